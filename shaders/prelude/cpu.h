// CPU prelude: compiles the portable (MSL-style) kernels in shaders/ as C++.
//
// The host shim runs every threadgroup with exactly one thread, so barriers
// and SIMD reductions are no-ops and threadgroup memory is a local array.
// Kernels are correct for any group size (DESIGN section 3), so group size 1
// is a legal schedule; it proves the arithmetic, the GPU runs prove the
// parallel logic.
//
// Calling convention between the host shim and a compiled kernel: each
// instantiation exports `extern "C" void rlx_k_<host_name>(const rlx_cpu_ctx*)`.
// The context carries the bound buffers (binding i = the kernel's i-th
// parameter) and the thread ids; a variadic template unpacks the buffer table
// into the kernel's typed parameters.
#ifndef RLX_PRELUDE_CPU_H
#define RLX_PRELUDE_CPU_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <utility>

#define RLX_TARGET_CPU 1

typedef unsigned int uint;
typedef unsigned char uchar;    // MSL's names (the GGUF block kernels read bytes)
typedef unsigned short ushort;
struct uint3 { uint x, y, z; };
// Two floats read or written as one 8-byte unit (MSL's and CUDA's float2).
struct alignas(8) rlx_float2 { float x, y; };
// Four floats or sixteen bytes as one 16-byte unit, two ints as one 8-byte
// unit (MSL's and CUDA's float4, uint4 and int2: on GPUs one memory
// instruction for the lot).
struct alignas(16) rlx_float4 { float x, y, z, w; };
struct alignas(8) rlx_int2 { int x, y; };
struct alignas(16) rlx_uint4 { uint x, y, z, w; };
// IEEE half: ARM64's __fp16 (a storage type that computes in float; GCC
// before 13 has no _Float16 in C++ there), _Float16 elsewhere. Kernels only
// load and store halves and compute in float, so the two behave the same.
#if defined(__aarch64__)
typedef __fp16 half;
#else
typedef _Float16 half;
#endif

// Kept in sync with the host shim, csrc/host/ (it is the only other user).
#define RLX_CPU_MAX_BINDINGS 12
// dispatch: a number no other dispatch of the process shares, so that a
// kernel may keep per-thread work derived from its inputs across the groups
// of one dispatch (the VNNI GEMV's integer copy of x, csrc/host_quant_vnni.h).
struct rlx_cpu_ctx {
    void *buffers[RLX_CPU_MAX_BINDINGS];
    uint3 group_id;
    uint3 num_groups;
    uint64_t dispatch;
};

struct rlx_ids {
    uint3 group_id;
    uint3 num_groups;
    uint64_t dispatch;
};

// ---- kernel signature -------------------------------------------------------
#define RLX_KERNEL static inline void
#define RLX_BUF(type, name, index) type name
#define RLX_PARAMS(type, name, index) const type *name
#define RLX_IDS , rlx_ids rlx_ids_arg
#define rlx_group_id (rlx_ids_arg.group_id)
#define rlx_num_groups (rlx_ids_arg.num_groups)
#define rlx_local_id (uint3{0u, 0u, 0u})
#define rlx_group_size (uint3{1u, 1u, 1u})
#define rlx_let_next_kernel_launch() ((void)0)  /* CUDA PDL only (prelude/cuda.h) */
#define RLX_GROUP_IDS        /* group ids in helpers: Metal only (prelude/metal.h) */
#define RLX_GROUP_IDS_ARGS
#define RLX_DEVICE            /* address-space qualifier of helper pointers */
#define RLX_CONSTANT const
#define RLX_INLINE static inline
// A program-scope constant table (the GGUF grids of shaders/quant_tables.h).
#define RLX_TABLE(type, decl) static const type decl

// ---- threadgroup memory, barriers, reductions -----------------------------
#define RLX_SHARED(type, name, count) type name[count]
// RLX_SHARED memory's address space in helper parameters (Metal: threadgroup).
#define RLX_GROUP_MEM
// A thread's own memory (arrays) in helper parameters (Metal: thread).
#define RLX_THREAD
#define rlx_barrier() ((void)0)

