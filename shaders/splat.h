// The splat family (rlx/ir/ops/splat.py): a 3D Gaussian Splatting forward
// renderer; the device radix sorts (by depth, then by tile) and the
// multi-group scan behind splat_offsets are shaders/sort.h.
// rlx/reference/splat.py states the algorithm and its conventions in
// float64, in this order of operations.
//
// - splat_project: one thread per Gaussian: camera-space mean (z <= 0.2
//   culled), 3D covariance R S S^T R^T, EWA projection with the Jacobian
//   (x/z, y/z clamped to 1.3x the half field of view) plus the 0.3-pixel
//   dilation, conic (factored: below), 3-sigma radius, tile rectangle,
//   sigmoid opacity, SH colour; the tiles of the rectangle it can reach with alpha >= 1/255
//   (rlx_splat_tile_hit); a 16-float record, zeros when culled.
// - splat_depth_keys: one (depth bits, index) row per Gaussian (culled:
//   key 0xFFFFFFFF, last), for a stable sort by depth: the depth order.
// - splat_offsets: splat_order_tiles gathers the tiles touched in depth
//   order, the scan of sort.h turns them into their exclusive prefix sum.
// - splat_bin: one thread per depth-order position writes its Gaussian's
//   (tile, index) pairs (the tiles rlx_splat_tile_hit accepts, as counted)
//   at its offset, dropping those at or past the capacity. The pairs come
//   out in depth order, so a stable sort by tile alone orders them by
//   (tile, depth, index).
// - splat_ranges: one thread per tile, two binary searches in the sorted pairs.
// - splat_raster: one group per 16x16 tile; batches of the tile's Gaussians
//   are staged in group memory, each pixel composites them front to back
//   (Gaussian-major over the tile's pixels: vector lanes on the CPU).
#define RLX_SPLAT_TILE 16u
#define RLX_SPLAT_PIXELS 256u
#define RLX_SPLAT_REC 16u
#define RLX_SPLAT_BATCH 256u
#define RLX_SPLAT_MAX_THREADS 1024u

struct SplatProjectParams {
    uint n, sh_k, width, height;     // Gaussians, SH coefficients per channel (1, 4, 9, 16), image size
    uint gx, gy, pad0, pad1;         // tile grid
};

RLX_INLINE float rlx_splat_floor(float x) {
    x = x < -1.0e9f ? -1.0e9f : (x > 1.0e9f ? 1.0e9f : x);
    const float t = (float)(int)x;
    return t > x ? t - 1.0f : t;
}

RLX_INLINE float rlx_splat_ceil(float x) {
    x = x < -1.0e9f ? -1.0e9f : (x > 1.0e9f ? 1.0e9f : x);
    const float t = (float)(int)x;
    return t < x ? t + 1.0f : t;
}

RLX_INLINE float rlx_splat_clamp(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }


// The conic (inverse 2D covariance) is kept factored, as (qa, qk, qm) with
//   q(dx, dy) = qa (dx + qk dy)^2 + qm dy^2    (dx, dy: mean - point)
// (qa = c / det, qk = -b / c, qm = 1 / c for the covariance [[a, b], [b, c]]):
// the expanded a' dx^2 + 2 b' dx dy + c' dy^2 of a needle-thin Gaussian
// cancels to rounding noise in f32 hundreds of pixels along its axis, and
// its sign then decides whether a pixel blends it; two squares cannot.
RLX_INLINE float rlx_splat_q(float qa, float qk, float qm, float dx, float dy) {
    const float t = dx + qk * dy;
    return qa * t * t + qm * dy * dy;
}

// The q at which a Gaussian of opacity op falls to alpha 0.99/255 (1/255
// with 1% of margin): op * exp(-q / 2) >= 0.99/255 is q <= reach, one log
// a Gaussian instead of an exp a tile. Negative: no pixel is reached.
RLX_INLINE float rlx_splat_reach(float op) { return 2.0f * rlx_log(op * (255.0f / 0.99f)); }

