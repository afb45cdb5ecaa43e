/*
 * Host shim: C[m, n] = alpha * A[m, k] . B[n, k]^T + beta * C for few rows
 * (m <= kMaxRows, 64) against row-major weights, the shape of decode steps and short
 * sentences. The cost there is streaming B (the weights) from memory once;
 * a BLAS packs B on every call first (read, write a copy, read it again).
 * This kernel reads 4 rows of B straight from memory and applies them to
 * every row of A (A stays in L1 or L2), 4 rows of A at a time with up to 16
 * vector accumulators. B is f32, f16 or bf16 (both widened in registers).
 * It exists twice, from one body
 * (host_small_m_body.h): AVX-512 (16 lanes, masked tails) and AVX2 + FMA +
 * F16C (8 lanes), each with its own target attributes, and the shim takes the
 * one the CPU has (rlx_cpu, asked at device open) whatever the build
 * targets; elsewhere it keeps the BLAS path. On x86-64, f32 products of 16
 * rows or more take a second form instead (host_small_m_packed_body.h: B
 * packed in panels, a register tile of rows x 2 vectors of columns).
 */
#ifndef RLX_HOST_SMALL_M_H
#define RLX_HOST_SMALL_M_H

#include <stdint.h>

#include "host_cpu.h"

#if defined(RLX_HAVE_X86_TARGETS) || (defined(__aarch64__) && defined(__ARM_NEON))
#define RLX_HAVE_SMALL_M 1

namespace rlx_small_m {

// Up to 64 rows: A (64 x k) stays in L2 and the kernel beat OpenBLAS by 10-25%
// from 17 to 64 rows on a 2-core AVX-512 Xeon (OpenBLAS packs B on every
// call); from ~128 rows the BLAS's register blocking wins (benchmarks/README,
// "CPU: small-M gemm range").
constexpr int64_t kMaxRows = 64;
// Software prefetch of B, as host_bf16.h's small-M kernel: the same offset
// kPrefetchRows rows ahead (two 4-row blocks), into L2. The weights stream
// from L3 or memory on every run; 1 KiB ahead within the rows into L1 left
// too little lead. Only the first block of A's rows prefetches (later
// blocks read the same B rows from L1).
constexpr int64_t kPrefetchRows = 8;
// bf16 weights (raw bits), a type of their own so that the loads below tell
// them from f16's uint16_t: the kernel widens them in registers (a shift
// into the high half of an f32), so they stream at half the bytes of f32.
struct bf16 { uint16_t bits; };

}  // namespace rlx_small_m
#endif

#if defined(RLX_HAVE_X86_TARGETS)
#include <immintrin.h>

// GCC 12's _mm512_reduce_add_ps initializes its "undefined" vectors from
// themselves, which -Wuninitialized reports once inlined (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx_small_m {

// The four sums of a, b, c and d's 8 lanes at once (three hadds and an add,
// instead of a shuffle tree per sum): every C element of a tile ends with one.
__attribute__((target("avx2"))) static inline void hsum4(__m256 a, __m256 b, __m256 c, __m256 d, float out[4]) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}