// A reduction over the threadgroup. With one thread per group the value is
// already the group's result; `scratch` is the caller's shared array.
RLX_INLINE float rlx_group_sum(float v, float *scratch) { (void)scratch; return v; }
RLX_INLINE float rlx_group_max(float v, float *scratch) { (void)scratch; return v; }
// Atomic add to group memory, returning the old value (sort_histogram's
// digit counts). One thread per group: a plain add. A macro over a named
// function, so tests/c/group_threads.cpp can swap in a real atomic.
RLX_INLINE uint rlx_cpu_group_atomic_add(uint *p, uint v) { const uint old = *p; *p = old + v; return old; }
#define rlx_group_atomic_add rlx_cpu_group_atomic_add
// Device scope: groups run at the same time on the pool's threads, so these
// is a real atomic (attention_split_merge's count of finished groups); a
// plain load is fresh after the acquire.
RLX_INLINE uint rlx_device_atomic_add_acq_rel(uint *p, uint v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
RLX_INLINE float rlx_load_fresh(const float *p) { return *p; }
// SIMD groups: a one-thread group is one SIMD group of one lane.
#define rlx_simd_lane 0u
#define rlx_simd_id 0u
#define rlx_simd_width 1u
RLX_INLINE float rlx_simd_sum(float v) { return v; }
#define rlx_simd_barrier() ((void)0)
// A set of lanes of one SIMD group, bit i for lane i (64 bits: the widest
// SIMD group of any target). rlx_simd_match: the lanes whose `value` agrees
// with this lane's in its low `bits` bits, among the lanes where `valid`
// (every lane of the SIMD group calls it, with the same `bits`); one lane here.
typedef uint64_t rlx_lanes;
RLX_INLINE rlx_lanes rlx_simd_match(uint value, uint bits, bool valid) { (void)value; (void)bits; return valid ? 1u : 0u; }
RLX_INLINE uint rlx_lanes_count(rlx_lanes s) { return (uint)__builtin_popcountll(s); }
// The sum of `v` over the lanes before this one in its SIMD group (none here).
RLX_INLINE uint rlx_simd_prefix_exclusive_sum(uint v) { (void)v; return 0u; }

// ---- half load/store and math ---------------------------------------------
RLX_INLINE float rlx_to_float(float v) { return v; }
RLX_INLINE float rlx_to_float(half v) { return (float)v; }
template <typename T> RLX_INLINE T rlx_from_float(float v) { return (T)v; }
// Bit patterns to floats: an f32's 32 bits, and an IEEE half's 16 (the low
// bits of `bits`) widened exactly to f32.
RLX_INLINE uint rlx_float_to_bits(float f) { uint b; memcpy(&b, &f, sizeof b); return b; }
RLX_INLINE float rlx_bits_to_float(uint bits) { float f; memcpy(&f, &bits, sizeof f); return f; }
RLX_INLINE float rlx_half_bits_to_float(uint bits) {
    const unsigned short b = (unsigned short)bits;
    half h;
    memcpy(&h, &b, sizeof h);
    return (float)h;
}

// exp as an inline, branch-free polynomial (Cody-Waite range reduction and
// Cephes' degree-6 expf polynomial; relative error < 1e-7 on [-80, 80] as
// written, but the build's -fassociative-math folds the two-constant
// reduction into one rounded ln 2, and then it is < 1e-6 on [-20, 20] and
// < 4e-6 on [-87, 88], measured):
// unlike a libm call, GCC vectorizes loops that use it, which is what makes
// softmax, GELU and SiLU fast on the CPU. Inputs clamp to [-87, ln(FLT_MAX)]:
// anything below -87, -inf included, gives exactly 0, anything above
// ln(FLT_MAX) +inf (as expf); NaN gives NaN (the clamps turn
// it into -87, so the last select puts it back: softmax of a row with a NaN
// is NaN through this). Compare-and-select rather than fminf/fmaxf, whose
// NaN rules stop the vectorizer.
#define RLX_CPU_INF __builtin_inff()
static inline float rlx_cpu_max(float a, float b) { return a > b ? a : b; }
static inline float rlx_cpu_min(float a, float b) { return a < b ? a : b; }
static inline float rlx_cpu_exp(float x) {
    const float xc = rlx_cpu_min(rlx_cpu_max(x, -87.0f), 88.72283f);
    // floor(t + 0.5) via truncation of a positive number (t >= -126 here).
    const int32_t ni = (int32_t)(xc * 1.44269504088896341f + 127.5f) - 127;
    const float n = (float)ni;
    const float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float y = p * r * r + r + 1.0f;
    // y * 2^n in two steps, because n reaches 128 at the top of the range
    // where 2^n alone is no float: 2^(n - h) goes into y's exponent bits
    // (y is in [0.7, 1.5), so that stays a normal float), then one multiply
    // by 2^h rounds correctly into the subnormals at the bottom. Two float
    // multiplies by two scales would not do: -fassociative-math may fold
    // them into one product that overflows.
    const int32_t h = ni >> 1;
    int32_t y_bits;
    memcpy(&y_bits, &y, sizeof y_bits);
    y_bits += (ni - h) << 23;
    const int32_t scale_bits = (h + 127) << 23;
    float y_scaled, scale;
    memcpy(&y_scaled, &y_bits, sizeof y_scaled);
    memcpy(&scale, &scale_bits, sizeof scale);
    const float e = y_scaled * scale * (float)(x >= -87.0f);
    // Past ln(FLT_MAX) the true result is not a float: +inf, as expf gives.
    return x != x ? x : (x > 88.7228394f ? RLX_CPU_INF : e);
}
// Natural log that GCC vectorizes (glibc's logf is a call a lane):
// x = m 2^e with m in [sqrt(1/2), sqrt(2)), then log(1 + f), f = m - 1, by
// Cephes' degree-9 polynomial, and e ln 2 in two parts (relative error
// ~1e-7 on normal and subnormal inputs). Subnormals are scaled by 2^23
// first; log 0 = -inf, log of a negative number or NaN is NaN, log +inf =
// +inf, as logf. Selects, not branches, so loops over it vectorize.
static inline float rlx_cpu_log(float x) {
    const bool sub = x < 1.17549435e-38f;
    const float xs = sub ? x * 8388608.0f : x;
    int32_t bits;
    memcpy(&bits, &xs, sizeof bits);
    int32_t e = ((bits >> 23) & 255) - 127 - (sub ? 23 : 0);
    const int32_t m_bits = (bits & 0x007fffff) | 0x3f800000;
    float m;
    memcpy(&m, &m_bits, sizeof m);
    const bool big = m > 1.41421356f;
    m = big ? m * 0.5f : m;
    e += big ? 1 : 0;
    const float f = m - 1.0f, z = f * f, ef = (float)e;
    float y = 7.0376836292e-2f;
    y = y * f - 1.1514610310e-1f;
    y = y * f + 1.1676998740e-1f;
    y = y * f - 1.2420140846e-1f;
    y = y * f + 1.4249322787e-1f;
    y = y * f - 1.6668057665e-1f;
    y = y * f + 2.0000714765e-1f;
    y = y * f - 2.4999993993e-1f;
    y = y * f + 3.3333331174e-1f;
    y = y * f * z - 2.12194440e-4f * ef - 0.5f * z;
    const float r = f + y + 0.693359375f * ef;
    return x != x || x < 0.0f ? __builtin_nanf("") : (x == 0.0f ? -RLX_CPU_INF : (x == RLX_CPU_INF ? x : r));
}
#define rlx_exp rlx_cpu_exp
#define rlx_log rlx_cpu_log
#define rlx_sqrt sqrtf
#define rlx_rsqrt(x) (1.0f / sqrtf(x))
#define rlx_tanh tanhf
#define rlx_fmax rlx_cpu_max
#define rlx_fmin rlx_cpu_min
#define rlx_fabs fabsf
#define RLX_UNROLL   /* full unrolling of a constant-count loop: a GPU hint (prelude/cuda.h) */
#define RLX_INFINITY INFINITY

// ---- elementwise range loop -----------------------------------------------
// On the CPU each group takes one contiguous chunk, so the inner loop is a
// plain counted loop the compiler can vectorize.
#define RLX_FOR_RANGE(i, n)                                                        \
    for (uint64_t rlx_total_ = (uint64_t)rlx_num_groups.x,                         \
                  rlx_chunk_ = ((uint64_t)(n) + rlx_total_ - 1) / rlx_total_,      \
                  rlx_begin_ = (uint64_t)rlx_group_id.x * rlx_chunk_,              \
                  rlx_end_ = rlx_begin_ + rlx_chunk_ < (uint64_t)(n)               \
                                 ? rlx_begin_ + rlx_chunk_ : (uint64_t)(n),        \
                  i = rlx_begin_;                                                  \
         i < rlx_end_; ++i)

// Marks the next loop as a max-reduction into v, so GCC vectorizes it
// (compiled with -fopenmp-simd; no OpenMP runtime involved). Without the
// hint, a max reduction only vectorizes under -ffinite-math-only, which
// would break -inf masks. A no-op on the GPU preludes. The lanes' final
// combine is a hardware max, which may drop a NaN: use it only where a NaN
// reaches the result another way (softmax: through exp and the sum), never
// for a max that is itself the result (reduce.h).
#define RLX_PRAGMA(x) _Pragma(#x)
#define RLX_MAX_REDUCTION(v) RLX_PRAGMA(omp simd reduction(max : v))

// Cooperative loop over [0, n) by the threads of one group.
#define RLX_FOR_GROUP(i, n) for (uint i = 0; i < (uint)(n); ++i)

// ---- instantiation ---------------------------------------------------------
template <typename A> struct rlx_cpu_arg {
    static A get(const rlx_cpu_ctx *c, unsigned i) { return static_cast<A>(c->buffers[i]); }
};
template <> struct rlx_cpu_arg<rlx_ids> {
    static rlx_ids get(const rlx_cpu_ctx *c, unsigned) { return rlx_ids{c->group_id, c->num_groups, c->dispatch}; }
};
template <typename... A, unsigned long... I>
static inline void rlx_cpu_invoke_impl(void (*f)(A...), const rlx_cpu_ctx *c,
                                       std::integer_sequence<unsigned long, I...>) {
    f(rlx_cpu_arg<A>::get(c, (unsigned)I)...);
}
template <typename... A>
static inline void rlx_cpu_invoke(void (*f)(A...), const rlx_cpu_ctx *c) {
    rlx_cpu_invoke_impl(f, c, std::make_integer_sequence<unsigned long, sizeof...(A)>{});
}

// The exported name: rlx_k_<host_name>, plus RLX_CPU_KERNEL_SUFFIX where the
// host shim builds the kernels once more for an instruction set (e.g.
// csrc/host_kernels_avx2.cpp: rlx_k_<host_name>__avx2).
#ifndef RLX_CPU_KERNEL_SUFFIX
#define RLX_CPU_KERNEL_SUFFIX
#endif
#define RLX_CPU_PASTE_(a, b) a##b
#define RLX_CPU_PASTE(a, b) RLX_CPU_PASTE_(a, b)
#define RLX_CPU_SYMBOL(host_name) RLX_CPU_PASTE(rlx_k_##host_name, RLX_CPU_KERNEL_SUFFIX)

// RLX_CPU_EXPORT2(kernel_template, type1, type2, host_name): exports one
// variant of a kernel with two template arguments (e.g. input and output
// dtype of a cast).
#define RLX_CPU_EXPORT2(kernel, type1, type2, host_name)                           \
    extern "C" __attribute__((visibility("default"))) void RLX_CPU_SYMBOL(host_name)( \
        const rlx_cpu_ctx *c) {                                                    \
        rlx_cpu_invoke(&kernel<type1, type2>, c);                                  \
    }
// A translation unit that exports only some kernels in another instruction
// set (csrc/host_kernels_avx512vnni.cpp) defines RLX_CPU_EXPORT_LISTED_ONLY:
// the headers' instantiations below then export nothing, and it names its
// kernels with RLX_CPU_EXPORT2.
#ifdef RLX_CPU_EXPORT_LISTED_ONLY
#define RLX_INSTANTIATE(kernel, type, host_name)
#define RLX_INSTANTIATE2(kernel, type1, type2, host_name)
#define RLX_EXPORT(kernel, host_name)
#else
// RLX_INSTANTIATE(kernel_template, type, host_name): exports one variant.
#define RLX_INSTANTIATE(kernel, type, host_name)                                   \
    extern "C" __attribute__((visibility("default"))) void RLX_CPU_SYMBOL(host_name)( \
        const rlx_cpu_ctx *c) {                                                    \
        rlx_cpu_invoke(&kernel<type>, c);                                          \
    }
// Two template arguments (e.g. input and output dtype of a cast).
#define RLX_INSTANTIATE2(kernel, type1, type2, host_name) RLX_CPU_EXPORT2(kernel, type1, type2, host_name)
// A kernel that is not a template.
#define RLX_EXPORT(kernel, host_name)                                              \
    extern "C" __attribute__((visibility("default"))) void RLX_CPU_SYMBOL(host_name)( \
        const rlx_cpu_ctx *c) {                                                    \
        rlx_cpu_invoke(&kernel, c);                                                \
    }
#endif
// An instantiation for the host alone, inside #ifdef RLX_TARGET_CPU: the
// CUDA shim finds its kernels by scanning the source for lines that start
// with RLX_INSTANTIATE, whatever #if they sit in (csrc/cuda/device.inc.c).
#define RLX_HOST_INSTANTIATE2(kernel, type1, type2, host_name) RLX_INSTANTIATE2(kernel, type1, type2, host_name)

#include "common.h"
#endif
