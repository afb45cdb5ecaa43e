// The quantized GEMVs of csrc/host_quant_arm64.h with the dot-product
// extension (SDOT, vdotq_s32: ARMv8.2's FEAT_DotProd, in every ARM64 server
// and Apple core of recent years), exported as rlx_k_<name>__neondot. Only
// these functions are compiled for it (a target pragma, not -march; ARMv8.2, which every CPU with the extension implements), so the
// library still loads on plain ARMv8.0; the shim takes them where the CPU
// reports the extension (csrc/host_cpu.h, has_arm64_dotprod) and
// RLX_HOST_ISA allows it. Every other kernel comes from the levels below
// (pipeline_get). Empty elsewhere; setup.py builds it for ARM64 only.
#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#else
#pragma GCC target("arch=armv8.2-a+dotprod")   // arm_neon.h declares vdotq_s32 under this
#endif
#define RLX_ARM64_DOTPROD 1
#define RLX_CPU_KERNEL_SUFFIX __neondot
#define RLX_CPU_EXPORT_LISTED_ONLY 1   // the headers' own kernels come from the baseline build
#include "prelude/cpu.h"
#include "movement.h"   // quant.h uses its GatherParams
#include "quant.h"
#include "host_quant_arm64.h"

#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