namespace avx512 {
#define RLX_SM_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
typedef __m512 vec;
constexpr int64_t W = 16;
constexpr int kTileCols = 4;   // 16 + 4 + 1 of the 32 zmm registers
RLX_SM_TARGET static inline vec vzero() { return _mm512_setzero_ps(); }
RLX_SM_TARGET static inline vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
RLX_SM_TARGET static inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }
RLX_SM_TARGET static inline uint16_t float_to_half(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
RLX_SM_TARGET static inline __m256 fold(vec v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
}
RLX_SM_TARGET static inline void reduce4(vec a, vec b, vec c, vec d, float out[4]) {
    hsum4(fold(a), fold(b), fold(c), fold(d), out);
}
RLX_SM_TARGET static inline vec load_a(const float *p) { return _mm512_loadu_ps(p); }
RLX_SM_TARGET static inline vec load_a_tail(const float *p, int n) {
    return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1u), p);
}
// B as f32: f32 directly, f16 (raw bits) through vcvtph2ps, so f16 weights
// stream at half the bytes.
RLX_SM_TARGET static inline vec load_b(const float *p) { return _mm512_loadu_ps(p); }
RLX_SM_TARGET static inline vec load_b(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
RLX_SM_TARGET static inline vec load_b_tail(const float *p, int n) { return load_a_tail(p, n); }
RLX_SM_TARGET static inline vec load_b_tail(const uint16_t *p, int n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)((1u << n) - 1u), p));
}
RLX_SM_TARGET static inline vec widen_bf16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
RLX_SM_TARGET static inline vec load_b(const bf16 *p) { return widen_bf16(_mm256_loadu_si256((const __m256i *)p)); }
RLX_SM_TARGET static inline vec load_b_tail(const bf16 *p, int n) {
    return widen_bf16(_mm256_maskz_loadu_epi16((__mmask16)((1u << n) - 1u), p));
}
#include "host_small_m_body.h"
// The packed-panel form (host_small_m_packed_body.h): 8 rows x 32 columns,
// 16 accumulators (12 rows were no faster on a 2-core Xeon).
constexpr int64_t kPackRows = 8;
RLX_SM_TARGET static inline vec vbroadcast(float x) { return _mm512_set1_ps(x); }
RLX_SM_TARGET static inline vec load_lanes(const float *p, int n) { return n == W ? _mm512_loadu_ps(p) : load_a_tail(p, n); }
RLX_SM_TARGET static inline void store_lanes(float *p, vec v, int n) {
    if (n == W) _mm512_storeu_ps(p, v);
    else _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1u), v);
}
// The 16 x 16 block at src (rows ldb apart) transposed into dst (rows ld
// apart): pairs, then quads, then 128-bit lanes twice.
RLX_SM_TARGET static inline void transpose_block(const float *src, int64_t ldb, float *dst, int64_t ld) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ldb);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
        const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; ++i) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
        }
    for (int i = 0; i < 8; ++i) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
    for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ld, r[i]);
}
#include "host_small_m_packed_body.h"
#undef RLX_SM_TARGET
}  // namespace avx512

