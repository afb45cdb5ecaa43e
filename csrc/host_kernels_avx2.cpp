// The built-in kernels again for x86-64-v3 (AVX2, FMA, F16C), exported as
// rlx_k_<name>__avx2: the host shim takes them where the CPU has that
// instruction set (csrc/host_cpu.h) and RLX_HOST_ISA allows it, so one
// portable build is fast on every x86-64 machine. Empty elsewhere.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt")
#endif
#define RLX_CPU_KERNEL_SUFFIX __avx2
// GCC defines no __AVX2__ under a target pragma: kernels with AVX2
// intrinsics (shaders/fp8.h) test this instead.
#define RLX_CPU_AVX2 1
// The K-quants' decode GEMVs come from the integer form (csrc/host_quant_vnni.h
// with vpmaddwd for vpdpwssd): 1.7-2x the f32 form's speed at this level.
#define RLX_CPU_INT_KQUANT_GEMV 1
// q5_0's from bytes (csrc/host_quant_q5_0_avx2.h: vpmaddubsw over x in int8
// pieces; the AVX-VNNI level builds its own with vpdpwssd).
#define RLX_CPU_INT_Q5_0_GEMV 1
#include "host_kernels.cpp"
#include "host_quant_vnni.h"
#include "host_quant_q5_0_avx2.h"
#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
