// Unary elementwise activations over a contiguous range. The op code picks
// the function so one pipeline serves every activation (fewer pipelines to
// compile and cache on Metal and CUDA); issue 3 widens the set.
struct UnaryParams {
    uint n;
    uint op;  // 0 gelu (erf), 1 gelu (tanh), 2 silu
    uint in_offset, out_offset;
};

RLX_INLINE float rlx_unary_apply(uint op, float x) {
    if (op == 0u) return rlx_gelu_erf(x);
    if (op == 1u) return rlx_gelu_tanh(x);
    return rlx_silu(x);
}

template <typename T>
RLX_KERNEL unary(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE T *, y, 1),
                 RLX_PARAMS(UnaryParams, p, 2) RLX_IDS) {
    const uint op = p->op;
    RLX_DEVICE const T *src = x + p->in_offset;
    RLX_DEVICE T *dst = y + p->out_offset;
    RLX_FOR_RANGE(i, p->n) { dst[i] = rlx_from_float<T>(rlx_unary_apply(op, rlx_to_float(src[i]))); }
}
RLX_INSTANTIATE(unary, float, unary_f32)
RLX_INSTANTIATE(unary, half, unary_f16)
