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
