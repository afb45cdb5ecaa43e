// Reductions over one axis of a dense tensor viewed as [outer, len, inner]:
// one threadgroup per output element, its threads stride over the axis and
// meet in a group reduction. Accumulates in f32.
struct ReduceParams {
    uint outer, len, inner;
    uint op;  // 0 sum, 1 mean, 2 max
    uint in_offset, pad0, pad1, pad2;
};

// The start of output element `out`'s run along the axis (stride p->inner).
template <typename T>
RLX_INLINE RLX_DEVICE const T *rlx_reduce_base(RLX_DEVICE const T *x, RLX_CONSTANT ReduceParams *p, uint out) {
    const uint o = out / p->inner, in = out % p->inner;
    return x + p->in_offset + (uint64_t)o * p->len * p->inner + in;
}

template <typename T>
RLX_KERNEL reduce(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE T *, y, 1),
                  RLX_PARAMS(ReduceParams, p, 2) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    const uint out = rlx_group_id.x;
    if (out >= p->outer * p->inner) return;
    RLX_DEVICE const T *base = rlx_reduce_base(x, p, out);
    const bool is_max = p->op == 2u;
    float acc = is_max ? -RLX_INFINITY : 0.0f;
    RLX_FOR_GROUP(k, p->len) {
        const float v = rlx_to_float(base[(uint64_t)k * p->inner]);
        acc = is_max ? rlx_maximum(acc, v) : acc + v;   // max: NaN if any element is
    }
    acc = is_max ? rlx_group_max(acc, scratch) : rlx_group_sum(acc, scratch);
    if (p->op == 1u) acc /= (float)p->len;
    if (rlx_local_id.x == 0) y[out] = rlx_from_float<T>(acc);
}
RLX_INSTANTIATE(reduce, float, reduce_f32)
RLX_INSTANTIATE(reduce, half, reduce_f16)

// Index of the first maximum (numpy's tie rule): the group finds the max,
// then the smallest index holding it. A NaN counts as the maximum (numpy,
// torch): the max is then NaN, which equals nothing, so the second pass also
// takes NaN elements; without a NaN no element is NaN and that is a no-op.
// Indices travel as floats, exact below 2^24 elements along the axis (the
// lowering checks).
struct RlxArgmax {
    float best;    // the max of the range (NaN if it holds one)
    uint first;    // the first index of [begin, end) holding it (or the first NaN)
};

// The argmax of elements [begin, end) of a row (stride inner; begin < end)
// into r (an RlxArgmax), every thread of the group calling it. A macro, not a
// function: on Metal the group's ids are the kernel's parameters.
#ifdef RLX_TARGET_CPU
// One thread a row (a 262,144-logit row took 0.37 ms as the group loops:
// rlx_maximum's NaN test keeps GCC from vectorizing them). A contiguous
// row goes in one pass of blocks: each block's max and NaN count as
// vector reductions, keeping the first block that raises the max (or
// holds a NaN, which ends the pass), then the first index in that block
// holding the max (or the first NaN); a two-pass form (the max, then a
// scalar search from the row's start) spent most of its time in the
// search. A strided row keeps the two passes. Same rule as the group
// form. Timings: benchmarks/README.md ("CPU: the decode step's argmax").
#define RLX_ARGMAX_CPU_BLOCK 512u
// The first index of [begin, end) (stride inner) holding top, or the first
// NaN; begin if none does.
template <typename T>
RLX_INLINE uint rlx_argmax_first_cpu(RLX_DEVICE const T *base, uint inner, uint begin, uint end, float top,
                                     bool any_nan) {
    for (uint k = begin; k < end; ++k) {
        const float v = rlx_to_float(base[(uint64_t)k * inner]);
        if (any_nan ? v != v : v == top) return k;
    }
    return begin;
}
// A contiguous row [begin, end) in blocks.
template <typename T>
RLX_INLINE RlxArgmax rlx_argmax_row_cpu(RLX_DEVICE const T *row, uint begin, uint end) {
    float top = -RLX_INFINITY;
    uint block = begin;   // the first block holding top, or the first NaN
    bool any_nan = false;
    for (uint b = begin; b < end; b += RLX_ARGMAX_CPU_BLOCK) {
        const uint e = end - b < RLX_ARGMAX_CPU_BLOCK ? end : b + RLX_ARGMAX_CPU_BLOCK;
        float m = -RLX_INFINITY, nans = 0.0f;
        // 64-bit offsets from the block's start: indexed by a uint, GCC 12's
        // AVX-512 and AVX2 builds loaded the elements one at a time.
        RLX_DEVICE const T *from = row + b;
        const uint64_t n = e - b;
        RLX_PRAGMA(omp simd reduction(max : m) reduction(+ : nans))
        for (uint64_t i = 0; i < n; ++i) {
            const float v = rlx_to_float(from[i]);
            m = v > m ? v : m;
            nans += v != v ? 1.0f : 0.0f;
        }
        if (nans > 0.0f) {   // the first NaN wins whatever follows
            block = b, any_nan = true;
            break;
        }
        if (m > top) top = m, block = b;   // strictly: an equal max in a later block is not the first
    }
    const uint e = end - block < RLX_ARGMAX_CPU_BLOCK ? end : block + RLX_ARGMAX_CPU_BLOCK;
    return RlxArgmax{any_nan ? NAN : top, rlx_argmax_first_cpu(row, 1u, block, e, top, any_nan)};
}
template <typename T>
RLX_INLINE RlxArgmax rlx_argmax_range_cpu(RLX_DEVICE const T *base, uint inner, uint begin, uint end) {
    if (inner == 1u) return rlx_argmax_row_cpu(base, begin, end);   // plain vector loads, not gathers
    float top = -RLX_INFINITY, nans = 0.0f;
    RLX_PRAGMA(omp simd reduction(max : top) reduction(+ : nans))
    for (uint k = begin; k < end; ++k) {
        const float v = rlx_to_float(base[(uint64_t)k * inner]);
        top = v > top ? v : top;
        nans += v != v ? 1.0f : 0.0f;
    }
    const bool any_nan = nans > 0.0f;
    return RlxArgmax{any_nan ? NAN : top, rlx_argmax_first_cpu(base, inner, begin, end, top, any_nan)};
}
#define RLX_ARGMAX_RANGE(r, base, inner, begin, end, scratch) \
    do {                                                      \
        (void)(scratch);                                      \
        r = rlx_argmax_range_cpu(base, inner, begin, end);    \
    } while (0)
