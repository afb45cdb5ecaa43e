// The elementwise family: binary ops with broadcasting (add, sub, mul, div,
// maximum, minimum) and unary ops (activations, tanh, exp, log, neg, sqrt, rsqrt,
// scale_shift).

// Binary elementwise ops with broadcasting through strides.
// out[i] = op(a[a_offset + sum(idx_d * a_strides[d])], b[...]) over the output
// shape; a stride of 0 broadcasts that dimension. Strides and offsets are in
// elements, so views need no copy.


struct BinaryParams {
    uint n;          // output elements
    uint ndim;
    uint op;         // 0 add, 1 mul, 2 sub, 3 div, 4 max, 5 min
    uint contiguous; // 1: a, b and out share the output's dense layout
    uint a_offset, b_offset, pad0, pad1;
    uint shape[RLX_MAX_DIMS];
    uint a_strides[RLX_MAX_DIMS];
    uint b_strides[RLX_MAX_DIMS];
};

RLX_INLINE float rlx_binary_apply(uint op, float x, float y) {
    switch (op) {
        case 0u: return x + y;
        case 1u: return x * y;
        case 2u: return x - y;
        case 3u: return x / y;
        case 4u: return rlx_maximum(x, y);   // NaN-propagating (common.h)
        default: return rlx_minimum(x, y);
    }
}

template <typename T>
RLX_KERNEL binary(RLX_BUF(RLX_DEVICE const T *, a, 0), RLX_BUF(RLX_DEVICE const T *, b, 1),
                  RLX_BUF(RLX_DEVICE T *, out, 2), RLX_PARAMS(BinaryParams, p, 3) RLX_IDS) {
    // Params into registers before the first index read: on CUDA that read
    // waits for the previous kernel (see the prelude), so loads issued before
    // it overlap that kernel instead of following it.
    const uint op = p->op, n = p->n, a_offset = p->a_offset, b_offset = p->b_offset;
    rlx_let_next_kernel_launch();  // the branch below waits for p->contiguous
    if (p->contiguous) {
        RLX_FOR_RANGE(i, n) {
            out[i] = rlx_from_float<T>(rlx_binary_apply(op, rlx_to_float(a[a_offset + i]),
                                                        rlx_to_float(b[b_offset + i])));
        }
        return;
    }
    RLX_FOR_RANGE(i, p->n) {
        uint rest = (uint)i, ia = p->a_offset, ib = p->b_offset;
        for (int d = (int)p->ndim - 1; d >= 0; --d) {
            uint coord = rest % p->shape[d];
            rest /= p->shape[d];
            ia += coord * p->a_strides[d];
            ib += coord * p->b_strides[d];
        }
        out[i] = rlx_from_float<T>(rlx_binary_apply(op, rlx_to_float(a[ia]), rlx_to_float(b[ib])));
    }
}
RLX_INSTANTIATE(binary, float, binary_f32)
RLX_INSTANTIATE(binary, half, binary_f16)

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
        case 10u: RLX_UNARY_LOOP(rlx_log(v));
        default: RLX_UNARY_LOOP(v * scale + shift);
    }
}
#undef RLX_UNARY_LOOP
RLX_INSTANTIATE(unary, float, unary_f32)
RLX_INSTANTIATE(unary, half, unary_f16)
