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

// The value rows a slot lets through, [first, cnt), and the cache row the
// first of them lands on before the ring wraps, s0 = start mod rows.
struct rlx_set_rows_window {
    uint first, cnt, s0;
};

RLX_INLINE rlx_set_rows_window rlx_set_rows_window_of(RLX_DEVICE const int *slot, RLX_CONSTANT SetRowsParams *p) {
    const uint rows = p->rows, nv = p->n_values;
    const int start = slot[p->slot_offset], count = slot[p->slot_offset + 1u];
    rlx_set_rows_window w;
    w.cnt = count <= 0 ? 0u : ((uint)count < nv ? (uint)count : nv);
    w.first = w.cnt > rows ? w.cnt - rows : 0u;
    // (start + t) mod rows for any int start: both terms below rows < 2^31.
    const int srem = start % (int)rows;
    w.s0 = (uint)(srem < 0 ? srem + (int)rows : srem);
    return w;
}

// The cache row of value row t (inside the window).
RLX_INLINE uint rlx_set_rows_row(const rlx_set_rows_window w, const uint t, const uint rows) {
    return (w.s0 + t % rows) % rows;
}

// Element i (< n_values * row_elems) of one write: dst row (start + t) mod
// rows, element e, from src row t, where the slot allows row t.
template <typename T>
RLX_INLINE void rlx_set_row_elem(RLX_DEVICE T *dst, RLX_DEVICE const T *src, RLX_DEVICE const int *slot,
                                 RLX_CONSTANT SetRowsParams *p, const uint64_t i, const uint dst_offset,
                                 const uint src_offset) {
    const uint re = p->row_elems;
    const rlx_set_rows_window w = rlx_set_rows_window_of(slot, p);
    const uint t = (uint)(i / re), e = (uint)(i % re);
    if (t < w.first || t >= w.cnt) return;
    const uint r = rlx_set_rows_row(w, t, p->rows);
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

// rmsnorm_rope and a set_rows pair in one dispatch (a decoder layer's
// query/key norms and RoPE, then its K and V cache writes; the lowering
// folds them, rlx/lowering/rope_cache.py). The first write's values are
// rows of the rope's own output y (its key heads): the group that forms a
// rope row also stores it into the cache, so the keys need no second
// kernel and no read back. Groups [0, rope.rows) are rope rows; groups
// [rope.rows, rope.rows + n_values) copy the second write's value rows (V),
// which a kernel before this one wrote. The writes' element offsets are in
// `cache`: dst_offset / src_offset the first write's (src_offset into y,
// whole rope rows of D), dst2_offset / src2_offset the second's.
struct RmsNormRopeCacheParams {
    RmsNormRopeParams rope;
    SetRowsParams cache;
};

template <typename T>
RLX_KERNEL rmsnorm_rope_cache(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const int *, pos, 1),
                              RLX_BUF(RLX_DEVICE const float *, inv_freq, 2),
                              RLX_BUF(RLX_DEVICE const T *, weight_a, 3), RLX_BUF(RLX_DEVICE const T *, weight_b, 4),
                              RLX_BUF(RLX_DEVICE T *, y, 5), RLX_BUF(RLX_DEVICE T *, dst, 6),
                              RLX_BUF(RLX_DEVICE T *, dst2, 7), RLX_BUF(RLX_DEVICE const T *, src2, 8),
                              RLX_BUF(RLX_DEVICE const int *, slot, 9),
                              RLX_PARAMS(RmsNormRopeCacheParams, p, 10) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    RLX_CONSTANT RmsNormRopeParams *rp = &p->rope;
    RLX_CONSTANT SetRowsParams *cp = &p->cache;
    const uint group = rlx_group_id.x, rope_rows = rp->rows, re = cp->row_elems;
    if (group >= rope_rows + cp->n_values) return;
    const rlx_set_rows_window w = rlx_set_rows_window_of(slot, cp);
    if (group >= rope_rows) {   // a V row: the group copies it where the slot allows it
        const uint t = group - rope_rows;
        if (t < w.first || t >= w.cnt) return;
        RLX_DEVICE T *to = dst2 + cp->dst2_offset + (uint64_t)rlx_set_rows_row(w, t, cp->rows) * re;
        RLX_DEVICE const T *from = src2 + cp->src2_offset + (uint64_t)t * re;
        RLX_FOR_GROUP(e, re) { to[e] = from[e]; }
        return;
    }
    // Where this rope row's outputs sit among the first write's values: a
    // whole value row's slice (the lowering checks that rows of D tile them).
    const uint64_t at = (uint64_t)rp->out_offset + (uint64_t)group * rp->D;
    RLX_DEVICE T *cache_row = dst;
    bool to_cache = false;
    if (at >= cp->src_offset && at < (uint64_t)cp->src_offset + (uint64_t)cp->n_values * re) {
        const uint64_t f = at - cp->src_offset;
        const uint t = (uint)(f / re), e0 = (uint)(f % re);
        to_cache = t >= w.first && t < w.cnt;
        if (to_cache) cache_row = dst + cp->dst_offset + (uint64_t)rlx_set_rows_row(w, t, cp->rows) * re + e0;
    }
    rlx_rmsnorm_rope_row<T>(x, pos, inv_freq, weight_a, weight_b, y, rp, group, cache_row, to_cache,
                            scratch RLX_GROUP_IDS_ARGS);
}
RLX_INSTANTIATE(rmsnorm_rope_cache, float, rmsnorm_rope_cache_f32)
RLX_INSTANTIATE(rmsnorm_rope_cache, half, rmsnorm_rope_cache_f16)
