// Rotary position embedding (semantics: rlx/ir/ops_attention.py).
//
// Elementwise over (row = (b, t, h), item): items [0, half) rotate one pair
// each, items [half, half + D - rotary_dim) copy a pass-through feature. x is
// read through its (b, t, h) strides (the feature axis is contiguous), so a
// head slice of a packed QKV tensor needs no copy; positions are read through
// their own strides (b stride 0 when one [T] vector serves every batch row).
// inv_freq is a float32 table computed on the host, so every target and the
// reference see the same angle: float(position) * inv_freq[i], one multiply.
struct RopeParams {
    uint n;              // rows * per_row work items
    uint per_row;        // half + (D - rotary_dim)
    uint T, H;
    uint D, half, interleaved, out_offset;
    uint x_offset, x_sb, x_st, x_sh;
    uint p_offset, p_sb, p_st, pad0;
};

// sin and cos of a float32 angle, the same arithmetic on every target (the
// preludes have no sin/cos, and Metal's fast forms differ from the CPU's).
// The reduction by pi/2 is done in 64-bit fixed point (2^-32 units, pi/2
// carried to 2^-64), not as a float Cody-Waite chain, so it stays exact
// whatever float reassociation a target's compiler allows (the host kernels
// are built with -fassociative-math, which folds a Cody-Waite chain back into
// one rounded pi/2). Then Cephes' minimax polynomials on [-pi/4, pi/4].
// Measured against float64 sin/cos of the same float32 angle: < 1.2e-7
// absolute for any |angle| <= 2^30 (larger angles are clamped to 2^30).
struct rlx_sincos_t {
    float s, c;
};

RLX_INLINE rlx_sincos_t rlx_sincos_portable(float a) {
    a = rlx_fmin(rlx_fmax(a, -1073741824.0f), 1073741824.0f);
    const int64_t pi2_hi = 6746518852ll, pi2_lo = 1121027177ll;   // floor(pi/2 * 2^64) = hi * 2^32 + lo
    // a * 2^32 is exact in float (a power-of-two scale) and an integer when
    // |a| >= 2^-9; below that the truncation costs < 2^-32.
    const int64_t fixed = (int64_t)(a * 4294967296.0f);
    // Quadrant in two steps: a float estimate (off by up to ulp(a) / 1.5 for
    // large a), then the nearest quadrant of the small exact remainder.
    const int64_t k0 = (int64_t)(a * 0.636619772367581343f);
    const int64_t r0 = fixed - k0 * pi2_hi - ((k0 * pi2_lo) >> 32);
    const float t1 = (float)r0 * 1.4822459e-10f;                   // 2^-32 * 2/pi
    const int64_t k = k0 + (int64_t)(t1 >= 0.0f ? t1 + 0.5f : t1 - 0.5f);
    const int64_t r_fixed = fixed - k * pi2_hi - ((k * pi2_lo) >> 32);
    const float r = (float)r_fixed * 2.3283064365386963e-10f;      // 2^-32
    const float z = r * r;
    const float s = r + r * z * (-1.6666654611e-1f + z * (8.3321608736e-3f + z * -1.9515295891e-4f));
    const float c = 1.0f - 0.5f * z + z * z * (4.166664568298827e-2f + z * (-1.388731625493765e-3f +
                                                                          z * 2.443315711809948e-5f));
    const uint q = (uint)(k & 3);
    rlx_sincos_t out;
    out.s = q == 0u ? s : q == 1u ? c : q == 2u ? -s : -c;
    out.c = q == 0u ? c : q == 1u ? -s : q == 2u ? -c : s;
    return out;
}

template <typename T>
RLX_KERNEL rope(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const int *, pos, 1),
                RLX_BUF(RLX_DEVICE const float *, inv_freq, 2), RLX_BUF(RLX_DEVICE T *, y, 3),
                RLX_PARAMS(RopeParams, p, 4) RLX_IDS) {
    const uint per_row = p->per_row, half = p->half;
    RLX_FOR_RANGE(i, p->n) {
        const uint row = (uint)(i / per_row), item = (uint)(i % per_row);
        const uint h = row % p->H, bt = row / p->H, t = bt % p->T, b = bt / p->T;
        RLX_DEVICE const T *xr = x + p->x_offset + (uint64_t)b * p->x_sb + (uint64_t)t * p->x_st +
                                 (uint64_t)h * p->x_sh;
        RLX_DEVICE T *yr = y + p->out_offset + (uint64_t)row * p->D;
        if (item >= half) {             // pass-through feature
            const uint d = 2u * half + (item - half);
            yr[d] = xr[d];
            continue;
        }
        const int position = pos[p->p_offset + b * p->p_sb + t * p->p_st];
        const float angle = (float)position * inv_freq[item];
        const rlx_sincos_t sc = rlx_sincos_portable(angle);
        const float s = sc.s, c = sc.c;
        const uint i0 = p->interleaved ? 2u * item : item;
        const uint i1 = p->interleaved ? 2u * item + 1u : item + half;
        const float a = rlx_to_float(xr[i0]), bb = rlx_to_float(xr[i1]);
        yr[i0] = rlx_from_float<T>(a * c - bb * s);
        yr[i1] = rlx_from_float<T>(a * s + bb * c);
    }
}
RLX_INSTANTIATE(rope, float, rope_f32)
RLX_INSTANTIATE(rope, half, rope_f16)

