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
// With flag 4 an i32 active length L (run-time data: a KV cache's filled
// rows, read after the group index as every buffer is) replaces Tk in every
// loop: only keys [0, L) are read, and the last query sits at key L - 1.
// q, k, v and the mask are read through (b, t, h) / (b, h, q, k) strides with
// a contiguous feature axis, so head slices of a packed QKV tensor and
// broadcast masks (stride 0) need no copy. Query head h reads kv head
// h / group (grouped-query attention). f16 inputs and outputs, f32 math.
struct AttentionParams {
    uint rows, Tq, Tk, Hq;
    uint group, D, Dv, flags;          // flags: 1 = has mask, 2 = causal
    uint window, q_offset, k_offset, v_offset;   // window 0 = none; flags 4 = has length
    uint m_offset, o_offset, splits, keys_per_split;   // the split kernels' (below)
    float scale, softcap, pad2, pad3;  // softcap 0 = none
    uint q_sb, q_st, q_sh, k_sb;
    uint k_st, k_sh, v_sb, v_st;
    uint v_sh, m_sb, m_sh, m_sq;
    uint m_sk, l_offset, pad5, pad6;
};

#define RLX_ATT_MASK 1u
#define RLX_ATT_CAUSAL 2u
#define RLX_ATT_LENGTH 4u
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

// The keys a row reads: the active length clamped to [0, Tk], or Tk.
RLX_INLINE uint rlx_att_active(RLX_CONSTANT AttentionParams *p, RLX_DEVICE const int *length) {
    if ((p->flags & RLX_ATT_LENGTH) == 0u) return p->Tk;
    const int n = length[p->l_offset];
    return n <= 0 ? 0u : ((uint)n < p->Tk ? (uint)n : p->Tk);
}

// The pointers of one output row (b, query i, head h): its query, the K and
// V rows of its KV head, its mask row, and where the last query sits among
// the `active` keys (qpos: for causal and window).
template <typename T>
struct rlx_att_row {
    RLX_DEVICE const T *q, *k, *v, *mask;
    int qpos;
};

template <typename T>
RLX_INLINE rlx_att_row<T> rlx_att_row_of(RLX_CONSTANT AttentionParams *p, uint row, RLX_DEVICE const T *q,
                                         RLX_DEVICE const T *k, RLX_DEVICE const T *v, RLX_DEVICE const T *mask,
                                         uint active) {
    const uint Hq = p->Hq, Tq = p->Tq;
    const uint h = row % Hq, i = (row / Hq) % Tq, b = row / (Hq * Tq);
    const uint kvh = h / p->group;
    rlx_att_row<T> r;
    r.q = q + p->q_offset + (uint64_t)b * p->q_sb + (uint64_t)i * p->q_st + (uint64_t)h * p->q_sh;
    r.k = k + p->k_offset + (uint64_t)b * p->k_sb + (uint64_t)kvh * p->k_sh;
    r.v = v + p->v_offset + (uint64_t)b * p->v_sb + (uint64_t)kvh * p->v_sh;
    r.mask = mask + p->m_offset + (uint64_t)b * p->m_sb + (uint64_t)h * p->m_sh + (uint64_t)i * p->m_sq;
    r.qpos = (int)i + (int)active - (int)Tq;   // the last query sits at the last active key
    return r;
}

