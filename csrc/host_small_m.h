/*
 * Host shim: C[m, n] = alpha * A[m, k] . B[n, k]^T + beta * C for few rows
 * (m <= 16) against row-major weights, the shape of decode steps and short
 * sentences. The cost there is streaming B (the weights) from memory once;
 * a BLAS packs B on every call first (read, write a copy, read it again).
 * This kernel reads 4 rows of B straight from memory and applies them to
 * every row of A (A stays in L1), 4 rows of A at a time with 16 AVX-512
 * accumulators. The functions carry their own AVX-512 target attributes
 * and run where the CPU has AVX-512 (rlx_cpu::has_avx512, asked at device
 * open), whatever the build targets; elsewhere the shim keeps the BLAS path.
 */
#ifndef RLX_HOST_SMALL_M_H
#define RLX_HOST_SMALL_M_H

#include <stdint.h>

#include "host_cpu.h"

#if defined(RLX_HAVE_X86_TARGETS)
#include <immintrin.h>
#define RLX_HAVE_SMALL_M 1
#define RLX_SMALL_M_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))

// GCC 12's _mm512_reduce_add_ps initializes its "undefined" vectors from
// themselves, which -Wuninitialized reports once inlined (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx_small_m {

constexpr int64_t kMaxRows = 16;
// Software prefetch of B, as host_bf16.h's small-M kernel: the same offset
// kPrefetchRows rows ahead (two 4-row blocks), into L2. The weights stream
// from L3 or memory on every run; 1 KiB ahead within the rows into L1 left
// too little lead. Only the first block of A's rows prefetches (later
// blocks read the same B rows from L1).
constexpr int64_t kPrefetchRows = 8;

// 16 elements of B as f32: f32 directly, f16 (raw bits) through vcvtph2ps,
// so f16 weights stream at half the bytes.
RLX_SMALL_M_TARGET static inline __m512 load_b(const float *p) { return _mm512_loadu_ps(p); }
RLX_SMALL_M_TARGET static inline __m512 load_b(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
RLX_SMALL_M_TARGET static inline __m512 load_b_masked(const float *p, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, p);
}
RLX_SMALL_M_TARGET static inline __m512 load_b_masked(const uint16_t *p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

// C element store: f32, or f16 (round to nearest even) for f16 gemms.
RLX_SMALL_M_TARGET static inline void store_c(float *c, float v, float beta) {
    *c = beta == 0.0f ? v : v + beta * *c;
}
RLX_SMALL_M_TARGET static inline void store_c(uint16_t *c, float v, float beta) {
    if (beta != 0.0f) v += beta * _cvtsh_ss(*c);
    *c = _cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT);
}

// MI rows of A (1..4, f32) against NJ rows of B (1..4): an MI x NJ tile of C.
template <int MI, int NJ, typename TB, typename TC>
RLX_SMALL_M_TARGET static inline void tile(int64_t k, float alpha, const float *const *a, const TB *const *b, float beta,
                        TC *c, int64_t ldc, int64_t pf_stride) {
    __m512 acc[MI][NJ];
    for (int i = 0; i < MI; ++i)
        for (int j = 0; j < NJ; ++j) acc[i][j] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 16 <= k; p += 16) {
        __m512 bv[NJ];
        if (pf_stride)  // (a prefetch past the end of B is harmless: it never faults)
            for (int j = 0; j < NJ; ++j) _mm_prefetch((const char *)(b[j] + pf_stride + p), _MM_HINT_T1);
        for (int j = 0; j < NJ; ++j) bv[j] = load_b(b[j] + p);
        for (int i = 0; i < MI; ++i) {
            const __m512 av = _mm512_loadu_ps(a[i] + p);
            for (int j = 0; j < NJ; ++j) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
        }
    }
    if (p < k) {  // masked tail: no scalar loop
        const __mmask16 m = (__mmask16)((1u << (k - p)) - 1u);
        __m512 bv[NJ];
        for (int j = 0; j < NJ; ++j) bv[j] = load_b_masked(b[j] + p, m);
        for (int i = 0; i < MI; ++i) {
            const __m512 av = _mm512_maskz_loadu_ps(m, a[i] + p);
            for (int j = 0; j < NJ; ++j) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < MI; ++i)
        for (int j = 0; j < NJ; ++j)   // beta == 0 never reads C (BLAS semantics)
            store_c(c + i * ldc + j, alpha * _mm512_reduce_add_ps(acc[i][j]), beta);
}

template <int NJ, typename TB, typename TC>
RLX_SMALL_M_TARGET static inline void column_block(int64_t m, int64_t k, float alpha, const float *A, int64_t lda,
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
RLX_SMALL_M_TARGET static inline void columns(int64_t m, int64_t n0, int64_t n1, int64_t k, float alpha, const float *A,
                                              int64_t lda,
                           const TB *B, int64_t ldb, float beta, TC *C, int64_t ldc) {
    for (int64_t j0 = n0; j0 < n1; j0 += 4) {
        const int64_t nj = n1 - j0 < 4 ? n1 - j0 : 4;
        const TB *b[4];
        for (int64_t j = 0; j < nj; ++j) b[j] = B + (j0 + j) * ldb;
        switch (nj) {
            case 1: column_block<1>(m, k, alpha, A, lda, b, ldb, beta, C + j0, ldc); break;
            case 2: column_block<2>(m, k, alpha, A, lda, b, ldb, beta, C + j0, ldc); break;
            case 3: column_block<3>(m, k, alpha, A, lda, b, ldb, beta, C + j0, ldc); break;
            default: column_block<4>(m, k, alpha, A, lda, b, ldb, beta, C + j0, ldc); break;
        }
    }
}

}  // namespace rlx_small_m
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
#endif
