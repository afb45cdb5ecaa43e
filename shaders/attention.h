// Scaled dot-product attention (semantics: rlx/ir/ops_attention.py).
//
// One group per output row (b, query i, head h), row = (b * Tq + i) * Hq + h,
// which is also the row of the dense [B, Tq, Hq, Dv] output. The row's Tk
// scores live in a float32 scratch region (scores + row * Tk), so any Tk fits.
//   pass 1: threads stride over blocks of 4 keys: s = (q . k) * scale,
//           softcap, + mask, causal / window -> -inf; stored, and a group max.
//   pass 2: each thread turns its own scores into exp(s - max) (it reads only
//           what it wrote) and the group sums them.
//   barrier: pass 3 reads every thread's probabilities.
//   pass 3: threads stride over output features: out[d] = sum_j p_j v[j, d] / sum.
// A row whose keys are all masked (max = -inf) writes zeros; a NaN score
// (from q, k or the mask) makes its row NaN, as in PyTorch.
// q, k, v and the mask are read through (b, t, h) / (b, h, q, k) strides with
// a contiguous feature axis, so head slices of a packed QKV tensor and
// broadcast masks (stride 0) need no copy. Query head h reads kv head
// h / group (grouped-query attention). f16 inputs and outputs, f32 math.
struct AttentionParams {
    uint rows, Tq, Tk, Hq;
    uint group, D, Dv, flags;          // flags: 1 = has mask, 2 = causal
    uint window, q_offset, k_offset, v_offset;   // window 0 = none
    uint m_offset, o_offset, pad0, pad1;
    float scale, softcap, pad2, pad3;  // softcap 0 = none
    uint q_sb, q_st, q_sh, k_sb;
    uint k_st, k_sh, v_sb, v_st;
    uint v_sh, m_sb, m_sh, m_sq;
    uint m_sk, pad4, pad5, pad6;
};

#define RLX_ATT_MASK 1u
#define RLX_ATT_CAUSAL 2u
#define RLX_ATT_KB 4u       // keys per block in passes 1 and 2
#define RLX_ATT_CHUNK 8u    // output features per chunk in pass 3

// Dot product of two contiguous rows with eight partial sums (independent
// chains: ILP everywhere, one vector on the CPU).
template <typename T>
RLX_INLINE float rlx_att_dot(RLX_DEVICE const T *a, RLX_DEVICE const T *b, uint n) {
    float acc[RLX_ATT_CHUNK];
    for (uint u = 0; u < RLX_ATT_CHUNK; ++u) acc[u] = 0.0f;
    uint d = 0;
    for (; d + RLX_ATT_CHUNK <= n; d += RLX_ATT_CHUNK) {
        for (uint u = 0; u < RLX_ATT_CHUNK; ++u) acc[u] += rlx_to_float(a[d + u]) * rlx_to_float(b[d + u]);
    }
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; d < n; ++d) s += rlx_to_float(a[d]) * rlx_to_float(b[d]);
    return s;
}

struct rlx_att_f4 {
    float v[RLX_ATT_KB];
};

// Four keys' dot products with one query row: q is loaded once per feature
// and the four sums are independent chains.
template <typename T>
RLX_INLINE rlx_att_f4 rlx_att_dot4(RLX_DEVICE const T *q, RLX_DEVICE const T *k0, uint64_t k_st, uint n) {
    RLX_DEVICE const T *k1 = k0 + k_st;
    RLX_DEVICE const T *k2 = k1 + k_st;
    RLX_DEVICE const T *k3 = k2 + k_st;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (uint d = 0; d < n; ++d) {
        const float x = rlx_to_float(q[d]);
        a0 += x * rlx_to_float(k0[d]);
        a1 += x * rlx_to_float(k1[d]);
        a2 += x * rlx_to_float(k2[d]);
        a3 += x * rlx_to_float(k3[d]);
    }
    rlx_att_f4 r;
    r.v[0] = a0;
    r.v[1] = a1;
    r.v[2] = a2;
    r.v[3] = a3;
    return r;
}

