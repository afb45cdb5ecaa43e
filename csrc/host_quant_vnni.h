// The decode GEMV y = x W^T of the K-quants (q2_k, q3_k, q4_k, q5_k, q6_k) on CPUs with AVX-512
// VNNI (vpdpwssd: 32 products of 16-bit integers summed in pairs into 16
// 32-bit lanes, one instruction). Included by csrc/host_kernels_avx512vnni.cpp
// only, after shaders/quant.h (its decoders' layouts and rlx_q_gemv_cpu, the
// fallback).
//
// Why integers: the f32 form (quant.h's RlxQ512) spends ~22 vector
// operations on 64 weights (widen, mask, convert, scale, subtract, FMA) and
// is bound by that, not by memory. Here a weight is its small integer code
// times its sub-block's integer scale, both exact in 16 bits (q4_k: q * sc
// <= 15 * 63; q5_k 31 * 63; q6_k: (q - 32) * sc, |.| <= 32 * 128; q3_k
// 4 * 32; q2_k 3 * 15), so 64 weights take one
// widening load, two bit operations, two 16-bit multiplies and the dot
// products, with every float scale applied once per 256-element block.
//
// Precision: x is not rounded to 16 bits. Each 256-element block of an x
// row is split as x = s (hi + lo / 32768) with s = amax / 16383, hi =
// round(x / s) and lo the rounded remainder, so the two integer dot products
// carry ~30 bits of x: the error of an element is that of f32 (x / s) plus
// s / 65536 (amax * 2^-30), against the 2^-24 relative rounding of the f32
// form's products. The q4_k min term (dmin * m * sum x) uses f32 sums of x
// over each 16-element group (q2_k, q4_k, q5_k). tests/ops/test_quant_kernels.py holds this
// form to the same bound as the f32 one. Rows of x with a NaN, an infinity
// or a block maximum under 1e-30 (where 16383 / amax would overflow) take
// the f32 form, which propagates them as every other kernel does.
//
// Overflow: a lane sums 16 products a block (256 elements / 16 lanes), each
// at most 4096 * 16384 = 2^26 (q6_k), so at most 2^30 < 2^31.
//
// x is converted once per dispatch and thread, not per group: the groups of
// one dispatch share x, and rlx_ids::dispatch says which dispatch a group
// belongs to (the host shim numbers them).
#ifndef RLX_HOST_QUANT_VNNI_H
#define RLX_HOST_QUANT_VNNI_H

#include <float.h>
#include <immintrin.h>
#include <stdlib.h>

