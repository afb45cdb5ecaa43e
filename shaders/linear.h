// Fused matmul epilogues.
//
// bias_act: y = act(y + bias) in place, after the shim's gemm (large M);
// one threadgroup per row.
// matmul_rows: out[m, n] = act(sum_k a[m, k] * b(k, n) + bias[n]) with one
// threadgroup per output column and its threads splitting K: the path for
// small M (decode-style mat-vec), where a BLAS / MPS / cuBLAS call costs
// more than it saves. b is [N, K] (transpose_b, rows contiguous: the fast
// case, how PyTorch and GGUF store weights) or [K, N].
struct LinearParams {
    uint m, n, k;
    uint a_offset;
    uint transpose_b, has_bias, act, pad0;
};

template <typename T>
RLX_KERNEL bias_act(RLX_BUF(RLX_DEVICE T *, y, 0), RLX_BUF(RLX_DEVICE const T *, bias, 1),
                    RLX_PARAMS(LinearParams, p, 2) RLX_IDS) {
    const uint n = p->n, m = p->m, has_bias = p->has_bias, act = p->act;  // before the first index read
    // Branch-free loop bodies for the CPU vectorizer; without a bias the
    // binding is y itself and is never read.
    // One group per row, its threads over the columns: contiguous, and the
    // bias index needs no modulo (which would stop the CPU vectorizer).
    const uint row = rlx_group_id.x;
    if (row >= m) return;
    RLX_DEVICE T *yr = y + (uint64_t)row * n;
#define RLX_BIAS_ACT_LOOP(f)                                                        \
    RLX_FOR_GROUP(c, n) { yr[c] = rlx_from_float<T>(f(rlx_to_float(yr[c]) + rlx_to_float(bias[c]))); }
#define RLX_ACT_LOOP(f) RLX_FOR_GROUP(c, n) { yr[c] = rlx_from_float<T>(f(rlx_to_float(yr[c]))); }
    if (has_bias) {
        RLX_SWITCH_ACTIVATION(act, RLX_BIAS_ACT_LOOP)
    } else {
        RLX_SWITCH_ACTIVATION(act, RLX_ACT_LOOP)
    }
#undef RLX_BIAS_ACT_LOOP
#undef RLX_ACT_LOOP
}
RLX_INSTANTIATE(bias_act, float, bias_act_f32)
RLX_INSTANTIATE(bias_act, half, bias_act_f16)

// One group per output column n: it reads row n of W once and applies it to
// eight rows of A at a time (M is small here, so A stays in cache): the
// weights stream once, the bound for decode-style and short-batch matmuls,
// and the eight independent accumulators keep the FMA pipes busy instead of
// waiting on one dependency chain.
#ifdef RLX_TARGET_CPU
#define RLX_ROWS_PER_PASS 16   // 32 vector registers: 16 accumulators + loads
#else
#define RLX_ROWS_PER_PASS 8
#endif
template <typename T>
RLX_KERNEL matmul_rows(RLX_BUF(RLX_DEVICE const T *, a, 0), RLX_BUF(RLX_DEVICE const T *, b, 1),
                       RLX_BUF(RLX_DEVICE const T *, bias, 2), RLX_BUF(RLX_DEVICE T *, out, 3),
                       RLX_PARAMS(LinearParams, p, 4) RLX_IDS) {
    RLX_SHARED(float, scratch, 32);
    const uint col = rlx_group_id.y * rlx_num_groups.x + rlx_group_id.x;
    if (col >= p->n) return;
    const uint k = p->k, n = p->n, m = p->m;
    const float bias_v = p->has_bias ? rlx_to_float(bias[col]) : 0.0f;
    RLX_DEVICE const T *a0 = a + p->a_offset;
    if (m == 1 && p->transpose_b) {   // mat-vec: one dot product, no wasted rows
        RLX_DEVICE const T *br = b + (uint64_t)col * k;
        float acc = 0.0f;
        RLX_FOR_GROUP(i, k) { acc += rlx_to_float(a0[i]) * rlx_to_float(br[i]); }
        acc = rlx_group_sum(acc, scratch);
        if (rlx_local_id.x == 0) out[col] = rlx_from_float<T>(rlx_activation(p->act, acc + bias_v));
        return;
    }
    for (uint m0 = 0; m0 < m; m0 += RLX_ROWS_PER_PASS) {
        // Rows past the end repeat the last row (harmless reads, never written),
        // so the inner loop has a fixed trip count and no branch.
        RLX_DEVICE const T *ar[RLX_ROWS_PER_PASS];
        float acc[RLX_ROWS_PER_PASS];
        for (uint r = 0; r < RLX_ROWS_PER_PASS; ++r) {
            ar[r] = a0 + (uint64_t)(m0 + r < m ? m0 + r : m - 1) * k;
            acc[r] = 0.0f;
        }
        if (p->transpose_b) {
            RLX_DEVICE const T *br = b + (uint64_t)col * k;
            RLX_FOR_GROUP(i, k) {
                const float bv = rlx_to_float(br[i]);
                for (uint r = 0; r < RLX_ROWS_PER_PASS; ++r) acc[r] += rlx_to_float(ar[r][i]) * bv;
            }
        } else {
            RLX_FOR_GROUP(i, k) {
                const float bv = rlx_to_float(b[(uint64_t)i * n + col]);
                for (uint r = 0; r < RLX_ROWS_PER_PASS; ++r) acc[r] += rlx_to_float(ar[r][i]) * bv;
            }
        }
        for (uint r = 0; r < RLX_ROWS_PER_PASS && m0 + r < m; ++r) {
            const float v = rlx_group_sum(acc[r], scratch);
            if (rlx_local_id.x == 0) out[(uint64_t)(m0 + r) * n + col] = rlx_from_float<T>(rlx_activation(p->act, v + bias_v));
        }
    }
}
RLX_INSTANTIATE(matmul_rows, float, matmul_rows_f32)
RLX_INSTANTIATE(matmul_rows, half, matmul_rows_f16)
