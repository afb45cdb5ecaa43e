// The decode GEMV y = x W^T of the K-quants (q2_k, q3_k, q4_k, q5_k, q6_k) on CPUs with AVX-512
// VNNI or AVX-VNNI (vpdpwssd: products of 16-bit integers summed in pairs
// into 32-bit lanes, one instruction), and on plain AVX2 (vpmaddwd + vpaddd,
// the same sums in two). Included by csrc/host_kernels_avx512vnni.cpp,
// csrc/host_kernels_avx2vnni.cpp and csrc/host_kernels_avx2.cpp, after
// shaders/quant.h (its decoders' layouts and rlx_q_gemv_cpu, the fallback);
// the vector operations are csrc/host_quant_vnni_ops.h's, in the including
// file's instruction set.
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
// Wide blocks: the error bound above is relative to the block's maximum,
// so a block of small values beside one spike keeps the small values to
// amax * 2^-30 each, and where the spike's weight is zero the product is
// the small values' alone: 256 elements' error, up to 256 |w| amax 2^-30,
// passes the tests' bound 1e-5 sum |x||w| only while the other elements'
// sum of |x| is at least ~0.024 amax. A dispatch with a block whose
// sum |x| minus its maximum is under kWideFloor amax (ten times that
// margin) takes the f32 form. Gaussian-like x has that sum near 70 amax;
// a one-hot block (exact in integers anyway) and spikes over small values
// fall back.
//
// Overflow: a lane sums 16 products a block (256 elements / 16 lanes; the
// AVX-VNNI form keeps two 8-lane accumulators for that), each at most
// 4096 * 16384 = 2^26 (q6_k), so at most 2^30 < 2^31.
//
// x is converted once per dispatch and thread, not per group: the groups of
// one dispatch share x, and rlx_ids::dispatch says which dispatch a group
// belongs to (the host shim numbers them).
#ifndef RLX_HOST_QUANT_VNNI_H
#define RLX_HOST_QUANT_VNNI_H

#include <float.h>
#include <stdlib.h>

#include "host_heap_buffer.h"
#include "host_quant_int_rows.h"
#include "host_quant_vnni_ops.h"

namespace rlx_vnni {

constexpr float kHiRange = 16383.0f;   // |hi| <= 2^14 - 1
constexpr float kLoScale = 32768.0f;   // lo = round((x / s - hi) * 2^15), |lo| <= 2^14
constexpr float kMinBlockMax = 1e-30f;
constexpr float kWideFloor = 0.25f;   // see "Wide blocks" above

// A growing heap array (csrc/host_heap_buffer.h).
template <typename T> using Buffer = RlxHeapBuffer<T>;

// x rows as 16-bit integer pairs, per block of 256 elements.
struct XInt16 : RlxXKey {
    bool usable = false;         // false: some block needs the f32 form
    Buffer<int16_t> hi, lo;      // [m][k]
    Buffer<float> scale;         // [m][k / 256]: x ~= scale * (hi + lo / 32768)
    Buffer<float> sum16;         // [m][k / 16]: f32 sums of x (the min terms)
    Buffer<float> sum32;         // [m][k / 32]: the same over 32 elements
};

// Fills c for this dispatch's x (m rows of k, k a multiple of 256); false
// where a row must take the f32 form. Cached per thread across the groups
// of one dispatch.
template <typename T>
static bool prepare(XInt16 &c, const T *x, uint m, uint k, uint stride, uint64_t dispatch) {
    const RlxXKey want{dispatch, x, m, k, stride, 0};
    if (rlx_x_key_holds(c, want)) return c.usable;
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
            X16 v[16];
            bool special = false;
            for (uint i = 0; i < 16u; ++i) {
                v[i] = x16_load(xb + 16u * i);
                special |= x16_special(v[i]);
            }
            const float a = x16_amax(v, 16u);
            float abs_sum = 0.0f;
            for (uint i = 0; i < 16u; ++i) abs_sum += x16_abs_sum(v[i]);
            if (special || (a != 0.0f && (a < kMinBlockMax || abs_sum - a < kWideFloor * a))) {
                c.usable = false;
                break;
            }
            const float inv = a > 0.0f ? kHiRange / a : 0.0f;
            c.scale[(size_t)r * blocks + b] = a / kHiRange;
            int16_t *hi = c.hi.data() + (size_t)r * k + 256u * b, *lo = c.lo.data() + (size_t)r * k + 256u * b;
            float *sums = c.sum16.data() + (size_t)r * (k / 16u) + 16u * b;
            for (uint i = 0; i < 16u; ++i) {
                x16_split(v[i], inv, kLoScale, hi + 16u * i, lo + 16u * i);
                sums[i] = x16_sum(v[i]);
            }
            float *sums32 = c.sum32.data() + (size_t)r * (k / 32u) + 8u * b;
            for (uint i = 0; i < 8u; ++i) sums32[i] = sums[2u * i] + sums[2u * i + 1u];
        }
    }
    rlx_x_key_store(c, want);
    return c.usable;
}

