// The quantized GEMVs that have a VNNI form (csrc/host_quant_vnni.h, and
// q5_0's in csrc/host_quant_q5_0_avx512.h), in AVX-512 VNNI, exported as
// rlx_k_<name>__avx512vnni. The host shim looks a kernel up from the
// device's level down (csrc/host/device.inc.cpp, pipeline_get), so every
// kernel without such a form comes from the AVX-512 build at this level:
// this file adds only what VNNI makes faster. Empty elsewhere.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx512vnni,avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt"))), apply_to = function)
#else
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx512vnni,avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt")
#endif
#define RLX_CPU_KERNEL_SUFFIX __avx512vnni
#define RLX_CPU_AVX512 1   // quant.h's f32 fallback in its AVX-512 form (see host_kernels_avx512.cpp)
#define RLX_CPU_EXPORT_LISTED_ONLY 1   // the headers' own kernels come from the other builds
#include "prelude/cpu.h"
#include "movement.h"   // quant.h uses its GatherParams
#include "quant.h"
#include "host_quant_vnni.h"
#include "host_quant_q5_0_avx512.h"   // q5_0's GEMV from bytes, two blocks a register

#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
