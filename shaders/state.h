// State (buffers kept across runs): set_rows, the in-place row write of a
// KV cache (rlx/ir/ops/state.py).
//
// dst[(start + t) mod rows] = src[t] for the rows t in [first, cnt), where
// (start, count) = slot[0..1] is run-time data, cnt = count clamped to
// [0, n_values] and first = cnt - rows when cnt > rows (a ring buffer keeps
// the newest rows), else 0. The grid covers every value row; rows outside
// [first, cnt) write nothing. slot is read inside the loop, after the range
// loop's first index (on CUDA the point where a kernel waits for the one
// before it, which may have written slot).
struct SetRowsParams {
    uint rows, n_values, row_elems, dst_offset, src_offset, slot_offset, pad0, pad1;
};

template <typename T>
RLX_KERNEL set_rows(RLX_BUF(RLX_DEVICE T *, dst, 0), RLX_BUF(RLX_DEVICE const T *, src, 1),
                    RLX_BUF(RLX_DEVICE const int *, slot, 2), RLX_PARAMS(SetRowsParams, p, 3) RLX_IDS) {
    const uint re = p->row_elems, rows = p->rows, nv = p->n_values;
    RLX_FOR_RANGE(i, (uint64_t)nv * re) {
        const int start = slot[p->slot_offset], count = slot[p->slot_offset + 1u];
        const uint cnt = count <= 0 ? 0u : ((uint)count < nv ? (uint)count : nv);
        const uint first = cnt > rows ? cnt - rows : 0u;
        const uint t = (uint)(i / re), e = (uint)(i % re);
        if (t < first || t >= cnt) continue;
        // (start + t) mod rows for any int start: both terms below rows < 2^31.
        const int srem = start % (int)rows;
        const uint s0 = (uint)(srem < 0 ? srem + (int)rows : srem);
        const uint r = (s0 + t % rows) % rows;
        dst[p->dst_offset + (uint64_t)r * re + e] = src[p->src_offset + (uint64_t)t * re + e];
    }
}
RLX_INSTANTIATE(set_rows, float, set_rows_f32)
RLX_INSTANTIATE(set_rows, half, set_rows_f16)