// Whether a projected Gaussian can reach alpha >= 1/255 at any pixel centre
// of the tile whose first pixel is (x0, y0): the smallest q over the
// rectangle of the tile's pixel centres (0 when the mean is inside, else
// on an edge, where the 1D minimum is the stationary point clamped to the
// edge) against the Gaussian's reach (rlx_splat_reach). The rectangle
// holds every pixel centre, so a tile this rejects has no pixel the raster
// would blend (rounding is far inside the margin); the 3-sigma rectangle
// keeps about a third more tiles.
RLX_INLINE bool rlx_splat_tile_hit(float u, float v, float qa, float qk, float qm, float reach, float x0, float y0) {
    const float dx_lo = u - (x0 + 15.5f), dx_hi = u - (x0 + 0.5f);   // dx over the tile: [dx_lo, dx_hi]
    const float dy_lo = v - (y0 + 15.5f), dy_hi = v - (y0 + 0.5f);
    float q = 0.0f;
    if (!(dx_lo <= 0.0f && dx_hi >= 0.0f && dy_lo <= 0.0f && dy_hi >= 0.0f)) {
        // dx fixed on the left and right edges: q is least at dy = -qa qk dx / (qa qk^2 + qm).
        const float dy_of_dx = -qa * qk / (qa * qk * qk + qm);
        const float q0 = rlx_splat_q(qa, qk, qm, dx_lo, rlx_splat_clamp(dy_of_dx * dx_lo, dy_lo, dy_hi));
        const float q1 = rlx_splat_q(qa, qk, qm, dx_hi, rlx_splat_clamp(dy_of_dx * dx_hi, dy_lo, dy_hi));
        // dy fixed on the top and bottom edges: least at dx = -qk dy.
        const float q2 = rlx_splat_q(qa, qk, qm, rlx_splat_clamp(-qk * dy_lo, dx_lo, dx_hi), dy_lo);
        const float q3 = rlx_splat_q(qa, qk, qm, rlx_splat_clamp(-qk * dy_hi, dx_lo, dx_hi), dy_hi);
        q = rlx_fmin(rlx_fmin(q0, q1), rlx_fmin(q2, q3));
    }
    return q <= reach;
}

// One Gaussian's SH coefficients (n = 3 k floats, k <= 16) into c: the
// f32 table in 16-byte loads where every row is 16-byte aligned (k = 4 or
// 16; the table starts at its storage's first byte, which is 16-byte
// aligned on every target). A warp's 32 rows are 32 lines apart, so each
// load instruction reaches 32 lines: a fourth as many of them as scalar loads.
RLX_INLINE void rlx_splat_sh_row(RLX_DEVICE const float *row, uint n, RLX_THREAD float *c) {
    if ((n & 3u) == 0u) {
        RLX_UNROLL
        for (uint j = 0u; j < 48u; j += 4u) {
            if (j < n) {
                const rlx_float4 v = *(RLX_DEVICE const rlx_float4 *)(row + j);
                c[j] = v.x;
                c[j + 1u] = v.y;
                c[j + 2u] = v.z;
                c[j + 3u] = v.w;
            }
        }
        return;
    }
    RLX_UNROLL
    for (uint j = 0u; j < 48u; ++j)
        if (j < n) c[j] = row[j];
}
RLX_INLINE void rlx_splat_sh_row(RLX_DEVICE const half *row, uint n, RLX_THREAD float *c) {
    RLX_UNROLL
    for (uint j = 0u; j < 48u; ++j)
        if (j < n) c[j] = rlx_to_float(row[j]);
}

