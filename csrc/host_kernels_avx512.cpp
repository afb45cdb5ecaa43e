// The built-in kernels again for AVX-512 (F, BW, VL, DQ, CD) on top of x86-64-v3, exported as
// rlx_k_<name>__avx512: the host shim takes them where the CPU has that
// instruction set (csrc/host_cpu.h) and RLX_HOST_ISA allows it, so one
// portable build is fast on every x86-64 machine. Empty elsewhere.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt"))), apply_to = function)
#else
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt")
#endif
#define RLX_CPU_KERNEL_SUFFIX __avx512
// GCC defines no __AVX512F__ under a target pragma: kernels with AVX-512
// intrinsics (shaders/quant.h) test this instead.
#define RLX_CPU_AVX512 1
#include "host_kernels.cpp"
#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
