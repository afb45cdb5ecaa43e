/*
 * cuLaunchKernelEx's config structs (cuda.h, CUDA 12.0+) as the CUDA shim
 * declares them: the shim builds without the toolkit, so only what it sets is
 * spelled out. The includer defines CUstream (the shim's own typedef, or
 * cuda.h's in benchmarks/gpu/launch_layout_check.c, which checks these
 * layouts against the toolkit's on a machine that has it).
 */
#ifndef RLX_CUDA_LAUNCH_H
#define RLX_CUDA_LAUNCH_H

typedef struct {
    int id;                     /* CUlaunchAttributeID */
    char pad[8 - sizeof(int)];
    union { char bytes[64]; int programmatic_stream_serialization_allowed; } value;
} cu_launch_attribute;

typedef struct {
    unsigned grid[3], block[3], shared_bytes;
    CUstream stream;
    cu_launch_attribute *attrs;
    unsigned n_attrs;
} cu_launch_config;

#define RLX_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6

#endif
