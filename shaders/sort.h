// The sort family (rlx/ir/ops/sort.py): a stable LSD radix sort of rows of
// 32-bit words by one or two leading key words (unsigned), 8 bits a pass.
// Any op that needs a device sort (the splat renderer's tile/depth keys,
// later top-k sampling) lowers to these three kernels (rlx/lowering/sort.py).
//
// A pass over digit `shift` of key column `word`:
// - sort_histogram: the sorted range [0, m) (m = min(count[0], n), a count
//   the device computed, or n) is cut into `blocks` contiguous chunks, one
//   per group; each group counts its chunk's digits into
//   hist[digit * blocks + block] (digit-major, so one exclusive scan gives
//   every (digit, block) its first output row).
// - sort_scan: one group, an exclusive prefix sum of hist in place.
// - sort_scatter: each group walks its chunk in order and writes every row
//   to hist[digit * blocks + block] + (rows of that digit before it in the
//   chunk): stable, so a pass keeps the order of the earlier (less
//   significant) passes among equal digits.
// Race-free by construction: every shared counter has one owner thread per
// step, steps are separated by barriers, and no two threads write one
// output row. A group of one thread (the CPU) counts and scatters directly;
// larger groups (GPUs) rank a tile of rows at a time in group memory (each
// row's rank among equal digits before it in the tile, each digit's running
// base advanced by its owner thread after the tile).
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
    RLX_SHARED(uint, dig, RLX_SORT_TILE);
    const uint b = rlx_group_id.x, blocks = p->blocks;
    if (b >= blocks) return;
    const RlxRange rows = rlx_sort_block_rows(p, count, b);
    const uint begin = rows.begin, end = rows.end;
    const uint cols = p->cols, word = p->word, shift = p->shift, mask = p->mask;
    RLX_DEVICE const T *s = src + p->src_offset;
    RLX_FOR_GROUP(d, RLX_SORT_RADIX) h[d] = 0u;
    rlx_barrier();
    if (rlx_group_size.x == 1u) {
        for (uint i = begin; i < end; ++i) h[((uint)s[(uint64_t)i * cols + word] >> shift) & mask] += 1u;
    } else {
        for (uint t0 = begin; t0 < end; t0 += RLX_SORT_TILE) {
            const uint len = end - t0 < RLX_SORT_TILE ? end - t0 : RLX_SORT_TILE;
            RLX_FOR_GROUP(j, len) dig[j] = ((uint)s[(uint64_t)(t0 + j) * cols + word] >> shift) & mask;
            rlx_barrier();
            RLX_FOR_GROUP(d, RLX_SORT_RADIX) {
                uint c = 0u;
                for (uint k = 0u; k < len; ++k) c += dig[k] == d ? 1u : 0u;
                h[d] += c;
            }
            rlx_barrier();
        }
    }
    rlx_barrier();
    RLX_FOR_GROUP(d, RLX_SORT_RADIX) hist[d * blocks + b] = h[d];
}
RLX_INSTANTIATE(sort_histogram, uint, sort_histogram_u32)

// One group: hist[0 .. RADIX * blocks) becomes its exclusive prefix sum.
// Each thread sums a contiguous segment, one thread scans the segment
// totals, each thread rewrites its segment from its total's prefix.
template <typename T>
RLX_KERNEL sort_scan(RLX_BUF(RLX_DEVICE T *, hist, 0), RLX_PARAMS(SortParams, p, 1) RLX_IDS) {
    RLX_SHARED(uint, part, RLX_SORT_MAX_THREADS);
    const uint total = RLX_SORT_RADIX * p->blocks;
    const uint g = rlx_group_size.x < RLX_SORT_MAX_THREADS ? rlx_group_size.x : RLX_SORT_MAX_THREADS;
    const uint t = rlx_local_id.x;
    const RlxRange segment = rlx_group_segment(total, t, g);
    const uint lo = segment.begin, hi = segment.end;
    uint s = 0u;
    for (uint i = lo; i < hi; ++i) s += (uint)hist[i];
    if (t < g) part[t] = s;
    rlx_barrier();
    if (t == 0u) rlx_serial_exclusive_scan(part, g);
    rlx_barrier();
    uint run = t < g ? part[t] : 0u;
    for (uint i = lo; i < hi; ++i) {
        const uint v = (uint)hist[i];
        hist[i] = (T)run;
        run += v;
    }
}
RLX_INSTANTIATE(sort_scan, uint, sort_scan_u32)

template <typename T>
RLX_KERNEL sort_scatter(RLX_BUF(RLX_DEVICE const T *, src, 0), RLX_BUF(RLX_DEVICE const int *, count, 1),
                        RLX_BUF(RLX_DEVICE const uint *, hist, 2), RLX_BUF(RLX_DEVICE T *, dst, 3),
                        RLX_PARAMS(SortParams, p, 4) RLX_IDS) {
    RLX_SHARED(uint, base, RLX_SORT_RADIX);
    RLX_SHARED(uint, dig, RLX_SORT_TILE);
    const uint b = rlx_group_id.x, blocks = p->blocks;
    if (b >= blocks) return;
    const RlxRange rows = rlx_sort_block_rows(p, count, b);
    const uint begin = rows.begin, end = rows.end;
    const uint cols = p->cols, word = p->word, shift = p->shift, mask = p->mask;
    RLX_DEVICE const T *s = src + p->src_offset;
    RLX_FOR_GROUP(d, RLX_SORT_RADIX) base[d] = hist[d * blocks + b];
    rlx_barrier();
    if (rlx_group_size.x == 1u) {
        for (uint i = begin; i < end; ++i) {
            const uint d = ((uint)s[(uint64_t)i * cols + word] >> shift) & mask;
            const uint o = base[d]++;
            for (uint c = 0u; c < cols; ++c) dst[(uint64_t)o * cols + c] = s[(uint64_t)i * cols + c];
        }
    } else {
        for (uint t0 = begin; t0 < end; t0 += RLX_SORT_TILE) {
            const uint len = end - t0 < RLX_SORT_TILE ? end - t0 : RLX_SORT_TILE;
            RLX_FOR_GROUP(j, len) dig[j] = ((uint)s[(uint64_t)(t0 + j) * cols + word] >> shift) & mask;
            rlx_barrier();
            RLX_FOR_GROUP(j, len) {
                const uint d = dig[j];
                uint r = 0u;
                for (uint k = 0u; k < j; ++k) r += dig[k] == d ? 1u : 0u;
                const uint o = base[d] + r;
                for (uint c = 0u; c < cols; ++c) dst[(uint64_t)o * cols + c] = s[(uint64_t)(t0 + j) * cols + c];
            }
            rlx_barrier();
            RLX_FOR_GROUP(d, RLX_SORT_RADIX) {
                uint c = 0u;
                for (uint k = 0u; k < len; ++k) c += dig[k] == d ? 1u : 0u;
                base[d] += c;
            }
            rlx_barrier();
        }
    }
}
RLX_INSTANTIATE(sort_scatter, uint, sort_scatter_u32)