// One block's integer sums into every row's f32 accumulator, scaled by
// the block's factor d * (x row's block scale).
template <uint M>
RLX_VNNI_INLINE void add_blocks(const XInt16 &c, const uint *xrow, uint blk, float d, const Acc *hi, const Acc *lo,
                                F *acc) {
    for (uint r = 0; r < M; ++r) {
        const float f = d * c.scale[(size_t)xrow[r] * (c.k / 256u) + blk];
        acc[r] = f_add_block(acc[r], hi[r], lo[r], f, f * (1.0f / kLoScale));
    }
}

// One 32-element piece of weights (w: its scaled codes) against elements
// [o, o + 32) of every x row.
template <uint M>
RLX_VNNI_INLINE void dot32(const XInt16 &c, const size_t *xo, size_t o, W w, Acc *hi, Acc *lo) {
    for (uint r = 0; r < M; ++r) {
        hi[r] = acc_dot(hi[r], w, c.hi.data() + xo[r] + o);
        lo[r] = acc_dot(lo[r], w, c.lo.data() + xo[r] + o);
    }
}

// sum of m (8 or 16 f32 lanes) * sums, as __m256 halves: the min terms.
RLX_VNNI_INLINE __m256 min_terms8(__m256 acc, __m256i m_i32, float dmin, const float *sums) {
    return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(m_i32)), _mm256_loadu_ps(sums), acc);
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

// q3_k's 16 signed 6-bit scales, from the 12 packed bytes at q
// (rlx_q_q3k_scale's layout: scale i's low nibble is nibble i / 8 of byte
// i % 8, its high two bits bits 2 (i / 4) of byte 8 + i % 4), a 32-bit word
// (four scales) at a time.
RLX_VNNI_INLINE void q3k_scales(const uchar *q, int16_t *out16) {
    uint32_t u[3], out[4];
    memcpy(u, q, sizeof u);
    const uint32_t low4 = 0x0f0f0f0fu, two = 0x03030303u;
    out[0] = (u[0] & low4) | ((u[2] & two) << 4);
    out[1] = (u[1] & low4) | (((u[2] >> 2) & two) << 4);
    out[2] = ((u[0] >> 4) & low4) | (((u[2] >> 4) & two) << 4);
    out[3] = ((u[1] >> 4) & low4) | (((u[2] >> 6) & two) << 4);
    __m128i bytes;
    memcpy(&bytes, out, sizeof bytes);
    _mm256_storeu_si256((__m256i *)out16, _mm256_sub_epi16(_mm256_cvtepu8_epi16(bytes), _mm256_set1_epi16(32)));
}

