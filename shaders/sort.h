// The sort family (rlx/ir/ops/sort.py): a stable LSD radix sort of rows of
// 32-bit words by one or two leading key words (unsigned), 8 bits a pass,
// and the multi-group exclusive scan it (and splat_offsets) is built on.
// Any op that needs a device sort (the splat renderer's depth and tile keys,
// later top-k sampling) lowers to these kernels (rlx/lowering/sort.py).
//
// A pass over digit `shift` of key column `word`:
// - sort_histogram: the sorted range [0, m) (m = min(count[0], n), a count
//   the device computed, or n) is cut into `blocks` contiguous chunks, one
//   per group; each group counts its chunk's digits into
//   hist[digit * blocks + block] (digit-major, so one exclusive scan gives
//   every (digit, block) its first output row). Counts are group-memory
//   atomic adds: sums commute, so the order of the adds does not matter.
// - scan_reduce / scan_partials / scan_down: the exclusive prefix sum of
//   hist in place, over many groups (below).
// - sort_scatter: each group walks its chunk in order and writes every row
//   to hist[digit * blocks + block] + (rows of that digit before it in the
//   chunk): stable, so a pass keeps the order of the earlier (less
//   significant) passes among equal digits.
// Race-free by construction: every shared counter has one owner thread per
// step (or is only changed by atomic adds), steps are separated by
// barriers, and no two threads write one output row. A group of one thread
// (the CPU) counts and scatters directly; larger groups (GPUs) rank a tile
// of rows at a time in group memory: the tile is sorted stably by its
// digit with four 2-bit splits (each a prefix sum over the tile, O(TILE log
// TILE) work), then a row's rank among equal digits is its position in the
// sorted tile minus its digit's first position there.
#define RLX_SORT_RADIX 256u
#define RLX_SORT_TILE 256u
#define RLX_SORT_MAX_THREADS 1024u

struct SortParams {
    uint n, cols, src_offset, count_offset;   // rows, words per row, src's first word, count's element
    uint has_count, word, shift, mask;        // count given; key column, digit shift and mask of this pass
    uint blocks, pad0, pad1, pad2;            // chunks (groups) of the histogram and scatter
};

RLX_INLINE uint rlx_sort_rows(uint n, uint has_count, int count) {
    if (!has_count) return n;
    const uint c = count > 0 ? (uint)count : 0u;
    return c < n ? c : n;
}

// Rows [begin, end) of block b: the rows to sort (p->n, or the device
// count) in p->blocks equal chunks; the histogram and the scatter of a pass
// must split them the same way.
RLX_INLINE RlxRange rlx_sort_block_rows(RLX_CONSTANT SortParams *p, RLX_DEVICE const int *count, uint b) {
    const uint m = rlx_sort_rows(p->n, p->has_count, count[p->count_offset]);
    const uint chunk = (m + p->blocks - 1u) / p->blocks;
    const uint begin = b * chunk < m ? b * chunk : m;
    return RlxRange{begin, begin + chunk < m ? begin + chunk : m};
}

template <typename T>
RLX_KERNEL sort_histogram(RLX_BUF(RLX_DEVICE const T *, src, 0), RLX_BUF(RLX_DEVICE const int *, count, 1),
                          RLX_BUF(RLX_DEVICE uint *, hist, 2), RLX_PARAMS(SortParams, p, 3) RLX_IDS) {
    RLX_SHARED(uint, h, RLX_SORT_RADIX);
    const uint b = rlx_group_id.x, blocks = p->blocks;
    if (b >= blocks) return;
    const RlxRange rows = rlx_sort_block_rows(p, count, b);
    const uint begin = rows.begin;
    const uint cols = p->cols, word = p->word, shift = p->shift, mask = p->mask;
    RLX_DEVICE const T *s = src + p->src_offset;
    RLX_FOR_GROUP(d, RLX_SORT_RADIX) h[d] = 0u;
    rlx_barrier();
    RLX_FOR_GROUP(j, rows.end - begin) {
        rlx_group_atomic_add(&h[((uint)s[(uint64_t)(begin + j) * cols + word] >> shift) & mask], 1u);
    }
    rlx_barrier();
    RLX_FOR_GROUP(d, RLX_SORT_RADIX) hist[d * blocks + b] = h[d];
}
RLX_INSTANTIATE(sort_histogram, uint, sort_histogram_u32)