// rope(rmsnorm(x, w), positions): the per-head query/key norm over D and
// RoPE in one kernel, one threadgroup per (b, t, h) row. The sum of squares
// is reduced over the row first; then each work item (a rotating pair or a
// pass-through feature, as in rope) normalizes the features it reads, rounds
// them to T (as the plain rmsnorm stores them) and rotates. Every thread
// reads x only, so the passes need no barrier beyond the reduction's.
// Heads h >= weight_b_from take weight_b (a query's and a key's heads in
// one dispatch; H and weight_b bound to weight when there is none).
struct RmsNormRopeParams {
    uint rows;           // B * T * H
    uint per_row;        // half + (D - rotary_dim)
    uint T, H;
    uint D, half, interleaved, out_offset;
    uint x_offset, x_sb, x_st, x_sh;
    uint p_offset, p_sb, p_st, add_one;
    float eps;
    uint weight_b_from, pad1, pad2;
};

// One (b, t, h) row of rmsnorm_rope by the whole group; with to_cache
// (uniform in the group), cache_row gets the row's D outputs as well
// (rmsnorm_rope_cache's KV cache row; no null pointers, which the
// preludes' address spaces do not all spell alike).
template <typename T>
RLX_INLINE void rlx_rmsnorm_rope_row(RLX_DEVICE const T *x, RLX_DEVICE const int *pos,
                                     RLX_DEVICE const float *inv_freq, RLX_DEVICE const T *weight_a,
                                     RLX_DEVICE const T *weight_b, RLX_DEVICE T *y,
                                     RLX_CONSTANT RmsNormRopeParams *p, const uint row,
                                     RLX_DEVICE T *cache_row, const bool to_cache,
                                     RLX_GROUP_MEM float *scratch RLX_GROUP_IDS) {
    const uint per_row = p->per_row, half = p->half, D = p->D;
    const float one = p->add_one ? 1.0f : 0.0f, eps = p->eps;
    const uint h = row % p->H, bt = row / p->H, t = bt % p->T, b = bt / p->T;
    RLX_DEVICE const T *xr = x + p->x_offset + (uint64_t)b * p->x_sb + (uint64_t)t * p->x_st + (uint64_t)h * p->x_sh;
    RLX_DEVICE T *yr = y + p->out_offset + (uint64_t)row * D;
    RLX_DEVICE const T *weight = h < p->weight_b_from ? weight_a : weight_b;
    // The position before the reduction: read behind it, it was a memory
    // round trip after the reduction's, before any rotation could start.
    const int position = pos[p->p_offset + b * p->p_sb + t * p->p_st];
    float ss = 0.0f;
    RLX_FOR_GROUP(i, D) {
        const float v = rlx_to_float(xr[i]);
        ss += v * v;
    }
    const float inv = rlx_rsqrt(rlx_group_sum(ss, scratch) / (float)D + eps);
    RLX_FOR_GROUP(item, per_row) {
        if (item >= half) {             // pass-through feature: normed only
            const uint d = 2u * half + (item - half);
            const T out = rlx_from_float<T>(rlx_to_float(xr[d]) * inv * (one + rlx_to_float(weight[d])));
            yr[d] = out;
            if (to_cache) cache_row[d] = out;
            continue;
        }
        const rlx_sincos_t sc = rlx_sincos_portable((float)position * inv_freq[item]);
        const uint i0 = p->interleaved ? 2u * item : item;
        const uint i1 = p->interleaved ? 2u * item + 1u : item + half;
        const float a = rlx_to_float(rlx_from_float<T>(rlx_to_float(xr[i0]) * inv * (one + rlx_to_float(weight[i0]))));
        const float bb = rlx_to_float(rlx_from_float<T>(rlx_to_float(xr[i1]) * inv * (one + rlx_to_float(weight[i1]))));
        const T out0 = rlx_from_float<T>(a * sc.c - bb * sc.s), out1 = rlx_from_float<T>(a * sc.s + bb * sc.c);
        yr[i0] = out0;
        yr[i1] = out1;
        if (to_cache) {
            cache_row[i0] = out0;
            cache_row[i1] = out1;
        }
    }
}

template <typename T>
RLX_KERNEL rmsnorm_rope(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const int *, pos, 1),
                        RLX_BUF(RLX_DEVICE const float *, inv_freq, 2), RLX_BUF(RLX_DEVICE const T *, weight_a, 3),
                        RLX_BUF(RLX_DEVICE const T *, weight_b, 4), RLX_BUF(RLX_DEVICE T *, y, 5),
                        RLX_PARAMS(RmsNormRopeParams, p, 6) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    const uint row = rlx_group_id.x;
    if (row >= p->rows) return;
    rlx_rmsnorm_rope_row<T>(x, pos, inv_freq, weight_a, weight_b, y, p, row, y, false, scratch RLX_GROUP_IDS_ARGS);
}
RLX_INSTANTIATE(rmsnorm_rope, float, rmsnorm_rope_f32)
RLX_INSTANTIATE(rmsnorm_rope, half, rmsnorm_rope_f16)
