// Unary elementwise ops over a contiguous range. The op code picks the
// function, so one pipeline serves every unary op (fewer pipelines to build
// and cache on Metal and CUDA).
struct UnaryParams {
    uint n;
    uint op;  // see rlx/runtime/params.py UNARY_OPS
    uint in_offset, out_offset;
    float scale, shift;
    uint pad0, pad1;
};

RLX_INLINE float rlx_unary_apply(uint op, float x, float scale, float shift) {
    switch (op) {
        case 0u: return rlx_gelu_erf(x);
        case 1u: return rlx_gelu_tanh(x);
        case 2u: return rlx_silu(x);
        case 3u: return rlx_fmax(x, 0.0f);
        case 4u: return rlx_tanh(x);
        case 5u: return rlx_exp(x);
        case 6u: return -x;
        case 7u: return rlx_sqrt(x);
        case 8u: return rlx_rsqrt(x);
        default: return x * scale + shift;  // 9: scale and shift
    }
}

template <typename T>
RLX_KERNEL unary(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE T *, y, 1),
                 RLX_PARAMS(UnaryParams, p, 2) RLX_IDS) {
    const uint op = p->op;
    const float scale = p->scale, shift = p->shift;
    RLX_DEVICE const T *src = x + p->in_offset;
    RLX_DEVICE T *dst = y + p->out_offset;
    RLX_FOR_RANGE(i, p->n) { dst[i] = rlx_from_float<T>(rlx_unary_apply(op, rlx_to_float(src[i]), scale, shift)); }
}
RLX_INSTANTIATE(unary, float, unary_f32)
RLX_INSTANTIATE(unary, half, unary_f16)
