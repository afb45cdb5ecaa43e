// The small-M kernel's loops (csrc/host_small_m.h), written once and included
// once per instruction set inside its namespace, after that namespace has
// defined RLX_SM_TARGET, the vector type `vec` of W floats, kTileCols (columns
// of C per tile, 1..4: 4 rows x kTileCols accumulators plus kTileCols B
// vectors and one A vector must fit the registers) and vzero, load_a,
// load_a_tail, load_b, load_b_tail (f32, f16 and bf16 B), fma, reduce4 and
// half_to_float / float_to_half (f16 C).
// No include guard: it is meant to be included more than once.

// C element store: f32, or f16 (round to nearest even) for f16 gemms.
RLX_SM_TARGET static inline void store_c(float *c, float v, float beta) { *c = beta == 0.0f ? v : v + beta * *c; }
RLX_SM_TARGET static inline void store_c(uint16_t *c, float v, float beta) {
    if (beta != 0.0f) v += beta * half_to_float(*c);
    *c = float_to_half(v);
}

// MI rows of A (1..4, f32) against NJ rows of B (1..4): an MI x NJ tile of C.
template <int MI, int NJ, typename TB, typename TC>
RLX_SM_TARGET static inline void tile(int64_t k, float alpha, const float *const *a, const TB *const *b, float beta,
                        TC *c, int64_t ldc, int64_t pf_stride) {
    vec acc[MI][NJ];
    for (int i = 0; i < MI; ++i)
        for (int j = 0; j < NJ; ++j) acc[i][j] = vzero();
    int64_t p = 0;
    for (; p + W <= k; p += W) {
        vec bv[NJ];
        if (pf_stride)  // (a prefetch past the end of B is harmless: it never faults)
            for (int j = 0; j < NJ; ++j) __builtin_prefetch(b[j] + pf_stride + p, 0, 2);   // L2 (x86: prefetcht1)
        for (int j = 0; j < NJ; ++j) bv[j] = load_b(b[j] + p);
        for (int i = 0; i < MI; ++i) {
            const vec av = load_a(a[i] + p);
            for (int j = 0; j < NJ; ++j) acc[i][j] = fma(av, bv[j], acc[i][j]);
        }
    }
    if (p < k) {  // the tail through masked (or zero-padded) loads: no scalar loop
        const int n = (int)(k - p);
        vec bv[NJ];
        for (int j = 0; j < NJ; ++j) bv[j] = load_b_tail(b[j] + p, n);
        for (int i = 0; i < MI; ++i) {
            const vec av = load_a_tail(a[i] + p, n);
            for (int j = 0; j < NJ; ++j) acc[i][j] = fma(av, bv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < MI; ++i) {
        float sum[4];
        const vec z = vzero();
        reduce4(acc[i][0], NJ > 1 ? acc[i][NJ > 1 ? 1 : 0] : z, NJ > 2 ? acc[i][NJ > 2 ? 2 : 0] : z,
                NJ > 3 ? acc[i][NJ > 3 ? 3 : 0] : z, sum);
        for (int j = 0; j < NJ; ++j)   // beta == 0 never reads C (BLAS semantics)
            store_c(c + i * ldc + j, alpha * sum[j], beta);
    }
}

template <int NJ, typename TB, typename TC>
RLX_SM_TARGET static inline void column_block(int64_t m, int64_t k, float alpha, const float *A, int64_t lda,
                                const TB *const *b, int64_t ldb, float beta, TC *C, int64_t ldc) {
    for (int64_t i0 = 0; i0 < m; i0 += 4) {
        const int64_t pf = i0 == 0 ? kPrefetchRows * ldb : 0;
        const float *a[4];
        const int64_t mi = m - i0 < 4 ? m - i0 : 4;
        for (int64_t i = 0; i < mi; ++i) a[i] = A + (i0 + i) * lda;
        TC *c = C + i0 * ldc;
        switch (mi) {
            case 1: tile<1, NJ>(k, alpha, a, b, beta, c, ldc, pf); break;
            case 2: tile<2, NJ>(k, alpha, a, b, beta, c, ldc, pf); break;
            case 3: tile<3, NJ>(k, alpha, a, b, beta, c, ldc, pf); break;
            default: tile<4, NJ>(k, alpha, a, b, beta, c, ldc, pf); break;
        }
    }
}

// Columns [n0, n1) of C. A is f32 (an f16 gemm widens its few rows first);
// B and C are f32 or f16 (uint16_t bits).
template <typename TB, typename TC>
RLX_SM_TARGET static inline void columns(int64_t m, int64_t n0, int64_t n1, int64_t k, float alpha, const float *A,
                                              int64_t lda,
                           const TB *B, int64_t ldb, float beta, TC *C, int64_t ldc) {
    for (int64_t j0 = n0; j0 < n1; j0 += kTileCols) {
        const int64_t nj = n1 - j0 < kTileCols ? n1 - j0 : kTileCols;
        const TB *b[4];
        for (int64_t j = 0; j < nj; ++j) b[j] = B + (j0 + j) * ldb;
        switch (nj) {
            case 1: column_block<1>(m, k, alpha, A, lda, b, ldb, beta, C + j0, ldc); break;
            case 2: column_block<2>(m, k, alpha, A, lda, b, ldb, beta, C + j0, ldc); break;
            case 3: column_block<3>(m, k, alpha, A, lda, b, ldb, beta, C + j0, ldc); break;
            default: column_block<kTileCols>(m, k, alpha, A, lda, b, ldb, beta, C + j0, ldc); break;
        }
    }
}
