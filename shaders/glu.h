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
    // One group per row, its threads over the columns (contiguous access).
    const uint cols = p->cols, row = rlx_group_id.x;
    if (row >= p->rows) return;
    RLX_DEVICE const T *gr = gate + p->gate_offset + (uint64_t)row * p->gate_row_stride;
    RLX_DEVICE const T *ur = up + p->up_offset + (uint64_t)row * p->up_row_stride;
    RLX_DEVICE T *orow = out + (uint64_t)row * cols;
#define RLX_GLU_LOOP(f)                                                             \
    RLX_FOR_GROUP(c, cols) { orow[c] = rlx_from_float<T>(f(rlx_to_float(gr[c])) * rlx_to_float(ur[c])); }
    RLX_SWITCH_ACTIVATION(p->act, RLX_GLU_LOOP)
#undef RLX_GLU_LOOP
}
RLX_INSTANTIATE(glu, float, glu_f32)
RLX_INSTANTIATE(glu, half, glu_f16)
