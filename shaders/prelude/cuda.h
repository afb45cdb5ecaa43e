// CUDA prelude: the portable kernels in shaders/ as CUDA C++, compiled at run
// time by NVRTC in the CUDA shim, and by `nvcc --ptx` in the compile check.
#ifndef RLX_PRELUDE_CUDA_H
#define RLX_PRELUDE_CUDA_H

#include <cuda_fp16.h>

#define RLX_TARGET_CUDA 1

typedef unsigned int uint;
typedef unsigned char uchar;    // MSL's names (the GGUF block kernels read bytes)
typedef unsigned short ushort;
typedef float2 rlx_float2;   // two floats as one 8-byte load or store
typedef float4 rlx_float4;   // four floats as one 16-byte load or store
typedef int2 rlx_int2;       // two ints as one 8-byte load or store
typedef uint4 rlx_uint4;     // sixteen bytes as one load or store
typedef unsigned long long rlx_u64;
#ifndef __CUDACC_RTC__
#include <stdint.h>
#else
typedef unsigned long long uint64_t;
typedef long long int64_t;
typedef unsigned int uint32_t;
typedef int int32_t;
#endif

// ---- kernel signature -------------------------------------------------------
#define RLX_KERNEL __global__ void
#define RLX_BUF(type, name, index) type name
// Params by value (DESIGN section 3): the struct travels in the launch, and
// the kernel reads its fields from the constant bank, where a field costs no
// memory round trip. Read through a pointer into the params region, the
// fields a kernel branches on first (bound checks, split counts, offsets)
// were a chain of dependent global reads, each a trip to DRAM, because the
// weights a decode step streams evict the params region from L2 (Nsight
// Compute on attention_split_merge, benchmarks/README.md). __grid_constant__
// lets the kernel take the struct's address without a local copy, so
// `p->field`, `p[0]` and helpers taking `const P *` read it in place. The
// wrapper is 16-byte aligned, so its size is never 8: the CUDA shim tells a
// by-value params struct from a buffer pointer by its size
// (cuFuncGetParamInfo) and passes the params binding's bytes. 0: a pointer
// into the params region, as on Metal and the CPU (the shim compiles with 0
// where the driver cannot report parameter sizes; KERNEL_DEFINES=
// RLX_PARAMS_BY_VALUE=0 in the GPU benchmarks is the A/B). The CUDA shim
// and the Cython core handle both forms.
#ifndef RLX_PARAMS_BY_VALUE
#define RLX_PARAMS_BY_VALUE 1
#endif
template <typename P>
struct __align__(16) rlx_params_value {
    P fields;
    __device__ __forceinline__ const P *operator->() const { return &fields; }
    __device__ __forceinline__ operator const P *() const { return &fields; }
};
#if RLX_PARAMS_BY_VALUE
#define RLX_PARAMS(type, name, index) const __grid_constant__ rlx_params_value<type> name
#else
#define RLX_PARAMS(type, name, index) const type *__restrict__ name
#endif
#define RLX_IDS
#define rlx_num_groups gridDim
#define rlx_group_size blockDim

