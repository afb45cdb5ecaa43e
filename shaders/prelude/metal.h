// Metal prelude: the portable kernels in shaders/ as MSL, compiled at run
// time by the Metal shim (newLibraryWithSource). Not run in this project's
// CI: no Apple hardware is in reach; see README "What is verified where".
#ifndef RLX_PRELUDE_METAL_H
#define RLX_PRELUDE_METAL_H

#include <metal_stdlib>
using namespace metal;
typedef float2 rlx_float2;   // two floats as one 8-byte load or store
typedef float4 rlx_float4;   // four floats as one 16-byte load or store
typedef int2 rlx_int2;       // two ints as one 8-byte load or store
typedef uint4 rlx_uint4;     // sixteen bytes as one load or store

#define RLX_TARGET_METAL 1

// ---- kernel signature -------------------------------------------------------
#define RLX_KERNEL [[kernel]] void
#define RLX_BUF(type, name, index) type name [[buffer(index)]]
#define RLX_PARAMS(type, name, index) constant type *name [[buffer(index)]]
#define RLX_IDS                                                                     \
    , uint3 rlx_group_id [[threadgroup_position_in_grid]],                          \
      uint3 rlx_local_id [[thread_position_in_threadgroup]],                        \
      uint3 rlx_group_size [[threads_per_threadgroup]],                             \
      uint3 rlx_num_groups [[threadgroups_per_grid]],                               \
      uint rlx_simd_lane [[thread_index_in_simdgroup]],                             \
      uint rlx_simd_id [[simdgroup_index_in_threadgroup]],                          \
      uint rlx_simd_width [[threads_per_simdgroup]]
// A helper that loops over the group, reduces over it or reads SIMD ids
// declares RLX_GROUP_IDS after its parameters and is called with
// RLX_GROUP_IDS_ARGS: here those ids are the kernel's parameters (above),
// elsewhere globals or constants, so both are empty there.
#define RLX_GROUP_IDS                                                               \
    , uint3 rlx_local_id, uint3 rlx_group_size, uint rlx_simd_lane, uint rlx_simd_id, uint rlx_simd_width
#define RLX_GROUP_IDS_ARGS , rlx_local_id, rlx_group_size, rlx_simd_lane, rlx_simd_id, rlx_simd_width
#define RLX_DEVICE device
#define RLX_CONSTANT constant
#define RLX_INLINE static inline
// A program-scope constant table (the GGUF grids of shaders/quant_tables.h).
#define RLX_TABLE(type, decl) constant type decl

// ---- threadgroup memory, barriers, reductions -----------------------------
#define RLX_SHARED(type, name, count) threadgroup type name[count]
// The address space of RLX_SHARED memory, for pointers to it that a helper
// function takes (Metal: threadgroup; a plain pointer elsewhere).
#define RLX_GROUP_MEM threadgroup
// A thread's own memory (arrays) in helper parameters.
#define RLX_THREAD thread
// Orders threadgroup memory and device memory: kernels such as attention
// exchange values through a device scratch region between passes, which
// mem_threadgroup alone would not order on Metal (CUDA's __syncthreads
// covers both).
#define rlx_barrier() threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup)

// Group reductions (rlx_group_sum, rlx_group_max) follow common.h, below.
// Atomic add to threadgroup memory, returning the old value: MSL's
// atomic_fetch_add_explicit on threadgroup atomic_uint (relaxed, the one
// order MSL offers); the counters are declared uint, so the pointer is cast.
RLX_INLINE uint rlx_group_atomic_add(threadgroup uint *p, uint v) {
    return atomic_fetch_add_explicit((threadgroup atomic_uint *)p, v, memory_order_relaxed);
}
// A plain load: on Metal only attention_merge reads partials this way, and
// they come from an earlier dispatch (no device-scope counterpart of
// prelude/cuda.h's fence and atomic here: attention_split_merge is not
// built for Metal).
RLX_INLINE float rlx_load_fresh(device const float *p) { return *p; }

// ---- half load/store and math ---------------------------------------------
RLX_INLINE float rlx_to_float(float v) { return v; }
RLX_INLINE float rlx_to_float(half v) { return float(v); }
template <typename T> RLX_INLINE T rlx_from_float(float v) { return static_cast<T>(v); }
// Bit patterns to floats: an f32's 32 bits, and an IEEE half's 16 (the low
// bits of `bits`) widened exactly to f32.
RLX_INLINE uint rlx_float_to_bits(float f) { return as_type<uint>(f); }
RLX_INLINE float rlx_bits_to_float(uint bits) { return as_type<float>(bits); }
RLX_INLINE float rlx_half_bits_to_float(uint bits) { return float(as_type<half>(ushort(bits))); }