// ---- the multi-group exclusive scan ----------------------------------------
// data[offset .. offset + n) becomes its exclusive prefix sum in place
// (values and sums saturate at 2^31 - 1: they are i32 counts); with
// has_total, data[total_offset] gets the total. The n elements are cut into
// `groups` contiguous chunks (rlx_group_segment), one group each:
// - scan_reduce: group b sums its chunk into part[b];
// - scan_partials: one group, part[0 .. groups) becomes its exclusive prefix;
// - scan_down: group b rescans its chunk from part[b].
// With groups == 1 the lowering dispatches scan_down alone (its base is 0).
// Within a group, thread t takes a contiguous segment of the chunk, thread 0
// scans the segment totals in group memory between barriers.
struct ScanParams {
    uint n, offset, groups, total_offset;   // elements, the first one, chunks, where the total goes
    uint has_total, pad0, pad1, pad2;
};

RLX_INLINE uint rlx_scan_add(uint a, uint b) {
    const uint s = a + b;   // both <= 2^31 - 1: no wrap
    return s < 0x7FFFFFFFu ? s : 0x7FFFFFFFu;
}

// part[0 .. g) becomes its saturating exclusive prefix sum; returns the total.
RLX_INLINE uint rlx_scan_serial(RLX_GROUP_MEM uint *part, uint g) {
    uint run = 0u;
    for (uint j = 0u; j < g; ++j) {
        const uint v = part[j];
        part[j] = run;
        run = rlx_scan_add(run, v);
    }
    return run;
}

// Thread t's saturating sum of its segment of d, and the rewrite of that
// segment into its exclusive prefix from run (the scans' two passes).
template <typename T>
RLX_INLINE uint rlx_scan_segment_sum(RLX_DEVICE const T *d, RlxRange seg) {
    uint s = 0u;
    for (uint i = seg.begin; i < seg.end; ++i) s = rlx_scan_add(s, (uint)d[i]);
    return s;
}
template <typename T>
RLX_INLINE void rlx_scan_segment_rewrite(RLX_DEVICE T *d, RlxRange seg, uint run) {
    for (uint i = seg.begin; i < seg.end; ++i) {
        const uint v = (uint)d[i];
        d[i] = (T)run;
        run = rlx_scan_add(run, v);
    }
}

template <typename T>
RLX_KERNEL scan_reduce(RLX_BUF(RLX_DEVICE const T *, data, 0), RLX_BUF(RLX_DEVICE T *, part, 1),
                       RLX_PARAMS(ScanParams, p, 2) RLX_IDS) {
    RLX_SHARED(uint, sums, RLX_SORT_MAX_THREADS);
    const uint b = rlx_group_id.x;
    if (b >= p->groups) return;
    const RlxRange chunk = rlx_group_segment(p->n, b, p->groups);
    const uint g = rlx_group_size.x < RLX_SORT_MAX_THREADS ? rlx_group_size.x : RLX_SORT_MAX_THREADS;
    const uint t = rlx_local_id.x;
    const RlxRange seg = rlx_group_segment(chunk.end - chunk.begin, t, g);
    const uint s = rlx_scan_segment_sum(data + p->offset + chunk.begin, seg);
    if (t < g) sums[t] = s;
    rlx_barrier();
    if (t == 0u) part[b] = (T)rlx_scan_serial(sums, g);
}
RLX_INSTANTIATE(scan_reduce, uint, scan_reduce_u32)

template <typename T>
RLX_KERNEL scan_partials(RLX_BUF(RLX_DEVICE T *, part, 0), RLX_PARAMS(ScanParams, p, 1) RLX_IDS) {
    RLX_SHARED(uint, sums, RLX_SORT_MAX_THREADS);
    const uint g = rlx_group_size.x < RLX_SORT_MAX_THREADS ? rlx_group_size.x : RLX_SORT_MAX_THREADS;
    const uint t = rlx_local_id.x;
    const RlxRange seg = rlx_group_segment(p->groups, t, g);
    const uint s = rlx_scan_segment_sum(part, seg);
    if (t < g) sums[t] = s;
    rlx_barrier();
    if (t == 0u) rlx_scan_serial(sums, g);
    rlx_barrier();
    rlx_scan_segment_rewrite(part, seg, t < g ? sums[t] : 0u);
}
RLX_INSTANTIATE(scan_partials, uint, scan_partials_u32)