template <typename T>
RLX_KERNEL splat_project(RLX_BUF(RLX_DEVICE const T *, means, 0), RLX_BUF(RLX_DEVICE const T *, scales, 1),
                         RLX_BUF(RLX_DEVICE const T *, quats, 2), RLX_BUF(RLX_DEVICE const T *, opac, 3),
                         RLX_BUF(RLX_DEVICE const T *, sh, 4), RLX_BUF(RLX_DEVICE const float *, cam, 5),
                         RLX_BUF(RLX_DEVICE float *, out, 6), RLX_PARAMS(SplatProjectParams, p, 7) RLX_IDS) {
    // The group index first: on CUDA reading it is the programmatic-launch
    // wait for the kernel before (prelude/cuda.h); no buffer before it.
    (void)rlx_group_id;
    const float w00 = cam[0], w01 = cam[1], w02 = cam[2], w03 = cam[3];
    const float w10 = cam[4], w11 = cam[5], w12 = cam[6], w13 = cam[7];
    const float w20 = cam[8], w21 = cam[9], w22 = cam[10], w23 = cam[11];
    const float fx = cam[16], fy = cam[17], cx = cam[18], cy = cam[19];
    // Camera centre: -R^T t.
    const float px = -(w00 * w03 + w10 * w13 + w20 * w23);
    const float py = -(w01 * w03 + w11 * w13 + w21 * w23);
    const float pz = -(w02 * w03 + w12 * w13 + w22 * w23);
    const float limx = 1.3f * 0.5f * (float)p->width / fx, limy = 1.3f * 0.5f * (float)p->height / fy;
    const uint k = p->sh_k;
    RLX_FOR_RANGE(i, p->n) {
        // The record as four 16-byte parts, zeros for a culled Gaussian
        // (each test below breaks out), stored once.
        rlx_float4 r0 = rlx_float4{0.0f, 0.0f, 0.0f, 0.0f}, r1 = r0, r2 = r0, r3 = r0;
        do {
            const float mx = rlx_to_float(means[3u * i]), my = rlx_to_float(means[3u * i + 1u]);
            const float mz = rlx_to_float(means[3u * i + 2u]);
            const float tx = w00 * mx + w01 * my + w02 * mz + w03;
            const float ty = w10 * mx + w11 * my + w12 * mz + w13;
            const float tz = w20 * mx + w21 * my + w22 * mz + w23;
            if (!(tz > 0.2f)) break;   // near plane (and NaN)
            // Rotation from the normalized quaternion (w, x, y, z).
            float qw = rlx_to_float(quats[4u * i]), qx = rlx_to_float(quats[4u * i + 1u]);
            float qy = rlx_to_float(quats[4u * i + 2u]), qz = rlx_to_float(quats[4u * i + 3u]);
            const float qn = rlx_sqrt(qw * qw + qx * qx + qy * qy + qz * qz);
            if (!(qn > 0.0f)) break;
            qw /= qn; qx /= qn; qy /= qn; qz /= qn;
            const float r00 = 1.0f - 2.0f * (qy * qy + qz * qz), r01 = 2.0f * (qx * qy - qw * qz);
            const float r02 = 2.0f * (qx * qz + qw * qy), r10 = 2.0f * (qx * qy + qw * qz);
            const float r11 = 1.0f - 2.0f * (qx * qx + qz * qz), r12 = 2.0f * (qy * qz - qw * qx);
            const float r20 = 2.0f * (qx * qz - qw * qy), r21 = 2.0f * (qy * qz + qw * qx);
            const float r22 = 1.0f - 2.0f * (qx * qx + qy * qy);
            const float s0 = rlx_exp(rlx_to_float(scales[3u * i])), s1 = rlx_exp(rlx_to_float(scales[3u * i + 1u]));
            const float s2 = rlx_exp(rlx_to_float(scales[3u * i + 2u]));
            // EWA: J (2x3) at the clamped x / z, y / z; T = J W (W: the viewmat's rotation).
            const float txc = rlx_splat_clamp(tx / tz, -limx, limx) * tz;
            const float tyc = rlx_splat_clamp(ty / tz, -limy, limy) * tz;
            const float j00 = fx / tz, j02 = -fx * txc / (tz * tz), j11 = fy / tz, j12 = -fy * tyc / (tz * tz);
            const float t00 = j00 * w00 + j02 * w20, t01 = j00 * w01 + j02 * w21, t02 = j00 * w02 + j02 * w22;
            const float t10 = j11 * w10 + j12 * w20, t11 = j11 * w11 + j12 * w21, t12 = j11 * w12 + j12 * w22;
            // cov2d = P P^T with P = T R S (2x3): Sigma = R S S^T R^T never formed.
            // Its determinant by Cauchy-Binet, the sum of P's squared 2x2 minors,
            // each s_i s_j times a minor of T R: no cancellation, where a c - b^2
            // of a needle-thin Gaussian (scales 1e4 apart) cancels to noise in f32.
            const float q00 = t00 * r00 + t01 * r10 + t02 * r20, q01 = t00 * r01 + t01 * r11 + t02 * r21;
            const float q02 = t00 * r02 + t01 * r12 + t02 * r22;
            const float q10 = t10 * r00 + t11 * r10 + t12 * r20, q11 = t10 * r01 + t11 * r11 + t12 * r21;
            const float q12 = t10 * r02 + t11 * r12 + t12 * r22;
            const float p00 = q00 * s0, p01 = q01 * s1, p02 = q02 * s2;
            const float p10 = q10 * s0, p11 = q11 * s1, p12 = q12 * s2;
            const float e00 = p00 * p00 + p01 * p01 + p02 * p02, e11 = p10 * p10 + p11 * p11 + p12 * p12;
            const float b = p00 * p10 + p01 * p11 + p02 * p12;
            const float m01 = s0 * s1 * (q00 * q11 - q01 * q10), m02 = s0 * s2 * (q00 * q12 - q02 * q10);
            const float m12 = s1 * s2 * (q01 * q12 - q02 * q11);
            const float a = e00 + 0.3f, c = e11 + 0.3f;
            // det(P P^T + 0.3 I) = det(P P^T) + 0.3 trace(P P^T) + 0.09.
            const float det = (m01 * m01 + m02 * m02 + m12 * m12) + 0.3f * (e00 + e11) + 0.09f;
            if (!(det > 0.0f && det <= 3.0e38f)) break;   // NaN, and an overflowed scale's inf
            const float mid = 0.5f * (a + c);
            // mid^2 - det without its cancellation on round Gaussians.
            const float half_gap = 0.5f * (e00 - e11);
            const float disc = half_gap * half_gap + b * b;
            const float lam = mid + rlx_sqrt(disc > 0.1f ? disc : 0.1f);
            const float radius = rlx_splat_ceil(3.0f * rlx_sqrt(lam));
            const float u = fx * tx / tz + cx, v = fy * ty / tz + cy;
            const float opacity = rlx_sigmoid(rlx_to_float(opac[i]));
            if (!(opacity > 0.0f)) break;   // NaN too
            const float reach = rlx_splat_reach(opacity);
            if (!(reach >= 0.0f)) break;
            // The tile rectangle: the 3-sigma one cut to the box of the
            // ellipse q <= reach (half-widths sqrt(reach a), sqrt(reach c))
            // and a pixel, which no tile outside passes rlx_splat_tile_hit:
            // the loops below, and splat_bin's, test only tiles it may pass.
            const float ex = rlx_sqrt(reach * a) + 1.0f, ey = rlx_sqrt(reach * c) + 1.0f;
            const float gx = (float)p->gx, gy = (float)p->gy;
            const float xmin = rlx_splat_clamp(rlx_splat_floor((u - rlx_fmin(radius, ex)) / 16.0f), 0.0f, gx);
            const float xmax = rlx_splat_clamp(rlx_splat_floor((u + rlx_fmin(radius, ex)) / 16.0f) + 1.0f, 0.0f, gx);
            const float ymin = rlx_splat_clamp(rlx_splat_floor((v - rlx_fmin(radius, ey)) / 16.0f), 0.0f, gy);
            const float ymax = rlx_splat_clamp(rlx_splat_floor((v + rlx_fmin(radius, ey)) / 16.0f) + 1.0f, 0.0f, gy);
            const float qa = c / det, qk = -b / c, qm = 1.0f / c;   // the conic, factored (rlx_splat_q)
            uint hits = 0u;
            for (float ty = ymin; ty < ymax; ty += 1.0f)
                for (float tx = xmin; tx < xmax; tx += 1.0f)
                    hits += rlx_splat_tile_hit(u, v, qa, qk, qm, reach, 16.0f * tx, 16.0f * ty) ? 1u : 0u;
            if (hits == 0u) break;
            const float tiles = (float)hits;
            // View-dependent colour: SH at the unit direction from the camera centre.
            float dx = mx - px, dy = my - py, dz = mz - pz;
            const float dn = rlx_sqrt(dx * dx + dy * dy + dz * dz);
            dx /= dn; dy /= dn; dz /= dn;
            float shc[48];
            rlx_splat_sh_row(sh + (uint64_t)i * k * 3u, 3u * k, shc);
            float rgb[3];
            for (uint ch = 0u; ch < 3u; ++ch) {
                float res = 0.28209479177387814f * shc[ch];
                if (k > 1u) {
                    res = res - 0.4886025119029199f * dy * shc[3u + ch]
                        + 0.4886025119029199f * dz * shc[6u + ch]
                        - 0.4886025119029199f * dx * shc[9u + ch];
                    if (k > 4u) {
                        const float xx = dx * dx, yy = dy * dy, zz = dz * dz, xy = dx * dy, yz = dy * dz, xz = dx * dz;
                        res = res + 1.0925484305920792f * xy * shc[12u + ch]
                            + -1.0925484305920792f * yz * shc[15u + ch]
                            + 0.31539156525252005f * (2.0f * zz - xx - yy) * shc[18u + ch]
                            + -1.0925484305920792f * xz * shc[21u + ch]
                            + 0.5462742152960396f * (xx - yy) * shc[24u + ch];
                        if (k > 9u) {
                            res = res + -0.5900435899266435f * dy * (3.0f * xx - yy) * shc[27u + ch]
                                + 2.890611442640554f * xy * dz * shc[30u + ch]
                                + -0.4570457994644658f * dy * (4.0f * zz - xx - yy) * shc[33u + ch]
                                + 0.3731763325901154f * dz * (2.0f * zz - 3.0f * xx - 3.0f * yy)
                                      * shc[36u + ch]
                                + -0.4570457994644658f * dx * (4.0f * zz - xx - yy) * shc[39u + ch]
                                + 1.445305721320277f * dz * (xx - yy) * shc[42u + ch]
                                + -0.5900435899266435f * dx * (xx - 3.0f * yy) * shc[45u + ch];
                        }
                    }
                }
                res += 0.5f;
                rgb[ch] = res > 0.0f ? res : 0.0f;
            }
            r0 = rlx_float4{u, v, tz, qa};
            r1 = rlx_float4{qk, qm, opacity, rgb[0]};
            r2 = rlx_float4{rgb[1], rgb[2], radius, tiles};
            r3 = rlx_float4{xmin, ymin, xmax, ymax};
        } while (false);
        // A fresh arena value: 128-byte aligned.
        RLX_DEVICE rlx_float4 *o = (RLX_DEVICE rlx_float4 *)(out + i * RLX_SPLAT_REC);
        o[0] = r0;
        o[1] = r1;
        o[2] = r2;
        o[3] = r3;
    }
}
RLX_INSTANTIATE(splat_project, float, splat_project_f32)
RLX_INSTANTIATE(splat_project, half, splat_project_f16)

