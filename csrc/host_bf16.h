/*
 * Host shim: gemm with f32 A, bf16 B (the weights under precision="bf16")
 * and f32 C, accumulating in f32.
 *
 * Two kernels, both chosen at run time from the CPU's features (the build
 * needs no -march flag: every vector function carries its own target
 * attribute, and a compiler or CPU without them gets the portable path):
 *   - small M (few rows against row-major weights B[n, k], the decode and
 *     short-sentence shape): A's rows are rounded to bf16 once (m x k, tiny)
 *     and B streams from memory once, at half the bytes of f32 weights,
 *     through vdpbf16ps (32 products per instruction, f32 sums); the
 *     device's pool splits the columns.
 *   - any M: a blocked gemm. A is rounded to bf16 once per call, and per
 *     (k block, column block) B is packed into pairs of k ("VNNI" layout:
 *     for k pair p and column j the two bf16 B[2p, j], B[2p+1, j] form one
 *     32-bit lane), so one vdpbf16ps multiplies a broadcast pair of A by 16
 *     columns of B. The micro-kernel keeps an MR x 32 tile of C in 24
 *     registers; work is split over the pool in (row block, column block)
 *     tasks.
 * Level 0 (no AVX-512 BF16, another architecture, or RLX_HOST_BF16=0): up
 * to 16 rows the caller's small-M kernel (host_small_m.h) widens B in
 * registers; more rows widen B to f32 in memory and run the sgemm. Both
 * keep A in f32 (the bf16 kernels round A to bf16).
 */
#ifndef RLX_HOST_BF16_H
#define RLX_HOST_BF16_H

#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <vector>

namespace rlx_bf16 {

// ---- portable scalar conversions ------------------------------------------------
static inline float to_f32(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// Round to nearest even; NaN stays a (quiet) NaN.
static inline uint16_t from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// dst[i] = float(src[i]); the compiler vectorizes the shift.
static inline void widen(const uint16_t *src, float *dst, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) dst[i] = to_f32(src[i]);
}

}  // namespace rlx_bf16

// RLX_NO_BF16_KERNELS builds the portable path only (as on other architectures).
#if defined(__x86_64__) && !defined(RLX_NO_BF16_KERNELS) && \
    ((defined(__clang__) && __clang_major__ >= 9) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 10))
#define RLX_HAVE_BF16_KERNELS 1
#include <immintrin.h>

#include "host_cpu.h"

#define RLX_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))

// GCC 12's intrinsic headers initialize their "undefined" vectors from
// themselves, which -Wuninitialized reports once inlined here (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx_bf16 {

// 2: AVX-512 with BF16 (both kernels); 0: none (the caller's f32 path).
static inline int cpu_level() { return rlx_cpu::has_avx512_bf16() ? 2 : 0; }

typedef __m512bh bh512;

RLX_BF16_TARGET static inline bh512 as_bh(__m512i v) { return (bh512)v; }

// A rows (f32, lda) -> bf16 pairs, kp = ceil(k / 2) 32-bit words per row at
// stride ldp words; an odd k ends with a zero partner.
RLX_BF16_TARGET static inline void round_rows(int64_t r0, int64_t r1, int64_t k, const float *A, int64_t lda,
                                              uint32_t *out, int64_t ldp) {
    for (int64_t r = r0; r < r1; ++r) {
        const float *a = A + r * lda;
        uint16_t *o = (uint16_t *)(out + r * ldp);
        int64_t p = 0;
        for (; p + 32 <= k; p += 32) {
            const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + p + 16), _mm512_loadu_ps(a + p));
            _mm512_storeu_si512((void *)(o + p), (__m512i)v);
        }
        const int64_t kp2 = ((k + 1) / 2) * 2;   // bf16 elements incl. the zero partner
        if (p < kp2) {
            const int64_t left = k - p;           // 0..31 real elements
            const __mmask16 m0 = (__mmask16)(left >= 16 ? 0xffff : (1u << left) - 1u);
            const __mmask16 m1 = (__mmask16)(left <= 16 ? 0 : (1u << (left - 16)) - 1u);
            const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, a + p + 16),
                                                   _mm512_maskz_loadu_ps(m0, a + p));
            const int64_t outn = kp2 - p;         // even, <= 32
            const __mmask32 mo = outn >= 32 ? 0xffffffffu : (__mmask32)((1u << outn) - 1u);
            _mm512_mask_storeu_epi16((void *)(o + p), mo, (__m512i)v);
        }
    }
}