template <typename T>
RLX_KERNEL scan_down(RLX_BUF(RLX_DEVICE T *, data, 0), RLX_BUF(RLX_DEVICE const T *, part, 1),
                     RLX_PARAMS(ScanParams, p, 2) RLX_IDS) {
    RLX_SHARED(uint, sums, RLX_SORT_MAX_THREADS);
    const uint b = rlx_group_id.x;
    if (b >= p->groups) return;
    const RlxRange chunk = rlx_group_segment(p->n, b, p->groups);
    const uint g = rlx_group_size.x < RLX_SORT_MAX_THREADS ? rlx_group_size.x : RLX_SORT_MAX_THREADS;
    const uint t = rlx_local_id.x;
    const RlxRange seg = rlx_group_segment(chunk.end - chunk.begin, t, g);
    RLX_DEVICE T *d = data + p->offset + chunk.begin;
    const uint s = rlx_scan_segment_sum(d, seg);
    if (t < g) sums[t] = s;
    rlx_barrier();
    const uint base = p->groups > 1u ? (uint)part[b] : 0u;
    if (t == 0u) {
        const uint total = rlx_scan_add(base, rlx_scan_serial(sums, g));
        if (p->has_total && b + 1u == p->groups) data[p->total_offset] = (T)total;
    }
    rlx_barrier();
    rlx_scan_segment_rewrite(d, seg, t < g ? rlx_scan_add(base, sums[t]) : 0u);
}
RLX_INSTANTIATE(scan_down, uint, scan_down_u32)

// ---- the scatter -------------------------------------------------------------
// One 2-bit split of a tile's rows: ord_in (tile rows, stably sorted by
// the digit bits below `shift`) goes to ord_out stably sorted by bits
// [shift, shift + 2) too. Each position's one-hot of its 2-bit value (three
// 10-bit fields; the fourth count is the position minus the other three)
// is prefix-summed over the tile (Hillis-Steele, ping-pong in sc[0 .. 2
// TILE)), which gives the row's place among equal values and each value's
// start. Every thread of the group calls it (it has barriers).
RLX_INLINE void rlx_sort_split2(RLX_GROUP_MEM const uint *dig, RLX_GROUP_MEM const uint *ord_in,
                                RLX_GROUP_MEM uint *ord_out, RLX_GROUP_MEM uint *sc, uint len, uint shift,
                                uint local, uint threads) {
    for (uint q = local; q < len; q += threads) {
        const uint v = (dig[ord_in[q]] >> shift) & 3u;
        sc[q] = v < 3u ? 1u << (10u * v) : 0u;
    }
    rlx_barrier();
    uint cur = 0u;
    for (uint off = 1u; off < len; off <<= 1) {
        for (uint q = local; q < len; q += threads)
            sc[(cur ^ 1u) * RLX_SORT_TILE + q] = sc[cur * RLX_SORT_TILE + q]
                + (q >= off ? sc[cur * RLX_SORT_TILE + q - off] : 0u);
        rlx_barrier();
        cur ^= 1u;
    }
    const uint tot = sc[cur * RLX_SORT_TILE + len - 1u];
    const uint n0 = tot & 1023u, n1 = (tot >> 10) & 1023u, n2 = (tot >> 20) & 1023u;
    for (uint q = local; q < len; q += threads) {
        const uint v = (dig[ord_in[q]] >> shift) & 3u;
        const uint ex = sc[cur * RLX_SORT_TILE + q] - (v < 3u ? 1u << (10u * v) : 0u);
        const uint e0 = ex & 1023u, e1 = (ex >> 10) & 1023u, e2 = (ex >> 20) & 1023u;
        const uint before = v == 0u ? e0 : (v == 1u ? e1 : (v == 2u ? e2 : q - e0 - e1 - e2));
        const uint start = v == 0u ? 0u : (v == 1u ? n0 : (v == 2u ? n0 + n1 : n0 + n1 + n2));
        ord_out[start + before] = ord_in[q];
    }
    rlx_barrier();
}