namespace rlx_vnni {

constexpr float kHiRange = 16383.0f;   // |hi| <= 2^14 - 1
constexpr float kLoScale = 32768.0f;   // lo = round((x / s - hi) * 2^15), |lo| <= 2^14
constexpr float kMinBlockMax = 1e-30f;

#define RLX_VNNI_INLINE static inline __attribute__((always_inline))

// A growing heap array. Not std::vector: this file is compiled under a
// target pragma, and libstdc++'s always_inline allocator members then fail
// to inline into the pragma's functions (GCC 13: "target specific option
// mismatch").
template <typename T> struct Buffer {
    T *p = nullptr;
    size_t n = 0;
    Buffer() = default;
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
    ~Buffer() { free(p); }
    bool reserve(size_t count) {   // false: out of memory (the old contents are kept)
        if (count <= n) return true;
        T *q = (T *)realloc(p, count * sizeof(T));
        if (!q) return false;
        p = q, n = count;
        return true;
    }
    T *data() { return p; }
    const T *data() const { return p; }
    T &operator[](size_t i) { return p[i]; }
    const T &operator[](size_t i) const { return p[i]; }
};

// x rows as 16-bit integer pairs, per block of 256 elements.
struct XInt16 {
    uint64_t dispatch = 0;   // 0: nothing cached (the shim's dispatches count from 1)
    const void *x = nullptr;
    uint m = 0, k = 0, stride = 0;
    bool usable = false;              // false: some block needs the f32 form
    Buffer<int16_t> hi, lo;      // [m][k]
    Buffer<float> scale;         // [m][k / 256]: x ~= scale * (hi + lo / 32768)
    Buffer<float> sum16;         // [m][k / 16]: f32 sums of x (the min terms)
    Buffer<float> sum32;         // [m][k / 32]: the same over 32 elements
};

RLX_VNNI_INLINE __m512 load16(const float *p) { return _mm512_loadu_ps(p); }
RLX_VNNI_INLINE __m512 load16(const half *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

// Fills c for this dispatch's x (m rows of k, k a multiple of 256); false
// where a row must take the f32 form. Cached per thread across the groups
// of one dispatch.
template <typename T>
static bool prepare(XInt16 &c, const T *x, uint m, uint k, uint stride, uint64_t dispatch) {
    if (dispatch != 0 && c.dispatch == dispatch && c.x == (const void *)x && c.m == m && c.k == k &&
        c.stride == stride)
        return c.usable;
    c.dispatch = 0;   // stays invalid until filled
    const uint blocks = k / 256u;
    // Out of memory: the f32 form, which needs no buffer.
    if (!c.hi.reserve((size_t)m * k) || !c.lo.reserve((size_t)m * k) || !c.scale.reserve((size_t)m * blocks) ||
        !c.sum16.reserve((size_t)m * (k / 16u)) || !c.sum32.reserve((size_t)m * (k / 32u)))
        return false;
    c.usable = true;
    for (uint r = 0; r < m && c.usable; ++r) {
        const T *xr = x + (uint64_t)r * stride;
        for (uint b = 0; b < blocks; ++b) {
            const T *xb = xr + 256u * b;
            __m512 v[16], amax = _mm512_setzero_ps();
            __mmask16 special = 0;
            for (uint i = 0; i < 16u; ++i) {
                v[i] = load16(xb + 16u * i);
                special |= _mm512_fpclass_ps_mask(v[i], 0x99);   // QNaN, +inf, -inf, SNaN
                amax = _mm512_max_ps(amax, _mm512_abs_ps(v[i]));
            }
            const float a = _mm512_reduce_max_ps(amax);
            if (special || (a != 0.0f && a < kMinBlockMax)) {
                c.usable = false;
                break;
            }
            const float inv = a > 0.0f ? kHiRange / a : 0.0f;
            c.scale[(size_t)r * blocks + b] = a / kHiRange;
            int16_t *hi = c.hi.data() + (size_t)r * k + 256u * b, *lo = c.lo.data() + (size_t)r * k + 256u * b;
            for (uint i = 0; i < 16u; ++i) {
                const __m512 t = _mm512_mul_ps(v[i], _mm512_set1_ps(inv));
                const __m512i h = _mm512_cvt_roundps_epi32(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                const __m512 rest = _mm512_mul_ps(_mm512_sub_ps(t, _mm512_cvtepi32_ps(h)), _mm512_set1_ps(kLoScale));
                const __m512i l = _mm512_cvt_roundps_epi32(rest, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                _mm256_storeu_si256((__m256i *)(hi + 16u * i), _mm512_cvtepi32_epi16(h));
                _mm256_storeu_si256((__m256i *)(lo + 16u * i), _mm512_cvtepi32_epi16(l));
            }
            float *sums = c.sum16.data() + (size_t)r * (k / 16u) + 16u * b;
            for (uint i = 0; i < 16u; ++i) sums[i] = _mm512_reduce_add_ps(v[i]);
            float *sums32 = c.sum32.data() + (size_t)r * (k / 32u) + 8u * b;
            for (uint i = 0; i < 8u; ++i) sums32[i] = _mm512_reduce_add_ps(_mm512_add_ps(v[2u * i], v[2u * i + 1u]));
        }
    }
    c.dispatch = dispatch, c.x = x, c.m = m, c.k = k, c.stride = stride;
    return c.usable;
}

// The integer sums of one block (ahi, alo) into the row's f32 accumulator,
// scaled by the block's float factor f = d * s.
RLX_VNNI_INLINE __m512 add_block(__m512 acc, __m512i ahi, __m512i alo, float f) {
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ahi), _mm512_set1_ps(f), acc);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(alo), _mm512_set1_ps(f * (1.0f / kLoScale)), acc);
}

// One 32-element piece of weights (w: 32 words of scaled codes) against
// elements [o, o + 32) of every x row.
template <uint M>
RLX_VNNI_INLINE void dot32(const XInt16 &c, const size_t *xo, size_t o, __m512i w, __m512i *ahi, __m512i *alo) {
    for (uint r = 0; r < M; ++r) {
        ahi[r] = _mm512_dpwssd_epi32(ahi[r], w, _mm512_loadu_si512(c.hi.data() + xo[r] + o));
        alo[r] = _mm512_dpwssd_epi32(alo[r], w, _mm512_loadu_si512(c.lo.data() + xo[r] + o));
    }
}

template <typename Q> struct Rows { static constexpr bool has = false; };

// The 6-bit scales (low 8 bytes) and mins (high 8 bytes) of q4_k / q5_k's
// 8 sub-blocks, from the 12 packed bytes at q (rlx_q_k_scale_min's layout,
// unpacked a 32-bit word at a time: sub-blocks 0-3 keep the low 6 bits of
// bytes 0-3 / 4-7, sub-blocks 4-7 take a nibble of bytes 8-11 and the top
// two bits of bytes 0-3 / 4-7).
RLX_VNNI_INLINE void k_scales_mins(const uchar *q, uint64_t &scales, uint64_t &mins) {
    uint32_t u[3];
    memcpy(u, q, sizeof u);
    const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, two = 0x03030303u;
    scales = (uint64_t)(u[0] & low6) | (uint64_t)((u[2] & low4) | (((u[0] >> 6) & two) << 4)) << 32;
    mins = (uint64_t)(u[1] & low6) | (uint64_t)(((u[2] >> 4) & low4) | (((u[1] >> 6) & two) << 4)) << 32;
}

// q3_k's 16 signed 6-bit scales as words (the low 16 of a vector), from the
// 12 packed bytes at q (rlx_q_q3k_scale's layout: scale i's low nibble is
// nibble i / 8 of byte i % 8, its high two bits bits 2 (i / 4) of byte 8 + i % 4),
// a 32-bit word (four scales) at a time.
RLX_VNNI_INLINE __m512i q3k_scales(const uchar *q) {
    uint32_t u[3], out[4];
    memcpy(u, q, sizeof u);
    const uint32_t low4 = 0x0f0f0f0fu, two = 0x03030303u;
    out[0] = (u[0] & low4) | ((u[2] & two) << 4);
    out[1] = (u[1] & low4) | (((u[2] >> 2) & two) << 4);
    out[2] = ((u[0] >> 4) & low4) | (((u[2] >> 4) & two) << 4);
    out[3] = ((u[1] >> 4) & low4) | (((u[2] >> 6) & two) << 4);
    __m128i bytes;
    memcpy(&bytes, out, sizeof bytes);
    return _mm512_castsi256_si512(_mm256_sub_epi16(_mm256_cvtepu8_epi16(bytes), _mm256_set1_epi16(32)));
}

// A vector of 32 words whose first 16 take word 2 i of sc and the rest word
// 2 i + 1: the scales of the two 16-element groups of 32-element piece i.
RLX_VNNI_INLINE __m512i scale_pair(__m512i sc, uint i) {
    const __m512i upper = _mm512_maskz_set1_epi16(0xFFFF0000u, 1);
    return _mm512_permutexvar_epi16(_mm512_add_epi16(upper, _mm512_set1_epi16((short)(2u * i))), sc);
}

// q4_k: sub-blocks 2j and 2j + 1 are the low and high nibbles of the same
// 32 bytes; w = d * sc * q - dmin * m. q5_k (FIFTH) adds bit i of byte e of
// its 32 high-bit bytes as bit 4 of element e of sub-block i.
template <bool FIFTH> struct RowsK45 {
    static constexpr bool has = true;
    static constexpr uint BYTES = FIFTH ? 176u : 144u, QS = FIFTH ? 48u : 16u;
    template <uint M>
    RLX_VNNI_INLINE void run(const XInt16 &c, const uint *xrow, const uchar *wr, uint blocks, float *out) {
        const __m512i low4 = _mm512_set1_epi16(15), one = _mm512_set1_epi16(1);
        __m512 acc[M];
        __m256 mins[M];   // per sub-block: dmin * m * (sum of x)
        size_t xo[M];
        for (uint r = 0; r < M; ++r)
            acc[r] = _mm512_setzero_ps(), mins[r] = _mm256_setzero_ps(), xo[r] = (size_t)xrow[r] * c.k;
        for (uint blk = 0; blk < blocks; ++blk) {
            const uchar *b = wr + (uint64_t)blk * BYTES;
            uint64_t scales, mins8;
            k_scales_mins(b + 4, scales, mins8);
            const __m512i sc = _mm512_cvtepu8_epi16(_mm256_zextsi128_si256(_mm_cvtsi64_si128((long long)scales)));
            __m512i ahi[M], alo[M];
            for (uint r = 0; r < M; ++r) ahi[r] = alo[r] = _mm512_setzero_si512();
            const __m512i H = FIFTH ? _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(b + 16))) : low4;
            for (uint j = 0; j < 4u; ++j) {
                const __m512i w = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(b + QS + 32u * j)));
                __m512i c0 = _mm512_and_si512(w, low4), c1 = _mm512_srli_epi16(w, 4);
                if constexpr (FIFTH) {
                    c0 = _mm512_or_si512(c0, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(H, 2u * j), one), 4));
                    c1 = _mm512_or_si512(c1, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(H, 2u * j + 1u),
                                                                                one), 4));
                }
                const __m512i q0 = _mm512_mullo_epi16(c0, _mm512_permutexvar_epi16(_mm512_set1_epi16((short)(2u * j)), sc));
                const __m512i q1 = _mm512_mullo_epi16(c1, _mm512_permutexvar_epi16(_mm512_set1_epi16((short)(2u * j + 1u)),
                                                                                   sc));
                dot32<M>(c, xo, 256u * blk + 64u * j, q0, ahi, alo);
                dot32<M>(c, xo, 256u * blk + 64u * j + 32u, q1, ahi, alo);
            }
            const float d = rlx_q_f16(b);
            const __m256 dm = _mm256_mul_ps(_mm256_set1_ps(rlx_q_f16(b + 2)),
                                            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mins8))));
            for (uint r = 0; r < M; ++r) {
                acc[r] = add_block(acc[r], ahi[r], alo[r], d * c.scale[(size_t)xrow[r] * (c.k / 256u) + blk]);
                mins[r] = _mm256_fmadd_ps(dm, _mm256_loadu_ps(c.sum32.data() + (size_t)xrow[r] * (c.k / 32u) + 8u * blk),
                                          mins[r]);
            }
        }
        for (uint r = 0; r < M; ++r) {
            const __m128 m4 = _mm_add_ps(_mm256_castps256_ps128(mins[r]), _mm256_extractf128_ps(mins[r], 1));
            const __m128 m2 = _mm_add_ps(m4, _mm_movehl_ps(m4, m4));
            out[r] = _mm512_reduce_add_ps(acc[r]) - _mm_cvtss_f32(_mm_add_ss(m2, _mm_shuffle_ps(m2, m2, 1)));
        }
    }
};
template <> struct Rows<QFmtQ4_K> : RowsK45<false> {};
template <> struct Rows<QFmtQ5_K> : RowsK45<true> {};

