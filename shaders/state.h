// State (buffers kept across runs): set_rows, the in-place row write of a
// KV cache (rlx/ir/ops/state.py).
//
// dst[(start + t) mod rows] = src[t] for the rows t in [first, cnt), where
// (start, count) = slot[0..1] is run-time data, cnt = count clamped to
// [0, n_values] and first = cnt - rows when cnt > rows (a ring buffer keeps
// the newest rows), else 0. The grid covers every value row; rows outside
// [first, cnt) write nothing. slot is read inside the loop, after the range
// loop's first index (on CUDA the point where a kernel waits for the one
// before it, which may have written slot). set_rows_pair does two such
// writes at one slot.
struct SetRowsParams {
    // dst2_offset / src2_offset: set_rows_pair's second write (same slot,
    // rows and row shape); set_rows leaves them 0.
    uint rows, n_values, row_elems, dst_offset, src_offset, slot_offset, dst2_offset, src2_offset;
};

// Element i (< n_values * row_elems) of one write: dst row (start + t) mod
// rows, element e, from src row t, where the slot allows row t.
template <typename T>
RLX_INLINE void rlx_set_row_elem(RLX_DEVICE T *dst, RLX_DEVICE const T *src, RLX_DEVICE const int *slot,
                                 RLX_DEVICE const SetRowsParams *p, const uint64_t i, const uint dst_offset,
                                 const uint src_offset) {
    const uint re = p->row_elems, rows = p->rows, nv = p->n_values;
    const int start = slot[p->slot_offset], count = slot[p->slot_offset + 1u];
    const uint cnt = count <= 0 ? 0u : ((uint)count < nv ? (uint)count : nv);
    const uint first = cnt > rows ? cnt - rows : 0u;
    const uint t = (uint)(i / re), e = (uint)(i % re);
    if (t < first || t >= cnt) return;
    // (start + t) mod rows for any int start: both terms below rows < 2^31.
    const int srem = start % (int)rows;
    const uint s0 = (uint)(srem < 0 ? srem + (int)rows : srem);
    const uint r = (s0 + t % rows) % rows;
    dst[dst_offset + (uint64_t)r * re + e] = src[src_offset + (uint64_t)t * re + e];
}

template <typename T>
RLX_KERNEL set_rows(RLX_BUF(RLX_DEVICE T *, dst, 0), RLX_BUF(RLX_DEVICE const T *, src, 1),
                    RLX_BUF(RLX_DEVICE const int *, slot, 2), RLX_PARAMS(SetRowsParams, p, 3) RLX_IDS) {
    RLX_FOR_RANGE(i, (uint64_t)p->n_values * p->row_elems) {
        rlx_set_row_elem<T>(dst, src, slot, p, i, p->dst_offset, p->src_offset);
    }
}

// Two writes at one slot in one dispatch (a decoder layer's K and V rows):
// the first n_values * row_elems indices are the first write's, the rest
// the second's.
template <typename T>
RLX_KERNEL set_rows_pair(RLX_BUF(RLX_DEVICE T *, dst, 0), RLX_BUF(RLX_DEVICE const T *, src, 1),
                         RLX_BUF(RLX_DEVICE T *, dst2, 2), RLX_BUF(RLX_DEVICE const T *, src2, 3),
                         RLX_BUF(RLX_DEVICE const int *, slot, 4), RLX_PARAMS(SetRowsParams, p, 5) RLX_IDS) {
    const uint64_t n = (uint64_t)p->n_values * p->row_elems;
    RLX_FOR_RANGE(i, 2u * n) {
        if (i < n) rlx_set_row_elem<T>(dst, src, slot, p, i, p->dst_offset, p->src_offset);
        else rlx_set_row_elem<T>(dst2, src2, slot, p, i - n, p->dst2_offset, p->src2_offset);
    }
}
RLX_INSTANTIATE(set_rows, float, set_rows_f32)
RLX_INSTANTIATE(set_rows, half, set_rows_f16)
RLX_INSTANTIATE(set_rows_pair, float, set_rows_pair_f32)
RLX_INSTANTIATE(set_rows_pair, half, set_rows_pair_f16)