// ---- small M: stream B[n, k] (row-major bf16) once --------------------------------
namespace small {

constexpr int64_t kMaxRows = 16;
// Software prefetch of B: the same offset kPrefetchRows rows ahead (two
// 4-row blocks), into L2 (T1). The weights of a model (MiniLM: 21 MB) come
// from L3 or memory on every run; prefetching 2 KiB ahead within the rows
// into L1 (T0) left too little lead for that (the measurements: 12 or 16
// rows within noise of 8, 4 rows or T0 slower, L2-resident weights
// unchanged; benchmarks/README.md, "How the fast paths work"). Only the first row group prefetches (later groups
// read the same B rows from L1).
constexpr int64_t kPrefetchRows = 8;
// Rows per group: 6 x 4 accumulators plus 4 B vectors fit the 32
// registers; 3, 4, 5 and 6 measured within noise of each other at m = 9.
constexpr int kGroup = 6;

// Sums of 4 vectors: lane j of the result is the sum of v[j]'s 16 lanes.
RLX_BF16_TARGET static inline __m128 reduce4(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
    const __m256 a0 = _mm256_add_ps(_mm512_castps512_ps256(v0), _mm512_extractf32x8_ps(v0, 1));
    const __m256 a1 = _mm256_add_ps(_mm512_castps512_ps256(v1), _mm512_extractf32x8_ps(v1, 1));
    const __m256 a2 = _mm256_add_ps(_mm512_castps512_ps256(v2), _mm512_extractf32x8_ps(v2, 1));
    const __m256 a3 = _mm256_add_ps(_mm512_castps512_ps256(v3), _mm512_extractf32x8_ps(v3, 1));
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// MI rows of A (bf16 pairs, ldp words per row) against NJ (<= 4) rows of B:
// C[i, j0 + j] for i < MI, j < nj.
template <int MI>
RLX_BF16_TARGET static inline void tile(int64_t k, float alpha, const uint32_t *a, int64_t ldp,
                                        const uint16_t *const *b, int nj, float beta, float *c, int64_t ldc,
                                        const float *bias, int64_t pf_stride) {
    __m512 acc[MI][4];
    for (int i = 0; i < MI; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 32 <= k; p += 32) {
        bh512 bv[4];
        if (pf_stride)  // (a prefetch past the end of B is harmless: it never faults)
            for (int j = 0; j < 4; ++j) _mm_prefetch((const char *)(b[j] + pf_stride + p), _MM_HINT_T1);
        for (int j = 0; j < 4; ++j) bv[j] = as_bh(_mm512_loadu_si512((const void *)(b[j] + p)));
        for (int i = 0; i < MI; ++i) {
            const bh512 av = as_bh(_mm512_loadu_si512((const void *)(a + i * ldp + p / 2)));
            for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], av, bv[j]);
        }
    }
    if (p < k) {  // masked tail; A's rows are zero past k
        const __mmask32 m = (__mmask32)((1ull << (k - p)) - 1ull);
        bh512 bv[4];
        for (int j = 0; j < 4; ++j) bv[j] = as_bh(_mm512_maskz_loadu_epi16(m, (const void *)(b[j] + p)));
        const __mmask16 ma = (__mmask16)((1u << ((k - p + 1) / 2)) - 1u);
        for (int i = 0; i < MI; ++i) {
            const bh512 av = as_bh(_mm512_maskz_loadu_epi32(ma, (const void *)(a + i * ldp + p / 2)));
            for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], av, bv[j]);
        }
    }
    const __mmask8 mc = (__mmask8)((1u << nj) - 1u);
    const __m128 bv = bias ? _mm_maskz_loadu_ps(mc, bias) : _mm_setzero_ps();
    for (int i = 0; i < MI; ++i) {
        __m128 s = _mm_fmadd_ps(_mm_set1_ps(alpha), reduce4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]), bv);
        float *ci = c + i * ldc;
        if (beta != 0.0f)  // beta == 0 never reads C (BLAS semantics)
            s = _mm_fmadd_ps(_mm_set1_ps(beta), _mm_maskz_loadu_ps(mc, ci), s);
        _mm_mask_storeu_ps(ci, mc, s);
    }
}

