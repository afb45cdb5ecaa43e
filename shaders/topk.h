// Top-k along the last axis (rlx/ir/ops/topk.py): the indices of the k
// largest elements of each row, by descending value; ties go to the lower
// index and NaN ranks above +inf (torch.topk's rule).
//
// Each element becomes a 32-bit key whose unsigned order is the value order
// (NaN largest, -0 == +0), and entries compare as (key descending, index
// ascending): a total order, so every kernel, group size and the numpy
// reference pick the same indices. NaN is found from the bits, not v != v,
// which a fast-math compile (Metal's default) may fold away.
//
// Two forms; the lowering (rlx/lowering/topk.py) picks:
// - topk_select: one group per row, a sorted list of k entries kept by
//   insertion while one thread walks the row. On the CPU (one-thread groups)
//   that is the whole job: one compare per element once the list is full.
// - topk_tile: one group per chunk of a row (a power of two <= RLX_TOPK_TILE
//   entries) bitonic-sorts the chunk in group memory and keeps its best k,
//   as (key, index) pairs into scratch; passes repeat over those candidates
//   until one chunk holds a row, and the last pass writes the indices. A
//   262144-entry vocabulary row is 128 groups, then one or two small passes,
//   instead of one group walking the whole row.
#define RLX_TOPK_MAX_K 256u
#define RLX_TOPK_TILE 2048u

struct TopkParams {
    uint rows, n, k, chunk;   // n: entries per row at this pass; chunk: entries per group (a power of two)
    uint chunks, in_offset;   // groups per row, ceil(n / chunk); x's first element
    uint from_x, final;       // read x (else candidate pairs); write indices (else candidate pairs)
};

RLX_INLINE uint rlx_topk_key(float v) {
    const uint b = rlx_float_to_bits(v), mag = b & 0x7FFFFFFFu;
    if (mag > 0x7F800000u) return 0xFFFFFFFFu;   // NaN
    if (mag == 0u) return 0x80000000u;           // -0 ties with +0
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Entry (ka, ia) ranks above (kb, ib).
RLX_INLINE bool rlx_topk_above(uint ka, uint ia, uint kb, uint ib) {
    return ka > kb || (ka == kb && ia < ib);
}

// One group per row; its first thread does the work (the CPU's groups have
// one thread; GPUs take topk_tile).
template <typename T>
RLX_KERNEL topk_select(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE int *, out, 1),
                       RLX_PARAMS(TopkParams, p, 2) RLX_IDS) {
    RLX_SHARED(uint, keys, RLX_TOPK_MAX_K);
    RLX_SHARED(uint, ids, RLX_TOPK_MAX_K);
    const uint row = rlx_group_id.x, k = p->k, n = p->n;
    if (row >= p->rows || rlx_local_id.x != 0u) return;
    RLX_DEVICE const T *xr = x + p->in_offset + (uint64_t)row * n;
    uint held = 0u;
    for (uint i = 0u; i < n; ++i) {
        const uint key = rlx_topk_key(rlx_to_float(xr[i]));
        // i is past every index held, so an equal key ranks below them all.
        if (held == k && key <= keys[k - 1u]) continue;
        uint at = held < k ? held++ : k - 1u;
        for (; at > 0u && keys[at - 1u] < key; --at) {
            keys[at] = keys[at - 1u];
            ids[at] = ids[at - 1u];
        }
        keys[at] = key;
        ids[at] = i;
    }
    for (uint t = 0u; t < k; ++t) out[(uint64_t)row * k + t] = (int)ids[t];
}
RLX_INSTANTIATE(topk_select, float, topk_select_f32)
RLX_INSTANTIATE(topk_select, half, topk_select_f16)

// One group per (row, chunk): load the chunk (padding ranks below every real
// entry), bitonic-sort it best first, keep the first k. cand_in / cand_out
// hold (key, index) pairs, [rows, n, 2] and [rows, chunks * k, 2].
template <typename T>
RLX_KERNEL topk_tile(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const uint *, cand_in, 1),
                     RLX_BUF(RLX_DEVICE uint *, cand_out, 2), RLX_BUF(RLX_DEVICE int *, out, 3),
                     RLX_PARAMS(TopkParams, p, 4) RLX_IDS) {
    RLX_SHARED(uint, keys, RLX_TOPK_TILE);
    RLX_SHARED(uint, ids, RLX_TOPK_TILE);
    const uint g = rlx_group_id.x, chunk = p->chunk, k = p->k;
    if (g >= p->rows * p->chunks) return;
    const uint row = g / p->chunks, c = g % p->chunks;
    const uint64_t base = (uint64_t)row * p->n;
    RLX_FOR_GROUP(t, chunk) {
        const uint j = c * chunk + t;
        uint key = 0u, id = 0xFFFFFFFFu;
        if (j < p->n) {
            if (p->from_x) {
                key = rlx_topk_key(rlx_to_float(x[p->in_offset + base + j]));
                id = j;
            } else {
                key = cand_in[2u * (base + j)];
                id = cand_in[2u * (base + j) + 1u];
            }
        }
        keys[t] = key;
        ids[t] = id;
    }
    // Bitonic sort: blocks of `size` alternate best-first / worst-first until
    // the last, which covers the chunk, is best first. Each pair (a, a +
    // stride) is one thread's; the barriers separate the steps.
    for (uint size = 2u; size <= chunk; size <<= 1) {
        for (uint stride = size >> 1; stride > 0u; stride >>= 1) {
            rlx_barrier();
            RLX_FOR_GROUP(t, chunk >> 1) {
                const uint a = 2u * stride * (t / stride) + t % stride, b = a + stride;
                const bool best_first = (a & size) == 0u;
                if (rlx_topk_above(keys[b], ids[b], keys[a], ids[a]) == best_first) {
                    const uint tk = keys[a], ti = ids[a];
                    keys[a] = keys[b];
                    ids[a] = ids[b];
                    keys[b] = tk;
                    ids[b] = ti;
                }
            }
        }
    }
    rlx_barrier();
    RLX_FOR_GROUP(t, k) {
        if (p->final) {
            out[(uint64_t)row * k + t] = (int)ids[t];
        } else {
            const uint64_t o = ((uint64_t)row * p->chunks + c) * k + t;
            cand_out[2u * o] = keys[t];
            cand_out[2u * o + 1u] = ids[t];
        }
    }
}
RLX_INSTANTIATE(topk_tile, float, topk_tile_f32)
RLX_INSTANTIATE(topk_tile, half, topk_tile_f16)

// values[r, t] = x[r, indices[r, t]] (take_along_axis); NaN outside [0, n).
struct TopkValuesParams {
    uint rows, n, k, in_offset, idx_offset, pad0, pad1, pad2;
};

template <typename T>
RLX_KERNEL topk_values(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const int *, indices, 1),
                       RLX_BUF(RLX_DEVICE T *, out, 2), RLX_PARAMS(TopkValuesParams, p, 3) RLX_IDS) {
    const uint k = p->k, n = p->n;
    RLX_FOR_RANGE(i, (uint64_t)p->rows * k) {
        const uint r = rlx_index_div(i, k);
        const int j = indices[p->idx_offset + i];
        out[i] = (j >= 0 && (uint)j < n) ? x[p->in_offset + (uint64_t)r * n + (uint)j]
                                          : rlx_from_float<T>(rlx_bits_to_float(0x7FC00000u));
    }
}
RLX_INSTANTIATE(topk_values, float, topk_values_f32)
RLX_INSTANTIATE(topk_values, half, topk_values_f16)
