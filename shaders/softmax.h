// Softmax over the last axis: one threadgroup per row, the row's threads
// stride over its columns and meet in group reductions. Accumulates in f32.
struct SoftmaxParams {
    uint rows, cols;
    uint in_offset, out_offset;
};

template <typename T>
RLX_KERNEL softmax(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE T *, y, 1),
                   RLX_PARAMS(SoftmaxParams, p, 2) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    const uint row = rlx_group_id.x;
    if (row >= p->rows) return;
    const uint cols = p->cols;
    RLX_DEVICE const T *xr = x + p->in_offset + (uint64_t)row * cols;
    RLX_DEVICE T *yr = y + p->out_offset + (uint64_t)row * cols;

    float m = -RLX_INFINITY;
    RLX_MAX_REDUCTION(m)
    RLX_FOR_GROUP(i, cols) { m = rlx_maximum(m, rlx_to_float(xr[i])); }
    m = rlx_group_max(m, scratch);
    // A row that is -inf everywhere gives zeros, as masked_softmax and
    // attention do, so fusing softmax(scores + mask) into attention never
    // changes a result; a NaN still makes the whole row NaN (inv below).
    const float shift = m == -RLX_INFINITY ? 0.0f : m;
    // exp is written once and rescaled: each thread rereads only what it
    // wrote itself (same loop mapping), so no barrier is needed between.
    float s = 0.0f;
    RLX_FOR_GROUP(i, cols) {
        const float e = rlx_exp(rlx_to_float(xr[i]) - shift);
        yr[i] = rlx_from_float<T>(e);
        s += e;
    }
    s = rlx_group_sum(s, scratch);
    const float inv = s == 0.0f ? 0.0f : 1.0f / s;
    RLX_FOR_GROUP(i, cols) { yr[i] = rlx_from_float<T>(rlx_to_float(yr[i]) * inv); }
}
RLX_INSTANTIATE(softmax, float, softmax_f32)
RLX_INSTANTIATE(softmax, half, softmax_f16)

// softmax(x * scale + mask) over the last axis. The mask is read through
// broadcast strides (0 on broadcast dimensions) over x's leading dimensions,
// so a [1, 1, Tq, Tk] or [B, 1, 1, Tk] mask needs no expanded copy.
struct MaskedSoftmaxParams {
    uint rows, cols, in_offset, has_mask;
    float scale;
    uint mask_offset, mask_col_stride, n_lead;
    uint lead_shape[RLX_MAX_DIMS];
    uint mask_lead_strides[RLX_MAX_DIMS];
};

// T: scores and mask; U: probabilities (f32 scores may give f16 probabilities
// for an f16 P @ V gemm). A group may hold several rows, one per y index
// (Target.row_grid's stacked form): the runtime stacks rows only when x is
// one SIMD group wide, so every reduction stays inside one SIMD group.
template <typename T, typename U>
RLX_KERNEL softmax_masked(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const T *, mask, 1),
                          RLX_BUF(RLX_DEVICE U *, y, 2), RLX_PARAMS(MaskedSoftmaxParams, p, 3) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    // Params before the first index read (binary.h says why).
    const uint rows = p->rows, cols = p->cols, in_offset = p->in_offset, has_mask = p->has_mask;
    const uint mask_offset = p->mask_offset, n_lead = p->n_lead, mcs = p->mask_col_stride;
    const float scale = p->scale;
    const uint row = rlx_group_id.x * rlx_group_size.y + rlx_local_id.y;
    if (row >= rows) return;
    RLX_DEVICE const T *xr = x + in_offset + (uint64_t)row * cols;
    RLX_DEVICE U *yr = y + (uint64_t)row * cols;
    uint m = mask_offset, rest = row;
    for (int d = (int)n_lead - 1; d >= 0; --d) {
        m += (rest % p->lead_shape[d]) * p->mask_lead_strides[d];
        rest /= p->lead_shape[d];
    }
    // Three shapes of the same loops (no mask, a contiguous mask row, a
    // strided one) so each body is branch-free: the CPU target vectorizes them.
