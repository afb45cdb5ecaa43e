// The vector operations of the VNNI K-quant GEMVs (csrc/host_quant_vnni.h),
// in the instruction set of the translation unit that includes them:
// AVX-512 VNNI (RLX_CPU_AVX512: 32 words a zmm, vpdpwssd zmm), AVX-VNNI
// (RLX_CPU_AVXVNNI: AVX2 machines such as Intel's client cores since Alder
// Lake: two ymm of 16 words, vpdpwssd ymm) or plain AVX2 (the same ymm
// halves, vpmaddwd + vpaddd for vpdpwssd). The GEMV is written once against these.
//
//   W     32 16-bit words: a 32-element piece of scaled weight codes
//   Acc   32-bit integer sums of one piece stream (16 lanes either way)
//   F     f32 partial sums of one output
#ifndef RLX_HOST_QUANT_VNNI_OPS_H
#define RLX_HOST_QUANT_VNNI_OPS_H

#include <immintrin.h>

namespace rlx_vnni {

#define RLX_VNNI_INLINE static inline __attribute__((always_inline))

// The sum of 8 floats (both forms use it for the 8-lane min terms).
RLX_VNNI_INLINE float hsum8(__m256 v) {
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps(d, d, 1)));
}

#if defined(RLX_CPU_AVX512)
struct W { __m512i v; };
struct Acc { __m512i v; };
struct F { __m512 v; };

RLX_VNNI_INLINE W w_u8(const uchar *p) { return {_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p))}; }
RLX_VNNI_INLINE W w_set1(int v) { return {_mm512_set1_epi16((short)v)}; }
RLX_VNNI_INLINE W w_and(W a, W b) { return {_mm512_and_si512(a.v, b.v)}; }
RLX_VNNI_INLINE W w_or(W a, W b) { return {_mm512_or_si512(a.v, b.v)}; }
RLX_VNNI_INLINE W w_sub(W a, W b) { return {_mm512_sub_epi16(a.v, b.v)}; }
RLX_VNNI_INLINE W w_mul(W a, W b) { return {_mm512_mullo_epi16(a.v, b.v)}; }
RLX_VNNI_INLINE W w_srl(W a, unsigned n) { return {_mm512_srli_epi16(a.v, n)}; }
RLX_VNNI_INLINE W w_sll(W a, unsigned n) { return {_mm512_slli_epi16(a.v, n)}; }
// Words 0-15 take s[2 i], words 16-31 s[2 i + 1] (the two 16-element
// groups of piece i).
RLX_VNNI_INLINE W w_scale_pair(const int16_t *s, unsigned i) {
    return {_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(s[2u * i])), _mm256_set1_epi16(s[2u * i + 1u]),
                               1)};
}

RLX_VNNI_INLINE Acc acc_zero() { return {_mm512_setzero_si512()}; }
RLX_VNNI_INLINE Acc acc_dot(Acc a, W w, const int16_t *x) {
    return {_mm512_dpwssd_epi32(a.v, w.v, _mm512_loadu_si512(x))};
}

RLX_VNNI_INLINE F f_zero() { return {_mm512_setzero_ps()}; }
// acc + f * (float)hi + (f / 32768) * (float)lo: one block's integer sums.
RLX_VNNI_INLINE F f_add_block(F acc, Acc hi, Acc lo, float f, float f_lo) {
    const __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi.v), _mm512_set1_ps(f), acc.v);
    return {_mm512_fmadd_ps(_mm512_cvtepi32_ps(lo.v), _mm512_set1_ps(f_lo), a)};
}
RLX_VNNI_INLINE float f_sum(F a) { return _mm512_reduce_add_ps(a.v); }