template <int R>
RLX_BF16_TARGET static inline void tile_rows(int64_t rows, int64_t k, float alpha, const uint32_t *a, int64_t ldp,
                                             const uint16_t *const *b, int nj, float beta, float *c, int64_t ldc,
                                             const float *bias, int64_t pf_stride) {
    if (rows == R)
        tile<R>(k, alpha, a, ldp, b, nj, beta, c, ldc, bias, pf_stride);
    else if constexpr (R > 1)
        tile_rows<R - 1>(rows, k, alpha, a, ldp, b, nj, beta, c, ldc, bias, pf_stride);
}

// Columns [n0, n1) of C[m, n] = alpha * A . B^T + beta * C (+ bias[n] on
// every row when bias is not NULL), A already rounded (ap: m rows of ldp
// bf16 pairs, zero past k), B[n, k] at row stride ldb.
RLX_BF16_TARGET static inline void columns(int64_t m, int64_t n0, int64_t n1, int64_t k, float alpha,
                                           const uint32_t *ap, int64_t ldp, const uint16_t *B, int64_t ldb,
                                           float beta, float *C, int64_t ldc, const float *bias = nullptr) {
    // Row groups of at most kGroup, as even as possible (9 rows: 5 + 4, 16: 6 + 5 + 5).
    const int64_t groups = (m + kGroup - 1) / kGroup;
    for (int64_t j0 = n0; j0 < n1; j0 += 4) {
        const int nj = (int)std::min<int64_t>(4, n1 - j0);
        const uint16_t *b[4];
        for (int j = 0; j < 4; ++j) b[j] = B + (j0 + std::min(j, nj - 1)) * ldb;  // spare lanes repeat a row
        for (int64_t g = 0, i0 = 0; g < groups; ++g) {
            const int64_t i1 = m * (g + 1) / groups;
            tile_rows<kGroup>(i1 - i0, k, alpha, ap + i0 * ldp, ldp, b, nj, beta, C + i0 * ldc + j0, ldc,
                              bias ? bias + j0 : nullptr, g == 0 ? kPrefetchRows * ldb : 0);
            i0 = i1;
        }
    }
}

}  // namespace small

