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

// One loop per op (the op is uniform across the dispatch): a per-element
// switch would stop the CPU target's vectorizer.
#define RLX_UNARY_LOOP(expr)                                                         \
    RLX_FOR_RANGE(i, n) {                                                            \
        const float v = rlx_to_float(src[i]);                                        \
        dst[i] = rlx_from_float<T>(expr);                                            \
    }                                                                                \
    break

template <typename T>
RLX_KERNEL unary(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE T *, y, 1),
                 RLX_PARAMS(UnaryParams, p, 2) RLX_IDS) {
    const float scale = p->scale, shift = p->shift;   // params before the first index read (binary.h)
    const uint n = p->n;
    RLX_DEVICE const T *src = x + p->in_offset;
    RLX_DEVICE T *dst = y + p->out_offset;
    rlx_let_next_kernel_launch();  // the switch below waits for p->op
    switch (p->op) {
        case 0u: RLX_UNARY_LOOP(rlx_gelu_erf(v));
        case 1u: RLX_UNARY_LOOP(rlx_gelu_tanh(v));
        case 2u: RLX_UNARY_LOOP(rlx_silu(v));
        case 3u: RLX_UNARY_LOOP(rlx_relu(v));
        case 4u: RLX_UNARY_LOOP(rlx_tanh(v));
        case 5u: RLX_UNARY_LOOP(rlx_exp(v));
        case 6u: RLX_UNARY_LOOP(-v);
        case 7u: RLX_UNARY_LOOP(rlx_sqrt(v));
        case 8u: RLX_UNARY_LOOP(rlx_rsqrt(v));
        default: RLX_UNARY_LOOP(v * scale + shift);
    }
}
#undef RLX_UNARY_LOOP
RLX_INSTANTIATE(unary, float, unary_f32)
RLX_INSTANTIATE(unary, half, unary_f16)