#define RLX_MASKED_SOFTMAX(VALUE)                                                   \
    {                                                                               \
    if (cols <= RLX_ROW_CACHE * rlx_group_size.x) {                                 \
        /* The row in registers: read once, written once. The loops stop at */     \
        /* the last slot any thread of the group uses (a uniform branch), so */    \
        /* a 128-column row on 32 threads evaluates 4 slots, not 8 (an exp */      \
        /* under a select would run for every slot). */                            \
        const uint used = (cols + rlx_group_size.x - 1) / rlx_group_size.x;         \
        float v[RLX_ROW_CACHE] = {0.0f};                                            \
        float mx = -RLX_INFINITY;                                                   \
        for (uint j = 0; j < RLX_ROW_CACHE; ++j) {                                  \
            if (j >= used) break;                                                   \
            const uint i = rlx_local_id.x + j * rlx_group_size.x;                   \
            v[j] = i < cols ? (VALUE) : -RLX_INFINITY;                              \
            mx = rlx_maximum(mx, v[j]);                                             \
        }                                                                           \
        mx = rlx_group_max(mx, scratch);                                            \
        const float shift = mx == -RLX_INFINITY ? 0.0f : mx;                        \
        float s = 0.0f;                                                             \
        for (uint j = 0; j < RLX_ROW_CACHE; ++j) {                                  \
            if (j >= used) break;                                                   \
            const uint i = rlx_local_id.x + j * rlx_group_size.x;                   \
            v[j] = i < cols ? rlx_exp(v[j] - shift) : 0.0f;                         \
            s += v[j];                                                              \
        }                                                                           \
        s = rlx_group_sum(s, scratch);                                              \
        const float inv = s == 0.0f ? 0.0f : 1.0f / s;                              \
        for (uint j = 0; j < RLX_ROW_CACHE; ++j) {                                  \
            if (j >= used) break;                                                   \
            const uint i = rlx_local_id.x + j * rlx_group_size.x;                   \
            if (i < cols) yr[i] = rlx_from_float<U>(v[j] * inv);                    \
        }                                                                           \
    } else {                                                                        \
        float mx = -RLX_INFINITY;                                                   \
        RLX_MAX_REDUCTION(mx)                                                       \
        RLX_FOR_GROUP(i, cols) { mx = rlx_maximum(mx, VALUE); }                     \
        mx = rlx_group_max(mx, scratch);                                            \
        /* A row masked everywhere (-inf) gives zeros rather than NaN (the */       \
        /* shift, and inv for a zero sum); a NaN anywhere in the row passes */      \
        /* through exp and the sum and makes the whole row NaN (torch). */          \
        const float shift = mx == -RLX_INFINITY ? 0.0f : mx;                        \
        float s = 0.0f;                                                             \
        RLX_FOR_GROUP(i, cols) {                                                    \
            const float e = rlx_exp(VALUE - shift);                                 \
            yr[i] = rlx_from_float<U>(e);                                           \
            s += e;                                                                 \
        }                                                                           \
        s = rlx_group_sum(s, scratch);                                              \
        const float inv = s == 0.0f ? 0.0f : 1.0f / s;                              \
        RLX_FOR_GROUP(i, cols) { yr[i] = rlx_from_float<U>(rlx_to_float(yr[i]) * inv); } \
    }                                                                               \
    }
    // In place (y == x) is allowed: each thread reads an element before it
    // writes it, and later passes read only what the same thread wrote.
    if (!has_mask) {
        RLX_MASKED_SOFTMAX(rlx_to_float(xr[i]) * scale)
    } else if (mcs == 1u) {
        RLX_DEVICE const T *mr = mask + m;
        RLX_MASKED_SOFTMAX(rlx_to_float(xr[i]) * scale + rlx_to_float(mr[i]))
    } else {
        RLX_MASKED_SOFTMAX(rlx_to_float(xr[i]) * scale + rlx_to_float(mask[m + i * mcs]))
    }
#undef RLX_MASKED_SOFTMAX
}
RLX_INSTANTIATE2(softmax_masked, float, float, softmax_masked_f32)
RLX_INSTANTIATE2(softmax_masked, half, half, softmax_masked_f16)
RLX_INSTANTIATE2(softmax_masked, float, half, softmax_masked_f32_f16)