// Programmatic dependent launch (sm_90 and newer): the CUDA shim lets a kernel
// start while the kernel before it in the stream finishes, which hides launch
// latency between short kernels. Reading the group or thread index first
// lets the next kernel begin launching (griddepcontrol.launch_dependents),
// then waits for the previous kernel to complete with its writes visible
// (griddepcontrol.wait). Kernels derive every buffer address from these
// indices, so no buffer is read or written before the wait; the params
// region is written only by the host, before the run. Letting the next
// kernel launch before this one has waited is safe because that kernel's own
// wait is for this kernel's completion, not for the trigger; and it moves
// the next launch under this kernel's wait instead of after it, which is
// what a chain of short kernels spends its time on. On older architectures
// these are the plain indices and the shim launches kernels one after
// another.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#ifndef RLX_PDL_TRIGGER_AFTER_WAIT
static __device__ __forceinline__ uint3 rlx_after_predecessor(uint3 ids) {
    asm volatile("griddepcontrol.launch_dependents;");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    return ids;
}
#else  /* the order before, kept for benchmarks/gpu/floor_kernels.py's A/B */
static __device__ __forceinline__ uint3 rlx_after_predecessor(uint3 ids) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
    return ids;
}
#endif
// For a kernel that must branch on its params before its first index read:
// lets the next kernel begin launching now rather than after that branch
// (which waits for the params' load). Harmless to repeat.
static __device__ __forceinline__ void rlx_let_next_kernel_launch() {
    asm volatile("griddepcontrol.launch_dependents;");
}
// Kernels with a prefetch phase before their wait (the decode GEMVs, the
// split-K attention) bracket it with these. RLX_PDL_LATE_TRIGGER 0: they let
// the next kernel launch first, as every kernel does; 1: only once their
// wait is over. Every kernel triggering before its wait lets launches
// cascade: the next kernel's groups, started, trigger at once, so groups of
// several kernels ahead sit resident on the SMs, waiting, holding the
// registers and shared memory of the kernel that is running. For a chain
// of tiny kernels (the replay floor) that is the point; for these heavy
// ones the late trigger would keep one of them waiting ahead at most. An
// A/B hook (KERNEL_DEFINES="RLX_PDL_LATE_TRIGGER=1", benchmarks/gpu/
// kernel_defines.py), not yet timed: the Gemma 3 decode step ran 10%
// faster with PDL off than on in session 24 (benchmarks/README.md), and
// this is the first suspect; the call that was to time it ran out of
// device time while compiling.
#ifndef RLX_PDL_LATE_TRIGGER
#define RLX_PDL_LATE_TRIGGER 0
#endif
static __device__ __forceinline__ void rlx_pdl_prefetch_begin() {
    if (!RLX_PDL_LATE_TRIGGER) asm volatile("griddepcontrol.launch_dependents;");
}
static __device__ __forceinline__ void rlx_pdl_prefetch_end() {
    if (RLX_PDL_LATE_TRIGGER) {
        asm volatile("griddepcontrol.wait;" ::: "memory");
        asm volatile("griddepcontrol.launch_dependents;");
    }
}
#define rlx_group_id rlx_after_predecessor(blockIdx)
#define rlx_local_id rlx_after_predecessor(threadIdx)
// The indices without the wait, for one use only: rlx_prefetch_l2 of lines
// the kernel will read, issued before the wait so that their memory latency
// overlaps the previous kernel's tail. A prefetch returns no data, so a
// line a predecessor is still writing is harmless (L2 is the point of
// coherence): at worst a wasted fetch. Addresses stay inside the buffers.
#define rlx_group_id_early blockIdx
#define rlx_local_id_early threadIdx
#else
#define rlx_group_id_early rlx_group_id
#define rlx_local_id_early rlx_local_id
#define rlx_group_id blockIdx
#define rlx_local_id threadIdx
#define rlx_let_next_kernel_launch() ((void)0)
#define rlx_pdl_prefetch_begin() ((void)0)
#define rlx_pdl_prefetch_end() ((void)0)
#endif
static __device__ __forceinline__ void rlx_prefetch_l2(const void *p) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
// Asynchronous 16-byte copies from global into shared memory (cp.async,
// sm_80 and newer; a plain copy before): the data travels without
// occupying registers, so a SIMD group can keep several in flight. Only
// the first `valid` bytes of src are read (the rest of the 16 are zero):
// a copy that ends past a buffer never reads beyond it. Each thread waits
// for its own copies (rlx_async_wait); other lanes see them after a SIMD
// or group barrier.
// dst_shared: a shared-window address (rlx_shared_address), so a loop of
// copies needs no conversion per copy.
static __device__ __forceinline__ uint rlx_shared_address(const void *p) { return (uint)__cvta_generic_to_shared(p); }
static __device__ __forceinline__ void rlx_async_copy16(uint dst_shared, const void *src, uint valid) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst_shared), "l"(src), "r"(valid) : "memory");
#else
    uchar *d = (uchar *)__cvta_shared_to_generic(dst_shared);
    const uchar *s = (const uchar *)src;
    if (valid >= 16u) *(uint4 *)d = __ldg((const uint4 *)s);
    else for (uint i = 0; i < 16u; ++i) d[i] = i < valid ? s[i] : (uchar)0;
#endif
}
// Closes the calling thread's copies issued since the last commit into a group.
static __device__ __forceinline__ void rlx_async_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
// Waits until at most N of the calling thread's committed groups are in flight.
template <int N>
static __device__ __forceinline__ void rlx_async_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}
#define RLX_GROUP_IDS        /* group ids in helpers: Metal only (prelude/metal.h) */
#define RLX_GROUP_IDS_ARGS
#define RLX_DEVICE
#define RLX_CONSTANT const
#define RLX_INLINE static __device__ __forceinline__
// A program-scope constant table (the GGUF grids of shaders/quant_tables.h):
// global memory through the read-only cache; lookups are data-dependent, so
// __constant__ (which serializes divergent addresses) would be slower.
#define RLX_TABLE(type, decl) static __device__ const type decl

// ---- threadgroup memory, barriers, reductions -----------------------------
#define RLX_SHARED(type, name, count) __shared__ type name[count]
// RLX_SHARED memory's address space in helper parameters (Metal: threadgroup).
#define RLX_GROUP_MEM
// A thread's own memory (arrays) in helper parameters (Metal: thread).
#define RLX_THREAD
#define rlx_barrier() __syncthreads()

