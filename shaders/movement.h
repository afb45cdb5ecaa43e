// The data-movement family: gather, and the strided copy that materializes
// views, writes concat's slices and casts.

// Row gather (embedding lookup): out[i, :] = table[idx[i], :]. Indices are
// int32, or int64 read as their low word (little-endian on every target);
// the runtime checks their range before the run, so the kernel only clamps
// to stay inside the table.
struct GatherParams {
    uint n_indices, dim, rows;
    uint index_is_i64;
};

template <typename T>
RLX_KERNEL gather(RLX_BUF(RLX_DEVICE const T *, table, 0), RLX_BUF(RLX_DEVICE const int *, indices, 1),
                  RLX_BUF(RLX_DEVICE T *, out, 2), RLX_PARAMS(GatherParams, p, 3) RLX_IDS) {
    const uint dim = p->dim;
    RLX_FOR_RANGE(i, (uint64_t)p->n_indices * dim) {
        const uint r = (uint)(i / dim), c = (uint)(i % dim);
        int idx = p->index_is_i64 ? indices[2u * r] : indices[r];
        idx = idx < 0 ? 0 : (idx >= (int)p->rows ? (int)p->rows - 1 : idx);
        out[i] = table[(uint64_t)idx * dim + c];
    }
}
RLX_INSTANTIATE(gather, float, gather_f32)
RLX_INSTANTIATE(gather, half, gather_f16)

// Strided copy with an optional dtype change. It materializes any view
// (narrow, transpose, broadcast) for consumers that cannot read through
// strides, writes into a strided destination (concat writes each input into
// its slice of the output), and doubles as the f32 <-> f16 cast.
struct CopyParams {
    uint n, ndim, in_offset, out_offset;
    uint shape[RLX_MAX_DIMS];
    uint in_strides[RLX_MAX_DIMS];
    uint out_strides[RLX_MAX_DIMS];
};

#ifdef RLX_TARGET_CPU
// The CPU copies its chunk as runs along the innermost dimension (RlxWalk:
// no index division per element; a concat's 480,000-float part took 4.8 ms
// with them), each run a plain loop: a vectorized copy where both strides
// are 1.
template <typename TI, typename TO>
RLX_INLINE void rlx_copy_runs(const TI *x, TO *y, const CopyParams *p, uint64_t begin, uint64_t end) {
    const uint *strides[2] = {p->in_strides, p->out_strides};
    const uint64_t offsets[2] = {p->in_offset, p->out_offset};
    RlxWalk<2> w(p->shape, p->ndim, strides, offsets, begin);
    const uint64_t is = p->in_strides[w.last], os = p->out_strides[w.last];
    for (uint64_t e = begin; e < end;) {
        const uint len = (uint)(w.row_left() < end - e ? w.row_left() : end - e);
        const TI *src = x + w.at[0];
        TO *dst = y + w.at[1];
        if (is == 1u && os == 1u) {
            for (uint t = 0; t < len; ++t) dst[t] = rlx_from_float<TO>(rlx_to_float(src[t]));
        } else {
            for (uint t = 0; t < len; ++t) dst[t * os] = rlx_from_float<TO>(rlx_to_float(src[t * is]));
        }
        e += len;
        w.advance(len);
    }
}
#endif

template <typename TI, typename TO>
RLX_KERNEL copy_strided(RLX_BUF(RLX_DEVICE const TI *, x, 0), RLX_BUF(RLX_DEVICE TO *, y, 1),
                        RLX_PARAMS(CopyParams, p, 2) RLX_IDS) {
#ifdef RLX_TARGET_CPU
    {
        uint64_t begin, end;
        rlx_group_chunk(p->n, rlx_group_id.x, rlx_num_groups.x, &begin, &end);
        if (begin < end) rlx_copy_runs(x, y, p, begin, end);
        return;
    }
#endif
    RLX_FOR_RANGE(i, p->n) {
        uint rest = (uint)i, src = p->in_offset, dst = p->out_offset;
        for (int d = (int)p->ndim - 1; d >= 0; --d) {
            const uint coord = rest % p->shape[d];
            rest /= p->shape[d];
            src += coord * p->in_strides[d];
            dst += coord * p->out_strides[d];
        }
        y[dst] = rlx_from_float<TO>(rlx_to_float(x[src]));
    }
}
RLX_INSTANTIATE2(copy_strided, float, float, copy_f32_f32)
RLX_INSTANTIATE2(copy_strided, half, half, copy_f16_f16)
RLX_INSTANTIATE2(copy_strided, float, half, copy_f32_f16)
RLX_INSTANTIATE2(copy_strided, half, float, copy_f16_f32)