// q6_k: in each half g of 128 elements, bytes ql[64 g + e] (A) and
// ql[64 g + 32 + e] (B) give the low nibbles of elements e, 32 + e (low
// nibbles) and 64 + e, 96 + e (high nibbles); qh[32 g + e] gives their two
// high bits, two at a time; w = d * sc[j / 16] * (q - 32).
template <> struct Rows<QFmtQ6_K> {
    static constexpr bool has = true;
    template <uint M>
    RLX_VNNI_INLINE void run(const XInt16 &c, const uint *xrow, const uchar *wr, uint blocks, float *out) {
        const __m512i m4 = _mm512_set1_epi16(15), m3 = _mm512_set1_epi16(3), m48 = _mm512_set1_epi16(48);
        const __m512i bias = _mm512_set1_epi16(32);
        __m512 acc[M];
        size_t xo[M];
        for (uint r = 0; r < M; ++r) acc[r] = _mm512_setzero_ps(), xo[r] = (size_t)xrow[r] * c.k;
        for (uint blk = 0; blk < blocks; ++blk) {
            const uchar *b = wr + (uint64_t)blk * 210u;
            // 16 int8 scales as words (a 16-byte load: 32 would read past the last block).
            const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192))));
            __m512i ahi[M], alo[M];
            for (uint r = 0; r < M; ++r) ahi[r] = alo[r] = _mm512_setzero_si512();
            for (uint g = 0; g < 2u; ++g) {
                const __m512i A = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(b + 64u * g)));
                const __m512i B = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(b + 64u * g + 32u)));
                const __m512i H = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(b + 128u + 32u * g)));
                __m512i q[4];
                q[0] = _mm512_or_si512(_mm512_and_si512(A, m4), _mm512_slli_epi16(_mm512_and_si512(H, m3), 4));
                q[1] = _mm512_or_si512(_mm512_and_si512(B, m4), _mm512_and_si512(_mm512_slli_epi16(H, 2), m48));
                q[2] = _mm512_or_si512(_mm512_srli_epi16(A, 4), _mm512_and_si512(H, m48));
                q[3] = _mm512_or_si512(_mm512_srli_epi16(B, 4), _mm512_and_si512(_mm512_srli_epi16(H, 2), m48));
                for (uint t = 0; t < 4u; ++t) {
                    // Word w of quarter t of half g takes scale 8 g + 2 t + (w >= 16).
                    const __m512i w = _mm512_mullo_epi16(_mm512_sub_epi16(q[t], bias), scale_pair(sc, 4u * g + t));
                    dot32<M>(c, xo, 256u * blk + 128u * g + 32u * t, w, ahi, alo);
                }
            }
            const float d = rlx_q_f16(b + 208);
            for (uint r = 0; r < M; ++r)
                acc[r] = add_block(acc[r], ahi[r], alo[r], d * c.scale[(size_t)xrow[r] * (c.k / 256u) + blk]);
        }
        for (uint r = 0; r < M; ++r) out[r] = _mm512_reduce_add_ps(acc[r]);
    }
};