namespace avx2 {
#define RLX_SM_TARGET __attribute__((target("avx2,fma,f16c")))
typedef __m256 vec;
constexpr int64_t W = 8;
constexpr int kTileCols = 3;   // 12 + 3 + 1 = the 16 ymm registers (4 columns spilled)
RLX_SM_TARGET static inline vec vzero() { return _mm256_setzero_ps(); }
RLX_SM_TARGET static inline vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
RLX_SM_TARGET static inline void reduce4(vec a, vec b, vec c, vec d, float out[4]) { hsum4(a, b, c, d, out); }
RLX_SM_TARGET static inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }
RLX_SM_TARGET static inline uint16_t float_to_half(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
RLX_SM_TARGET static inline vec load_a(const float *p) { return _mm256_loadu_ps(p); }
RLX_SM_TARGET static inline vec load_a_tail(const float *p, int n) {   // lanes >= n read nothing (zero)
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane));
}
RLX_SM_TARGET static inline vec load_b(const float *p) { return _mm256_loadu_ps(p); }
RLX_SM_TARGET static inline vec load_b(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
RLX_SM_TARGET static inline vec load_b_tail(const float *p, int n) { return load_a_tail(p, n); }
// No 16-bit masked load in AVX2: the tail (fewer than 8) goes through a
// zeroed copy.
RLX_SM_TARGET static inline __m128i load_8_halves_tail(const uint16_t *p, int n) {
    uint16_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < n; ++i) t[i] = p[i];
    return _mm_loadu_si128((const __m128i *)t);
}
RLX_SM_TARGET static inline vec load_b_tail(const uint16_t *p, int n) { return _mm256_cvtph_ps(load_8_halves_tail(p, n)); }
RLX_SM_TARGET static inline vec widen_bf16(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
RLX_SM_TARGET static inline vec load_b(const bf16 *p) { return widen_bf16(_mm_loadu_si128((const __m128i *)p)); }
RLX_SM_TARGET static inline vec load_b_tail(const bf16 *p, int n) {
    return widen_bf16(load_8_halves_tail(&p->bits, n));
}
#include "host_small_m_body.h"
// The packed-panel form: 6 rows x 16 columns, 12 accumulators + 2 panel
// vectors + 1 broadcast of the 16 ymm registers.
constexpr int64_t kPackRows = 6;
RLX_SM_TARGET static inline vec vbroadcast(float x) { return _mm256_set1_ps(x); }
RLX_SM_TARGET static inline vec load_lanes(const float *p, int n) { return n == W ? _mm256_loadu_ps(p) : load_a_tail(p, n); }
RLX_SM_TARGET static inline void store_lanes(float *p, vec v, int n) {
    if (n == W) {
        _mm256_storeu_ps(p, v);
        return;
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane), v);
}
// The 8 x 8 block at src (rows ldb apart) transposed into dst (rows ld apart).
RLX_SM_TARGET static inline void transpose_block(const float *src, int64_t ldb, float *dst, int64_t ld) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ldb);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(dst + i * ld, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
        _mm256_storeu_ps(dst + (i + 4) * ld, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
}
#include "host_small_m_packed_body.h"
#undef RLX_SM_TARGET
}  // namespace avx2

}  // namespace rlx_small_m
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#include <string.h>

namespace rlx_small_m {
// NEON (ARM64's baseline: no target attribute, nothing to ask the CPU).
namespace neon {
#define RLX_SM_TARGET
typedef float32x4_t vec;
constexpr int64_t W = 4;
constexpr int kTileCols = 4;   // 16 + 4 + 1 of the 32 NEON registers
static inline vec vzero() { return vdupq_n_f32(0.0f); }
static inline vec fma(vec a, vec b, vec c) { return vfmaq_f32(c, a, b); }
static inline void reduce4(vec a, vec b, vec c, vec d, float out[4]) {
    vst1q_f32(out, vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d)));
}
static inline float half_to_float(uint16_t h) {
    __fp16 v;
    memcpy(&v, &h, 2);
    return (float)v;
}
static inline uint16_t float_to_half(float f) {   // round to nearest even (the default FPCR mode)
    const __fp16 v = (__fp16)f;
    uint16_t h;
    memcpy(&h, &v, 2);
    return h;
}
// Tails (fewer than 4 lanes) through a zeroed copy: NEON has no masked loads.
template <typename T> static inline void copy_tail(T *t, const T *p, int n) {
    for (int i = 0; i < n; ++i) t[i] = p[i];
}
static inline vec load_a(const float *p) { return vld1q_f32(p); }
static inline vec load_a_tail(const float *p, int n) {
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    copy_tail(t, p, n);
    return vld1q_f32(t);
}
static inline vec load_b(const float *p) { return vld1q_f32(p); }
static inline vec load_b_tail(const float *p, int n) { return load_a_tail(p, n); }
static inline vec load_b(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
static inline vec load_b_tail(const uint16_t *p, int n) {
    uint16_t t[4] = {0, 0, 0, 0};
    copy_tail(t, p, n);
    return load_b(t);
}
static inline vec load_b(const bf16 *p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(&p->bits), 16)); }
static inline vec load_b_tail(const bf16 *p, int n) {
    uint16_t t[4] = {0, 0, 0, 0};
    copy_tail(t, &p->bits, n);
    return load_b((const bf16 *)t);
}
#include "host_small_m_body.h"
#undef RLX_SM_TARGET
}  // namespace neon
}  // namespace rlx_small_m
#endif
#endif
