// The small-M kernel's packed-panel form for f32 (csrc/host_small_m.h),
// written once and included once per x86 instruction set inside its
// namespace, after host_small_m_body.h and after that namespace has defined
// kPackRows (rows of A a tile takes), vbroadcast (one float into every
// lane), store_lanes / load_lanes (the first n lanes of a vector) and
// transpose_block (a W x W block of floats transposed in registers).
// No include guard: it is meant to be included more than once.
//
// Why a second form: the dot form (host_small_m_body.h) keeps a 4 x 4 tile
// of C in vector accumulators along k and reduces each across its lanes at
// the end, reading 4 vectors of A and 4 of B per 16 FMAs, and re-reads A's
// rows from L2 for every 4 columns. It ran 128-row products at 100-118
// GFLOP/s on one core whose FMA peak is 214 (benchmarks/README.md, "CPU:
// the packed small-M form"). Here 2 x W columns of B are packed once per
// call, a slice at a time, into a panel laid out k-major (the W-wide
// vectors of one k side by side), and a tile of kPackRows rows of A by
// those columns keeps 2 x kPackRows accumulators: per k it loads 2 vectors
// of the panel and broadcasts kPackRows floats of A, and nothing is
// reduced across lanes. The panel is packed and used in slices of kPackK
// values of k, so the slice every row tile re-reads stays in L1.

constexpr int64_t kPackCols = 2 * W;   // columns of B in one panel
constexpr int64_t kPackK = 256;        // k values of a panel slice: kPackCols x 256 floats, 32 KiB at W = 16

// Columns [j0, j0 + cols) of B (rows of the row-major weights, cols <=
// kPackCols) into panel[p * kPackCols + j]; columns past cols are zero so a
// tile's full vectors never read stale data. W whole rows go through
// transpose_block, W values of k at a time: element by element the packing
// took a third of the time of a 128-row product (benchmarks/README.md).
RLX_SM_TARGET static inline void pack_panel(const float *B, int64_t ldb, int64_t j0, int64_t cols, int64_t k,
                                            float *panel) {
    const int64_t k_full = k / W * W;
    for (int64_t h = 0; h < kPackCols; h += W) {
        if (h + W <= cols) {   // W whole rows of B: W x W blocks transposed in registers
            for (int64_t p0 = 0; p0 < k_full; p0 += W)
                transpose_block(B + (j0 + h) * ldb + p0, ldb, panel + p0 * kPackCols + h, kPackCols);
        }
        const int64_t p_from = h + W <= cols ? k_full : 0;
        for (int64_t j = h; j < h + W; ++j) {
            if (j < cols) {
                const float *b = B + (j0 + j) * ldb;
                for (int64_t p = p_from; p < k; ++p) panel[p * kPackCols + j] = b[p];
            } else {
                for (int64_t p = p_from; p < k; ++p) panel[p * kPackCols + j] = 0.0f;
            }
        }
    }
}

// R rows of A (its columns [0, k) of this slice) by one panel slice into the
// R x cols block of C: C = alpha * sum + beta * C (beta == 0 never reads C).
template <int R>
RLX_SM_TARGET static inline void packed_tile(int64_t k, float alpha, const float *A, int64_t lda,
                                             const float *panel, float beta, float *C, int64_t ldc, int64_t cols) {
    vec acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = vzero();
    for (int64_t p = 0; p < k; ++p) {
        const vec b0 = load_b(panel + p * kPackCols), b1 = load_b(panel + p * kPackCols + W);
        for (int r = 0; r < R; ++r) {
            const vec a = vbroadcast(A[r * lda + p]);
            acc[r][0] = fma(a, b0, acc[r][0]);
            acc[r][1] = fma(a, b1, acc[r][1]);
        }
    }
    const vec va = vbroadcast(alpha), vb = vbroadcast(beta);
    const int n0 = cols < W ? (int)cols : (int)W, n1 = cols > W ? (int)(cols - W) : 0;
    for (int r = 0; r < R; ++r) {
        float *c = C + r * ldc;
        vec v0 = fma(va, acc[r][0], vzero()), v1 = fma(va, acc[r][1], vzero());
        if (beta != 0.0f) {
            v0 = fma(vb, load_lanes(c, n0), v0);
            if (n1) v1 = fma(vb, load_lanes(c + W, n1), v1);
        }
        store_lanes(c, v0, n0);
        if (n1) store_lanes(c + W, v1, n1);
    }
}

// Columns [n0, n1) of C = alpha * A . B^T + beta * C, all f32. A panel
// slice is packed, then every row tile reads it: 32 KiB on the stack.
RLX_SM_TARGET static inline void packed_columns(int64_t m, int64_t n0, int64_t n1, int64_t k, float alpha,
                                                const float *A, int64_t lda, const float *B, int64_t ldb,
                                                float beta, float *C, int64_t ldc) {
    alignas(64) float panel[kPackCols * kPackK];
    for (int64_t j0 = n0; j0 < n1; j0 += kPackCols) {
        const int64_t cols = n1 - j0 < kPackCols ? n1 - j0 : kPackCols;
        for (int64_t p0 = 0; p0 < k; p0 += kPackK) {
            const int64_t kl = k - p0 < kPackK ? k - p0 : kPackK;
            pack_panel(B + p0, ldb, j0, cols, kl, panel);
            const float slice_beta = p0 == 0 ? beta : 1.0f;   // later slices add to the first's result
            for (int64_t i0 = 0; i0 < m; i0 += kPackRows) {
                const int64_t rows = m - i0 < kPackRows ? m - i0 : kPackRows;
                const float *a = A + i0 * lda + p0;
                float *c = C + i0 * ldc + j0;
                switch (rows) {   // kPackRows <= 8
#define RLX_PACKED_ROWS(R) \
    case R: packed_tile<R>(kl, alpha, a, lda, panel, slice_beta, c, ldc, cols); break;
                    RLX_PACKED_ROWS(1) RLX_PACKED_ROWS(2) RLX_PACKED_ROWS(3) RLX_PACKED_ROWS(4) RLX_PACKED_ROWS(5)
                    RLX_PACKED_ROWS(6) RLX_PACKED_ROWS(7)
#undef RLX_PACKED_ROWS
                    default: packed_tile<kPackRows>(kl, alpha, a, lda, panel, slice_beta, c, ldc, cols); break;
                }
            }
        }
    }
}