// q2_k and q3_k: in half g of 128 elements, byte 32 g + e of their 2-bit
// codes holds elements 32 t + e (t = 0..3) in bits 2 t; a scale per 16
// elements. q2_k: w = d * (sc & 15) * q - dmin * (sc >> 4) (scale bytes
// 0..15, codes at 16, d and dmin at 80 and 82). q3_k: w = d * sc * (q - 4 +
// 4 h), h bit j / 32 of byte j % 32 of the high-bit mask at 0, codes at 32,
// signed 6-bit scales packed in 12 bytes at 96, d at 108.
template <bool Q3> struct RowsK23 {
    static constexpr bool has = true;
    static constexpr uint BYTES = Q3 ? 110u : 84u, QS = Q3 ? 32u : 16u;
    template <uint M>
    RLX_VNNI_INLINE void run(const XInt16 &c, const uint *xrow, const uchar *wr, uint blocks, float *out) {
        const __m512i m3 = _mm512_set1_epi16(3), one = _mm512_set1_epi16(1), four = _mm512_set1_epi16(4);
        __m512 acc[M], mins[M];   // mins: per 16-element group, dmin * m * (sum of x)
        size_t xo[M];
        for (uint r = 0; r < M; ++r) acc[r] = mins[r] = _mm512_setzero_ps(), xo[r] = (size_t)xrow[r] * c.k;
        for (uint blk = 0; blk < blocks; ++blk) {
            const uchar *b = wr + (uint64_t)blk * BYTES;
            // q2_k: scale in the low nibble of bytes 0..15, min in the high one.
            const __m256i sm = Q3 ? _mm256_setzero_si256() : _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)b));
            const __m512i sc = Q3 ? q3k_scales(b + 96)
                                  : _mm512_castsi256_si512(_mm256_and_si256(sm, _mm256_set1_epi16(15)));
            const __m512i H = Q3 ? _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)b)) : one;
            __m512i ahi[M], alo[M];
            for (uint r = 0; r < M; ++r) ahi[r] = alo[r] = _mm512_setzero_si512();
            for (uint g = 0; g < 2u; ++g) {
                const __m512i codes = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(b + QS + 32u * g)));
                for (uint t = 0; t < 4u; ++t) {
                    __m512i q = _mm512_and_si512(_mm512_srli_epi16(codes, 2u * t), m3);
                    if constexpr (Q3) {   // q - 4 + 4 h
                        const __m512i h = _mm512_and_si512(_mm512_srli_epi16(H, 4u * g + t), one);
                        q = _mm512_sub_epi16(_mm512_or_si512(q, _mm512_slli_epi16(h, 2)), four);
                    }
                    const __m512i w = _mm512_mullo_epi16(q, scale_pair(sc, 4u * g + t));
                    dot32<M>(c, xo, 256u * blk + 128u * g + 32u * t, w, ahi, alo);
                }
            }
            const float d = rlx_q_f16(b + (Q3 ? 108u : 80u));
            for (uint r = 0; r < M; ++r) {
                acc[r] = add_block(acc[r], ahi[r], alo[r], d * c.scale[(size_t)xrow[r] * (c.k / 256u) + blk]);
                if constexpr (!Q3) {
                    const __m512 dm = _mm512_mul_ps(_mm512_set1_ps(rlx_q_f16(b + 82)),
                                                    _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm256_srli_epi16(sm, 4))));
                    mins[r] = _mm512_fmadd_ps(dm, _mm512_loadu_ps(c.sum16.data() + (size_t)xrow[r] * (c.k / 16u) + 16u * blk),
                                              mins[r]);
                }
            }
        }
        for (uint r = 0; r < M; ++r) out[r] = _mm512_reduce_add_ps(_mm512_sub_ps(acc[r], mins[r]));
    }
};
template <> struct Rows<QFmtQ2_K> : RowsK23<false> {};
template <> struct Rows<QFmtQ3_K> : RowsK23<true> {};