struct SplatScanParams {
    uint n, pad0, pad1, pad2;
};

// keys[i] = (depth bits, i): positive depths order as their bits; culled
// Gaussians (no tiles) get 0xFFFFFFFF and emit no pairs wherever they sort.
template <typename T>
RLX_KERNEL splat_depth_keys(RLX_BUF(RLX_DEVICE const T *, rec, 0), RLX_BUF(RLX_DEVICE int *, keys, 1),
                            RLX_PARAMS(SplatScanParams, p, 2) RLX_IDS) {
    RLX_FOR_RANGE(i, p->n) {
        RLX_DEVICE const T *r = rec + i * RLX_SPLAT_REC;
        const bool drawn = rlx_to_float(r[11]) > 0.0f;
        const int key = (int)(drawn ? rlx_float_to_bits(rlx_to_float(r[2])) : 0xFFFFFFFFu);
        *(RLX_DEVICE rlx_int2 *)(keys + 2u * i) = rlx_int2{key, (int)i};
    }
}
RLX_INSTANTIATE(splat_depth_keys, float, splat_depth_keys_rec)

// tiles[k] = tiles touched by the k-th Gaussian in depth order (order: the
// depth-sorted keys, column 1 the index); the scan that follows makes them
// offsets.
template <typename T>
RLX_KERNEL splat_order_tiles(RLX_BUF(RLX_DEVICE const T *, rec, 0), RLX_BUF(RLX_DEVICE const int *, order, 1),
                             RLX_BUF(RLX_DEVICE int *, tiles, 2), RLX_PARAMS(SplatScanParams, p, 3) RLX_IDS) {
    RLX_FOR_RANGE(k, p->n) {
        const uint64_t i = (uint)order[2u * k + 1u];
        tiles[k] = (int)rlx_to_float(rec[i * RLX_SPLAT_REC + 11u]);
    }
}
RLX_INSTANTIATE(splat_order_tiles, float, splat_order_tiles_rec)

