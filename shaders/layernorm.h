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
