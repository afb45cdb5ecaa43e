// The quantized GEMVs that have a VNNI form (csrc/host_quant_vnni.h, and
// q5_0's in csrc/host_quant_q5_0_avx2.h), in AVX-VNNI (AVX2 machines with
// it: Intel client cores since Alder Lake), exported as
// rlx_k_<name>__avx2vnni. The host shim looks a kernel up from the device's
// level down (csrc/host/device.inc.cpp, pipeline_get), so every kernel
// without such a form comes from the AVX2 build at this level: this file
// adds only what VNNI makes faster. Empty elsewhere.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt,avxvnni"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt,avxvnni")
#endif
#define RLX_CPU_KERNEL_SUFFIX __avx2vnni
#define RLX_CPU_AVX2 1   // quant.h's f32 fallback in its AVX2 form (see host_kernels_avx2.cpp)
#define RLX_CPU_AVXVNNI 1   // csrc/host_quant_vnni_ops.h: vpdpwssd
#define RLX_CPU_EXPORT_LISTED_ONLY 1   // the headers' own kernels come from the other builds
#include "prelude/cpu.h"
#include "movement.h"   // quant.h uses its GatherParams
#include "quant.h"
#include "host_quant_vnni.h"
#include "host_quant_q5_0_avx2.h"   // q5_0's GEMV from bytes, its multiply-adds in vpdpwssd

#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