// Group reductions (rlx_group_sum, rlx_group_max) follow common.h, below.
// Atomic add to group (shared) memory, returning the old value.
RLX_INLINE uint rlx_group_atomic_add(uint *p, uint v) { return atomicAdd(p, v); }
// Device scope (attention_split_merge's count of finished groups): the add
// as an acquire-release operation at device scope, and a load from L2 (the
// point of coherence) that no stale L1 line of this SM can answer. After a group
// barrier, one thread's release orders the whole group's earlier writes
// before the count (PTX release is cumulative over the barrier's
// synchronization, as cooperative groups' grid sync relies on), and the
// thread that reads the final count acquires the others' writes for its
// group's reads after the next barrier. One round trip where a fence by
// every thread, the add and a second fence took three.
RLX_INLINE uint rlx_device_atomic_add_acq_rel(uint *p, uint v) {
#if __CUDA_ARCH__ >= 700
    uint old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
#else   // no memory-order qualifiers before sm_70: fences around a plain add
    __threadfence();
    const uint old = atomicAdd(p, v);
    __threadfence();
    return old;
#endif
}
RLX_INLINE float rlx_load_fresh(const float *p) { return __ldcg(p); }

// ---- half load/store and math ---------------------------------------------
RLX_INLINE float rlx_to_float(float v) { return v; }
RLX_INLINE float rlx_to_float(__half v) { return __half2float(v); }
template <typename T> RLX_INLINE T rlx_from_float(float v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half rlx_from_float<__half>(float v) { return __float2half_rn(v); }
typedef __half half;
// Bit patterns to floats: an f32's 32 bits, and an IEEE half's 16 (the low
// bits of `bits`) widened exactly to f32.
RLX_INLINE uint rlx_float_to_bits(float f) { return __float_as_uint(f); }
RLX_INLINE float rlx_bits_to_float(uint bits) { return __uint_as_float(bits); }
RLX_INLINE float rlx_half_bits_to_float(uint bits) { return __half2float(__ushort_as_half((unsigned short)bits)); }

#define rlx_exp expf
#define rlx_log logf
#define rlx_sqrt sqrtf
#define rlx_rsqrt rsqrtf
#define rlx_tanh tanhf
#define rlx_fmax fmaxf
#define rlx_fmin fminf
#define rlx_fabs fabsf
#define RLX_UNROLL _Pragma("unroll")   /* unroll the next constant-count loop */
#define RLX_INFINITY __int_as_float(0x7f800000)

// ---- loops -----------------------------------------------------------------
// The loops start from rlx_group_id / rlx_local_id: that is where a kernel
// waits for its predecessor (above).
// One wait for the first global index (through rlx_group_id alone), not one
// per index read.
RLX_INLINE uint64_t rlx_first_global_index() {
    return (uint64_t)rlx_group_id.x * blockDim.x + threadIdx.x;
}
#define RLX_FOR_RANGE(i, n)                                                         \
    for (uint64_t i = rlx_first_global_index(); i < (uint64_t)(n); i += (uint64_t)gridDim.x * blockDim.x)
#define RLX_MAX_REDUCTION(v)   /* a vectorization hint for the CPU target only */
#define RLX_FOR_GROUP(i, n) for (uint i = rlx_local_id.x; i < (uint)(n); i += blockDim.x)

// ---- instantiation ---------------------------------------------------------
// Explicit instantiation; the CUDA shim maps each host name to the mangled
// name through NVRTC name expressions ("kernel<type>"), which it reads from
// these RLX_INSTANTIATE lines in the source.
#define RLX_INSTANTIATE(kernel, type, host_name) template __global__ decltype(kernel<type>) kernel<type>;
#define RLX_INSTANTIATE2(kernel, type1, type2, host_name)                           \
    template __global__ decltype(kernel<type1, type2>) kernel<type1, type2>;

#include "common.h"

// ---- group reductions (after common.h, whose rlx_maximum they use) ---------
// Warp reduction with an explicit active-lane count, so a group size that is
// not a multiple of 32 never reads an inactive lane; then one partial per
// warp in `scratch` (at least 32 floats), summed by every thread in a fixed
// order. The leading barrier lets a caller reuse `scratch` right away.
// The max is rlx_maximum (common.h): fmaxf would drop a NaN.
RLX_INLINE float rlx_group_reduce_cuda(float v, float *scratch, bool is_max) {
    const uint lid = threadIdx.x, size = blockDim.x;
    const uint lane = lid & 31u, warp = lid >> 5;
    const uint warp_lanes = min(32u, size - warp * 32u);
    const unsigned mask = warp_lanes == 32u ? 0xffffffffu : ((1u << warp_lanes) - 1u);
    for (uint off = 16; off > 0; off >>= 1) {
        const float other = __shfl_down_sync(mask, v, off);
        if (lane + off < warp_lanes) v = is_max ? rlx_maximum(v, other) : v + other;
    }
    if (size <= 32u) return __shfl_sync(mask, v, 0);
    const uint n_warps = (size + 31u) / 32u;
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float r = scratch[0];
    for (uint i = 1; i < n_warps; ++i) r = is_max ? rlx_maximum(r, scratch[i]) : r + scratch[i];
    return r;
}
#define rlx_group_sum(v, scratch) rlx_group_reduce_cuda((v), (scratch), false)
#define rlx_group_max(v, scratch) rlx_group_reduce_cuda((v), (scratch), true)

// ---- SIMD groups (warps) ---------------------------------------------------
// A group's threads form warps of 32 consecutive linear thread indices (x
// fastest); when the group size is not a multiple of 32 the last warp is
// partial. These read threadIdx directly: a kernel using them has already
// read rlx_group_id (the PDL wait, above) before touching a buffer.
// Metal's counterparts are the [[thread_index_in_simdgroup]] family of
// RLX_IDS (prelude/metal.h); the CPU's one-thread groups are one lane.
#define rlx_simd_width 32u
RLX_INLINE uint rlx_cuda_linear_tid() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
#define rlx_simd_lane (rlx_cuda_linear_tid() & 31u)
#define rlx_simd_id (rlx_cuda_linear_tid() >> 5)
// The lanes that exist in the calling thread's warp, as a shuffle mask.
RLX_INLINE unsigned rlx_cuda_warp_mask() {
    const uint total = blockDim.x * blockDim.y * blockDim.z, base = rlx_cuda_linear_tid() & ~31u;
    const uint lanes = min(32u, total - base);
    return lanes == 32u ? 0xffffffffu : ((1u << lanes) - 1u);
}
// Orders shared-memory accesses among the lanes of one warp (no group
// barrier): every existing lane of the warp must reach it.
RLX_INLINE void rlx_simd_barrier() { __syncwarp(rlx_cuda_warp_mask()); }
// A set of lanes of one warp, bit i for lane i (64 bits, the type every
// target shares). rlx_simd_match: the lanes whose `value` agrees with this
// lane's in its low `bits` bits, among the existing lanes where `valid`: one
// ballot a bit (the form CUB's match-based radix rank uses); every existing
// lane of the warp calls it with the same `bits`.
typedef uint64_t rlx_lanes;
RLX_INLINE rlx_lanes rlx_simd_match(uint value, uint bits, bool valid) {
    const unsigned mask = rlx_cuda_warp_mask();
    unsigned peers = __ballot_sync(mask, valid);
    for (uint b = 0u; b < bits; ++b) {
        const bool on = (value >> b) & 1u;
        const unsigned v = __ballot_sync(mask, on);
        peers &= on ? v : ~v;
    }
    return peers;
}
RLX_INLINE uint rlx_lanes_count(rlx_lanes s) { return (uint)__popcll(s); }
// The sum of `v` over the lanes before this one in its warp (wrapping u32
// adds); every existing lane calls it. An inclusive Kogge-Stone scan by
// shuffles up: lane i's source i - off always exists in a partial warp.
RLX_INLINE uint rlx_simd_prefix_exclusive_sum(uint v) {
    const unsigned mask = rlx_cuda_warp_mask();
    const uint lane = rlx_cuda_linear_tid() & 31u;
    uint inclusive = v;
    for (uint off = 1u; off < 32u; off <<= 1) {
        const uint other = __shfl_up_sync(mask, inclusive, off);
        if (lane >= off) inclusive += other;
    }
    return inclusive - v;
}
// Sum over the existing lanes of the calling warp, returned to every lane;
// every existing lane must call it (with warp-uniform control flow). A full
// warp: xor butterfly. A partial one (lanes 0..L-1, any L): shuffles down
// that never use a value from a lane >= L, then lane 0's total broadcast.
RLX_INLINE float rlx_simd_sum(float v) {
    const unsigned mask = rlx_cuda_warp_mask();
    if (mask == 0xffffffffu) {
        for (uint off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(mask, v, off);
        return v;
    }
    const uint lane = rlx_cuda_linear_tid() & 31u, lanes = (uint)__popc(mask);
    for (uint off = 16; off > 0; off >>= 1) {
        const float other = __shfl_down_sync(mask, v, off);
        if (lane + off < lanes) v += other;
    }
    return __shfl_sync(mask, v, 0);
}
#endif
