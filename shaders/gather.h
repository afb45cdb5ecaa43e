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