// q4_k: sub-blocks 2j and 2j + 1 are the low and high nibbles of the same
// 32 bytes; w = d * sc * q - dmin * m. q5_k (FIFTH) adds bit i of byte e of
// its 32 high-bit bytes as bit 4 of element e of sub-block i.
template <bool FIFTH> struct RowsK45 {
    static constexpr bool has = true;
    static constexpr uint BYTES = FIFTH ? 176u : 144u, QS = FIFTH ? 48u : 16u;
    template <uint M>
    RLX_VNNI_INLINE void run(const XInt16 &c, const uint *xrow, const uchar *wr, uint blocks, float *out) {
        const W low4 = w_set1(15), one = w_set1(1);
        F acc[M];
        __m256 mins[M];   // per sub-block: dmin * m * (sum of x)
        size_t xo[M];
        for (uint r = 0; r < M; ++r) acc[r] = f_zero(), mins[r] = _mm256_setzero_ps(), xo[r] = (size_t)xrow[r] * c.k;
        for (uint blk = 0; blk < blocks; ++blk) {
            const uchar *b = wr + (uint64_t)blk * BYTES;
            uint64_t scales, mins8;
            k_scales_mins(b + 4, scales, mins8);
            Acc hi[M], lo[M];
            for (uint r = 0; r < M; ++r) hi[r] = lo[r] = acc_zero();
            const W H = FIFTH ? w_u8(b + 16) : low4;
            for (uint j = 0; j < 4u; ++j) {
                const W w = w_u8(b + QS + 32u * j);
                W c0 = w_and(w, low4), c1 = w_srl(w, 4);
                if constexpr (FIFTH) {
                    c0 = w_or(c0, w_sll(w_and(w_srl(H, 2u * j), one), 4));
                    c1 = w_or(c1, w_sll(w_and(w_srl(H, 2u * j + 1u), one), 4));
                }
                dot32<M>(c, xo, 256u * blk + 64u * j, w_mul(c0, w_set1((int)((scales >> (16u * j)) & 255u))), hi, lo);
                dot32<M>(c, xo, 256u * blk + 64u * j + 32u,
                         w_mul(c1, w_set1((int)((scales >> (16u * j + 8u)) & 255u))), hi, lo);
            }
            add_blocks<M>(c, xrow, blk, rlx_q_f16(b), hi, lo, acc);
            const __m256i m8 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mins8));
            const float dmin = rlx_q_f16(b + 2);
            for (uint r = 0; r < M; ++r)
                mins[r] = min_terms8(mins[r], m8, dmin, c.sum32.data() + (size_t)xrow[r] * (c.k / 32u) + 8u * blk);
        }
        for (uint r = 0; r < M; ++r) out[r] = f_sum(acc[r]) - hsum8(mins[r]);
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
        const W m4 = w_set1(15), m3 = w_set1(3), m48 = w_set1(48), bias = w_set1(32);
        F acc[M];
        size_t xo[M];
        for (uint r = 0; r < M; ++r) acc[r] = f_zero(), xo[r] = (size_t)xrow[r] * c.k;
        for (uint blk = 0; blk < blocks; ++blk) {
            const uchar *b = wr + (uint64_t)blk * 210u;
            alignas(32) int16_t sc[16];   // int8 scales as words (a 16-byte load: 32 would pass the last block)
            _mm256_store_si256((__m256i *)sc, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192))));
            Acc hi[M], lo[M];
            for (uint r = 0; r < M; ++r) hi[r] = lo[r] = acc_zero();
            for (uint g = 0; g < 2u; ++g) {
                const W A = w_u8(b + 64u * g), B = w_u8(b + 64u * g + 32u), H = w_u8(b + 128u + 32u * g);
                W q[4];
                q[0] = w_or(w_and(A, m4), w_sll(w_and(H, m3), 4));
                q[1] = w_or(w_and(B, m4), w_and(w_sll(H, 2), m48));
                q[2] = w_or(w_srl(A, 4), w_and(H, m48));
                q[3] = w_or(w_srl(B, 4), w_and(w_srl(H, 2), m48));
                for (uint t = 0; t < 4u; ++t)   // quarter t of half g: scales 8 g + 2 t and + 1
                    dot32<M>(c, xo, 256u * blk + 128u * g + 32u * t,
                             w_mul(w_sub(q[t], bias), w_scale_pair(sc, 4u * g + t)), hi, lo);
            }
            add_blocks<M>(c, xrow, blk, rlx_q_f16(b + 208), hi, lo, acc);
        }
        for (uint r = 0; r < M; ++r) out[r] = f_sum(acc[r]);
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
        const W m3 = w_set1(3), one = w_set1(1), four = w_set1(4);
        F acc[M];
        __m256 mins[M][2];   // q2_k: per 16-element group, dmin * m * (sum of x)
        size_t xo[M];
        for (uint r = 0; r < M; ++r)
            acc[r] = f_zero(), mins[r][0] = mins[r][1] = _mm256_setzero_ps(), xo[r] = (size_t)xrow[r] * c.k;
        for (uint blk = 0; blk < blocks; ++blk) {
            const uchar *b = wr + (uint64_t)blk * BYTES;
            alignas(32) int16_t sc[16];
            __m256i sm = _mm256_setzero_si256();   // q2_k: scale in the low nibble of bytes 0..15, min in the high one
            if constexpr (Q3) {
                q3k_scales(b + 96, sc);
            } else {
                sm = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)b));
                _mm256_store_si256((__m256i *)sc, _mm256_and_si256(sm, _mm256_set1_epi16(15)));
            }
            const W H = Q3 ? w_u8(b) : one;
            Acc hi[M], lo[M];
            for (uint r = 0; r < M; ++r) hi[r] = lo[r] = acc_zero();
            for (uint g = 0; g < 2u; ++g) {
                const W codes = w_u8(b + QS + 32u * g);
                for (uint t = 0; t < 4u; ++t) {
                    W q = w_and(w_srl(codes, 2u * t), m3);
                    if constexpr (Q3)   // q - 4 + 4 h
                        q = w_sub(w_or(q, w_sll(w_and(w_srl(H, 4u * g + t), one), 2)), four);
                    dot32<M>(c, xo, 256u * blk + 128u * g + 32u * t, w_mul(q, w_scale_pair(sc, 4u * g + t)), hi, lo);
                }
            }
            add_blocks<M>(c, xrow, blk, rlx_q_f16(b + (Q3 ? 108u : 80u)), hi, lo, acc);
            if constexpr (!Q3) {
                const __m256i m16 = _mm256_srli_epi16(sm, 4);
                const __m256i m_lo = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(m16));
                const __m256i m_hi = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(m16, 1));
                const float dmin = rlx_q_f16(b + 82);
                for (uint r = 0; r < M; ++r) {
                    const float *s16 = c.sum16.data() + (size_t)xrow[r] * (c.k / 16u) + 16u * blk;
                    mins[r][0] = min_terms8(mins[r][0], m_lo, dmin, s16);
                    mins[r][1] = min_terms8(mins[r][1], m_hi, dmin, s16 + 8);
                }
            }
        }
        for (uint r = 0; r < M; ++r) out[r] = f_sum(acc[r]) - hsum8(_mm256_add_ps(mins[r][0], mins[r][1]));
    }
};
template <> struct Rows<QFmtQ2_K> : RowsK23<false> {};
template <> struct Rows<QFmtQ3_K> : RowsK23<true> {};

