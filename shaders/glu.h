// Gated linear units: out = act(gate) * up (SwiGLU: silu, GeGLU: gelu).
// gate and up are read through row strides, so both can be halves of one
// packed projection without a copy.
struct GluParams {
    uint rows, cols;
    uint gate_offset, gate_row_stride;
    uint up_offset, up_row_stride;
    uint act, pad0;
};

template <typename T>
RLX_KERNEL glu(RLX_BUF(RLX_DEVICE const T *, gate, 0), RLX_BUF(RLX_DEVICE const T *, up, 1),
               RLX_BUF(RLX_DEVICE T *, out, 2), RLX_PARAMS(GluParams, p, 3) RLX_IDS) {
    const uint cols = p->cols;
    RLX_FOR_RANGE(i, (uint64_t)p->rows * cols) {
        const uint r = (uint)(i / cols), c = (uint)(i % cols);
        const float g = rlx_to_float(gate[p->gate_offset + (uint64_t)r * p->gate_row_stride + c]);
        const float u = rlx_to_float(up[p->up_offset + (uint64_t)r * p->up_row_stride + c]);
        out[i] = rlx_from_float<T>(rlx_activation(p->act, g) * u);
    }
}
RLX_INSTANTIATE(glu, float, glu_f32)
RLX_INSTANTIATE(glu, half, glu_f16)