template <typename T>
RLX_KERNEL sort_scatter(RLX_BUF(RLX_DEVICE const T *, src, 0), RLX_BUF(RLX_DEVICE const int *, count, 1),
                        RLX_BUF(RLX_DEVICE const uint *, hist, 2), RLX_BUF(RLX_DEVICE T *, dst, 3),
                        RLX_PARAMS(SortParams, p, 4) RLX_IDS) {
    RLX_SHARED(uint, base, RLX_SORT_RADIX);        // each digit's next output row
    RLX_SHARED(uint, first, RLX_SORT_RADIX);       // each digit's first position in the sorted tile
    RLX_SHARED(uint, past, RLX_SORT_RADIX);        // ... and one past its last
    RLX_SHARED(uint, dig, RLX_SORT_TILE);          // tile row j's digit
    RLX_SHARED(uint, ord, 2u * RLX_SORT_TILE);     // tile rows in sorted order (two buffers)
    RLX_SHARED(uint, sc, 2u * RLX_SORT_TILE);      // the splits' prefix sums
    const uint b = rlx_group_id.x, blocks = p->blocks;
    if (b >= blocks) return;
    const RlxRange rows = rlx_sort_block_rows(p, count, b);
    const uint begin = rows.begin, end = rows.end;
    const uint cols = p->cols, word = p->word, shift = p->shift, mask = p->mask;
    RLX_DEVICE const T *s = src + p->src_offset;
    RLX_FOR_GROUP(d, RLX_SORT_RADIX) {
        base[d] = hist[d * blocks + b];
        first[d] = 0u;
        past[d] = 0u;
    }
    rlx_barrier();
    if (rlx_group_size.x == 1u) {
        for (uint i = begin; i < end; ++i) {
            const uint d = ((uint)s[(uint64_t)i * cols + word] >> shift) & mask;
            const uint o = base[d]++;
            for (uint c = 0u; c < cols; ++c) dst[(uint64_t)o * cols + c] = s[(uint64_t)i * cols + c];
        }
        return;
    }
    const uint local = rlx_local_id.x, threads = rlx_group_size.x;
    for (uint t0 = begin; t0 < end; t0 += RLX_SORT_TILE) {
        const uint len = end - t0 < RLX_SORT_TILE ? end - t0 : RLX_SORT_TILE;
        RLX_FOR_GROUP(j, len) {
            dig[j] = ((uint)s[(uint64_t)(t0 + j) * cols + word] >> shift) & mask;
            ord[j] = j;
        }
        rlx_barrier();
        // Four splits leave the sorted tile in ord[0 .. len) again.
        for (uint bit = 0u; bit < 8u; bit += 2u) {
            const uint in = (bit / 2u) % 2u;
            rlx_sort_split2(dig, ord + in * RLX_SORT_TILE, ord + (in ^ 1u) * RLX_SORT_TILE, sc, len, bit, local,
                            threads);
        }
        // Each digit's run in the sorted tile: its owner positions write its ends.
        RLX_FOR_GROUP(q, len) {
            const uint d = dig[ord[q]];
            if (q == 0u || dig[ord[q - 1u]] != d) first[d] = q;
            if (q + 1u == len || dig[ord[q + 1u]] != d) past[d] = q + 1u;
        }
        rlx_barrier();
        // Consecutive positions of one digit go to consecutive output rows.
        RLX_FOR_GROUP(q, len) {
            const uint j = ord[q], d = dig[j];
            const uint o = base[d] + q - first[d];
            for (uint c = 0u; c < cols; ++c) dst[(uint64_t)o * cols + c] = s[(uint64_t)(t0 + j) * cols + c];
        }
        rlx_barrier();
        RLX_FOR_GROUP(d, RLX_SORT_RADIX) {
            base[d] += past[d] - first[d];
            first[d] = 0u;
            past[d] = 0u;
        }
        rlx_barrier();
    }
}
RLX_INSTANTIATE(sort_scatter, uint, sort_scatter_u32)
