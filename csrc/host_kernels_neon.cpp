// The quantized GEMVs that have an integer form on ARM64
// (csrc/host_quant_arm64.h), in plain ARMv8.0 NEON (widening multiplies:
// every ARM64 CPU; one row of x, above which they take the f32 form),
// exported as rlx_k_<name>__neon. The host shim looks a
// kernel up from the device's level down (csrc/host/device.inc.cpp,
// pipeline_get), so every other kernel comes from the baseline build (NEON
// already, ARM64's baseline): this file adds only the integer GEMVs. Empty
// elsewhere; setup.py builds it for ARM64 only.
#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define RLX_CPU_KERNEL_SUFFIX __neon
#define RLX_CPU_EXPORT_LISTED_ONLY 1   // the headers' own kernels come from the baseline build
#include "prelude/cpu.h"
#include "movement.h"   // quant.h uses its GatherParams
#include "quant.h"
#include "host_quant_arm64.h"
#endif