#else
#define RLX_ARGMAX_RANGE(r, base, inner, begin, end, scratch)                                      \
    do {                                                                                           \
        const uint b_ = (begin), n_ = (end) - (begin);                                              \
        float best_ = -RLX_INFINITY;                                                               \
        RLX_FOR_GROUP(i_, n_) { best_ = rlx_maximum(best_, rlx_to_float((base)[(uint64_t)(b_ + i_) * (inner)])); } \
        best_ = rlx_group_max(best_, scratch);                                                     \
        float first_ = -(float)(b_ + n_);  /* negated: a max-reduction finds the smallest index */  \
        RLX_FOR_GROUP(i_, n_) {                                                                    \
            const float v_ = rlx_to_float((base)[(uint64_t)(b_ + i_) * (inner)]);                   \
            if (v_ == best_ || v_ != v_) first_ = rlx_maximum(first_, -(float)(b_ + i_));          \
        }                                                                                          \
        first_ = rlx_group_max(first_, scratch);                                                   \
        r.best = best_;                                                                            \
        r.first = (uint)(-first_);                                                                 \
    } while (0)
#endif

template <typename T>
RLX_KERNEL argmax(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE int *, y, 1),
                  RLX_PARAMS(ReduceParams, p, 2) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    const uint out = rlx_group_id.x;
    if (out >= p->outer * p->inner) return;
    RlxArgmax r;
    RLX_ARGMAX_RANGE(r, rlx_reduce_base(x, p, out), p->inner, 0u, p->len, scratch);
    if (rlx_local_id.x == 0) y[out] = (int)r.first;
}
RLX_INSTANTIATE(argmax, float, argmax_f32)
RLX_INSTANTIATE(argmax, half, argmax_f16)

// The argmax of a few long rows (a decode step's 262,144 logits), split so
// that many groups read the row: one group read it at 7.6 GB/s, 138 us on
// an H200, where the whole decode step is ~1.6 ms. argmax_chunks: group g
// takes chunk g % chunks (p->pad0 chunks of p->pad1 elements) of row
// g / chunks and writes its (max, first index) pair into part[2 g ..];
// argmax_merge: one group per row takes the first index of the largest
// chunk max (a NaN chunk's is its first NaN: the smallest such index wins,
// as in argmax).
template <typename T>
RLX_KERNEL argmax_chunks(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE float *, part, 1),
                         RLX_PARAMS(ReduceParams, p, 2) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    const uint chunks = p->pad0, chunk_len = p->pad1;
    const uint out = rlx_group_id.x / chunks, c = rlx_group_id.x % chunks;
    if (out >= p->outer * p->inner) return;
    const uint begin = c * chunk_len < p->len ? c * chunk_len : p->len;
    const uint end = p->len - begin < chunk_len ? p->len : begin + chunk_len;
    RlxArgmax r = {-RLX_INFINITY, begin};   // an empty chunk (past the row) loses to every other
    if (begin < end) RLX_ARGMAX_RANGE(r, rlx_reduce_base(x, p, out), p->inner, begin, end, scratch);
    if (rlx_local_id.x == 0) {
        part[2u * (uint64_t)rlx_group_id.x] = r.best;
        part[2u * (uint64_t)rlx_group_id.x + 1u] = (float)r.first;
    }
}
RLX_INSTANTIATE(argmax_chunks, float, argmax_chunks_f32)
RLX_INSTANTIATE(argmax_chunks, half, argmax_chunks_f16)

template <typename T>
RLX_KERNEL argmax_merge(RLX_BUF(RLX_DEVICE const float *, part, 0), RLX_BUF(RLX_DEVICE int *, y, 1),
                        RLX_PARAMS(ReduceParams, p, 2) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    const uint out = rlx_group_id.x, chunks = p->pad0;
    if (out >= p->outer * p->inner) return;
    RLX_DEVICE const float *pr = part + 2u * (uint64_t)out * chunks;
    float best = -RLX_INFINITY;
    RLX_FOR_GROUP(c, chunks) { best = rlx_maximum(best, pr[2u * c]); }
    best = rlx_group_max(best, scratch);
    float first = -(float)p->len;
    RLX_FOR_GROUP(c, chunks) {
        const float v = pr[2u * c];
        if (v == best || v != v) first = rlx_maximum(first, -pr[2u * c + 1u]);
    }
    first = rlx_group_max(first, scratch);
    if (rlx_local_id.x == 0) y[out] = (int)(-first);
}
RLX_INSTANTIATE(argmax_merge, float, argmax_merge_f32)
RLX_INSTANTIATE(argmax_merge, half, argmax_merge_f16)