struct SplatBinParams {
    uint n, capacity, gx, pad0;
};

template <typename T>
RLX_KERNEL splat_bin(RLX_BUF(RLX_DEVICE const T *, rec, 0), RLX_BUF(RLX_DEVICE const int *, order, 1),
                     RLX_BUF(RLX_DEVICE const int *, offsets, 2), RLX_BUF(RLX_DEVICE int *, pairs, 3),
                     RLX_PARAMS(SplatBinParams, p, 4) RLX_IDS) {
    const uint cap = p->capacity, gx = p->gx;
    RLX_FOR_RANGE(k, p->n) {
        const uint i = (uint)order[2u * k + 1u];
        // The record in 16-byte loads (rows are 64-byte aligned).
        RLX_DEVICE const rlx_float4 *r = (RLX_DEVICE const rlx_float4 *)(rec + (uint64_t)i * RLX_SPLAT_REC);
        const rlx_float4 tiles = r[2];
        if (!(tiles.w > 0.0f)) continue;
        const rlx_float4 head = r[0], conic = r[1], box = r[3];
        const uint x0 = (uint)box.x, y0 = (uint)box.y, x1 = (uint)box.z, y1 = (uint)box.w;
        const float u = head.x, v = head.y, qa = head.w, qk = conic.x, qm = conic.y;
        const float reach = rlx_splat_reach(conic.z);   // as splat_project computed it
        uint o = (uint)offsets[k];
        for (uint y = y0; y < y1; ++y) {
            for (uint x = x0; x < x1; ++x) {
                if (o >= cap) break;
                if (!rlx_splat_tile_hit(u, v, qa, qk, qm, reach, 16.0f * (float)x, 16.0f * (float)y)) continue;
                *(RLX_DEVICE rlx_int2 *)(pairs + 2u * (uint64_t)o) = rlx_int2{(int)(y * gx + x), (int)i};
                ++o;
            }
        }
    }
}
RLX_INSTANTIATE(splat_bin, float, splat_bin_rec)

struct SplatRangesParams {
    uint capacity, count_offset, tiles, pad0;
};

// ranges[t] = [first pair of tile t, first pair of a later tile): binary
// searches over the tile column of the sorted pairs [0, min(count, capacity)).
template <typename T>
RLX_KERNEL splat_ranges(RLX_BUF(RLX_DEVICE const T *, pairs, 0), RLX_BUF(RLX_DEVICE const int *, count, 1),
                        RLX_BUF(RLX_DEVICE int *, ranges, 2), RLX_PARAMS(SplatRangesParams, p, 3) RLX_IDS) {
    // The count was written by earlier kernels of the run: read the group
    // index first (on CUDA, the programmatic-launch wait; prelude/cuda.h).
    // Reading count before it gave stale ranges on the H200 at 256 threads.
    (void)rlx_group_id;
    const int cnt = count[p->count_offset];
    const uint m = cnt <= 0 ? 0u : ((uint)cnt < p->capacity ? (uint)cnt : p->capacity);
    RLX_FOR_RANGE(t, p->tiles) {
        for (uint side = 0u; side < 2u; ++side) {
            const uint want = (uint)t + side;   // first pair whose tile >= want
            uint lo = 0u, hi = m;
            while (lo < hi) {
                const uint mid = lo + (hi - lo) / 2u;
                if ((uint)pairs[2u * (uint64_t)mid] < want) lo = mid + 1u; else hi = mid;
            }
            ranges[2u * t + side] = (int)lo;
        }
    }
}
RLX_INSTANTIATE(splat_ranges, uint, splat_ranges_u32)

