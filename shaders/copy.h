// Strided copy into a dense output, with an optional dtype change. It
// materializes any view (narrow, transpose, broadcast) for consumers that
// cannot read through strides, and doubles as the f32 <-> f16 cast.
struct CopyParams {
    uint n, ndim, in_offset, out_offset;
    uint shape[RLX_MAX_DIMS];
    uint in_strides[RLX_MAX_DIMS];
};

template <typename TI, typename TO>
RLX_KERNEL copy_strided(RLX_BUF(RLX_DEVICE const TI *, x, 0), RLX_BUF(RLX_DEVICE TO *, y, 1),
                        RLX_PARAMS(CopyParams, p, 2) RLX_IDS) {
    RLX_FOR_RANGE(i, p->n) {
        uint rest = (uint)i, src = p->in_offset;
        for (int d = (int)p->ndim - 1; d >= 0; --d) {
            src += (rest % p->shape[d]) * p->in_strides[d];
            rest /= p->shape[d];
        }
        y[p->out_offset + i] = rlx_from_float<TO>(rlx_to_float(x[src]));
    }
}
RLX_INSTANTIATE2(copy_strided, float, float, copy_f32_f32)
RLX_INSTANTIATE2(copy_strided, half, half, copy_f16_f16)
RLX_INSTANTIATE2(copy_strided, float, half, copy_f32_f16)
RLX_INSTANTIATE2(copy_strided, half, float, copy_f16_f32)
