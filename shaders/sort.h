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
//   atomic adds, one per digit per SIMD group and round (rlx_simd_match):
//   sums commute, so the order of the adds does not matter.
// - scan_reduce / scan_partials / scan_down: the exclusive prefix sum of
//   hist in place, over many groups (below).
// - sort_scatter: each group walks its chunk in order and writes every row
//   to hist[digit * blocks + block] + (rows of that digit before it in the
//   chunk): stable, so a pass keeps the order of the earlier (less
//   significant) passes among equal digits.
// Race-free by construction: every shared counter has one owner thread per
// step (or is only changed by atomic adds), steps are separated by
// barriers (SIMD-group barriers within a SIMD group's own counters), and no
// two threads write one output row. A group of one thread (the CPU) counts
// and scatters directly; larger groups (GPUs) rank a tile of rows at a time
// with SIMD votes (the scatter, below).
#define RLX_SORT_RADIX 256u
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

// The digit's width (the votes that tell two digits apart) and a SIMD
// group's lanes before `lane`.
RLX_INLINE uint rlx_sort_digit_bits(uint mask) {
    uint bits = 0u;
    while (bits < 32u && (mask >> bits) != 0u) ++bits;
    return bits;
}
RLX_INLINE rlx_lanes rlx_sort_lanes_below(uint lane) {
    return lane == 0u ? (rlx_lanes)0 : (~(rlx_lanes)0) >> (64u - lane);
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
    const uint len = rows.end - begin, threads = rlx_group_size.x, local = rlx_local_id.x;
    if (threads == 1u) {
        for (uint j = 0u; j < len; ++j) h[((uint)s[(uint64_t)(begin + j) * cols + word] >> shift) & mask] += 1u;
    } else {
        // One atomic add per digit per SIMD group and round: the lowest lane of
        // each set of equal digits adds their count (keys with a common top
        // byte, such as depths, would otherwise queue on one counter).
        const uint bits = rlx_sort_digit_bits(mask);
        const rlx_lanes below = rlx_sort_lanes_below(rlx_simd_lane);
        for (uint j0 = 0u; j0 < len; j0 += threads) {   // every thread takes every round (the votes)
            const uint j = j0 + local;
            const bool valid = j < len;
            const uint d = valid ? ((uint)s[(uint64_t)(begin + j) * cols + word] >> shift) & mask : 0u;
            const rlx_lanes peers = rlx_simd_match(d, bits, valid);
            if (valid && rlx_lanes_count(peers & below) == 0u) rlx_group_atomic_add(&h[d], rlx_lanes_count(peers));
        }
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
// GPUs rank a tile of rows at a time, with SIMD votes rather than group-wide
// prefix sums: SIMD group w of the group owns `lanes * RLX_SORT_ITEMS`
// consecutive rows of the tile and walks them in RLX_SORT_ITEMS rounds of one
// row a lane. In a round, rlx_simd_match finds the lanes holding the same
// digit; a row's place is its SIMD group's running count of that digit
// (wc[w][digit], group memory) plus the matching lanes before it, and the
// lowest of those lanes then adds the round's count. After the rounds, one
// pass over the digits turns the SIMD groups' counts into output rows
// (base[digit], then each SIMD group's count in order), and every lane writes
// its rows. A tile costs four group barriers; the order is the rows' order
// (rounds in order, lanes in order, SIMD groups in order): stable.
#define RLX_SORT_ITEMS 8u   // rows a lane ranks per tile
#define RLX_SORT_SIMD 8u    // SIMD groups that rank (a larger group's other threads only meet the barriers)

template <typename T>
RLX_KERNEL sort_scatter(RLX_BUF(RLX_DEVICE const T *, src, 0), RLX_BUF(RLX_DEVICE const int *, count, 1),
                        RLX_BUF(RLX_DEVICE const uint *, hist, 2), RLX_BUF(RLX_DEVICE T *, dst, 3),
                        RLX_PARAMS(SortParams, p, 4) RLX_IDS) {
    RLX_SHARED(uint, base, RLX_SORT_RADIX);                  // each digit's next output row
    RLX_SHARED(uint, wc, RLX_SORT_SIMD * RLX_SORT_RADIX);    // per SIMD group: digit counts, then first rows
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
        return;
    }
    const uint width = rlx_simd_width, lane = rlx_simd_lane, sid = rlx_simd_id;
    const uint groups_of_lanes = (rlx_group_size.x + width - 1u) / width;
    const uint simds = groups_of_lanes < RLX_SORT_SIMD ? groups_of_lanes : RLX_SORT_SIMD;
    const uint ranking = rlx_group_size.x < simds * width ? rlx_group_size.x : simds * width;
    // This SIMD group's lanes that rank (0 past the first RLX_SORT_SIMD) and its rows' first row in a tile.
    const uint lanes = sid < simds ? (ranking - sid * width < width ? ranking - sid * width : width) : 0u;
    const uint own = sid * width * RLX_SORT_ITEMS;
    const rlx_lanes below = rlx_sort_lanes_below(lane);
    const uint bits = rlx_sort_digit_bits(mask);
    RLX_GROUP_MEM uint *mine = wc + (sid < simds ? sid : 0u) * RLX_SORT_RADIX;
    RLX_FOR_GROUP(i, simds * RLX_SORT_RADIX) wc[i] = 0u;
    rlx_barrier();
    for (uint t0 = begin; t0 < end; t0 += ranking * RLX_SORT_ITEMS) {
        uint place[RLX_SORT_ITEMS], digit[RLX_SORT_ITEMS];
        RLX_UNROLL
        for (uint r = 0u; r < RLX_SORT_ITEMS; ++r) {
            const uint row = t0 + own + r * lanes + lane;
            const bool valid = lane < lanes && row < end;
            const uint d = valid ? ((uint)s[(uint64_t)row * cols + word] >> shift) & mask : 0u;
            const rlx_lanes peers = rlx_simd_match(d, bits, valid);
            const uint before = rlx_lanes_count(peers & below);
            place[r] = valid ? mine[d] + before : 0u;
            digit[r] = d;
            rlx_simd_barrier();   // every lane has read its digit's count
            if (valid && before == 0u) mine[d] += rlx_lanes_count(peers);
            rlx_simd_barrier();   // the counts are visible to the next round
        }
        rlx_barrier();
        // Each digit's first output row per SIMD group: base, then the groups' counts in order.
        RLX_FOR_GROUP(d, RLX_SORT_RADIX) {
            uint run = base[d];
            for (uint w = 0u; w < simds; ++w) {
                const uint c = wc[w * RLX_SORT_RADIX + d];
                wc[w * RLX_SORT_RADIX + d] = run;
                run += c;
            }
            base[d] = run;
        }
        rlx_barrier();
        RLX_UNROLL
        for (uint r = 0u; r < RLX_SORT_ITEMS; ++r) {
            const uint row = t0 + own + r * lanes + lane;
            if (lane < lanes && row < end) {
                const uint o = mine[digit[r]] + place[r];
                for (uint c = 0u; c < cols; ++c) dst[(uint64_t)o * cols + c] = s[(uint64_t)row * cols + c];
            }
        }
        rlx_barrier();
        RLX_FOR_GROUP(i, simds * RLX_SORT_RADIX) wc[i] = 0u;
        rlx_barrier();
    }
}
RLX_INSTANTIATE(sort_scatter, uint, sort_scatter_u32)
