// Softmax over the last axis: one threadgroup per row, the row's threads
// stride over its columns and meet in group reductions. Accumulates in f32.
struct SoftmaxParams {
    uint rows, cols;
    uint in_offset, out_offset;
};

template <typename T>
RLX_KERNEL softmax(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE T *, y, 1),
                   RLX_PARAMS(SoftmaxParams, p, 2) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    const uint row = rlx_group_id.x;
    if (row >= p->rows) return;
    const uint cols = p->cols;
    RLX_DEVICE const T *xr = x + p->in_offset + (uint64_t)row * cols;
    RLX_DEVICE T *yr = y + p->out_offset + (uint64_t)row * cols;

    float m = -RLX_INFINITY;
    RLX_FOR_GROUP(i, cols) { m = rlx_fmax(m, rlx_to_float(xr[i])); }
    m = rlx_group_max(m, scratch);
    float s = 0.0f;
    RLX_FOR_GROUP(i, cols) { s += rlx_exp(rlx_to_float(xr[i]) - m); }
    s = rlx_group_sum(s, scratch);
    const float inv = 1.0f / s;
    RLX_FOR_GROUP(i, cols) { yr[i] = rlx_from_float<T>(rlx_exp(rlx_to_float(xr[i]) - m) * inv); }
}
RLX_INSTANTIATE(softmax, float, softmax_f32)
RLX_INSTANTIATE(softmax, half, softmax_f16)
