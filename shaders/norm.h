// The norm family: layernorm, rmsnorm and their fused residual forms.

// LayerNorm over the last axis: one threadgroup per row. Two passes (mean,
// then centred variance) in f32 so f16 rows with a large mean keep accuracy.
struct LayerNormParams {
    uint rows, cols;
    uint in_offset, out_offset;
    float eps;
    uint pad0, pad1, pad2;
};

template <typename T>
RLX_KERNEL layernorm(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const T *, weight, 1),
                     RLX_BUF(RLX_DEVICE const T *, bias, 2), RLX_BUF(RLX_DEVICE T *, y, 3),
                     RLX_PARAMS(LayerNormParams, p, 4) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    const uint row = rlx_group_id.x;
    if (row >= p->rows) return;
    const uint cols = p->cols;
    RLX_DEVICE const T *xr = x + p->in_offset + (uint64_t)row * cols;
    RLX_DEVICE T *yr = y + p->out_offset + (uint64_t)row * cols;

    float s = 0.0f;
    RLX_FOR_GROUP(i, cols) { s += rlx_to_float(xr[i]); }
    const float mean = rlx_group_sum(s, scratch) / (float)cols;
    float v = 0.0f;
    RLX_FOR_GROUP(i, cols) {
        const float d = rlx_to_float(xr[i]) - mean;
        v += d * d;
    }
    const float var = rlx_group_sum(v, scratch) / (float)cols;
    const float inv = rlx_rsqrt(var + p->eps);
    RLX_FOR_GROUP(i, cols) {
        const float n = (rlx_to_float(xr[i]) - mean) * inv;
        yr[i] = rlx_from_float<T>(n * rlx_to_float(weight[i]) + rlx_to_float(bias[i]));
    }
}
RLX_INSTANTIATE(layernorm, float, layernorm_f32)
RLX_INSTANTIATE(layernorm, half, layernorm_f16)

// RMSNorm and the fused residual + norm kernels: one threadgroup per row,
// f32 accumulation. The residual sum x + r is recomputed in each pass rather
// than stored, so a fused kernel reads its inputs twice and writes once.
// rmsnorm serves both plain and residual forms: r_offset == 0xffffffff means
// no residual (r is then bound to x and never read).
struct NormParams {
    uint rows, cols;
    uint x_offset, r_offset;
    float eps;
    uint add_one;   // rmsnorm: scale by (1 + w), as Gemma stores its weights
    uint pad0, pad1;
};

template <typename T>
RLX_KERNEL rmsnorm(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const T *, r, 1),
                   RLX_BUF(RLX_DEVICE const T *, weight, 2), RLX_BUF(RLX_DEVICE T *, y, 3),
                   RLX_PARAMS(NormParams, p, 4) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    const uint row = rlx_group_id.x;
    if (row >= p->rows) return;
    const uint cols = p->cols;
    const bool res = p->r_offset != 0xffffffffu;
    RLX_DEVICE const T *xr = x + p->x_offset + (uint64_t)row * cols;
    RLX_DEVICE const T *rr = r + (res ? p->r_offset : 0u) + (uint64_t)row * cols;
    RLX_DEVICE T *yr = y + (uint64_t)row * cols;
    float ss = 0.0f;
    RLX_FOR_GROUP(i, cols) {
        const float v = res ? rlx_to_float(xr[i]) + rlx_to_float(rr[i]) : rlx_to_float(xr[i]);
        ss += v * v;
    }
    ss = rlx_group_sum(ss, scratch);
    const float inv = rlx_rsqrt(ss / (float)cols + p->eps);
    const float one = p->add_one ? 1.0f : 0.0f;
    RLX_FOR_GROUP(i, cols) {
        const float v = res ? rlx_to_float(xr[i]) + rlx_to_float(rr[i]) : rlx_to_float(xr[i]);
        yr[i] = rlx_from_float<T>(v * inv * (one + rlx_to_float(weight[i])));
    }
}
RLX_INSTANTIATE(rmsnorm, float, rmsnorm_f32)
RLX_INSTANTIATE(rmsnorm, half, rmsnorm_f16)