// ---- any M: packed, blocked gemm --------------------------------------------------
namespace big {

// 12 x 32 tiles with 256-pair k blocks were the fastest of the tile and
// block sizes tried on Zen 4 (6 x 64, 8 x 48, 14 x 32; 128- or 192-pair
// blocks), packing included (benchmarks/README.md, "How the fast paths work").
constexpr int NV = 2;               // 16-column vectors per micro tile
constexpr int NR = 16 * NV;         // columns per micro tile
constexpr int MR = 12;              // rows per micro tile (MR x NV accumulators, 24 registers)
constexpr int64_t KCP = 256;        // k pairs per block: a B micro panel is 32 KiB (L1)
constexpr int64_t MC = 384;         // rows per A block (MC x KCP x 4 B = 384 KiB, L2)

// Packs B pairs [p0, p0 + kcp) x columns [j0, j0 + nc) into panels of NR
// columns: dst[(jp * kcp + p) * NR + j] holds (B[2p, j], B[2p + 1, j]) as one
// 32-bit word, zero past k and past the last column.
RLX_BF16_TARGET static inline void pack_b(bool tb, const uint16_t *B, int64_t ldb, int64_t k, int64_t p0,
                                          int64_t kcp, int64_t j0, int64_t nc, uint32_t *dst) {
    const int64_t panels = (nc + NR - 1) / NR;
    if (!tb) {
        // B[k, n]: rows 2p and 2p + 1 interleave 16 columns at a time.
        for (int64_t jp = 0; jp < panels; ++jp)
            for (int64_t p = 0; p < kcp; ++p) {
                const int64_t r0 = 2 * (p0 + p), r1 = r0 + 1;
                uint32_t *d = dst + (jp * kcp + p) * NR;
                for (int v = 0; v < NV; ++v) {
                    const int64_t j = jp * NR + v * 16, left = nc - j;
                    const __mmask16 m = left >= 16 ? (__mmask16)0xffff
                                                   : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1u);
                    const __m256i lo = r0 < k ? _mm256_maskz_loadu_epi16(m, B + r0 * ldb + j0 + j) : _mm256_setzero_si256();
                    const __m256i hi = r1 < k ? _mm256_maskz_loadu_epi16(m, B + r1 * ldb + j0 + j) : _mm256_setzero_si256();
                    const __m512i w = _mm512_or_si512(_mm512_cvtepu16_epi32(lo),
                                                      _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
                    _mm512_storeu_si512((void *)(d + v * 16), w);
                }
            }
        return;
    }
    // B[n, k] (weights as stored): column j's pairs are consecutive words of
    // row j; 16 rows x 16 pairs transpose through registers.
    const int64_t kw = k / 2;  // whole pairs in a row; an odd k leaves one element
    for (int64_t jp = 0; jp < panels; ++jp) {
        for (int v = 0; v < NV; ++v) {
            const int64_t jb = jp * NR + v * 16;      // first column of these 16
            const int64_t rows = std::max<int64_t>(0, std::min<int64_t>(16, nc - jb));
            int64_t p = 0;
            if (rows == 16) {
                for (; p + 16 <= kcp && p0 + p + 16 <= kw; p += 16) {
                    __m512i r[16];
                    for (int j = 0; j < 16; ++j)
                        r[j] = _mm512_loadu_si512((const void *)(B + (j0 + jb + j) * ldb + 2 * (p0 + p)));
                    // 16 x 16 transpose of 32-bit words.
                    __m512i t[16];
                    for (int j = 0; j < 16; j += 2) {
                        t[j] = _mm512_unpacklo_epi32(r[j], r[j + 1]);
                        t[j + 1] = _mm512_unpackhi_epi32(r[j], r[j + 1]);
                    }
                    for (int j = 0; j < 16; j += 4) {
                        r[j] = _mm512_unpacklo_epi64(t[j], t[j + 2]);
                        r[j + 1] = _mm512_unpackhi_epi64(t[j], t[j + 2]);
                        r[j + 2] = _mm512_unpacklo_epi64(t[j + 1], t[j + 3]);
                        r[j + 3] = _mm512_unpackhi_epi64(t[j + 1], t[j + 3]);
                    }
                    // r[4q + s] now holds, per 128-bit lane L, pairs 4L + (0, 1, 2, 3) of rows:
                    // lanes are grouped by 4 rows; finish with 128-bit shuffles.
                    for (int q = 0; q < 4; q += 2)
                        for (int s = 0; s < 4; ++s) {
                            t[4 * q + s] = _mm512_shuffle_i32x4(r[4 * q + s], r[4 * (q + 1) + s], 0x88);
                            t[4 * (q + 1) + s] = _mm512_shuffle_i32x4(r[4 * q + s], r[4 * (q + 1) + s], 0xdd);
                        }
                    for (int s = 0; s < 4; ++s)
                        for (int q = 0; q < 2; ++q) {
                            r[4 * q + s] = _mm512_shuffle_i32x4(t[4 * q + s], t[4 * (q + 2) + s], 0x88);
                            r[4 * (q + 2) + s] = _mm512_shuffle_i32x4(t[4 * q + s], t[4 * (q + 2) + s], 0xdd);
                        }
                    // r[pp] now holds pair p + pp of the 16 rows.
                    for (int pp = 0; pp < 16; ++pp)
                        _mm512_storeu_si512((void *)(dst + (jp * kcp + p + pp) * NR + v * 16), r[pp]);
                }
            }
            for (; p < kcp; ++p) {  // edges: scalar
                uint32_t *d = dst + (jp * kcp + p) * NR + v * 16;
                const int64_t e = 2 * (p0 + p);
                for (int j = 0; j < 16; ++j) {
                    uint32_t w = 0;
                    if (j < rows && e < k) {
                        const uint16_t *src = B + (j0 + jb + j) * ldb + e;
                        w = src[0] | (e + 1 < k ? (uint32_t)src[1] << 16 : 0u);
                    }
                    d[j] = w;
                }
            }
        }
    }
}

// C[rows, cols] (+)= alpha * A-pairs[rows, kcp] . B-panel[kcp, NR]; rows <= MR.
// first: this is the first k block (apply beta); later blocks accumulate.
// bias (the last k block only, else NULL): added to every row.
template <int R>
RLX_BF16_TARGET static inline void micro(int64_t kcp, const uint32_t *a, int64_t ldp, const uint32_t *b,
                                         float *c, int64_t ldc, int64_t cols, float alpha, float beta,
                                         bool first, const float *bias) {
    __m512 acc[R][NV];
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
    for (int64_t p = 0; p < kcp; ++p) {
        bh512 bv[NV];
        for (int v = 0; v < NV; ++v) bv[v] = as_bh(_mm512_loadu_si512((const void *)(b + p * NR + v * 16)));
        for (int i = 0; i < R; ++i) {
            const bh512 av = as_bh(_mm512_set1_epi32((int)a[i * ldp + p]));
            for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int v = 0; v < NV; ++v) {
        const int64_t left = cols - v * 16;
        if (left <= 0) break;
        const __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
        const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + v * 16) : _mm512_setzero_ps();
        for (int i = 0; i < R; ++i) {
            float *ci = c + i * ldc + v * 16;
            __m512 x = _mm512_fmadd_ps(va, acc[i][v], bv);
            if (!first)
                x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, ci));
            else if (beta != 0.0f)
                x = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, ci), x);
            _mm512_mask_storeu_ps(ci, m, x);
        }
    }
}