struct SplatRasterParams {
    uint width, height, gx, channels;     // channels: 5 (r, g, b, depth, alpha) or 3 (r, g, b)
    float bg_r, bg_g, bg_b, max_alpha;   // max_alpha: the clamp of a Gaussian's alpha (3DGS: 0.99)
};

// One batched Gaussian of a tile (its conic, opacity, colour and depth)
// and one pixel's compositing state.
struct RlxSplatGauss {
    float u, v, qa, qk, qm, op, cr, cg, cb, cd;
};
struct RlxSplatPx {
    float t, r, g, b, d, live;   // transmittance, colour and depth sums, 1: still compositing
};

// Gaussian gs composited into pixel (px, py) of state s, front to back: a
// skipped Gaussian adds 0 exactly. Masks are 0 / 1 floats (a form GCC
// vectorizes): use, stop (T would fall below 1e-4: this Gaussian is not
// added and the pixel is done), add = use and not stop.
RLX_INLINE RlxSplatPx rlx_splat_blend(RlxSplatGauss gs, float px, float py, RlxSplatPx s, float max_alpha) {
    const float dx = gs.u - px, dy = gs.v - py;
    const float power = -0.5f * rlx_splat_q(gs.qa, gs.qk, gs.qm, dx, dy);
    const float e = gs.op * rlx_exp(power);
    const float alpha = e < max_alpha ? e : max_alpha;
    const float test = s.t * (1.0f - alpha);
    const float use = (power <= 0.0f ? s.live : 0.0f) * (alpha >= 1.0f / 255.0f ? 1.0f : 0.0f);
    const float stop = test < 1.0e-4f ? use : 0.0f;
    const float add = use - stop;
    const float w = add * alpha * s.t;
    RlxSplatPx o;
    o.r = s.r + gs.cr * w;
    o.g = s.g + gs.cg * w;
    o.b = s.b + gs.cb * w;
    o.d = s.d + gs.cd * w;
    o.t = add != 0.0f ? test : s.t;
    o.live = s.live - stop;
    return o;
}

// rlx_splat_blend for one pixel in registers, with branches where it
// masks: the same arithmetic where a Gaussian is added, and a skipped one
// costs only its power and alpha. For GPU groups of one thread a pixel: a
// warp's 32 pixels are two rows of a tile, so its lanes mostly skip the
// same Gaussians together, and most of a tile's Gaussians reach none of a
// given pixel. Returns false once the pixel is done (s.live 0).
RLX_INLINE bool rlx_splat_composite(RlxSplatGauss gs, float px, float py, RLX_THREAD RlxSplatPx &s,
                                    float max_alpha) {
    const float dx = gs.u - px, dy = gs.v - py;
    const float power = -0.5f * rlx_splat_q(gs.qa, gs.qk, gs.qm, dx, dy);
    if (!(power <= 0.0f)) return true;
    const float e = gs.op * rlx_exp(power);
    const float alpha = e < max_alpha ? e : max_alpha;
    if (!(alpha >= 1.0f / 255.0f)) return true;
    const float test = s.t * (1.0f - alpha);
    if (test < 1.0e-4f) {
        s.live = 0.0f;
        return false;
    }
    const float w = alpha * s.t;
    s.r = s.r + gs.cr * w;
    s.g = s.g + gs.cg * w;
    s.b = s.b + gs.cb * w;
    s.d = s.d + gs.cd * w;
    s.t = test;
    return true;
}

// Batch j of group memory bt (see splat_raster) as a Gaussian.
RLX_INLINE RlxSplatGauss rlx_splat_batched(RLX_GROUP_MEM const float *bt, uint j) {
    RLX_GROUP_MEM const float *g = bt + 10u * j;
    return RlxSplatGauss{g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9]};
}