// Rows [j0, j1) of y = act(x W^T + bias); false (nothing written) where x
// needs the f32 form.
template <typename Q, typename T>
static bool gemv(const T *x, const uchar *w, T *y, const T *bias, const QuantGemvParams *p, uint j0, uint j1,
                 uint64_t dispatch) {
    static thread_local XInt16 cache;
    const uint m = p->m < (uint)RLX_QGEMV_MAX_M ? p->m : (uint)RLX_QGEMV_MAX_M, k = p->k, ys = p->y_stride;
    if (!prepare(cache, x, m, k, p->x_stride, dispatch)) return false;
    const uint blocks = k / (uint)Q::BLOCK;
    const uint64_t row_bytes = (uint64_t)blocks * (uint)Q::BYTES;
    uint xrow[RLX_QGEMV_MAX_M];
    for (uint r = 0; r < RLX_QGEMV_MAX_M; ++r) xrow[r] = r < m ? r : m - 1u;
    for (uint j = j0; j < j1; ++j) {
        const uchar *wr = w + (uint64_t)j * row_bytes;
        // As rlx_q_gemv_cpu: the blocks stream once, fetched a few rows ahead.
        for (uint64_t off = 0; off < row_bytes; off += 64u) __builtin_prefetch(wr + 4u * row_bytes + off, 0, 2);
        float s[RLX_QGEMV_MAX_M];
        if (m <= 1u) Rows<Q>::template run<1>(cache, xrow, wr, blocks, s);
        else if (m <= 2u) Rows<Q>::template run<2>(cache, xrow, wr, blocks, s);
        else if (m <= 4u) Rows<Q>::template run<4>(cache, xrow, wr, blocks, s);
        else Rows<Q>::template run<8>(cache, xrow, wr, blocks, s);
        const float bv = p->has_bias ? rlx_to_float(bias[j]) : 0.0f;
        for (uint r = 0; r < m; ++r) y[(uint64_t)r * ys + j] = rlx_from_float<T>(rlx_activation(p->act, s[r] + bv));
    }
    return true;
}

}  // namespace rlx_vnni

// gemv_<fmt> and gemv1_<fmt> of the formats above (on the CPU the two are
// one computation, as in quant.h).
template <typename Q, typename T>
RLX_KERNEL gemv_q_vnni(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const uchar *, w, 1),
                       RLX_BUF(RLX_DEVICE T *, y, 2), RLX_BUF(RLX_DEVICE const T *, bias, 3),
                       RLX_PARAMS(QuantGemvParams, p, 4) RLX_IDS) {
    const uint n = p->n, rpg = p->rows_per_group;
    const uint j0 = rlx_group_id.x * rpg;
    if (j0 >= n || p->m == 0u) return;
    const uint j1 = rpg < n - j0 ? j0 + rpg : n;
    if (!rlx_vnni::gemv<Q, T>(x, w, y, bias, p, j0, j1, rlx_ids_arg.dispatch)) rlx_q_gemv_cpu<Q, T>(x, w, y, bias, p, j0, j1);
}

#endif