template <typename T>
RLX_KERNEL attention(RLX_BUF(RLX_DEVICE const T *, q, 0), RLX_BUF(RLX_DEVICE const T *, k, 1),
                     RLX_BUF(RLX_DEVICE const T *, v, 2), RLX_BUF(RLX_DEVICE const T *, mask, 3),
                     RLX_BUF(RLX_DEVICE float *, scores, 4), RLX_BUF(RLX_DEVICE T *, out, 5),
                     RLX_PARAMS(AttentionParams, p, 6) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    const uint row = rlx_group_id.x;
    if (row >= p->rows) return;
    const uint Tq = p->Tq, Tk = p->Tk, Hq = p->Hq, D = p->D, Dv = p->Dv;
    const uint h = row % Hq, i = (row / Hq) % Tq, b = row / (Hq * Tq);
    const uint kvh = h / p->group;
    RLX_DEVICE const T *qr = q + p->q_offset + (uint64_t)b * p->q_sb + (uint64_t)i * p->q_st + (uint64_t)h * p->q_sh;
    RLX_DEVICE const T *kb = k + p->k_offset + (uint64_t)b * p->k_sb + (uint64_t)kvh * p->k_sh;
    RLX_DEVICE const T *vb = v + p->v_offset + (uint64_t)b * p->v_sb + (uint64_t)kvh * p->v_sh;
    RLX_DEVICE const T *mr = mask + p->m_offset + (uint64_t)b * p->m_sb + (uint64_t)h * p->m_sh +
                             (uint64_t)i * p->m_sq;
    RLX_DEVICE float *sr = scores + (uint64_t)row * Tk;
    RLX_DEVICE T *orow = out + p->o_offset + (uint64_t)row * Dv;
    const uint64_t k_st = p->k_st, v_st = p->v_st;
    const bool has_mask = (p->flags & RLX_ATT_MASK) != 0u, causal = (p->flags & RLX_ATT_CAUSAL) != 0u;
    const float scale = p->scale, cap = p->softcap;
    const int qpos = (int)i + (int)Tk - (int)Tq;    // the last query sits at the last key
    const int window = (int)p->window;
    // Passes 1 and 2: thread t takes the blocks of RLX_ATT_KB keys starting
    // at t * KB, t * KB + group * KB, ... (the same keys in both passes).
    const uint first = rlx_local_id.x * RLX_ATT_KB, step = rlx_group_size.x * RLX_ATT_KB;

    // pass 1: scores and their max
    float m = -RLX_INFINITY;
    for (uint j0 = first; j0 < Tk; j0 += step) {
        const uint n = Tk - j0 < RLX_ATT_KB ? Tk - j0 : RLX_ATT_KB;
        bool masked[RLX_ATT_KB];
        bool all_masked = true;
        for (uint u = 0; u < RLX_ATT_KB; ++u) {
            const int j = (int)(j0 + u);
            masked[u] = u >= n || (causal && j > qpos) || (window > 0 && qpos - j >= window);
            all_masked = all_masked && masked[u];
        }
        rlx_att_f4 dots;
        for (uint u = 0; u < RLX_ATT_KB; ++u) dots.v[u] = 0.0f;
        if (!all_masked) {
            if (n == RLX_ATT_KB) {
                dots = rlx_att_dot4(qr, kb + (uint64_t)j0 * k_st, k_st, D);
            } else {
                for (uint u = 0; u < n; ++u) dots.v[u] = rlx_att_dot(qr, kb + (uint64_t)(j0 + u) * k_st, D);
            }
        }
        for (uint u = 0; u < n; ++u) {
            float s = -RLX_INFINITY;
            if (!masked[u]) {
                s = dots.v[u] * scale;
                if (cap > 0.0f) s = cap * rlx_tanh(s / cap);
                if (has_mask) s += rlx_to_float(mr[(uint64_t)(j0 + u) * p->m_sk]);
            }
            sr[j0 + u] = s;
            m = rlx_maximum(m, s);   // a NaN score makes the row NaN (torch), not zeros
        }
    }
    m = rlx_group_max(m, scratch);
    if (m == -RLX_INFINITY) {          // every key masked: zeros (the same branch for the whole group)
        RLX_FOR_GROUP(d, Dv) { orow[d] = rlx_from_float<T>(0.0f); }
        return;
    }

    // pass 2: unnormalized probabilities and their sum; each thread reads only its own scores
    float l = 0.0f;
    for (uint j0 = first; j0 < Tk; j0 += step) {
        const uint n = Tk - j0 < RLX_ATT_KB ? Tk - j0 : RLX_ATT_KB;
        for (uint u = 0; u < n; ++u) {
            const float e = rlx_exp(sr[j0 + u] - m);
            sr[j0 + u] = e;
            l += e;
        }
    }
    l = rlx_group_sum(l, scratch);
    const float inv = 1.0f / l;
    rlx_barrier();                     // pass 3 reads every thread's probabilities

    // pass 3: out = P @ V. A group with fewer threads than Dv / 8 takes
    // features eight at a time, keys four at a time (16 independent
    // accumulator chains: ILP, and on the CPU four vectors); a wider group
    // gives each thread one feature. Keys with p = 0 (masked) are skipped.
    if (rlx_group_size.x * RLX_ATT_CHUNK <= Dv) {
        const uint chunks = (Dv + RLX_ATT_CHUNK - 1) / RLX_ATT_CHUNK;
        RLX_FOR_GROUP(c, chunks) {
            const uint d0 = c * RLX_ATT_CHUNK;
            if (d0 + RLX_ATT_CHUNK <= Dv) {
                float a0[RLX_ATT_CHUNK], a1[RLX_ATT_CHUNK], a2[RLX_ATT_CHUNK], a3[RLX_ATT_CHUNK];
                for (uint u = 0; u < RLX_ATT_CHUNK; ++u) a0[u] = a1[u] = a2[u] = a3[u] = 0.0f;
                uint j = 0;
                for (; j + 4u <= Tk; j += 4u) {
                    const float p0 = sr[j], p1 = sr[j + 1], p2 = sr[j + 2], p3 = sr[j + 3];
                    if (p0 == 0.0f && p1 == 0.0f && p2 == 0.0f && p3 == 0.0f) continue;
                    RLX_DEVICE const T *v0 = vb + (uint64_t)j * v_st + d0;
                    RLX_DEVICE const T *v1 = v0 + v_st;
                    RLX_DEVICE const T *v2 = v1 + v_st;
                    RLX_DEVICE const T *v3 = v2 + v_st;
                    for (uint u = 0; u < RLX_ATT_CHUNK; ++u) {
                        a0[u] += p0 * rlx_to_float(v0[u]);
                        a1[u] += p1 * rlx_to_float(v1[u]);
                        a2[u] += p2 * rlx_to_float(v2[u]);
                        a3[u] += p3 * rlx_to_float(v3[u]);
                    }
                }
                for (; j < Tk; ++j) {
                    const float pj = sr[j];
                    if (pj == 0.0f) continue;
                    RLX_DEVICE const T *vr = vb + (uint64_t)j * v_st + d0;
                    for (uint u = 0; u < RLX_ATT_CHUNK; ++u) a0[u] += pj * rlx_to_float(vr[u]);
                }
                for (uint u = 0; u < RLX_ATT_CHUNK; ++u) {
                    orow[d0 + u] = rlx_from_float<T>(((a0[u] + a1[u]) + (a2[u] + a3[u])) * inv);
                }
            } else {
                for (uint d = d0; d < Dv; ++d) {
                    float acc = 0.0f;
                    for (uint j = 0; j < Tk; ++j) {
                        const float pj = sr[j];
                        if (pj != 0.0f) acc += pj * rlx_to_float(vb[(uint64_t)j * v_st + d]);
                    }
                    orow[d] = rlx_from_float<T>(acc * inv);
                }
            }
        }
    } else {
        RLX_FOR_GROUP(d, Dv) {
            float acc = 0.0f;
            for (uint j = 0; j < Tk; ++j) {
                const float pj = sr[j];
                if (pj != 0.0f) acc += pj * rlx_to_float(vb[(uint64_t)j * v_st + d]);
            }
            orow[d] = rlx_from_float<T>(acc * inv);
        }
    }
}
RLX_INSTANTIATE(attention, float, attention_f32)
RLX_INSTANTIATE(attention, half, attention_f16)