// Gaussians [b0, b0 + len) of the sorted pairs into bt, between barriers
// (every thread of the group calls it).
RLX_INLINE void rlx_splat_load_batch(RLX_DEVICE const float *rec, RLX_DEVICE const int *pairs,
                                     RLX_GROUP_MEM float *bt, uint b0, uint len RLX_GROUP_IDS) {
    rlx_barrier();
    RLX_FOR_GROUP(j, len) {
        RLX_DEVICE const float *r = rec + (uint64_t)(uint)pairs[2u * (uint64_t)(b0 + j) + 1u] * RLX_SPLAT_REC;
        bt[10u * j] = r[0];
        bt[10u * j + 1u] = r[1];
        bt[10u * j + 2u] = r[3];
        bt[10u * j + 3u] = r[4];
        bt[10u * j + 4u] = r[5];
        bt[10u * j + 5u] = r[6];
        bt[10u * j + 6u] = r[7];
        bt[10u * j + 7u] = r[8];
        bt[10u * j + 8u] = r[9];
        bt[10u * j + 9u] = r[2];
    }
    rlx_barrier();
}

// A pixel's finished colour (and depth and alpha) over the background.
template <typename T>
RLX_INLINE void rlx_splat_store(RLX_DEVICE T *image, RLX_CONSTANT SplatRasterParams *p, uint x, uint y, RlxSplatPx s) {
    if (x >= p->width || y >= p->height) return;
    RLX_DEVICE T *o = image + ((uint64_t)y * p->width + x) * p->channels;
    o[0] = rlx_from_float<T>(s.r + s.t * p->bg_r);
    o[1] = rlx_from_float<T>(s.g + s.t * p->bg_g);
    o[2] = rlx_from_float<T>(s.b + s.t * p->bg_b);
    if (p->channels == 5u) {
        o[3] = rlx_from_float<T>(s.d);
        o[4] = rlx_from_float<T>(1.0f - s.t);
    }
}

