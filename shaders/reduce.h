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
template <typename T>
RLX_KERNEL argmax(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE int *, y, 1),
                  RLX_PARAMS(ReduceParams, p, 2) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    const uint out = rlx_group_id.x;
    if (out >= p->outer * p->inner) return;
    RLX_DEVICE const T *base = rlx_reduce_base(x, p, out);
#ifdef RLX_TARGET_CPU
    // One thread a row (a 262,144-logit row took 0.37 ms as the loops below:
    // rlx_maximum's NaN test keeps GCC from vectorizing them). The max and a
    // NaN count as two vector reductions, then the first index holding the
    // max, or the first NaN, with an early exit; same rule as below.
    (void)scratch;
    const uint len = p->len, inner = p->inner;
    float top = -RLX_INFINITY, nans = 0.0f;
    if (inner == 1u) {   // a contiguous row: plain vector loads (a run-time stride makes them gathers)
        RLX_PRAGMA(omp simd reduction(max : top) reduction(+ : nans))
        for (uint k = 0; k < len; ++k) {
            const float v = rlx_to_float(base[k]);
            top = v > top ? v : top;
            nans += v != v ? 1.0f : 0.0f;
        }
    } else {
        RLX_PRAGMA(omp simd reduction(max : top) reduction(+ : nans))
        for (uint k = 0; k < len; ++k) {
            const float v = rlx_to_float(base[(uint64_t)k * inner]);
            top = v > top ? v : top;
            nans += v != v ? 1.0f : 0.0f;
        }
    }
    const bool any_nan = nans > 0.0f;
    uint at = 0u;
    for (uint k = 0; k < len; ++k) {
        const float v = rlx_to_float(base[(uint64_t)k * inner]);
        if (any_nan ? v != v : v == top) {
            at = k;
            break;
        }
    }
    y[out] = (int)at;
    return;
#endif
    float best = -RLX_INFINITY;
    RLX_FOR_GROUP(k, p->len) { best = rlx_maximum(best, rlx_to_float(base[(uint64_t)k * p->inner])); }
    best = rlx_group_max(best, scratch);
    float first = -(float)p->len;  // negated so a max-reduction finds the smallest index
    RLX_FOR_GROUP(k, p->len) {
        const float v = rlx_to_float(base[(uint64_t)k * p->inner]);
        if (v == best || v != v) first = rlx_maximum(first, -(float)k);
    }
    first = rlx_group_max(first, scratch);
    if (rlx_local_id.x == 0) y[out] = (int)(-first);
}
RLX_INSTANTIATE(argmax, float, argmax_f32)
RLX_INSTANTIATE(argmax, half, argmax_f16)