// A weight row's m sums (rlx_qint_rows' Dot), the rows of x in tiles of
// 1, 2, 4 or 8.
template <typename Q> struct RowDots {
    RLX_VNNI_INLINE void run(const XInt16 &c, uint m, const uint *xrow, const uchar *wr, uint blocks,
                                    float *s) {
        if (m <= 1u) Rows<Q>::template run<1>(c, xrow, wr, blocks, s);
        else if (m <= 2u) Rows<Q>::template run<2>(c, xrow, wr, blocks, s);
        else if (m <= 4u) Rows<Q>::template run<4>(c, xrow, wr, blocks, s);
        else Rows<Q>::template run<8>(c, xrow, wr, blocks, s);
    }
};

// Rows [j0, j1) of y = act(x W^T + bias); false (nothing written) where x
// needs the f32 form.
template <typename Q, typename T>
static bool gemv(const T *x, const uchar *w, T *y, const T *bias, const QuantGemvParams *p, uint j0, uint j1,
                 uint64_t dispatch) {
    static thread_local XInt16 cache;
    const uint m = p->m < (uint)RLX_QGEMV_MAX_M ? p->m : (uint)RLX_QGEMV_MAX_M, k = p->k;
    if (!prepare(cache, x, m, k, p->x_stride, dispatch)) return false;
    const uint blocks = k / (uint)Q::BLOCK;
    rlx_qint_rows<RowDots<Q>>(cache, w, (uint64_t)blocks * (uint)Q::BYTES, blocks, y, bias, p, m, j0, j1);
    return true;
}

}  // namespace rlx_vnni

RLX_QINT_GEMV_KERNEL(gemv_q_vnni, rlx_vnni::gemv)

// The exports, in the including file's instruction set (its
// RLX_CPU_KERNEL_SUFFIX): gemv_<fmt> and gemv1_<fmt> are one computation on
// the CPU (as in quant.h).
#define RLX_VNNI_GEMVS(fmt_type, fmt)                                   \
    RLX_CPU_EXPORT2(gemv_q_vnni, fmt_type, float, gemv_##fmt##_f32)     \
    RLX_CPU_EXPORT2(gemv_q_vnni, fmt_type, half, gemv_##fmt##_f16)      \
    RLX_CPU_EXPORT2(gemv_q_vnni, fmt_type, float, gemv1_##fmt##_f32)    \
    RLX_CPU_EXPORT2(gemv_q_vnni, fmt_type, half, gemv1_##fmt##_f16)
RLX_VNNI_GEMVS(QFmtQ2_K, q2_k)
RLX_VNNI_GEMVS(QFmtQ3_K, q3_k)
RLX_VNNI_GEMVS(QFmtQ4_K, q4_k)
RLX_VNNI_GEMVS(QFmtQ5_K, q5_k)
RLX_VNNI_GEMVS(QFmtQ6_K, q6_k)

#endif
