/* Checks that the CUDA shim's declarations of cuLaunchKernelEx's config
 * structs (csrc/cuda_launch.h; the shim builds without cuda.h) match the
 * toolkit's. On a machine with the toolkit:
 *   gcc -I/usr/local/cuda/include -Icsrc benchmarks/gpu/launch_layout_check.c -o /tmp/llc && /tmp/llc */
#include <cuda.h>
#include <stddef.h>
#include <stdio.h>

#include "cuda_launch.h"   /* the shim's own declarations */

int main(void) {
    int ok = 1;
#define SAME(a, b) if ((size_t)(a) != (size_t)(b)) { printf("MISMATCH %s: %zu vs %zu\n", #a, (size_t)(a), (size_t)(b)); ok = 0; }
    SAME(sizeof(cu_launch_attribute), sizeof(CUlaunchAttribute));
    SAME(offsetof(cu_launch_attribute, value), offsetof(CUlaunchAttribute, value));
    SAME(sizeof(cu_launch_config), sizeof(CUlaunchConfig));
    SAME(offsetof(cu_launch_config, shared_bytes), offsetof(CUlaunchConfig, sharedMemBytes));
    SAME(offsetof(cu_launch_config, stream), offsetof(CUlaunchConfig, hStream));
    SAME(offsetof(cu_launch_config, attrs), offsetof(CUlaunchConfig, attrs));
    SAME(offsetof(cu_launch_config, n_attrs), offsetof(CUlaunchConfig, numAttrs));
    SAME(RLX_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
    printf(ok ? "launch config layout matches cuda.h\n" : "launch config layout DIFFERS from cuda.h\n");
    return !ok;
}
