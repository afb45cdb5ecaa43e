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
// The CPU walks its chunk as runs along the innermost dimension: the first
// element's coordinates once, then an odometer, each run a plain loop (a
// vectorized copy where both strides are 1), where an index division per
// dimension and element cost ~10 ns an element (a concat's 480,000-float
// part took 4.8 ms).
template <typename TI, typename TO>
RLX_INLINE void rlx_copy_runs(const TI *x, TO *y, const CopyParams *p, uint64_t begin, uint64_t end) {
    const uint nd = p->ndim, last = nd - 1u;
    uint coord[RLX_MAX_DIMS];
    uint64_t rest = begin;
    for (int d = (int)last; d >= 0; --d) {
        coord[d] = (uint)(rest % p->shape[d]);
        rest /= p->shape[d];
    }
    const uint64_t is = p->in_strides[last], os = p->out_strides[last];
    for (uint64_t e = begin; e < end;) {
        uint64_t src = p->in_offset, dst = p->out_offset;
        for (uint d = 0u; d < nd; ++d) {
            src += (uint64_t)coord[d] * p->in_strides[d];
            dst += (uint64_t)coord[d] * p->out_strides[d];
        }
        const uint64_t left = (uint64_t)(p->shape[last] - coord[last]);
        const uint64_t len = left < end - e ? left : end - e;
        if (is == 1u && os == 1u) {
            for (uint64_t t = 0; t < len; ++t) y[dst + t] = rlx_from_float<TO>(rlx_to_float(x[src + t]));
        } else {
            for (uint64_t t = 0; t < len; ++t) y[dst + t * os] = rlx_from_float<TO>(rlx_to_float(x[src + t * is]));
        }
        e += len;
        coord[last] += (uint)len;
        for (uint d = last; d > 0u && coord[d] >= p->shape[d]; --d) {
            coord[d] = 0u;
            ++coord[d - 1u];
        }
    }
}
#endif

template <typename TI, typename TO>
RLX_KERNEL copy_strided(RLX_BUF(RLX_DEVICE const TI *, x, 0), RLX_BUF(RLX_DEVICE TO *, y, 1),
                        RLX_PARAMS(CopyParams, p, 2) RLX_IDS) {
#ifdef RLX_TARGET_CPU
    {
        const uint64_t groups = (uint64_t)rlx_num_groups.x, chunk = ((uint64_t)p->n + groups - 1u) / groups;
        const uint64_t begin = (uint64_t)rlx_group_id.x * chunk;
        const uint64_t end = begin + chunk < (uint64_t)p->n ? begin + chunk : (uint64_t)p->n;
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
