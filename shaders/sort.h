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
// two threads write one output row or stage slot. A group of one thread
// (the CPU) counts and scatters directly; larger groups (GPUs) rank a tile
// of rows at a time with SIMD votes and write it out through group memory
// (the scatter, below).
#define RLX_SORT_RADIX 256u
#define RLX_SORT_MAX_THREADS 1024u
#define RLX_SORT_ITEMS 8u    // rows a lane ranks per tile (and a thread counts per histogram step)
#define RLX_SORT_SIMD 8u     // SIMD groups that rank (a larger group's other threads only meet the barriers)
#define RLX_SORT_TILE 2048u  // rows a scatter tile holds at most: RLX_SORT_SIMD SIMD groups of 32 lanes

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

// ---- group-wide prefix sums --------------------------------------------------
// rlx_group_count_scan: every thread of the group calls it with a count (the
// group's total must fit in 32 bits); it returns the sum of the counts of
// the threads before it (thread order) and the group's total. SIMD prefix
// sums, then one partial per SIMD group in `scratch` (RLX_SORT_MAX_THREADS
// entries: SIMD groups of one thread included); two group barriers, and
// scratch is free again on return.
struct RlxScan {
    uint before, total;
};

RLX_INLINE RlxScan rlx_group_count_scan(uint v, RLX_GROUP_MEM uint *scratch RLX_GROUP_IDS) {
    const uint width = rlx_simd_width, sid = rlx_simd_id, size = rlx_group_size.x;
    const uint simds = (size + width - 1u) / width;
    const uint in_simd = rlx_simd_prefix_exclusive_sum(v);
    const uint last_lane = (size - sid * width < width ? size - sid * width : width) - 1u;
    if (rlx_simd_lane == last_lane) scratch[sid] = in_simd + v;
    rlx_barrier();
    RlxScan r = RlxScan{in_simd, 0u};
    for (uint w = 0u; w < simds; ++w) {
        const uint part = scratch[w];
        if (w < sid) r.before += part;
        r.total += part;
    }
    rlx_barrier();
    return r;
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
        // byte, such as depths, would otherwise queue on one counter). A
        // thread loads its RLX_SORT_ITEMS keys of a step before it votes, so
        // their memory latencies overlap instead of adding up.
        const uint bits = rlx_sort_digit_bits(mask);
        const rlx_lanes below = rlx_sort_lanes_below(rlx_simd_lane);
        for (uint j0 = 0u; j0 < len; j0 += threads * RLX_SORT_ITEMS) {   // every thread takes every step (the votes)
            uint digit[RLX_SORT_ITEMS];
            RLX_UNROLL
            for (uint r = 0u; r < RLX_SORT_ITEMS; ++r) {
                const uint j = j0 + r * threads + local;
                digit[r] = j < len ? ((uint)s[(uint64_t)(begin + j) * cols + word] >> shift) & mask : 0u;
            }
            RLX_UNROLL
            for (uint r = 0u; r < RLX_SORT_ITEMS; ++r) {
                const bool valid = j0 + r * threads + local < len;
                const rlx_lanes peers = rlx_simd_match(digit[r], bits, valid);
                if (valid && rlx_lanes_count(peers & below) == 0u)
                    rlx_group_atomic_add(&h[digit[r]], rlx_lanes_count(peers));
            }
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
// A one-thread group (the CPU) walks its chunk in place. Larger groups move
// RLX_SCAN_STAGE elements at a time between device and group memory with
// consecutive threads on consecutive elements (coalesced); in group memory
// thread t scans a contiguous segment, and rlx_scan_group_sum places the
// segments' totals.
#define RLX_SCAN_STAGE 2048u

struct ScanParams {
    uint n, offset, groups, total_offset;   // elements, the first one, chunks, where the total goes
    uint has_total, pad0, pad1, pad2;
};

RLX_INLINE uint rlx_scan_add(uint a, uint b) {
    const uint s = a + b;   // both <= 2^31 - 1: no wrap
    return s < 0x7FFFFFFFu ? s : 0x7FFFFFFFu;
}
RLX_INLINE uint rlx_scan_clamp(uint64_t v) { return v < (uint64_t)0x7FFFFFFFu ? (uint)v : 0x7FFFFFFFu; }

// rlx_group_count_scan of values up to 2^31 - 1 whose sum may pass 32 bits,
// saturating like rlx_scan_add: their low and high 16 bits are scanned apart
// (neither sum can wrap for groups of up to 2^15 threads) and joined in 64
// bits. Adds of non-negative values saturate the same in any order, so this
// equals the serial saturating sum.
RLX_INLINE RlxScan rlx_scan_group_sum(uint v, RLX_GROUP_MEM uint *scratch RLX_GROUP_IDS) {
    const RlxScan lo = rlx_group_count_scan(v & 0xFFFFu, scratch RLX_GROUP_IDS_ARGS);
    const RlxScan hi = rlx_group_count_scan(v >> 16, scratch RLX_GROUP_IDS_ARGS);
    return RlxScan{rlx_scan_clamp(((uint64_t)hi.before << 16) + lo.before),
                   rlx_scan_clamp(((uint64_t)hi.total << 16) + lo.total)};
}

// d[0, len) becomes its exclusive prefix sum from `carry`, in place; returns
// carry plus the chunk's sum. Every thread of the group calls it.
template <typename T>
RLX_INLINE uint rlx_scan_chunk(RLX_DEVICE T *d, uint len, uint carry, RLX_GROUP_MEM uint *stage,
                               RLX_GROUP_MEM uint *scratch RLX_GROUP_IDS) {
    const uint t = rlx_local_id.x, g = rlx_group_size.x;
    if (g == 1u) {
        for (uint i = 0u; i < len; ++i) {
            const uint v = (uint)d[i];
            d[i] = (T)carry;
            carry = rlx_scan_add(carry, v);
        }
        return carry;
    }
    for (uint s0 = 0u; s0 < len; s0 += RLX_SCAN_STAGE) {
        const uint m = len - s0 < RLX_SCAN_STAGE ? len - s0 : RLX_SCAN_STAGE;
        for (uint i = t; i < m; i += g) stage[i] = (uint)d[s0 + i];
        rlx_barrier();
        const RlxRange seg = rlx_group_segment(m, t, g);
        uint sum = 0u;
        for (uint i = seg.begin; i < seg.end; ++i) sum = rlx_scan_add(sum, stage[i]);
        const RlxScan at = rlx_scan_group_sum(sum, scratch RLX_GROUP_IDS_ARGS);
        uint run = rlx_scan_add(carry, at.before);
        for (uint i = seg.begin; i < seg.end; ++i) {
            const uint v = stage[i];
            stage[i] = run;
            run = rlx_scan_add(run, v);
        }
        rlx_barrier();
        for (uint i = t; i < m; i += g) d[s0 + i] = (T)stage[i];
        carry = rlx_scan_add(carry, at.total);
        rlx_barrier();   // every thread has read the stage before the next fill
    }
    return carry;
}

template <typename T>
RLX_KERNEL scan_reduce(RLX_BUF(RLX_DEVICE const T *, data, 0), RLX_BUF(RLX_DEVICE T *, part, 1),
                       RLX_PARAMS(ScanParams, p, 2) RLX_IDS) {
    RLX_SHARED(uint, scratch, RLX_SORT_MAX_THREADS);
    const uint b = rlx_group_id.x;
    if (b >= p->groups) return;
    const RlxRange chunk = rlx_group_segment(p->n, b, p->groups);
    RLX_DEVICE const T *d = data + p->offset + chunk.begin;
    const uint len = chunk.end - chunk.begin, g = rlx_group_size.x;
    uint s = 0u;
    for (uint i = rlx_local_id.x; i < len; i += g) s = rlx_scan_add(s, (uint)d[i]);
    const RlxScan sum = rlx_scan_group_sum(s, scratch RLX_GROUP_IDS_ARGS);
    if (rlx_local_id.x == 0u) part[b] = (T)sum.total;
}
RLX_INSTANTIATE(scan_reduce, uint, scan_reduce_u32)

template <typename T>
RLX_KERNEL scan_partials(RLX_BUF(RLX_DEVICE T *, part, 0), RLX_PARAMS(ScanParams, p, 1) RLX_IDS) {
    RLX_SHARED(uint, stage, RLX_SCAN_STAGE);
    RLX_SHARED(uint, scratch, RLX_SORT_MAX_THREADS);
    rlx_scan_chunk(part, p->groups, 0u, stage, scratch RLX_GROUP_IDS_ARGS);
}
RLX_INSTANTIATE(scan_partials, uint, scan_partials_u32)

template <typename T>
RLX_KERNEL scan_down(RLX_BUF(RLX_DEVICE T *, data, 0), RLX_BUF(RLX_DEVICE const T *, part, 1),
                     RLX_PARAMS(ScanParams, p, 2) RLX_IDS) {
    RLX_SHARED(uint, stage, RLX_SCAN_STAGE);
    RLX_SHARED(uint, scratch, RLX_SORT_MAX_THREADS);
    const uint b = rlx_group_id.x;
    if (b >= p->groups) return;
    const RlxRange chunk = rlx_group_segment(p->n, b, p->groups);
    const uint base = p->groups > 1u ? (uint)part[b] : 0u;
    const uint total = rlx_scan_chunk(data + p->offset + chunk.begin, chunk.end - chunk.begin, base, stage,
                                      scratch RLX_GROUP_IDS_ARGS);
    if (p->has_total && b + 1u == p->groups && rlx_local_id.x == 0u) data[p->total_offset] = (T)total;
}
RLX_INSTANTIATE(scan_down, uint, scan_down_u32)

// ---- the scatter -------------------------------------------------------------
// GPUs take a tile of rows at a time, rank it with SIMD votes rather than
// group-wide prefix sums, and write it out through group memory:
// 1. SIMD group w of the group owns `lanes * RLX_SORT_ITEMS` consecutive
//    rows of the tile; each lane loads the digits of its RLX_SORT_ITEMS rows
//    (one a round, rows lane, lane + lanes, ...) first, then ranks them in
//    round order: rlx_simd_match finds the lanes holding the same digit; a
//    row's place is its SIMD group's running count of that digit (wc[w][d],
//    group memory) plus the matching lanes before it, and the lowest of
//    those lanes then adds the round's count.
// 2. One pass over the digits turns the SIMD groups' counts into output
//    rows (base[d], then each SIMD group's count in order) and keeps the
//    tile's first output row and count of each digit; a group scan of the
//    counts gives each digit's first slot in the tile's sorted order.
// 3. Every ranked row writes its place in the tile and its digit into its
//    slot of the stage.
// 4. The group walks the stage in order, consecutive threads on
//    consecutive slots, copying each row to its output row: a digit's rows
//    land on consecutive rows from consecutive threads (coalesced writes,
//    where writing from the ranking lanes scattered every row of a round).
// The order is the rows' order (rounds in order, lanes in order, SIMD
// groups in order): stable. Seven group barriers a tile.
template <typename T>
RLX_KERNEL sort_scatter(RLX_BUF(RLX_DEVICE const T *, src, 0), RLX_BUF(RLX_DEVICE const int *, count, 1),
                        RLX_BUF(RLX_DEVICE const uint *, hist, 2), RLX_BUF(RLX_DEVICE T *, dst, 3),
                        RLX_PARAMS(SortParams, p, 4) RLX_IDS) {
    RLX_SHARED(uint, base, RLX_SORT_RADIX);                  // each digit's next output row
    RLX_SHARED(uint, first, RLX_SORT_RADIX);                 // the tile's first output row of each digit
    RLX_SHARED(uint, slot0, RLX_SORT_RADIX);                 // the tile's count, then first slot, of each digit
    RLX_SHARED(uint, wc, RLX_SORT_SIMD * RLX_SORT_RADIX);    // per SIMD group: digit counts, then first rows
    RLX_SHARED(uint, stage, RLX_SORT_TILE);                  // the sorted tile: row in the tile | digit << 16
    RLX_SHARED(uint, scratch, RLX_SORT_MAX_THREADS);         // rlx_group_count_scan's partials
    const uint b = rlx_group_id.x, blocks = p->blocks;
    if (b >= blocks) return;
    const RlxRange rows = rlx_sort_block_rows(p, count, b);
    const uint begin = rows.begin, end = rows.end;
    const uint cols = p->cols, word = p->word, shift = p->shift, mask = p->mask;
    RLX_DEVICE const T *s = src + p->src_offset;
    RLX_FOR_GROUP(d, RLX_SORT_RADIX) base[d] = hist[d * blocks + b];
    rlx_barrier();
    const uint size = rlx_group_size.x, local = rlx_local_id.x;
    if (size == 1u) {
        for (uint i = begin; i < end; ++i) {
            const uint d = ((uint)s[(uint64_t)i * cols + word] >> shift) & mask;
            const uint o = base[d]++;
            for (uint c = 0u; c < cols; ++c) dst[(uint64_t)o * cols + c] = s[(uint64_t)i * cols + c];
        }
        return;
    }
    const uint width = rlx_simd_width, lane = rlx_simd_lane, sid = rlx_simd_id;
    const uint groups_of_lanes = (size + width - 1u) / width;
    const uint simds = groups_of_lanes < RLX_SORT_SIMD ? groups_of_lanes : RLX_SORT_SIMD;
    // The threads that rank: at most RLX_SORT_SIMD SIMD groups, and a tile the stage holds.
    uint ranking = size < simds * width ? size : simds * width;
    if (ranking > RLX_SORT_TILE / RLX_SORT_ITEMS) ranking = RLX_SORT_TILE / RLX_SORT_ITEMS;
    // This SIMD group's lanes that rank and its rows' first row in a tile.
    const uint ahead = sid * width;
    const uint lanes = sid < simds && ahead < ranking ? (ranking - ahead < width ? ranking - ahead : width) : 0u;
    const uint own = ahead * RLX_SORT_ITEMS;
    const uint tile = ranking * RLX_SORT_ITEMS;
    const rlx_lanes below = rlx_sort_lanes_below(lane);
    const uint bits = rlx_sort_digit_bits(mask);
    RLX_GROUP_MEM uint *mine = wc + (sid < simds ? sid : 0u) * RLX_SORT_RADIX;
    // Each thread's run of consecutive digits in the scan of the tile's counts.
    const uint per = (RLX_SORT_RADIX + size - 1u) / size;
    const uint d0 = local * per < RLX_SORT_RADIX ? local * per : RLX_SORT_RADIX;
    const uint d1 = d0 + per < RLX_SORT_RADIX ? d0 + per : RLX_SORT_RADIX;
    RLX_FOR_GROUP(i, simds * RLX_SORT_RADIX) wc[i] = 0u;
    rlx_barrier();
    for (uint t0 = begin; t0 < end; t0 += tile) {
        uint place[RLX_SORT_ITEMS], digit[RLX_SORT_ITEMS];
        RLX_UNROLL
        for (uint r = 0u; r < RLX_SORT_ITEMS; ++r) {
            const uint row = t0 + own + r * lanes + lane;
            digit[r] = lane < lanes && row < end ? ((uint)s[(uint64_t)row * cols + word] >> shift) & mask : 0u;
        }
        RLX_UNROLL
        for (uint r = 0u; r < RLX_SORT_ITEMS; ++r) {
            const bool valid = lane < lanes && t0 + own + r * lanes + lane < end;
            const uint d = digit[r];
            const rlx_lanes peers = rlx_simd_match(d, bits, valid);
            const uint before = rlx_lanes_count(peers & below);
            place[r] = valid ? mine[d] + before : 0u;
            rlx_simd_barrier();   // every lane has read its digit's count
            if (valid && before == 0u) mine[d] += rlx_lanes_count(peers);
            rlx_simd_barrier();   // the counts are visible to the next round
        }
        rlx_barrier();
        RLX_FOR_GROUP(d, RLX_SORT_RADIX) {
            const uint start = base[d];
            uint run = start;
            for (uint w = 0u; w < simds; ++w) {
                const uint c = wc[w * RLX_SORT_RADIX + d];
                wc[w * RLX_SORT_RADIX + d] = run;
                run += c;
            }
            first[d] = start;
            slot0[d] = run - start;
            base[d] = run;
        }
        rlx_barrier();
        uint counted = 0u;
        for (uint d = d0; d < d1; ++d) counted += slot0[d];
        const RlxScan at = rlx_group_count_scan(counted, scratch RLX_GROUP_IDS_ARGS);
        uint run = at.before;
        for (uint d = d0; d < d1; ++d) {   // this thread's own digits only
            const uint c = slot0[d];
            slot0[d] = run;
            run += c;
        }
        rlx_barrier();
        RLX_UNROLL
        for (uint r = 0u; r < RLX_SORT_ITEMS; ++r) {
            const uint in_tile = own + r * lanes + lane;
            if (lane < lanes && t0 + in_tile < end) {
                const uint d = digit[r];
                stage[slot0[d] + mine[d] + place[r] - first[d]] = in_tile | (d << 16);
            }
        }
        rlx_barrier();
        const uint filled = end - t0 < tile ? end - t0 : tile;
        for (uint i = local; i < filled; i += size) {
            const uint e = stage[i], d = e >> 16;
            const uint row = t0 + (e & 0xFFFFu), o = first[d] + i - slot0[d];
            for (uint c = 0u; c < cols; ++c) dst[(uint64_t)o * cols + c] = s[(uint64_t)row * cols + c];
        }
        RLX_FOR_GROUP(i, simds * RLX_SORT_RADIX) wc[i] = 0u;
        rlx_barrier();
    }
}
RLX_INSTANTIATE(sort_scatter, uint, sort_scatter_u32)
