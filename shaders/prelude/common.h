// Target-independent helpers, included by every prelude after its target
// macros. Code here runs identically on Metal, CUDA and the CPU, so the CPU
// tests exercise exactly what the GPUs run (Metal has no erf, for example,
// so all targets use this one).
#ifndef RLX_PRELUDE_COMMON_H
#define RLX_PRELUDE_COMMON_H

#define RLX_MAX_DIMS 6

// The masked softmax keeps up to this many values per thread in registers
// when a row fits (cols <= RLX_ROW_CACHE * threads): one read of the row
// instead of a pass per step. Same count on every target, so the CPU's
// one-thread groups run the cached form on rows of up to 8 columns and the
// loop form beyond (the tests cover both there).
#define RLX_ROW_CACHE 8

// NaN semantics, one rule on every target (numpy's and PyTorch's): a NaN
// input gives a NaN output. rlx_maximum / rlx_minimum are np.maximum and
// torch.maximum: NaN if either operand is NaN, whichever side it is on.
// C's fmax/fmin (and Metal's, and the hardware max of CUDA and SSE) return
// the other operand instead, so kernels take these for every max or min
// of data, and the group reductions (rlx_group_max) use them too.
// Compare and select: branch-free, so the CPU target still vectorizes.
// rlx_fmax / rlx_fmin remain for clamps of values that cannot be NaN.
// i / d for a range loop's 64-bit index: a 32-bit division whenever i fits
// (a 64-bit one is several times slower on CPUs and emulated on GPUs, and
// was most of the time of the FFT's per-element kernels).
RLX_INLINE uint rlx_index_div(uint64_t i, uint d) {
    return (i >> 32) == 0u ? (uint)i / d : (uint)(i / d);
}

// Contiguous segments: thread (or group) t of g takes the elements
// [begin, end) of n; those past g take none. The scans of shaders/sort.h cut
// their elements into groups' chunks with it, and a staged chunk into the
// threads' segments (each sums its own, a group scan places the totals,
// each rewrites its own).
struct RlxRange {
    uint begin, end;
};
RLX_INLINE RlxRange rlx_group_segment(uint n, uint t, uint g) {
    const uint seg = (n + g - 1u) / g;
    const uint begin = t < g ? (t * seg < n ? t * seg : n) : n;
    return RlxRange{begin, begin + seg < n ? begin + seg : n};
}

RLX_INLINE float rlx_maximum(float a, float b) { return (a != a || a > b) ? a : b; }
RLX_INLINE float rlx_minimum(float a, float b) { return (a != a || a < b) ? a : b; }

// erfc(z) for z >= 0 with a relative error below 1.2e-7 of the fit itself
// (the Chebyshev fit published in Numerical Recipes as erfcc), so it keeps
// its relative accuracy far into the tail, where 1 - erf(z) computed from an
// erf approximation of absolute error 1.5e-7 cancels (GELU at x = -5 was off
// by 4%, and 0 from x = -6). In f32 the exp's argument rounds, which costs
// up to ~3e-6 relative near z = 7.
RLX_INLINE float rlx_erfc_nonneg(float z) {
    const float t = 1.0f / (1.0f + 0.5f * z);
    const float p = -1.26551223f + t * (1.00002368f + t * (0.37409196f + t * (0.09678418f + t * (-0.18628806f +
                    t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f +
                    t * 0.17087277f))))))));
    return t * rlx_exp(p - z * z);
}