// LayerNorm of x + r (residual), two passes (mean, centred variance).
template <typename T>
RLX_KERNEL add_layernorm(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const T *, r, 1),
                         RLX_BUF(RLX_DEVICE const T *, weight, 2), RLX_BUF(RLX_DEVICE const T *, bias, 3),
                         RLX_BUF(RLX_DEVICE T *, y, 4), RLX_PARAMS(NormParams, p, 5) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    // Params before the first index read (binary.h says why).
    const uint rows = p->rows, cols = p->cols, x_offset = p->x_offset, r_offset = p->r_offset;
    const float eps = p->eps;
    const uint row = rlx_group_id.x;
    if (row >= rows) return;
    RLX_DEVICE const T *xr = x + x_offset + (uint64_t)row * cols;
    RLX_DEVICE const T *rr = r + r_offset + (uint64_t)row * cols;
    RLX_DEVICE T *yr = y + (uint64_t)row * cols;
    float s = 0.0f;
    RLX_FOR_GROUP(i, cols) { s += rlx_to_float(xr[i]) + rlx_to_float(rr[i]); }
    const float mean = rlx_group_sum(s, scratch) / (float)cols;
    float v = 0.0f;
    RLX_FOR_GROUP(i, cols) {
        const float d = rlx_to_float(xr[i]) + rlx_to_float(rr[i]) - mean;
        v += d * d;
    }
    const float inv = rlx_rsqrt(rlx_group_sum(v, scratch) / (float)cols + eps);
    RLX_FOR_GROUP(i, cols) {
        const float n = (rlx_to_float(xr[i]) + rlx_to_float(rr[i]) - mean) * inv;
        yr[i] = rlx_from_float<T>(n * rlx_to_float(weight[i]) + rlx_to_float(bias[i]));
    }
}
RLX_INSTANTIATE(add_layernorm, float, add_layernorm_f32)
RLX_INSTANTIATE(add_layernorm, half, add_layernorm_f16)

#include "norm_chain.h"

// Elements a thread of rmsnorm_add keeps in registers across its reductions.
#define RLX_NORM_CACHE 4

// x + rmsnorm(o, w), and with then_norm also the next block's pre-norm
// rmsnorm(x + rmsnorm(o, w), w_next): a sandwich-norm decoder's post-norm
// residual and the norm after it in one kernel, one threadgroup per row
// (the chain's arithmetic: norm_chain.h). y holds the sums (rows x cols),
// or with then_norm the normed sums and then the sums (the normed first:
// quantized GEMVs read their x at offset 0).
struct RmsNormAddParams {
    uint rows, cols;
    uint o_offset, x_offset;
    float eps, next_eps;
    uint add_one, next_add_one;
    uint then_norm;   // 0: rmsnorm_add (w_next is bound to w, never read)
    uint pad0, pad1, pad2;
};

// rlx_norm_chain's sink for rmsnorm_add: the sums and the normed sums in rows of y.
template <typename T> struct RlxNormRowSink {
    RLX_DEVICE T *sums;
    RLX_DEVICE T *normed;
};
template <typename T> RLX_INLINE void rlx_sink_sum(RlxNormRowSink<T> k, uint i, T s) { k.sums[i] = s; }
template <typename T> RLX_INLINE T rlx_sink_sum_at(RlxNormRowSink<T> k, uint i) { return k.sums[i]; }
template <typename T> RLX_INLINE void rlx_sink_out(RlxNormRowSink<T> k, uint i, T v) { k.normed[i] = v; }

template <typename T>
RLX_KERNEL rmsnorm_add(RLX_BUF(RLX_DEVICE const T *, o, 0), RLX_BUF(RLX_DEVICE const T *, x, 1),
                       RLX_BUF(RLX_DEVICE const T *, weight, 2), RLX_BUF(RLX_DEVICE const T *, next_weight, 3),
                       RLX_BUF(RLX_DEVICE T *, y, 4), RLX_PARAMS(RmsNormAddParams, p, 5) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    // Params before the first index read (binary.h says why).
    const uint rows = p->rows, cols = p->cols;
    RlxNormChain chain;
    chain.eps = p->eps, chain.next_eps = p->next_eps, chain.then_norm = p->then_norm != 0u;
    chain.one = p->add_one ? 1.0f : 0.0f, chain.next_one = p->next_add_one ? 1.0f : 0.0f;
    const uint o_offset = p->o_offset, x_offset = p->x_offset;
    const uint row = rlx_group_id.x;
    if (row >= rows) return;
    RlxNormRowSink<T> sink;
    sink.normed = y + (uint64_t)row * cols;
    sink.sums = sink.normed + (chain.then_norm ? (uint64_t)rows * cols : 0u);
    rlx_norm_chain<T, RLX_NORM_CACHE>(o + o_offset + (uint64_t)row * cols, x + x_offset + (uint64_t)row * cols,
                                      weight, next_weight, cols, chain, sink, scratch, rlx_local_id.x,
                                      rlx_group_size.x RLX_GROUP_IDS_ARGS);
}
RLX_INSTANTIATE(rmsnorm_add, float, rmsnorm_add_f32)
RLX_INSTANTIATE(rmsnorm_add, half, rmsnorm_add_f16)
