// Repetition penalty (rlx/ir/ops/penalty.py, llama.cpp's rule): out is a
// copy of x (the lowering's copy dispatch, before this one), and each
// history entry h of row r with an id in [0, V) sets
//   out[r, id] = x[r, id] > 0 ? x[r, id] / penalty : x[r, id] * penalty.
// It reads x, never out, so an id repeated in the history writes the same
// value again instead of penalizing twice: no dedup pass, and the threads
// that share an id store identical bits. The penalty is run-time data.
struct PenaltyParams {
    uint rows, vocab, hist_len, hist_row_stride;   // stride 0: one history for every row
    uint in_offset, hist_offset, pen_offset, pad0;
};

template <typename T>
RLX_KERNEL repetition_penalty(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const int *, history, 1),
                              RLX_BUF(RLX_DEVICE const float *, penalty, 2), RLX_BUF(RLX_DEVICE T *, out, 3),
                              RLX_PARAMS(PenaltyParams, p, 4) RLX_IDS) {
    const uint h = p->hist_len, v = p->vocab;
    RLX_FOR_RANGE(i, (uint64_t)p->rows * h) {
        const uint r = rlx_index_div(i, h), e = (uint)(i - (uint64_t)r * h);
        const int id = history[p->hist_offset + (uint64_t)r * p->hist_row_stride + e];
        if (id < 0 || (uint)id >= v) continue;
        const uint64_t at = (uint64_t)r * v + (uint)id;
        const float logit = rlx_to_float(x[p->in_offset + at]), pen = penalty[p->pen_offset];
        out[at] = rlx_from_float<T>(logit > 0.0f ? logit / pen : logit * pen);
    }
}
RLX_INSTANTIATE(repetition_penalty, float, repetition_penalty_f32)
RLX_INSTANTIATE(repetition_penalty, half, repetition_penalty_f16)