// Logistic from e = exp(-|x|), which never overflows: 1 / (1 + e) for
// x >= 0 and e / (1 + e) for x < 0. The latter is not 1 - 1 / (1 + e),
// which cancels (6e-4 relative error at x = -9, and -0 from x = -17):
// this form keeps the relative error of exp (on the CPU < 1.5e-6 for |x| <=
// 20 and < 4e-6 out to -80, see cpu.h), which SiLU, GLU and the linear
// epilogue inherit. NaN gives NaN.
RLX_INLINE float rlx_sigmoid(float x) {
    const float e = rlx_exp(-rlx_fabs(x));   // in (0, 1]
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

// x * Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2: erfc(|x| / sqrt 2) / 2 for
// x < 0 (relative accuracy in the tail), 1 minus that for x >= 0. NaN gives
// NaN; -inf gives NaN (-inf * 0), as 0.5 x (1 + erf(x / sqrt 2)) does.
RLX_INLINE float rlx_gelu_erf(float x) {
    const float half_c = 0.5f * rlx_erfc_nonneg(rlx_fabs(x) * 0.70710678118654752f);
    return x * (x < 0.0f ? half_c : 1.0f - half_c);
}

// 0.5 x (1 + tanh(u)) written as x * sigmoid(2u) (the same function): the
// sigmoid's exp vectorizes on the CPU (rlx_cpu_exp) where tanhf does not,
// which made GeGLU the third cost of a Gemma prefill.
RLX_INLINE float rlx_gelu_tanh(float x) {
    const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return x * rlx_sigmoid(2.0f * inner);
}

RLX_INLINE float rlx_silu(float x) { return x * rlx_sigmoid(x); }

// Activation codes shared by every fused epilogue (rlx/runtime/params.py
// ACTIVATIONS mirrors them).
#define RLX_ACT_NONE 0u
#define RLX_ACT_GELU 1u
#define RLX_ACT_GELU_TANH 2u
#define RLX_ACT_SILU 3u
#define RLX_ACT_RELU 4u

// RLX_SWITCH_ACTIVATION(act, LOOP) expands LOOP(f) once per activation with
// f the function to apply: the activation is uniform across a dispatch, so
// each loop body is branch-free (which the CPU target needs to vectorize).
#define RLX_SWITCH_ACTIVATION(act, LOOP)                                            \
    switch (act) {                                                                  \
        case RLX_ACT_GELU: LOOP(rlx_gelu_erf); break;                               \
        case RLX_ACT_GELU_TANH: LOOP(rlx_gelu_tanh); break;                         \
        case RLX_ACT_SILU: LOOP(rlx_silu); break;                                   \
        case RLX_ACT_RELU: LOOP(rlx_relu); break;                                   \
        default: LOOP(rlx_identity); break;                                         \
    }

RLX_INLINE float rlx_relu(float x) { return rlx_maximum(x, 0.0f); }   // relu(NaN) = NaN, as torch
RLX_INLINE float rlx_identity(float x) { return x; }

RLX_INLINE float rlx_activation(uint act, float x) {
    if (act == RLX_ACT_GELU) return rlx_gelu_erf(x);
    if (act == RLX_ACT_GELU_TANH) return rlx_gelu_tanh(x);
    if (act == RLX_ACT_SILU) return rlx_silu(x);
    if (act == RLX_ACT_RELU) return rlx_relu(x);
    return x;
}

#ifdef RLX_TARGET_CPU
// The CPU's walk over a chunk of a strided loop of K operands (copies,
// elementwise reads): the chunk's first coordinates and the operands'
// offsets once, then advance(n) moves n elements along the innermost
// dimension (at most to the row's end) and carries into the outer ones,
// where an index division per dimension and element cost ~10 ns an element.
template <uint K>
struct RlxWalk {
    const uint *shape;
    const uint *strides[K];
    uint last, coord[RLX_MAX_DIMS];
    uint64_t at[K];

    RlxWalk(const uint *shape_, uint ndim, const uint *const *strides_, const uint64_t *offsets, uint64_t begin)
        : shape(shape_), last(ndim - 1u) {
        for (uint k = 0u; k < K; ++k) {
            strides[k] = strides_[k];
            at[k] = offsets[k];
        }
        for (int d = (int)last; d >= 0; --d) {
            coord[d] = (uint)(begin % shape[d]);
            begin /= shape[d];
            for (uint k = 0u; k < K; ++k) at[k] += (uint64_t)coord[d] * strides[k][d];
        }
    }
    uint row_left() const { return shape[last] - coord[last]; }
    void advance(uint n) {
        for (uint k = 0u; k < K; ++k) at[k] += (uint64_t)n * strides[k][last];
        coord[last] += n;
        for (uint d = last; d > 0u && coord[d] == shape[d]; --d) {
            for (uint k = 0u; k < K; ++k) at[k] += (uint64_t)strides[k][d - 1u] - (uint64_t)shape[d] * strides[k][d];
            coord[d] = 0u;
            ++coord[d - 1u];
        }
    }
};

// The element range [begin, end) of group g of the dispatch's groups when
// a kernel splits n elements into one chunk a group (the CPU's own loops).
RLX_INLINE void rlx_group_chunk(uint64_t n, uint g, uint groups, uint64_t *begin, uint64_t *end) {
    const uint64_t chunk = (n + groups - 1u) / groups;
    *begin = (uint64_t)g * chunk;
    *end = *begin + chunk < n ? *begin + chunk : n;
}
#endif

#endif