// 16 floats from p (f32 or f16) as two __m256 halves, for the block prep.
struct X16 { __m512 v; };
RLX_VNNI_INLINE X16 x16_load(const float *p) { return {_mm512_loadu_ps(p)}; }
RLX_VNNI_INLINE X16 x16_load(const half *p) { return {_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p))}; }
RLX_VNNI_INLINE bool x16_special(X16 v) { return _mm512_fpclass_ps_mask(v.v, 0x99) != 0; }   // NaN or +-inf
RLX_VNNI_INLINE float x16_amax(const X16 *v, unsigned n) {
    __m512 m = _mm512_setzero_ps();
    for (unsigned i = 0; i < n; ++i) m = _mm512_max_ps(m, _mm512_abs_ps(v[i].v));
    return _mm512_reduce_max_ps(m);
}
RLX_VNNI_INLINE float x16_sum(X16 v) { return _mm512_reduce_add_ps(v.v); }
RLX_VNNI_INLINE float x16_abs_sum(X16 v) { return _mm512_reduce_add_ps(_mm512_abs_ps(v.v)); }
// hi = round(v * inv), lo = round((v * inv - hi) * lo_scale), 16 words each.
RLX_VNNI_INLINE void x16_split(X16 v, float inv, float lo_scale, int16_t *hi, int16_t *lo) {
    const __m512 t = _mm512_mul_ps(v.v, _mm512_set1_ps(inv));
    const __m512i h = _mm512_cvt_roundps_epi32(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 rest = _mm512_mul_ps(_mm512_sub_ps(t, _mm512_cvtepi32_ps(h)), _mm512_set1_ps(lo_scale));
    const __m512i l = _mm512_cvt_roundps_epi32(rest, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256((__m256i *)hi, _mm512_cvtepi32_epi16(h));
    _mm256_storeu_si256((__m256i *)lo, _mm512_cvtepi32_epi16(l));
}
#else
// AVX2 (with or without AVX-VNNI): every 32-word quantity is two ymm halves.
struct W { __m256i a, b; };
struct Acc { __m256i a, b; };   // two accumulators: a lane then sums 16 products a block, as in the zmm form
struct F { __m256 v; };

RLX_VNNI_INLINE W w_u8(const uchar *p) {
    return {_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p)),
            _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(p + 16)))};
}
RLX_VNNI_INLINE W w_set1(int v) { const __m256i s = _mm256_set1_epi16((short)v); return {s, s}; }
RLX_VNNI_INLINE W w_and(W x, W y) { return {_mm256_and_si256(x.a, y.a), _mm256_and_si256(x.b, y.b)}; }
RLX_VNNI_INLINE W w_or(W x, W y) { return {_mm256_or_si256(x.a, y.a), _mm256_or_si256(x.b, y.b)}; }
RLX_VNNI_INLINE W w_sub(W x, W y) { return {_mm256_sub_epi16(x.a, y.a), _mm256_sub_epi16(x.b, y.b)}; }
RLX_VNNI_INLINE W w_mul(W x, W y) { return {_mm256_mullo_epi16(x.a, y.a), _mm256_mullo_epi16(x.b, y.b)}; }
RLX_VNNI_INLINE W w_srl(W x, unsigned n) { return {_mm256_srli_epi16(x.a, n), _mm256_srli_epi16(x.b, n)}; }
RLX_VNNI_INLINE W w_sll(W x, unsigned n) { return {_mm256_slli_epi16(x.a, n), _mm256_slli_epi16(x.b, n)}; }
RLX_VNNI_INLINE W w_scale_pair(const int16_t *s, unsigned i) {
    return {_mm256_set1_epi16(s[2u * i]), _mm256_set1_epi16(s[2u * i + 1u])};
}