// Precise forms: the library is compiled with fast math off (the shim sets
// mathMode), these names keep the intent visible.
#define rlx_exp(x) metal::precise::exp(x)
#define rlx_log(x) metal::precise::log(x)
#define rlx_sqrt(x) metal::precise::sqrt(x)
#define rlx_rsqrt(x) metal::precise::rsqrt(x)
#define rlx_tanh(x) metal::precise::tanh(x)
#define rlx_fmax(a, b) metal::fmax((a), (b))
#define rlx_fmin(a, b) metal::fmin((a), (b))
#define rlx_fabs(x) metal::fabs(x)
#define RLX_UNROLL _Pragma("unroll")   /* unroll the next constant-count loop */
#define RLX_INFINITY INFINITY

// ---- loops -----------------------------------------------------------------
#define RLX_FOR_RANGE(i, n)                                                         \
    for (uint64_t i = (uint64_t)rlx_group_id.x * rlx_group_size.x + rlx_local_id.x; \
         i < (uint64_t)(n); i += (uint64_t)rlx_num_groups.x * rlx_group_size.x)
#define RLX_MAX_REDUCTION(v)   /* a vectorization hint for the CPU target only */
#define rlx_let_next_kernel_launch() ((void)0)  /* CUDA PDL only (prelude/cuda.h) */
#define RLX_FOR_GROUP(i, n) for (uint i = rlx_local_id.x; i < (uint)(n); i += rlx_group_size.x)

// ---- instantiation (the host name is what pipeline_get looks up) -----------
#define RLX_INSTANTIATE(kernel, type, host_name)                                    \
    template [[host_name(#host_name)]] [[kernel]] decltype(kernel<type>) kernel<type>;
#define RLX_INSTANTIATE2(kernel, type1, type2, host_name)                           \
    template [[host_name(#host_name)]] [[kernel]] decltype(kernel<type1, type2>) kernel<type1, type2>;

#include "common.h"

// ---- group reductions (after common.h, whose rlx_maximum they use) ---------
// Group-wide reduction: SIMD reduction, then one partial per simdgroup in
// `scratch` (at least 32 floats), summed by every thread so all get the
// result. simd_sum ignores inactive lanes, so a partial last simdgroup is
// fine; the leading barrier lets a caller reuse `scratch` for the next
// reduction. A max is NaN when any value is (rlx_maximum, common.h):
// simd_max and fmax may return the other operand instead, so a NaN in an
// active lane is found with simd_any (which, like simd_max, reads only
// active lanes) and the partials combine through rlx_maximum.
RLX_INLINE float rlx_group_reduce_metal(float v, threadgroup float *scratch, uint lid, uint group_size, uint lane,
                                        uint simd_id, uint simd_width, bool is_max) {
    v = is_max ? (simd_any(v != v) ? NAN : simd_max(v)) : simd_sum(v);
    if (group_size <= simd_width) return v;
    const uint n_simd = (group_size + simd_width - 1) / simd_width;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lane == 0) scratch[simd_id] = v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float r = scratch[0];
    for (uint i = 1; i < n_simd; ++i) r = is_max ? rlx_maximum(r, scratch[i]) : r + scratch[i];
    (void)lid;
    return r;
}
#define rlx_group_sum(v, scratch)                                                   \
    rlx_group_reduce_metal((v), (scratch), rlx_local_id.x, rlx_group_size.x, rlx_simd_lane, rlx_simd_id, \
                           rlx_simd_width, false)
#define rlx_group_max(v, scratch)                                                   \
    rlx_group_reduce_metal((v), (scratch), rlx_local_id.x, rlx_group_size.x, rlx_simd_lane, rlx_simd_id, \
                           rlx_simd_width, true)

// ---- SIMD groups -----------------------------------------------------------
// rlx_simd_lane, rlx_simd_id and rlx_simd_width are RLX_IDS parameters.
// simd_sum reads only active lanes (a partial last simdgroup is fine) and
// returns the sum to every lane; simdgroup_barrier orders threadgroup memory
// among the lanes of one simdgroup.
#define rlx_simd_sum(v) simd_sum(v)
#define rlx_simd_barrier() simdgroup_barrier(mem_flags::mem_threadgroup)
// A set of lanes of one simdgroup, bit i for lane i: simd_ballot's vote_t
// (64 bits) read through its explicit conversion. rlx_simd_match: the lanes
// whose `value` agrees with this lane's in its low `bits` bits, among the
// active lanes where `valid`, one ballot a bit; every active lane calls it
// with the same `bits`.
typedef ulong rlx_lanes;
RLX_INLINE rlx_lanes rlx_simd_match(uint value, uint bits, bool valid) {
    rlx_lanes peers = (rlx_lanes)simd_ballot(valid);
    for (uint b = 0u; b < bits; ++b) {
        const bool on = (value >> b) & 1u;
        const rlx_lanes v = (rlx_lanes)simd_ballot(on);
        peers &= on ? v : ~v;
    }
    return peers;
}
RLX_INLINE uint rlx_lanes_count(rlx_lanes s) { return (uint)popcount(s); }
// The sum of `v` over the active lanes before this one in its simdgroup.
#define rlx_simd_prefix_exclusive_sum(v) simd_prefix_exclusive_sum(v)
#endif
