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
RLX_INLINE float rlx_maximum(float a, float b) { return (a != a || a > b) ? a : b; }
RLX_INLINE float rlx_minimum(float a, float b) { return (a != a || a < b) ? a : b; }

// erf, Abramowitz & Stegun 7.1.26 refined with one extra term
// (W. J. Cody's rational form is longer; this one has |error| < 1.5e-7,
// below f32 rounding of GELU's result).
RLX_INLINE float rlx_erf_portable(float x) {
    const float s = x < 0.0f ? -1.0f : 1.0f;
    const float a = rlx_fabs(x);
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    const float y = 1.0f - (((((1.061405429f * t - 1.453152027f) * t) + 1.421413741f) * t - 0.284496736f) * t +
                            0.254829592f) * t * rlx_exp(-a * a);
    return s * y;
}

// Logistic from e = exp(-|x|), which never overflows: 1 / (1 + e) for
// x >= 0 and e / (1 + e) for x < 0. The latter is not 1 - 1 / (1 + e),
// which cancels (6e-4 relative error at x = -9, all of it from x = -17):
// this form keeps the relative error of exp (about 1e-6 for x in [-80, 20]),
// which SiLU, GLU and the linear epilogue inherit. NaN gives NaN.
RLX_INLINE float rlx_sigmoid(float x) {
    const float e = rlx_exp(-rlx_fabs(x));   // in (0, 1]
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

RLX_INLINE float rlx_gelu_erf(float x) { return 0.5f * x * (1.0f + rlx_erf_portable(x * 0.70710678118654752f)); }

RLX_INLINE float rlx_gelu_tanh(float x) {
    const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + rlx_tanh(inner));
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

#endif