RLX_VNNI_INLINE Acc acc_zero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
#if defined(RLX_CPU_AVXVNNI)
RLX_VNNI_INLINE Acc acc_dot(Acc c, W w, const int16_t *x) {
    return {_mm256_dpwssd_avx_epi32(c.a, w.a, _mm256_loadu_si256((const __m256i *)x)),
            _mm256_dpwssd_avx_epi32(c.b, w.b, _mm256_loadu_si256((const __m256i *)(x + 16)))};
}
#else
// Plain AVX2: vpmaddwd (the pairs' products summed into 32 bits) then an add,
// vpdpwssd's two halves. Exact: no pair reaches 2^31 (see host_quant_vnni.h, "Overflow").
RLX_VNNI_INLINE Acc acc_dot(Acc c, W w, const int16_t *x) {
    return {_mm256_add_epi32(c.a, _mm256_madd_epi16(w.a, _mm256_loadu_si256((const __m256i *)x))),
            _mm256_add_epi32(c.b, _mm256_madd_epi16(w.b, _mm256_loadu_si256((const __m256i *)(x + 16))))};
}
#endif

RLX_VNNI_INLINE F f_zero() { return {_mm256_setzero_ps()}; }
RLX_VNNI_INLINE F f_add_block(F acc, Acc hi, Acc lo, float f, float f_lo) {
    const __m256 vf = _mm256_set1_ps(f), vl = _mm256_set1_ps(f_lo);
    __m256 a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi.a), vf, acc.v);
    a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi.b), vf, a);
    a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo.a), vl, a);
    return {_mm256_fmadd_ps(_mm256_cvtepi32_ps(lo.b), vl, a)};
}
RLX_VNNI_INLINE float f_sum(F x) { return hsum8(x.v); }

struct X16 { __m256 a, b; };
RLX_VNNI_INLINE X16 x16_load(const float *p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
RLX_VNNI_INLINE X16 x16_load(const half *p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 8)))};
}
RLX_VNNI_INLINE bool x16_special(X16 v) {   // v - v is NaN exactly for NaN and +-inf
    const __m256 za = _mm256_sub_ps(v.a, v.a), zb = _mm256_sub_ps(v.b, v.b);
    return _mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(za, za, _CMP_UNORD_Q), _mm256_cmp_ps(zb, zb, _CMP_UNORD_Q))) != 0;
}
RLX_VNNI_INLINE float x16_amax(const X16 *v, unsigned n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (unsigned i = 0; i < n; ++i)
        m = _mm256_max_ps(m, _mm256_max_ps(_mm256_andnot_ps(sign, v[i].a), _mm256_andnot_ps(sign, v[i].b)));
    const __m128 q = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    const __m128 d = _mm_max_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_max_ss(d, _mm_shuffle_ps(d, d, 1)));
}
RLX_VNNI_INLINE float x16_sum(X16 v) { return hsum8(_mm256_add_ps(v.a, v.b)); }
RLX_VNNI_INLINE float x16_abs_sum(X16 v) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    return hsum8(_mm256_add_ps(_mm256_andnot_ps(sign, v.a), _mm256_andnot_ps(sign, v.b)));
}
RLX_VNNI_INLINE void x16_split(X16 v, float inv, float lo_scale, int16_t *hi, int16_t *lo) {
    const __m256 vi = _mm256_set1_ps(inv), vl = _mm256_set1_ps(lo_scale);
    const __m256 ta = _mm256_mul_ps(v.a, vi), tb = _mm256_mul_ps(v.b, vi);
    const __m256 ra = _mm256_round_ps(ta, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 rb = _mm256_round_ps(tb, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i ha = _mm256_cvtps_epi32(ra), hb = _mm256_cvtps_epi32(rb);
    const __m256i la = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_sub_ps(ta, ra), vl),
                                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256i lb = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_sub_ps(tb, rb), vl),
                                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // packs works within 128-bit lanes: restore element order with a 64-bit permute.
    _mm256_storeu_si256((__m256i *)hi, _mm256_permute4x64_epi64(_mm256_packs_epi32(ha, hb), 0xD8));
    _mm256_storeu_si256((__m256i *)lo, _mm256_permute4x64_epi64(_mm256_packs_epi32(la, lb), 0xD8));
}
#endif

}  // namespace rlx_vnni

#endif