template <int R>
RLX_BF16_TARGET static inline void micro_rows(int64_t rows, int64_t kcp, const uint32_t *a, int64_t ldp,
                                              const uint32_t *b, float *c, int64_t ldc, int64_t cols, float alpha,
                                              float beta, bool first, const float *bias) {
    if (rows == R)
        micro<R>(kcp, a, ldp, b, c, ldc, cols, alpha, beta, first, bias);
    else if constexpr (R > 1)
        micro_rows<R - 1>(rows, kcp, a, ldp, b, c, ldc, cols, alpha, beta, first, bias);
}

struct Gemm {
    int64_t m, n, k;
    float alpha, beta;
    const uint32_t *ap;  // A rounded to bf16 pairs: m rows of ldp words
    int64_t ldp;
    const uint16_t *B;
    int64_t ldb;
    bool tb;
    float *C;
    int64_t ldc;
    int64_t mt, nt;      // rows and columns per task
    const float *bias;   // n floats added to every row, or NULL
};

static inline int64_t tasks(const Gemm &g) { return ((g.m + g.mt - 1) / g.mt) * ((g.n + g.nt - 1) / g.nt); }

// Splits the work into tasks of whole micro tiles: enough for every thread
// and a few more for balance, but rows in blocks large enough that a packed
// B block is reused.
static inline void plan(Gemm &g, int threads) {
    const int64_t col_tiles = (g.n + NR - 1) / NR;
    int64_t col_parts = std::min<int64_t>(col_tiles, threads);
    int64_t row_parts = std::max<int64_t>(1, std::min<int64_t>((g.m + 4 * MR - 1) / (4 * MR), 2 * threads / col_parts));
    if (col_parts * row_parts < threads) row_parts = std::max<int64_t>(1, std::min<int64_t>((g.m + MR - 1) / MR, threads));
    g.nt = (col_tiles + col_parts - 1) / col_parts * NR;
    g.mt = ((g.m + row_parts - 1) / row_parts + MR - 1) / MR * MR;
}

RLX_BF16_TARGET static inline void run_task(const Gemm &g, int64_t t, std::vector<uint32_t> &scratch) {
    const int64_t col_tasks = (g.n + g.nt - 1) / g.nt;
    const int64_t i0 = (t / col_tasks) * g.mt, j0 = (t % col_tasks) * g.nt;
    const int64_t i1 = std::min(g.m, i0 + g.mt), nc = std::min(g.n - j0, g.nt);
    const int64_t kp = (g.k + 1) / 2, panels = (nc + NR - 1) / NR;
    scratch.resize((size_t)(panels * std::min(kp, KCP) * NR));
    uint32_t *bp = scratch.data();
    for (int64_t p0 = 0; p0 < kp; p0 += KCP) {
        const int64_t kcp = std::min(KCP, kp - p0);
        pack_b(g.tb, g.B, g.ldb, g.k, p0, kcp, j0, nc, bp);
        for (int64_t ic = i0; ic < i1; ic += MC) {
            const int64_t ie = std::min(i1, ic + MC);
            for (int64_t jp = 0; jp < panels; ++jp) {
                const uint32_t *b = bp + jp * kcp * NR;
                const int64_t cols = std::min<int64_t>(NR, nc - jp * NR);
                for (int64_t i = ic; i < ie; i += MR) {
                    const int64_t rows = std::min<int64_t>(MR, ie - i);
                    micro_rows<MR>(rows, kcp, g.ap + i * g.ldp + p0, g.ldp, b, g.C + i * g.ldc + j0 + jp * NR,
                                   g.ldc, cols, g.alpha, g.beta, p0 == 0,
                                   g.bias && p0 + kcp == kp ? g.bias + j0 + jp * NR : nullptr);
                }
            }
        }
    }
}

}  // namespace big
}  // namespace rlx_bf16
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // x86-64 with a compiler that knows AVX-512 BF16
#endif
