/* Checks that csrc/cuda_shim.c's own declarations of cuLaunchKernelEx's
 * config structs (the shim builds without cuda.h) match the toolkit's.
 * On a machine with the toolkit:
 *   gcc -I/usr/local/cuda/include benchmarks/gpu/launch_layout_check.c -o /tmp/llc && /tmp/llc */
#include <cuda.h>
#include <stddef.h>
#include <stdio.h>


/* The same declarations as csrc/cuda_shim.c (kept in step by this check). */
typedef struct {
    int id;
    char pad[8 - sizeof(int)];
    union { char bytes[64]; int programmatic_stream_serialization_allowed; } value;
} cu_launch_attribute;
typedef struct {
    unsigned grid[3], block[3], shared_bytes;
    CUstream stream;
    cu_launch_attribute *attrs;
    unsigned n_attrs;
} cu_launch_config;

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
    SAME(6, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
    printf(ok ? "launch config layout matches cuda.h\n" : "launch config layout DIFFERS from cuda.h\n");
    return !ok;
}
