// The quantized GEMVs that have an AVX-512 VNNI form (csrc/host_quant_vnni.h),
// exported as rlx_k_<name>__avx512vnni. The host shim looks a kernel up from
// the device's level down (csrc/host/device.inc.cpp, pipeline_get), so every
// kernel without such a form comes from the AVX-512 build at this level: this
// file adds only what VNNI makes faster. Empty elsewhere.
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

// gemv_<fmt> and gemv1_<fmt>: one computation on the CPU (as in quant.h).
#define RLX_VNNI_GEMVS(fmt_type, fmt)                                   \
    RLX_CPU_EXPORT2(gemv_q_vnni, fmt_type, float, gemv_##fmt##_f32)     \
    RLX_CPU_EXPORT2(gemv_q_vnni, fmt_type, half, gemv_##fmt##_f16)      \
    RLX_CPU_EXPORT2(gemv_q_vnni, fmt_type, float, gemv1_##fmt##_f32)    \
    RLX_CPU_EXPORT2(gemv_q_vnni, fmt_type, half, gemv1_##fmt##_f16)
RLX_VNNI_GEMVS(QFmtQ2_K, q2_k)
RLX_VNNI_GEMVS(QFmtQ3_K, q3_k)
RLX_VNNI_GEMVS(QFmtQ4_K, q4_k)
RLX_VNNI_GEMVS(QFmtQ5_K, q5_k)
RLX_VNNI_GEMVS(QFmtQ6_K, q6_k)

#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