template <typename T>
RLX_KERNEL attention(RLX_BUF(RLX_DEVICE const T *, q, 0), RLX_BUF(RLX_DEVICE const T *, k, 1),
                     RLX_BUF(RLX_DEVICE const T *, v, 2), RLX_BUF(RLX_DEVICE const T *, mask, 3),
                     RLX_BUF(RLX_DEVICE const int *, length, 4), RLX_BUF(RLX_DEVICE float *, scores, 5),
                     RLX_BUF(RLX_DEVICE T *, out, 6), RLX_PARAMS(AttentionParams, p, 7) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    const uint row = rlx_group_id.x;
    if (row >= p->rows) return;
    const uint Tk = rlx_att_active(p, length), D = p->D, Dv = p->Dv;   // keys [0, Tk) only
    const rlx_att_row<T> at = rlx_att_row_of(p, row, q, k, v, mask, Tk);
    RLX_DEVICE const T *qr = at.q, *kb = at.k, *vb = at.v, *mr = at.mask;
    RLX_DEVICE float *sr = scores + (uint64_t)row * p->Tk;
    RLX_DEVICE T *orow = out + p->o_offset + (uint64_t)row * Dv;
    const uint64_t k_st = p->k_st, v_st = p->v_st;
    const bool has_mask = (p->flags & RLX_ATT_MASK) != 0u, causal = (p->flags & RLX_ATT_CAUSAL) != 0u;
    const float scale = p->scale, cap = p->softcap;
    const int qpos = at.qpos;
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

// ---- split-K attention (decoding: few query rows, many keys) ---------------
// The fused kernel above gives one group to a row, so a decode step (one
// query row per head: 4 rows for Gemma 3) runs on a handful of cores while
// the keys stream through them. Here each row's keys are cut into `splits`
// chunks of keys_per_split (<= RLX_ATT_SPLIT_KEYS), one group each (group =
// row * splits + split), as MLX's vector SDPA does:
//   attention_split: the chunk's scores (SIMD group per key, its lanes
//     splitting the features: coalesced reads of K), their max m, the
//     probabilities exp(s - m) and their sum l, and the unnormalized
//     P @ V of the chunk; writes (acc[Dv], m, l) to the partials buffer.
//   attention_merge: one group per row combines the splits:
//     M = max m_s, L = sum l_s e^(m_s - M), out = sum acc_s e^(m_s - M) / L.
// Semantics equal the fused kernel's: additive mask (NaN + -inf is NaN),
// causal / window keys excluded, a row whose keys are all excluded writes
// zeros, a NaN score makes its row NaN.
// Partials: acc at (group * Dv), then (m, l) pairs at rows * splits * Dv.
#define RLX_ATT_SPLIT_KEYS 128u
#define RLX_ATT_SPLIT_ILP 4u     // keys a SIMD group (scores) or a thread (P @ V) has in flight
// Loads issued together before their products: a lane's features of the
// ILP keys (scores), a thread's V rows (P @ V), a thread's splits (merge).
// On an H200 (session 11) the merge's batched reads cut the decode step at
// 1900 keys (1.196 -> 1.147 ms); the split kernel's did not make it faster
// (its time was the cache rows' memory latency after the PDL wait, which
// rlx_att_split_prefetch below addresses: 9.7 -> 8.3 us a call). Two
// session-14 forms were measured and not kept (benchmarks/README.md):
// loading the chunk's V rows before the scores (0.1-0.14 us off a 12-14 us
// call), and attention_split_merge counting only the splits that hold
// active keys, numbered split-major (12.3 us a call at position 128
// against 11.9: the idle groups were not what it waited on).
#define RLX_ATT_SPLIT_DSTEPS 8u
#define RLX_ATT_SPLIT_VKEYS 16u
// The merge's partials a thread has in flight: its splits are read in
// batches of this many, the last batch predicated, so a row costs
// ceil(used / RLX_ATT_MERGE_ILP) dependent round trips to L2. At 8 with a
// pair-by-pair tail, position 1900 of a global layer (119 splits) walked
// 15 batches plus a tail one after another.
#ifndef RLX_ATT_MERGE_ILP
#define RLX_ATT_MERGE_ILP 16u
#endif
// The merge's per-split weights in group memory up to this many splits.
#define RLX_ATT_MERGE_SPLITS 1024u

#ifdef RLX_TARGET_CUDA
// attention_split's K and V rows, prefetched into L2 before the PDL wait
// (prelude/cuda.h): a decode step's cache rows were written steps ago and
// the weights streamed since have pushed them out of L2, so each dependent
// read of them (scores, then P @ V) cost a memory latency after the wait.
// The chunk's rows below the active length, read early as well (an input
// the host wrote before the run; were it computed by a predecessor, a stale
// value would only misjudge what to prefetch).
template <typename T>
RLX_INLINE void rlx_att_split_prefetch_rows(RLX_CONSTANT AttentionParams *p, RLX_DEVICE const T *q,
                                            RLX_DEVICE const T *k, RLX_DEVICE const T *v, RLX_DEVICE const T *mask,
                                            RLX_DEVICE const int *length) {
    const uint splits = p->splits, chunk = p->keys_per_split, gid = rlx_group_id_early.x;
    if (splits == 0u || gid / splits >= p->rows) return;
    const uint j0 = (gid % splits) * chunk, active = rlx_att_active(p, length);
    if (j0 >= active) return;
    const uint n = active - j0 < chunk ? active - j0 : chunk;
    const rlx_att_row<T> at = rlx_att_row_of(p, gid / splits, q, k, v, mask, active);
    const uint lines_k = (p->D * (uint)sizeof(T) + 127u) / 128u, lines_v = (p->Dv * (uint)sizeof(T) + 127u) / 128u;
    const uint per = lines_k + lines_v;
    for (uint i = rlx_local_id_early.x; i < n * per; i += blockDim.x) {
        const uint j = j0 + i / per, l = i % per;
        rlx_prefetch_l2(l < lines_k ? (const char *)(at.k + (uint64_t)j * p->k_st) + 128u * l
                                    : (const char *)(at.v + (uint64_t)j * p->v_st) + 128u * (l - lines_k));
    }
}
template <typename T>
RLX_INLINE void rlx_att_split_prefetch(RLX_CONSTANT AttentionParams *p, RLX_DEVICE const T *q,
                                       RLX_DEVICE const T *k, RLX_DEVICE const T *v, RLX_DEVICE const T *mask,
                                       RLX_DEVICE const int *length) {
    rlx_pdl_prefetch_begin();
    rlx_att_split_prefetch_rows<T>(p, q, k, v, mask, length);
    rlx_pdl_prefetch_end();
}
#endif

// One split's partials (group gid = row * splits + split, row < rows):
// what attention_split does, shared with attention_split_merge.
template <typename T>
RLX_INLINE void rlx_att_split_part(RLX_DEVICE const T *q, RLX_DEVICE const T *k, RLX_DEVICE const T *v,
                                   RLX_DEVICE const T *mask, RLX_DEVICE const int *length, RLX_DEVICE float *part,
                                   RLX_CONSTANT AttentionParams *p, const uint gid,
                                   RLX_GROUP_MEM float *probs RLX_GROUP_IDS) {
    const uint splits = p->splits, chunk = p->keys_per_split;
    const uint row = gid / splits, split = gid % splits;
    const uint Tk = rlx_att_active(p, length), D = p->D, Dv = p->Dv;   // keys [0, Tk) only
    const uint64_t k_st = p->k_st, v_st = p->v_st;
    const bool has_mask = (p->flags & RLX_ATT_MASK) != 0u, causal = (p->flags & RLX_ATT_CAUSAL) != 0u;
    const float scale = p->scale, cap = p->softcap;
    const int window = (int)p->window;
    const uint j0 = split * chunk;
    const uint n = j0 >= Tk ? 0u : (Tk - j0 < chunk ? Tk - j0 : chunk);
    RLX_DEVICE float *acc_out = part + (uint64_t)gid * Dv;
    RLX_DEVICE float *ml_out = part + (uint64_t)p->rows * splits * Dv + (uint64_t)gid * 2u;
    if (n == 0u) {   // a chunk past the active length (uniform in the group): an empty split the merge skips
        if (rlx_local_id.x == 0u) {
            ml_out[0] = -RLX_INFINITY;
            ml_out[1] = 0.0f;
        }
        return;
    }
    const rlx_att_row<T> at = rlx_att_row_of(p, row, q, k, v, mask, Tk);

    // Scores: SIMD group w takes keys w, w + n_simd, ...; its lanes (fewer
    // than the width in a partial last SIMD group) split the features. Four
    // keys at a time, so that their loads are in flight together: one key
    // after another, each a full memory latency, made a split of 16 keys
    // take ~21 us on an H200 whatever the context (session 9's trace).
    const uint width = rlx_simd_width, size = rlx_group_size.x;
    const uint n_simd = (size + width - 1u) / width;
    const uint simd = rlx_simd_id, lane = rlx_simd_lane;
    const uint lanes = size - simd * width < width ? size - simd * width : width;
    for (uint j4 = simd; j4 < n; j4 += RLX_ATT_SPLIT_ILP * n_simd) {
        float dot[RLX_ATT_SPLIT_ILP];
        bool live[RLX_ATT_SPLIT_ILP];
        RLX_DEVICE const T *kr[RLX_ATT_SPLIT_ILP];
        for (uint u = 0; u < RLX_ATT_SPLIT_ILP; ++u) {   // uniform in the SIMD group
            const int j = (int)(j0 + j4 + u * n_simd);
            live[u] = j4 + u * n_simd < n && !((causal && j > at.qpos) || (window > 0 && at.qpos - j >= window));
            kr[u] = at.k + (uint64_t)(live[u] ? j : (int)j0) * k_st;
            dot[u] = 0.0f;
        }
        uint d = lane;
        for (; d + (RLX_ATT_SPLIT_DSTEPS - 1u) * lanes < D; d += RLX_ATT_SPLIT_DSTEPS * lanes) {
            float qv[RLX_ATT_SPLIT_DSTEPS], kv[RLX_ATT_SPLIT_DSTEPS][RLX_ATT_SPLIT_ILP];
            for (uint e = 0; e < RLX_ATT_SPLIT_DSTEPS; ++e) {
                qv[e] = rlx_to_float(at.q[d + e * lanes]);
                for (uint u = 0; u < RLX_ATT_SPLIT_ILP; ++u) kv[e][u] = rlx_to_float(kr[u][d + e * lanes]);
            }
            for (uint e = 0; e < RLX_ATT_SPLIT_DSTEPS; ++e)   // each key's features in order, as one at a time
                for (uint u = 0; u < RLX_ATT_SPLIT_ILP; ++u) dot[u] += qv[e] * kv[e][u];
        }
        for (; d < D; d += lanes) {
            const float qd = rlx_to_float(at.q[d]);
            for (uint u = 0; u < RLX_ATT_SPLIT_ILP; ++u) dot[u] += qd * rlx_to_float(kr[u][d]);
        }
        for (uint u = 0; u < RLX_ATT_SPLIT_ILP; ++u) {
            const uint jj = j4 + u * n_simd;
            if (jj >= n) break;   // uniform
            const int j = (int)(j0 + jj);
            float sc = rlx_simd_sum(dot[u]) * scale;
            if (cap > 0.0f) sc = cap * rlx_tanh(sc / cap);
            if (has_mask) sc += rlx_to_float(at.mask[(uint64_t)j * p->m_sk]);
            if (lane == 0u) probs[jj] = live[u] ? sc : -RLX_INFINITY;
        }
    }
    rlx_barrier();
    float m = -RLX_INFINITY;
    for (uint jj = 0; jj < n; ++jj) m = rlx_maximum(m, probs[jj]);   // every thread, the same order
    rlx_barrier();                     // all have read the scores before they turn into probabilities
    if (m != -RLX_INFINITY) {          // uniform: the same m in every thread
        RLX_FOR_GROUP(jj, n) { probs[jj] = rlx_exp(probs[jj] - m); }
    }
    rlx_barrier();
    float l = 0.0f;
    if (m != -RLX_INFINITY) {
        for (uint jj = 0; jj < n; ++jj) l += probs[jj];
    }
    // P @ V of the chunk, unnormalized: a thread per feature (coalesced rows
    // of V), four keys a step in independent chains with their loads issued
    // together (every row below Tk is in bounds); p = 0 keys (masked) add
    // nothing, by a select, so a non-finite V there cannot leak in.
    RLX_FOR_GROUP(d, Dv) {
        float a[RLX_ATT_SPLIT_ILP];
        for (uint u = 0; u < RLX_ATT_SPLIT_ILP; ++u) a[u] = 0.0f;
        if (m != -RLX_INFINITY) {
            RLX_DEVICE const T *vd = at.v + (uint64_t)j0 * v_st + d;
            uint jj = 0;
            // Chain u % ILP takes key jj + u: the same chains, in the same
            // order, as the four-key steps below.
            for (; jj + RLX_ATT_SPLIT_VKEYS <= n; jj += RLX_ATT_SPLIT_VKEYS) {
                float vv[RLX_ATT_SPLIT_VKEYS];
                for (uint u = 0; u < RLX_ATT_SPLIT_VKEYS; ++u) vv[u] = rlx_to_float(vd[(uint64_t)(jj + u) * v_st]);
                for (uint u = 0; u < RLX_ATT_SPLIT_VKEYS; ++u) {
                    const float pu = probs[jj + u];
                    a[u % RLX_ATT_SPLIT_ILP] += pu != 0.0f ? pu * vv[u] : 0.0f;
                }
            }
            for (; jj + RLX_ATT_SPLIT_ILP <= n; jj += RLX_ATT_SPLIT_ILP) {
                float vv[RLX_ATT_SPLIT_ILP];
                for (uint u = 0; u < RLX_ATT_SPLIT_ILP; ++u) vv[u] = rlx_to_float(vd[(uint64_t)(jj + u) * v_st]);
                for (uint u = 0; u < RLX_ATT_SPLIT_ILP; ++u) {
                    const float pu = probs[jj + u];
                    a[u] += pu != 0.0f ? pu * vv[u] : 0.0f;
                }
            }
            for (; jj < n; ++jj) {
                const float pj = probs[jj];
                if (pj != 0.0f) a[0] += pj * rlx_to_float(vd[(uint64_t)jj * v_st]);
            }
        }
        float sum = 0.0f;
        for (uint u = 0; u < RLX_ATT_SPLIT_ILP; ++u) sum += a[u];
        acc_out[d] = sum;
    }
    if (rlx_local_id.x == 0u) {
        ml_out[0] = m;
        ml_out[1] = l;
    }
}

template <typename T>
RLX_KERNEL attention_split(RLX_BUF(RLX_DEVICE const T *, q, 0), RLX_BUF(RLX_DEVICE const T *, k, 1),
                           RLX_BUF(RLX_DEVICE const T *, v, 2), RLX_BUF(RLX_DEVICE const T *, mask, 3),
                           RLX_BUF(RLX_DEVICE const int *, length, 4), RLX_BUF(RLX_DEVICE float *, part, 5),
                           RLX_PARAMS(AttentionParams, p, 6) RLX_IDS) {
    RLX_SHARED(float, probs, RLX_ATT_SPLIT_KEYS);
#ifdef RLX_TARGET_CUDA
    rlx_att_split_prefetch<T>(p, q, k, v, mask, length);
#endif
    const uint gid = rlx_group_id.x;
    if (gid / p->splits >= p->rows) return;
    rlx_att_split_part<T>(q, k, v, mask, length, part, p, gid, probs RLX_GROUP_IDS_ARGS);
}

// The merge reduces over the splits with the whole group (a thread per
// split: one thread walking 128 splits per row was 7.6-15 us of a decode
// step a layer), skips the empty splits past the last one with keys (they
// wrote no acc), and stages each split's weight e^(m_s - M) / L once.
// Partials are read through rlx_load_fresh: in attention_split_merge other
// groups of the same kernel wrote them. Each split's (m, l) is read once,
// into group memory beside the weights (up to RLX_ATT_MERGE_SPLITS of
// them): in attention_split_merge every read of a partial is a round trip
// to L2 on the decode step's critical path, and the max, the total and
// the weights each read (m, l) again.
RLX_INLINE float rlx_att_split_weight(RLX_DEVICE const float *ml, const uint s, const float big, const float inv) {
    const float ms = rlx_load_fresh(ml + 2u * s);
    return ms != -RLX_INFINITY ? rlx_exp(ms - big) * inv : 0.0f;
}

// used_splits: the splits that hold keys where the caller knows them from
// the active length (ceil(active / keys_per_split)), else 0: then the last
// split with a finite or NaN max, by a group reduction. A split below the
// active length whose keys are all masked adds nothing either way (weight
// 0); counting it saves a reduction on the decode step's critical path.
template <typename T>
RLX_INLINE void rlx_att_merge_row(RLX_DEVICE const float *part, RLX_DEVICE T *out,
                                  RLX_CONSTANT AttentionParams *p, const uint row, const uint used_splits,
                                  RLX_GROUP_MEM float *scratch, RLX_GROUP_MEM float *weight,
                                  RLX_GROUP_MEM float *l_of RLX_GROUP_IDS) {
    const uint splits = p->splits, Dv = p->Dv;
    RLX_DEVICE const float *acc = part + (uint64_t)row * splits * Dv;
    RLX_DEVICE const float *ml = part + (uint64_t)p->rows * splits * Dv + (uint64_t)row * splits * 2u;
    RLX_DEVICE T *orow = out + p->o_offset + (uint64_t)row * Dv;
    const bool staged = splits <= RLX_ATT_MERGE_SPLITS;   // uniform
    float big = -RLX_INFINITY, last = -1.0f;
    RLX_FOR_GROUP(s, splits) {
        const float ms = rlx_load_fresh(ml + 2u * s);
        if (staged) {   // weight[s] holds m_s until it turns into the weight below
            weight[s] = ms;
            l_of[s] = rlx_load_fresh(ml + 2u * s + 1u);
        }
        big = rlx_maximum(big, ms);
        if (ms != -RLX_INFINITY) last = (float)s;   // NaN counts: its row turns NaN below
    }
    rlx_barrier();   // the staged (m, l), before other threads read them (a one-warp reduction has no barrier)
    big = rlx_group_max(big, scratch);
    if (used_splits == 0u) last = rlx_group_max(last, scratch);   // uniform
    if (big == -RLX_INFINITY) {        // every key masked: zeros
        RLX_FOR_GROUP(d, Dv) { orow[d] = rlx_from_float<T>(0.0f); }
        return;
    }
    const uint used = used_splits != 0u ? used_splits : (uint)last + 1u;
    float total = 0.0f;
    RLX_FOR_GROUP(s, used) {   // each s by the thread that staged it
        const float ms = staged ? weight[s] : rlx_load_fresh(ml + 2u * s);
        const float ls = staged ? l_of[s] : rlx_load_fresh(ml + 2u * s + 1u);
        if (ms != -RLX_INFINITY) total += ls * rlx_exp(ms - big);
    }
    total = rlx_group_sum(total, scratch);
    const float inv = 1.0f / total;
    if (staged) {
        RLX_FOR_GROUP(s, used) {
            const float ms = weight[s];
            weight[s] = ms != -RLX_INFINITY ? rlx_exp(ms - big) * inv : 0.0f;
        }
        rlx_barrier();
    }
    RLX_FOR_GROUP(d, Dv) {
        float o0 = 0.0f, o1 = 0.0f;
        uint s = 0;
        if (staged) {   // o0 takes the even splits, o1 the odd ones, in order, as in the pairs below
            for (; s < used; s += RLX_ATT_MERGE_ILP) {   // the last batch's splits past `used` read nothing
                float av[RLX_ATT_MERGE_ILP];
                for (uint u = 0; u < RLX_ATT_MERGE_ILP; ++u)
                    av[u] = s + u < used ? rlx_load_fresh(acc + (uint64_t)(s + u) * Dv + d) : 0.0f;
                for (uint u = 0; u < RLX_ATT_MERGE_ILP; u += 2u) {
                    const float w0 = s + u < used ? weight[s + u] : 0.0f;
                    const float w1 = s + u + 1u < used ? weight[s + u + 1u] : 0.0f;
                    o0 += w0 != 0.0f ? av[u] * w0 : 0.0f;
                    o1 += w1 != 0.0f ? av[u + 1u] * w1 : 0.0f;
                }
            }
        }
        for (; s + 2u <= used; s += 2u) {
            const float w0 = staged ? weight[s] : rlx_att_split_weight(ml, s, big, inv);
            const float w1 = staged ? weight[s + 1u] : rlx_att_split_weight(ml, s + 1u, big, inv);
            const float a0 = rlx_load_fresh(acc + (uint64_t)s * Dv + d);
            const float a1 = rlx_load_fresh(acc + (uint64_t)(s + 1u) * Dv + d);
            o0 += w0 != 0.0f ? a0 * w0 : 0.0f;
            o1 += w1 != 0.0f ? a1 * w1 : 0.0f;
        }
        if (s < used) {
            const float w0 = staged ? weight[s] : rlx_att_split_weight(ml, s, big, inv);
            if (w0 != 0.0f) o0 += rlx_load_fresh(acc + (uint64_t)s * Dv + d) * w0;
        }
        orow[d] = rlx_from_float<T>(o0 + o1);
    }
}

template <typename T>
RLX_KERNEL attention_merge(RLX_BUF(RLX_DEVICE const float *, part, 0), RLX_BUF(RLX_DEVICE T *, out, 1),
                           RLX_PARAMS(AttentionParams, p, 2) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    RLX_SHARED(float, weight, RLX_ATT_MERGE_SPLITS);
    RLX_SHARED(float, l_of, RLX_ATT_MERGE_SPLITS);
    const uint row = rlx_group_id.x;
    if (row >= p->rows) return;
    rlx_att_merge_row<T>(part, out, p, row, 0u, scratch, weight, l_of RLX_GROUP_IDS_ARGS);
}

// attention_split_merge's merge counts the splits below the active length
// (rlx_att_merge_row's used_splits) instead of reducing for the last one
// that holds keys. A compile-time switch for the GPU scripts' A/B
// (benchmarks/gpu/kernel_defines.py).
#ifndef RLX_ATT_MERGE_USED_FROM_LENGTH
#define RLX_ATT_MERGE_USED_FROM_LENGTH 1
#endif

#ifndef RLX_TARGET_METAL
// Split and merge in one dispatch (a decode step's launch less per
// attention): every group writes its split's partials and counts itself in
// count[row] with a device-scope release; the group that counts last
// merges the row (the other splits' partials are complete by then) and sets
// the count back to zero for the next run. The counts live in a resident,
// zero-initialized buffer of `rows` words. Not on Metal: MSL before 3.2
// documents no device-scope fence to order the partials before the count.
template <typename T>
RLX_KERNEL attention_split_merge(RLX_BUF(RLX_DEVICE const T *, q, 0), RLX_BUF(RLX_DEVICE const T *, k, 1),
                                 RLX_BUF(RLX_DEVICE const T *, v, 2), RLX_BUF(RLX_DEVICE const T *, mask, 3),
                                 RLX_BUF(RLX_DEVICE const int *, length, 4), RLX_BUF(RLX_DEVICE float *, part, 5),
                                 RLX_BUF(RLX_DEVICE T *, out, 6), RLX_BUF(RLX_DEVICE uint *, count, 7),
                                 RLX_PARAMS(AttentionParams, p, 8) RLX_IDS) {
    RLX_SHARED(float, probs, RLX_ATT_SPLIT_KEYS);
    RLX_SHARED(float, scratch, 32);
    RLX_SHARED(float, weight, RLX_ATT_MERGE_SPLITS);
    RLX_SHARED(float, l_of, RLX_ATT_MERGE_SPLITS);
    RLX_SHARED(uint, last, 1);
#ifdef RLX_TARGET_CUDA
    rlx_att_split_prefetch<T>(p, q, k, v, mask, length);
#endif
    const uint gid = rlx_group_id.x, row = gid / p->splits;
    if (row >= p->rows) return;
    // The splits that hold keys, for the merge: read now, beside the split's own reads.
    const uint chunk = p->keys_per_split, active = rlx_att_active(p, length);
    const uint holding = chunk ? (active + chunk - 1u) / chunk : 0u;
    const uint used = RLX_ATT_MERGE_USED_FROM_LENGTH ? (holding < p->splits ? holding : p->splits) : 0u;
    rlx_att_split_part<T>(q, k, v, mask, length, part, p, gid, probs RLX_GROUP_IDS_ARGS);
    // The group's partials, then its count: one acquire-release add after
    // the barrier (the prelude says why that orders every thread's writes),
    // and the group that counts last reads the others' partials after the
    // second barrier.
    rlx_barrier();
    if (rlx_local_id.x == 0u) last[0] = rlx_device_atomic_add_acq_rel(count + row, 1u) == p->splits - 1u ? 1u : 0u;
    rlx_barrier();
    if (last[0] == 0u) return;   // uniform in the group
    rlx_att_merge_row<T>(part, out, p, row, used, scratch, weight, l_of RLX_GROUP_IDS_ARGS);
    if (rlx_local_id.x == 0u) count[row] = 0u;   // every split has counted: nobody reads it again this run
}
RLX_INSTANTIATE(attention_split_merge, float, attention_split_merge_f32)
RLX_INSTANTIATE(attention_split_merge, half, attention_split_merge_f16)
#endif
RLX_INSTANTIATE(attention_split, float, attention_split_f32)
RLX_INSTANTIATE(attention_split, half, attention_split_f16)
RLX_INSTANTIATE(attention_merge, float, attention_merge_f32)
RLX_INSTANTIATE(attention_merge, half, attention_merge_f16)

// ---- grouped-query split-K attention (decoding on the CPU) -----------------
// The kernels above give a group to one query row, so the query heads that
// share a KV head (Gemma 3 270M: all 4) each read every K and V row again.
// attention_split_gqa gives a group to one KV head's `group` query heads
// (rows kv_row * group + hh, kv_row = (b * Tq + i) * Hkv + kvh) for one chunk
// of keys (gid = kv_row * splits + split): each K and V row is loaded once
// and dotted with up to RLX_ATT_GQA_HEADS queries (blocks of 8, 4, 2, 1
// heads, so a larger group re-reads the chunk from cache, not memory).
// The chunks cut the keys the row can see, found at run time (the causal /
// window range inside the active length), into `splits` equal parts: a
// sliding-window layer's 512 keys are spread over every split as evenly as
// a global layer's 1800. It writes attention_split's partials (per query
// row, same layout), which attention_merge combines; the same semantics.
// Made for one-thread groups (the CPU; the lowering picks it there only);
// written for any group size (barriers, thread-strided loops), but it has
// not run on a GPU.
#define RLX_ATT_GQA_HEADS 8u    // query heads a pass takes
#define RLX_ATT_GQA_WIDTH 32u   // P @ V output features a step (two AVX-512 vectors)

// The keys [lo, hi) a query at qpos sees among `active` keys: causal ends
// them at qpos, a window starts them at qpos - window + 1.
struct rlx_att_range {
    uint lo, hi;
};

RLX_INLINE rlx_att_range rlx_att_live(RLX_CONSTANT AttentionParams *p, int qpos, uint active) {
    int lo = 0, hi = (int)active;
    if ((p->flags & RLX_ATT_CAUSAL) != 0u && qpos + 1 < hi) hi = qpos + 1;
    if (p->window > 0u && qpos - (int)p->window + 1 > lo) lo = qpos - (int)p->window + 1;
    rlx_att_range r;
    r.lo = (uint)lo;
    r.hi = hi > lo ? (uint)hi : (uint)lo;
    return r;
}

// A kept key's logit: scaled dot, softcap, plus the additive mask.
RLX_INLINE float rlx_att_logit(float dot, RLX_CONSTANT AttentionParams *p, float mask) {
    float s = dot * p->scale;
    if (p->softcap > 0.0f) s = p->softcap * rlx_tanh(s / p->softcap);
    return (p->flags & RLX_ATT_MASK) != 0u ? s + mask : s;
}

template <uint NH, uint NK>
struct rlx_att_gqa_dots {
    float v[NH][NK];
};

// NH queries (q_sh apart) dotted with NK keys (k_st apart): each K element
// is loaded once for all NH queries; NH * NK independent chains.
template <typename T, uint NH, uint NK>
RLX_INLINE rlx_att_gqa_dots<NH, NK> rlx_att_gqa_dot(RLX_DEVICE const T *q, uint64_t q_sh, RLX_DEVICE const T *k,
                                                    uint64_t k_st, uint D) {
    rlx_att_gqa_dots<NH, NK> r;
    for (uint h = 0; h < NH; ++h)
        for (uint u = 0; u < NK; ++u) r.v[h][u] = 0.0f;
    for (uint d = 0; d < D; ++d) {
        float kd[NK];
        for (uint u = 0; u < NK; ++u) kd[u] = rlx_to_float(k[(uint64_t)u * k_st + d]);
        for (uint h = 0; h < NH; ++h) {
            const float qd = rlx_to_float(q[(uint64_t)h * q_sh + d]);
            for (uint u = 0; u < NK; ++u) r.v[h][u] += qd * kd[u];
        }
    }
    return r;
}

// One pass of NH query heads (h0 ..) over the chunk's n keys from j0:
// logits into probs (a row of `stride` per head), their max and
// probabilities exp(s - m), sum l, and the unnormalized P @ V into the
// partials of each head's query row. Group-wide: it takes the thread ids.
template <typename T, uint NH>
RLX_INLINE void rlx_att_gqa_pass(RLX_CONSTANT AttentionParams *p, RLX_DEVICE const T *q, RLX_DEVICE const T *k,
                                 RLX_DEVICE const T *v, RLX_DEVICE const T *mask, RLX_DEVICE const int *length,
                                 RLX_DEVICE float *part, RLX_GROUP_MEM float *probs, uint row0, uint split, uint j0,
                                 uint n, uint tid, uint threads) {
    const uint Tk = rlx_att_active(p, length), stride = p->keys_per_split, Dv = p->Dv, splits = p->splits;
    const rlx_att_row<T> at = rlx_att_row_of(p, row0, q, k, v, mask, Tk);   // head h0: K, V and mask rows
    const uint64_t q_sh = p->q_sh, m_sh = p->m_sh, k_st = p->k_st, v_st = p->v_st;
    // Logits, NK keys a step (NH * NK accumulators stay in registers).
    const uint NK = NH >= 8u ? 2u : 4u;
    const uint blocks = (n + NK - 1u) / NK;
    for (uint b = tid; b < blocks; b += threads) {
        const uint jj = b * NK;
        RLX_DEVICE const T *kr = at.k + (uint64_t)(j0 + jj) * k_st;
        float dots[NH][4];
        if (jj + NK <= n) {
            const rlx_att_gqa_dots<NH, NK> r = rlx_att_gqa_dot<T, NH, NK>(at.q, q_sh, kr, k_st, p->D);
            for (uint h = 0; h < NH; ++h)
                for (uint u = 0; u < NK; ++u) dots[h][u] = r.v[h][u];
        } else {
            for (uint u = 0; jj + u < n; ++u) {
                const rlx_att_gqa_dots<NH, 1> r = rlx_att_gqa_dot<T, NH, 1>(at.q, q_sh, kr + (uint64_t)u * k_st, k_st,
                                                                            p->D);
                for (uint h = 0; h < NH; ++h) dots[h][u] = r.v[h][0];
            }
        }
        for (uint u = 0; u < NK && jj + u < n; ++u) {
            const uint64_t j = j0 + jj + u;
            for (uint h = 0; h < NH; ++h) {
                const float mv = (p->flags & RLX_ATT_MASK) != 0u ? rlx_to_float(at.mask[h * m_sh + j * p->m_sk]) : 0.0f;
                probs[h * stride + jj + u] = rlx_att_logit(dots[h][u], p, mv);
            }
        }
    }
    rlx_barrier();
    float m[NH], l[NH];
    for (uint h = 0; h < NH; ++h) {   // every thread, the same order
        m[h] = -RLX_INFINITY;
        for (uint jj = 0; jj < n; ++jj) m[h] = rlx_maximum(m[h], probs[h * stride + jj]);   // NaN: the row turns NaN
    }
    rlx_barrier();                    // all have read the logits before they turn into probabilities
    for (uint jj = tid; jj < n; jj += threads) {
        for (uint h = 0; h < NH; ++h) {
            const float s = probs[h * stride + jj];
            probs[h * stride + jj] = m[h] == -RLX_INFINITY ? 0.0f : rlx_exp(s - m[h]);
        }
    }
    rlx_barrier();
    for (uint h = 0; h < NH; ++h) {
        l[h] = 0.0f;
        for (uint jj = 0; jj < n; ++jj) l[h] += probs[h * stride + jj];
    }
    // P @ V: each step loads a V row's RLX_ATT_GQA_WIDTH features once for
    // the NH heads (NH * WIDTH accumulators); p = 0 keys add nothing, by a
    // select, so a non-finite V there cannot leak in.
    const uint64_t head_part = (uint64_t)splits * Dv;
    RLX_DEVICE float *acc_out = part + ((uint64_t)row0 * splits + split) * Dv;
    const uint W = RLX_ATT_GQA_WIDTH, steps = (Dv + W - 1u) / W;
    for (uint c = tid; c < steps; c += threads) {
        const uint d0 = c * W, w = Dv - d0 < W ? Dv - d0 : W;
        RLX_DEVICE const T *vr = at.v + (uint64_t)j0 * v_st + d0;
        float acc[NH][RLX_ATT_GQA_WIDTH];
        for (uint h = 0; h < NH; ++h)
            for (uint e = 0; e < W; ++e) acc[h][e] = 0.0f;
        if (w == W) {
            for (uint jj = 0; jj < n; ++jj, vr += v_st) {
                float vv[RLX_ATT_GQA_WIDTH];
                for (uint e = 0; e < W; ++e) vv[e] = rlx_to_float(vr[e]);
                for (uint h = 0; h < NH; ++h) {
                    const float pj = probs[h * stride + jj];
                    for (uint e = 0; e < W; ++e) acc[h][e] += pj != 0.0f ? pj * vv[e] : 0.0f;
                }
            }
        } else {
            for (uint jj = 0; jj < n; ++jj, vr += v_st) {
                for (uint h = 0; h < NH; ++h) {
                    const float pj = probs[h * stride + jj];
                    if (pj == 0.0f) continue;
                    for (uint e = 0; e < w; ++e) acc[h][e] += pj * rlx_to_float(vr[e]);
                }
            }
        }
        for (uint h = 0; h < NH; ++h)
            for (uint e = 0; e < w; ++e) acc_out[h * head_part + d0 + e] = acc[h][e];
    }
    if (tid == 0u) {
        RLX_DEVICE float *ml = part + (uint64_t)p->rows * splits * Dv + ((uint64_t)row0 * splits + split) * 2u;
        for (uint h = 0; h < NH; ++h) {
            ml[h * splits * 2u] = m[h];
            ml[h * splits * 2u + 1u] = l[h];
        }
    }
    rlx_barrier();                    // the next pass reuses probs
}

template <typename T>
RLX_KERNEL attention_split_gqa(RLX_BUF(RLX_DEVICE const T *, q, 0), RLX_BUF(RLX_DEVICE const T *, k, 1),
                               RLX_BUF(RLX_DEVICE const T *, v, 2), RLX_BUF(RLX_DEVICE const T *, mask, 3),
                               RLX_BUF(RLX_DEVICE const int *, length, 4), RLX_BUF(RLX_DEVICE float *, part, 5),
                               RLX_PARAMS(AttentionParams, p, 6) RLX_IDS) {
    RLX_SHARED(float, probs, RLX_ATT_GQA_HEADS * RLX_ATT_SPLIT_KEYS);
    const uint splits = p->splits, group = p->group;
    const uint gid = rlx_group_id.x, kv_row = gid / splits, split = gid % splits;
    const uint row0 = kv_row * group;   // the query row of the KV head's first query head
    if (row0 >= p->rows) return;
    const uint Tk = rlx_att_active(p, length);
    const rlx_att_range live = rlx_att_live(p, (int)((row0 / p->Hq) % p->Tq) + (int)Tk - (int)p->Tq, Tk);
    // Equal chunks of the live keys, a multiple of 4 keys, at most
    // keys_per_split (splits * keys_per_split >= Tk >= the live keys).
    uint chunk = (live.hi - live.lo + splits - 1u) / splits;
    chunk = (chunk + 3u) & ~3u;
    chunk = chunk < p->keys_per_split ? chunk : p->keys_per_split;
    const uint j0 = live.lo + split * chunk;
    const uint n = j0 >= live.hi ? 0u : (live.hi - j0 < chunk ? live.hi - j0 : chunk);
    if (n == 0u) {   // no key here (uniform in the group): empty splits the merge skips
        RLX_DEVICE float *ml = part + (uint64_t)p->rows * splits * p->Dv + ((uint64_t)row0 * splits + split) * 2u;
        RLX_FOR_GROUP(h, group) {
            ml[h * splits * 2u] = -RLX_INFINITY;
            ml[h * splits * 2u + 1u] = 0.0f;
        }
        return;
    }
    const uint tid = rlx_local_id.x, threads = rlx_group_size.x;
    uint h0 = 0;
    for (; h0 + 8u <= group; h0 += 8u)
        rlx_att_gqa_pass<T, 8>(p, q, k, v, mask, length, part, probs, row0 + h0, split, j0, n, tid, threads);
    if (group - h0 >= 4u) {
        rlx_att_gqa_pass<T, 4>(p, q, k, v, mask, length, part, probs, row0 + h0, split, j0, n, tid, threads);
        h0 += 4u;
    }
    if (group - h0 >= 2u) {
        rlx_att_gqa_pass<T, 2>(p, q, k, v, mask, length, part, probs, row0 + h0, split, j0, n, tid, threads);
        h0 += 2u;
    }
    if (group - h0 >= 1u) rlx_att_gqa_pass<T, 1>(p, q, k, v, mask, length, part, probs, row0 + h0, split, j0, n, tid, threads);
}
RLX_INSTANTIATE(attention_split_gqa, float, attention_split_gqa_f32)
RLX_INSTANTIATE(attention_split_gqa, half, attention_split_gqa_f16)