// One group per tile; a batch of the tile's Gaussians in group memory at a
// time, each pixel compositing them in sorted order, front to back.
// - A group of one thread a pixel (GPUs: RLX_SPLAT_PIXELS threads) keeps
//   its pixel's state in registers, skips with branches
//   (rlx_splat_composite) and stops when a group sum of the live flags is 0.
// - Other groups (the CPU's one-thread groups, smaller GPU groups) keep
//   the state in group memory (px_*) and walk the batch Gaussian by
//   Gaussian, every pixel of the tile taking its step (RLX_FOR_GROUP: a
//   pixel always belongs to the same thread, so no barrier between
//   Gaussians; on the CPU the pixel loop is branch-free and vectorizes).
//   The group stops once no pixel is live (a decision every thread reads
//   from the same flags after a barrier).
// Both forms do the same arithmetic where they add a Gaussian: the same image.
template <typename T>
RLX_KERNEL splat_raster(RLX_BUF(RLX_DEVICE const float *, rec, 0), RLX_BUF(RLX_DEVICE const int *, pairs, 1),
                        RLX_BUF(RLX_DEVICE const int *, ranges, 2), RLX_BUF(RLX_DEVICE T *, image, 3),
                        RLX_PARAMS(SplatRasterParams, p, 4) RLX_IDS) {
    RLX_SHARED(float, px_x, RLX_SPLAT_PIXELS);      // pixel centres
    RLX_SHARED(float, px_y, RLX_SPLAT_PIXELS);
    RLX_SHARED(float, px_t, RLX_SPLAT_PIXELS);      // transmittance
    RLX_SHARED(float, px_r, RLX_SPLAT_PIXELS);
    RLX_SHARED(float, px_g, RLX_SPLAT_PIXELS);
    RLX_SHARED(float, px_b, RLX_SPLAT_PIXELS);
    RLX_SHARED(float, px_d, RLX_SPLAT_PIXELS);
    RLX_SHARED(float, px_live, RLX_SPLAT_PIXELS);   // 1: still compositing, 0: done or outside the image
    RLX_SHARED(float, bt, 10u * RLX_SPLAT_BATCH);   // u, v, a, b, c, opacity, r, g, b, depth
    RLX_SHARED(float, scratch, 32u);                // the register form's group sums
    const uint tile = rlx_group_id.x, gx = p->gx;
    const float max_alpha = p->max_alpha;
    const uint tx0 = (tile % gx) * RLX_SPLAT_TILE, ty0 = (tile / gx) * RLX_SPLAT_TILE;
    const uint start = (uint)ranges[2u * tile], end = (uint)ranges[2u * tile + 1u];
    if (rlx_group_size.x == RLX_SPLAT_PIXELS) {
        const uint q = rlx_local_id.x, x = tx0 + q % RLX_SPLAT_TILE, y = ty0 + q / RLX_SPLAT_TILE;
        const float px = (float)x + 0.5f, py = (float)y + 0.5f;
        RlxSplatPx s{1.0f, 0.0f, 0.0f, 0.0f, 0.0f, (x < p->width && y < p->height) ? 1.0f : 0.0f};
        for (uint b0 = start; b0 < end; b0 += RLX_SPLAT_BATCH) {
            const uint len = end - b0 < RLX_SPLAT_BATCH ? end - b0 : RLX_SPLAT_BATCH;
            rlx_splat_load_batch(rec, pairs, bt, b0, len RLX_GROUP_IDS_ARGS);
            if (s.live != 0.0f)
                for (uint j = 0u; j < len; ++j)
                    if (!rlx_splat_composite(rlx_splat_batched(bt, j), px, py, s, max_alpha)) break;
            if (rlx_group_sum(s.live, scratch) == 0.0f) break;
        }
        rlx_splat_store(image, p, x, y, s);
        return;
    }
    RLX_FOR_GROUP(q, RLX_SPLAT_PIXELS) {
        const uint x = tx0 + q % RLX_SPLAT_TILE, y = ty0 + q / RLX_SPLAT_TILE;
        px_x[q] = (float)x + 0.5f;
        px_y[q] = (float)y + 0.5f;
        px_t[q] = 1.0f;
        px_r[q] = 0.0f;
        px_g[q] = 0.0f;
        px_b[q] = 0.0f;
        px_d[q] = 0.0f;
        px_live[q] = (x < p->width && y < p->height) ? 1.0f : 0.0f;
    }
    uint live0 = 0u, live1 = RLX_SPLAT_PIXELS;   // one-thread groups: the rows holding a live pixel
    for (uint b0 = start; b0 < end; b0 += RLX_SPLAT_BATCH) {
        const uint len = end - b0 < RLX_SPLAT_BATCH ? end - b0 : RLX_SPLAT_BATCH;
        rlx_splat_load_batch(rec, pairs, bt, b0, len RLX_GROUP_IDS_ARGS);
        for (uint j = 0u; j < len; ++j) {
            const RlxSplatGauss gs = rlx_splat_batched(bt, j);
            // A one-thread group (the CPU) walks only the tile's rows that
            // the box of the ellipse q <= reach, widened by a pixel, meets
            // (half-height sqrt(reach / qm)): no pixel of another row
            // passes alpha >= 1/255. Of those, only the rows from the first
            // to the last with a live pixel (found again every 32
            // Gaussians; none: the tile is done). A skipped pixel's masked
            // step would add exactly nothing. Wider groups keep each
            // thread's pixels fixed (no barrier between Gaussians): every row.
            uint q0 = 0u, q1 = RLX_SPLAT_PIXELS;
            if (rlx_group_size.x == 1u) {
                if ((j & 31u) == 0u) {
                    live0 = RLX_SPLAT_PIXELS;
                    live1 = 0u;
                    for (uint row = 0u; row < RLX_SPLAT_PIXELS; row += RLX_SPLAT_TILE) {
                        float any = 0.0f;
                        for (uint c = 0u; c < RLX_SPLAT_TILE; ++c) any += px_live[row + c];
                        if (any != 0.0f) {
                            live0 = live0 < row ? live0 : row;
                            live1 = row + RLX_SPLAT_TILE;
                        }
                    }
                    if (live0 >= live1) break;
                }
                const float ey = rlx_sqrt(rlx_splat_reach(gs.op) / gs.qm) + 1.0f, cy = gs.v - (float)ty0 - 0.5f;
                q0 = RLX_SPLAT_TILE * (uint)rlx_splat_clamp(rlx_splat_ceil(cy - ey), 0.0f, 16.0f);
                q1 = RLX_SPLAT_TILE * (uint)rlx_splat_clamp(rlx_splat_floor(cy + ey) + 1.0f, 0.0f, 16.0f);
                q0 = q0 > live0 ? q0 : live0;
                q1 = q1 < live1 ? q1 : live1;
            }
            for (uint q = q0 + rlx_local_id.x; q < q1; q += rlx_group_size.x) {
                const RlxSplatPx o = rlx_splat_blend(
                    gs, px_x[q], px_y[q], RlxSplatPx{px_t[q], px_r[q], px_g[q], px_b[q], px_d[q], px_live[q]},
                    max_alpha);
                px_r[q] = o.r;
                px_g[q] = o.g;
                px_b[q] = o.b;
                px_d[q] = o.d;
                px_t[q] = o.t;
                px_live[q] = o.live;
            }
        }
        rlx_barrier();
        float alive = 0.0f;
        for (uint q = 0u; q < RLX_SPLAT_PIXELS; ++q) alive += px_live[q];
        if (alive == 0.0f) break;
    }
    rlx_barrier();
    RLX_FOR_GROUP(q, RLX_SPLAT_PIXELS) {
        rlx_splat_store(image, p, tx0 + q % RLX_SPLAT_TILE, ty0 + q / RLX_SPLAT_TILE,
                        RlxSplatPx{px_t[q], px_r[q], px_g[q], px_b[q], px_d[q], px_live[q]});
    }
}
RLX_INSTANTIATE(splat_raster, float, splat_raster_f32)
RLX_INSTANTIATE(splat_raster, half, splat_raster_f16)
