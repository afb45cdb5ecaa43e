// The decode GEMV y = x W^T of q8_0, q5_0 and the K-quants (q2_k .. q6_k)
// on ARM64, in integer dot products of the weights' codes. Included by
// csrc/host_kernels_neondot.cpp (RLX_ARM64_DOTPROD: SDOT, vdotq_s32) and
// csrc/host_kernels_neon.cpp (plain ARMv8.0 NEON: the same sums from
// widening multiplies, vmull_s8, and pairwise accumulation, vpadalq_s16),
// after shaders/quant.h (the block layouts, rlx_q_gemv_cpu: the f32 form).
//
// Why integers: the f32 form widens every code to a float and multiplies it
// by its scale before the FMA; here the codes stay bytes (q8_0: q; q5_0:
// q - 16; q4_k / q5_k: q; q6_k: q - 32; q3_k: q - 4 + 4 h; q2_k: q, all in
// int8), 16 of them dot 16 bytes of x in one SDOT, each sub-block's integer
// scale multiplies its 32-bit sums once, and the float scales apply once per
// block (d times x's block scale).
//
// Precision: SDOT takes 8-bit x; the GEMV's bound (1.2e-5 sum |x||w|, f32
// accumulation) holds per output, so a block must keep its small elements
// beside a large one. Each block of an x row (the format's block: 32 or
// 256 elements) is split into int8 pieces, x = s (p0 + p1 / 254 + p2 /
// 254^2 + ...) with s = amax / 127, p0 = round(x / s) and each next piece
// the rounded remainder of the previous times 254 (a remainder is at most
// 1/2, so |p| <= 127). Three pieces leave an element amax * 2^-24, five
// amax * 2^-39. Three are plenty where every block is narrow (amax at most
// 16 times the block's mean |x|: the rounding errors, random in sign, then
// stay under 1e-3 of the bound), so a dispatch takes three unless some
// block is wider; then five. Four (amax * 2^-31) failed the bound by 27x on
// a block of 1e-3 values with a 3e4 spike on a zero weight (q3_k, the
// test's hard x; the x86 VNNI form's 2^-30 fails it too, by 1.6x); five
// pass it at 0.06 of the bound. The integer sums are exact and reduced to
// one total a piece and block before any rounding, so the NEON and dotprod
// forms give the same bits (tests/runtime/test_arm64_host.py checks that,
// and both against float64). The min terms (q2_k, q4_k, q5_k: dmin * m *
// sum x) use f32 sums of x over each 16 elements. Rows of x with a NaN, an
// infinity or a block maximum under 1e-30 (where 127 / amax would
// overflow) take the f32 form, which propagates them as every other kernel
// does; so does a failed allocation.
//
// Cost (vector instructions per 32 weights of q4_k, counted from the
// source, not measured: emulation cannot time it, and no ARM64 machine was
// at hand): the f32 form ~50 to decode plus ~16 a row of x; SDOT ~8 plus
// ~17 a row (three pieces; ~27 with five); the widening multiplies ~8 plus
// ~35 a row. So SDOT takes every m (at m = 8 with five pieces it may lose),
// the plain NEON form only m = 1 (kNeonMaxM), where it is ~43 against ~66.
//
// Overflow: a 32-bit lane sums 4 products a 16-element dot (|q x| <= 128 *
// 127), times the sub-block's scale, over a block: at most q6_k's 16
// sub-blocks * 4 * 32 * 127 * 128 < 2^25.
//
// x is converted once per dispatch and thread (rlx_ids::dispatch), as in
// the VNNI form: the groups of one dispatch share x.
#ifndef RLX_HOST_QUANT_ARM64_H
#define RLX_HOST_QUANT_ARM64_H

#include <arm_neon.h>
#include <string.h>

#include "host_heap_buffer.h"
#include "host_quant_int_rows.h"

namespace {   // each level's translation unit keeps its own copy (another instruction set)
namespace rlx_a64q {

#define RLX_A64Q_INLINE static inline __attribute__((always_inline))

constexpr uint kPieces = 5;        // stored; a dispatch uses kNarrowPieces or all
constexpr uint kNarrowPieces = 3;  // where every block is narrow (amax <= kNarrowRatio * mean |x|)
constexpr float kNarrowRatio = 16.0f;
constexpr float kRange = 127.0f;   // |p0| <= 127
constexpr float kStep = 254.0f;    // p(i + 1) = round(remainder(i) * 254), |.| <= 127
constexpr float kMinBlockMax = 1e-30f;
constexpr uint kNeonMaxM = 1;      // the widening-multiply form's rows of x at most (Cost, above)

// acc plus the 16 products w[i] x[i], summed in fours into its lanes.
#if defined(RLX_ARM64_DOTPROD) && (defined(__ARM_FEATURE_DOTPROD) || !defined(__clang__))
RLX_A64Q_INLINE int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t x) { return vdotq_s32(acc, w, x); }
#elif defined(RLX_ARM64_DOTPROD)
// Clang before 16 declares vdotq_s32 only under -march=...+dotprod (not
// under a target attribute): the instruction itself, which the attribute
// lets the assembler take.
RLX_A64Q_INLINE int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t x) {
    __asm__("sdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(w), "w"(x));
    return acc;
}
#else
RLX_A64Q_INLINE int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t x) {
    // |w x| <= 128 * 127 is exact in 16 bits; the pairwise accumulate widens.
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(x)));
    return vpadalq_s16(acc, vmull_high_s8(w, x));
}
#endif

// x rows as kPieces int8 pieces, per block of `group` elements; the GEMV
// reads the first `pieces` of them.
struct XInt8 : RlxXKey {
    bool usable = false;           // false: some block needs the f32 form
    uint pieces = kPieces;         // kNarrowPieces where every block is narrow
    RlxHeapBuffer<int8_t> q;       // [m][k / group][kPieces][group]
    RlxHeapBuffer<float> scale;    // [m][k / group]: s
    RlxHeapBuffer<float> sum16;    // [m][k / 16]: f32 sums of x (the min terms)
};

RLX_A64Q_INLINE float32x4_t load4(const float *p) { return vld1q_f32(p); }
RLX_A64Q_INLINE float32x4_t load4(const half *p) { return vcvt_f32_f16(vld1_f16((const float16_t *)p)); }

enum Split { kSpecial, kNarrow, kWide };

// One block of one x row (group elements at xb, group <= 256) into its
// pieces: kSpecial where it needs the f32 form, kWide where its maximum
// is over kNarrowRatio times its mean |x| (the dispatch then takes all
// pieces).
template <typename T>
RLX_A64Q_INLINE Split split_block(const T *xb, uint group, int8_t *q, float *scale, float *sums) {
    float32x4_t v[64];
    uint32x4_t finite = vdupq_n_u32(~0u);
    float32x4_t amax = vdupq_n_f32(0.0f), asum = vdupq_n_f32(0.0f);
    for (uint i = 0; i < group / 4u; ++i) {
        v[i] = load4(xb + 4u * i);
        const float32x4_t z = vsubq_f32(v[i], v[i]);   // NaN exactly for NaN and +-inf
        finite = vandq_u32(finite, vceqq_f32(z, z));
        amax = vmaxq_f32(amax, vabsq_f32(v[i]));
        asum = vaddq_f32(asum, vabsq_f32(v[i]));
    }
    const float a = vmaxvq_f32(amax);
    if (vminvq_u32(finite) == 0u || (a != 0.0f && a < kMinBlockMax)) return kSpecial;
    const float inv = a > 0.0f ? kRange / a : 0.0f;
    *scale = a / kRange;
    for (uint i = 0; i < group / 4u; i += 4u) {   // 16 elements
        float32x4_t t[4];
        for (uint u = 0; u < 4u; ++u) t[u] = vmulq_n_f32(v[i + u], inv);
        for (uint p = 0; p < kPieces; ++p) {
            int32x4_t r[4];
            for (uint u = 0; u < 4u; ++u) {
                r[u] = vcvtnq_s32_f32(t[u]);
                t[u] = vmulq_n_f32(vsubq_f32(t[u], vcvtq_f32_s32(r[u])), kStep);
            }
            const int16x8_t lo = vcombine_s16(vmovn_s32(r[0]), vmovn_s32(r[1]));
            const int16x8_t hi = vcombine_s16(vmovn_s32(r[2]), vmovn_s32(r[3]));
            vst1q_s8(q + p * group + 4u * i, vcombine_s8(vmovn_s16(lo), vmovn_s16(hi)));
        }
        sums[i / 4u] = vaddvq_f32(vaddq_f32(vaddq_f32(v[i], v[i + 1u]), vaddq_f32(v[i + 2u], v[i + 3u])));
    }
    return a * (float)group <= kNarrowRatio * vaddvq_f32(asum) ? kNarrow : kWide;
}

// Fills c for this dispatch's x (m rows of k, k a multiple of group); false
// where the f32 form must run. Cached per thread across the groups of one
// dispatch.
template <typename T>
static bool prepare(XInt8 &c, const T *x, uint m, uint k, uint stride, uint group, uint64_t dispatch) {
    const RlxXKey want{dispatch, x, m, k, stride, group};
    if (rlx_x_key_holds(c, want)) return c.usable;
    c.dispatch = 0;   // stays invalid until filled
    const uint blocks = k / group;
    if (!c.q.reserve((size_t)m * k * kPieces) || !c.scale.reserve((size_t)m * blocks) ||
        !c.sum16.reserve((size_t)m * (k / 16u)))
        return false;   // out of memory: the f32 form, which needs no buffer
    c.usable = true;
    c.pieces = kNarrowPieces;
    for (uint r = 0; r < m && c.usable; ++r)
        for (uint b = 0; b < blocks && c.usable; ++b) {
            const Split split = split_block(x + (uint64_t)r * stride + (uint64_t)group * b, group,
                                            c.q.data() + ((size_t)r * k + (size_t)group * b) * kPieces,
                                            c.scale.data() + (size_t)r * blocks + b,
                                            c.sum16.data() + (size_t)r * (k / 16u) + (group / 16u) * b);
            c.usable = split != kSpecial;
            if (split == kWide) c.pieces = kPieces;
        }
    rlx_x_key_store(c, want);
    return c.usable;
}

// ---- the formats: a block's int8 codes, its integer sub-block scales ----------
// Codes<Q>: BLOCK and BYTES (Q's), SUB elements per integer scale (SUB ==
// BLOCK: none), MINS (a dmin * m * sum x term). codes(b, buf, sc, d) returns
// the block's BLOCK codes in element order (in buf, or in place) and sets
// sc[BLOCK / SUB] and d; mins(b, s16) is the min term against the block's
// f32 sums of x over each 16 elements.
template <typename Q> struct Codes { static constexpr bool has = false; };

// 32 nibbles of 16 bytes (low: elements 0-15, high: 16-31) as codes.
RLX_A64Q_INLINE void nibbles(const uchar *p, uint8x16_t &lo, uint8x16_t &hi) {
    const uint8x16_t v = vld1q_u8(p);
    lo = vandq_u8(v, vdupq_n_u8(15)), hi = vshrq_n_u8(v, 4);
}

template <> struct Codes<QFmtQ8_0> {   // f16 d, 32 int8: q * d
    static constexpr bool has = true, MINS = false;
    static constexpr uint BLOCK = 32, BYTES = 34, SUB = 32;
    RLX_A64Q_INLINE const int8_t *codes(const uchar *b, int8_t *, int32_t *, float &d) {
        d = rlx_q_f16(b);
        return (const int8_t *)(b + 2);
    }
    RLX_A64Q_INLINE float mins(const uchar *, const float *) { return 0.0f; }
};

template <> struct Codes<QFmtQ5_0> {   // f16 d, u32 fifth bits (bit j: element j), nibbles: d * (q - 16)
    static constexpr bool has = true, MINS = false;
    static constexpr uint BLOCK = 32, BYTES = 22, SUB = 32;
    RLX_A64Q_INLINE const int8_t *codes(const uchar *b, int8_t *buf, int32_t *, float &d) {
        d = rlx_q_f16(b);
        const uint qh = rlx_q_u32(b + 2);
        static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
        const uint8x16_t sel = vld1q_u8(bit), sixteen = vdupq_n_u8(16);
        uint8x16_t q[2];
        nibbles(b + 6, q[0], q[1]);
        for (uint h = 0; h < 2u; ++h) {   // elements 16 h + e: bit e of qh's bytes 2 h, 2 h + 1
            const uint8x16_t bytes = vcombine_u8(vdup_n_u8((uint8_t)(qh >> (16u * h))),
                                                 vdup_n_u8((uint8_t)(qh >> (16u * h + 8u))));
            q[h] = vorrq_u8(q[h], vandq_u8(vtstq_u8(bytes, sel), sixteen));
            vst1q_s8(buf + 16u * h, vsubq_s8(vreinterpretq_s8_u8(q[h]), vdupq_n_s8(16)));
        }
        return buf;
    }
    RLX_A64Q_INLINE float mins(const uchar *, const float *) { return 0.0f; }
};

// q4_k and q5_k: sub-blocks 2j and 2j + 1 are the low and high nibbles of
// the same 32 bytes; w = d * sc * q - dmin * m. q5_k (FIFTH) adds bit i of
// byte e of its 32 high-bit bytes as bit 4 of element e of sub-block i.
template <bool FIFTH> struct CodesK45 {
    static constexpr bool has = true, MINS = true;
    static constexpr uint BLOCK = 256, BYTES = FIFTH ? 176u : 144u, SUB = 32, QS = FIFTH ? 48u : 16u;
    RLX_A64Q_INLINE const int8_t *codes(const uchar *b, int8_t *buf, int32_t *sc, float &d) {
        d = rlx_q_f16(b);
        for (uint i = 0; i < 8u; ++i) sc[i] = (int32_t)(rlx_q_k_scale_min(b + 4, i) & 255u);
        const uint8x16_t one = vdupq_n_u8(1);
        for (uint j = 0; j < 4u; ++j)
            for (uint h = 0; h < 2u; ++h) {   // elements 64 j + 16 h + e (low) and + 32 (high)
                uint8x16_t lo, hi;
                nibbles(b + QS + 32u * j + 16u * h, lo, hi);
                if constexpr (FIFTH) {
                    const uint8x16_t H = vld1q_u8(b + 16 + 16u * h);
                    lo = vorrq_u8(lo, vshlq_n_u8(vandq_u8(vshlq_u8(H, vdupq_n_s8(-(int8_t)(2u * j))), one), 4));
                    hi = vorrq_u8(hi, vshlq_n_u8(vandq_u8(vshlq_u8(H, vdupq_n_s8(-(int8_t)(2u * j + 1u))), one), 4));
                }
                vst1q_u8((uint8_t *)buf + 64u * j + 16u * h, lo);
                vst1q_u8((uint8_t *)buf + 64u * j + 32u + 16u * h, hi);
            }
        return buf;
    }
    RLX_A64Q_INLINE float mins(const uchar *b, const float *s16) {
        float s = 0.0f;
        for (uint i = 0; i < 8u; ++i) s += (float)(rlx_q_k_scale_min(b + 4, i) >> 8u) * (s16[2u * i] + s16[2u * i + 1u]);
        return rlx_q_f16(b + 2) * s;
    }
};
template <> struct Codes<QFmtQ4_K> : CodesK45<false> {};
template <> struct Codes<QFmtQ5_K> : CodesK45<true> {};

// q6_k: in each half g of 128 elements, bytes ql[64 g + e] (A) and
// ql[64 g + 32 + e] (B) give the low nibbles of elements e, 32 + e (low
// nibbles) and 64 + e, 96 + e (high nibbles); qh[32 g + e] their two high
// bits, two at a time; w = d * sc[j / 16] * (q - 32).
template <> struct Codes<QFmtQ6_K> {
    static constexpr bool has = true, MINS = false;
    static constexpr uint BLOCK = 256, BYTES = 210, SUB = 16;
    RLX_A64Q_INLINE const int8_t *codes(const uchar *b, int8_t *buf, int32_t *sc, float &d) {
        d = rlx_q_f16(b + 208);
        for (uint i = 0; i < 16u; ++i) sc[i] = (int32_t)(int8_t)b[192u + i];
        const uint8x16_t m4 = vdupq_n_u8(15), m3 = vdupq_n_u8(3);
        const int8x16_t bias = vdupq_n_s8(32);
        for (uint g = 0; g < 2u; ++g)
            for (uint h = 0; h < 2u; ++h) {
                const uint8x16_t A = vld1q_u8(b + 64u * g + 16u * h), B = vld1q_u8(b + 64u * g + 32u + 16u * h);
                const uint8x16_t H = vld1q_u8(b + 128u + 32u * g + 16u * h);
                uint8x16_t q[4];
                q[0] = vorrq_u8(vandq_u8(A, m4), vshlq_n_u8(vandq_u8(H, m3), 4));
                q[1] = vorrq_u8(vandq_u8(B, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(H, 2), m3), 4));
                q[2] = vorrq_u8(vshrq_n_u8(A, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(H, 4), m3), 4));
                q[3] = vorrq_u8(vshrq_n_u8(B, 4), vshlq_n_u8(vshrq_n_u8(H, 6), 4));
                for (uint t = 0; t < 4u; ++t)
                    vst1q_s8(buf + 128u * g + 32u * t + 16u * h, vsubq_s8(vreinterpretq_s8_u8(q[t]), bias));
            }
        return buf;
    }
    RLX_A64Q_INLINE float mins(const uchar *, const float *) { return 0.0f; }
};

// q2_k and q3_k: in half g of 128 elements, byte 32 g + e of their 2-bit
// codes holds elements 32 t + e (t = 0..3) in bits 2 t; a scale per 16
// elements. q2_k: w = d * (sc & 15) * q - dmin * (sc >> 4) (scale bytes
// 0..15, codes at 16, d and dmin at 80 and 82). q3_k: w = d * sc * (q - 4 +
// 4 h), h bit j / 32 of byte j % 32 of the high-bit mask at 0, codes at 32,
// signed 6-bit scales packed in 12 bytes at 96, d at 108.
template <bool Q3> struct CodesK23 {
    static constexpr bool has = true, MINS = !Q3;
    static constexpr uint BLOCK = 256, BYTES = Q3 ? 110u : 84u, SUB = 16, QS = Q3 ? 32u : 16u;
    RLX_A64Q_INLINE const int8_t *codes(const uchar *b, int8_t *buf, int32_t *sc, float &d) {
        d = rlx_q_f16(b + (Q3 ? 108u : 80u));
        for (uint i = 0; i < 16u; ++i) sc[i] = Q3 ? (int32_t)rlx_q_q3k_scale(b + 96, i) : (int32_t)(b[i] & 15u);
        const uint8x16_t m3 = vdupq_n_u8(3), one = vdupq_n_u8(1);
        for (uint g = 0; g < 2u; ++g)
            for (uint h = 0; h < 2u; ++h) {
                const uint8x16_t c = vld1q_u8(b + QS + 32u * g + 16u * h);
                for (uint t = 0; t < 4u; ++t) {
                    const uint8x16_t q = vandq_u8(vshlq_u8(c, vdupq_n_s8(-(int8_t)(2u * t))), m3);
                    int8x16_t v = vreinterpretq_s8_u8(q);
                    if constexpr (Q3) {   // q - 4 + 4 h
                        const uint8x16_t H = vld1q_u8(b + 16u * h);
                        const uint8x16_t hb = vandq_u8(vshlq_u8(H, vdupq_n_s8(-(int8_t)(4u * g + t))), one);
                        v = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(q, vshlq_n_u8(hb, 2))), vdupq_n_s8(4));
                    }
                    vst1q_s8(buf + 128u * g + 32u * t + 16u * h, v);
                }
            }
        return buf;
    }
    RLX_A64Q_INLINE float mins(const uchar *b, const float *s16) {
        float s = 0.0f;
        for (uint i = 0; i < 16u; ++i) s += (float)(b[i] >> 4u) * s16[i];
        return rlx_q_f16(b + 82) * s;
    }
};
template <> struct Codes<QFmtQ2_K> : CodesK23<false> {};
template <> struct Codes<QFmtQ3_K> : CodesK23<true> {};

// The M outputs of one W row (blocks blocks at wr) against x rows xrow[],
// from the first P pieces of x.
template <typename Q, uint M, uint P>
static inline void rows(const XInt8 &c, const uint *xrow, const uchar *wr, uint blocks, float *out) {
    using C = Codes<Q>;
    constexpr uint SUBS = C::BLOCK / C::SUB;
    float acc[M], mins[M];
    for (uint r = 0; r < M; ++r) acc[r] = 0.0f, mins[r] = 0.0f;
    alignas(16) int8_t buf[C::BLOCK];
    int32_t sc[SUBS];
    for (uint blk = 0; blk < blocks; ++blk) {
        const uchar *b = wr + (uint64_t)blk * C::BYTES;
        float d;
        const int8_t *q = C::codes(b, buf, sc, d);
        for (uint r = 0; r < M; ++r) {
            const int8_t *xb = c.q.data() + ((size_t)xrow[r] * c.k + (size_t)C::BLOCK * blk) * kPieces;
            int32x4_t ip[P];
            for (uint p = 0; p < P; ++p) ip[p] = vdupq_n_s32(0);
            for (uint s = 0; s < SUBS; ++s)
                for (uint p = 0; p < P; ++p) {
                    int32x4_t t = SUBS > 1u ? vdupq_n_s32(0) : ip[p];
                    for (uint u = 0; u < C::SUB; u += 16u)
                        t = dot16(t, vld1q_s8(q + C::SUB * s + u), vld1q_s8(xb + p * C::BLOCK + C::SUB * s + u));
                    ip[p] = SUBS > 1u ? vmlaq_n_s32(ip[p], t, sc[s]) : t;
                }
            // Each piece's exact block total (the two levels spread it over
            // the lanes differently: totals first keeps their results the
            // same bits), weighted 254^-p (Horner, in f32), times the
            // block's factor d * s.
            float f = (float)vaddvq_s32(ip[P - 1u]);
            for (uint p = P - 1u; p-- > 0u;) f = (float)vaddvq_s32(ip[p]) + f * (1.0f / kStep);
            acc[r] += f * (d * c.scale[(size_t)xrow[r] * (c.k / C::BLOCK) + blk]);
            if constexpr (C::MINS)
                mins[r] += C::mins(b, c.sum16.data() + (size_t)xrow[r] * (c.k / 16u) + (C::BLOCK / 16u) * blk);
        }
    }
    for (uint r = 0; r < M; ++r) out[r] = acc[r] - mins[r];
}

// rows<Q, M, P> for the M of m rows of x (1, 2, 4 or 8: rows past m repeat the last).
template <typename Q, uint P>
RLX_A64Q_INLINE void rows_m(const XInt8 &c, uint m, const uint *xrow, const uchar *wr, uint blocks, float *out) {
    if (m <= 1u) rows<Q, 1, P>(c, xrow, wr, blocks, out);
    else if (m <= 2u) rows<Q, 2, P>(c, xrow, wr, blocks, out);
    else if (m <= 4u) rows<Q, 4, P>(c, xrow, wr, blocks, out);
    else rows<Q, 8, P>(c, xrow, wr, blocks, out);
}

// A weight row's m sums (rlx_qint_rows' Dot), in the piece count the x
// conversion chose.
template <typename Q> struct RowDots {
    RLX_A64Q_INLINE void run(const XInt8 &c, uint m, const uint *xrow, const uchar *wr, uint blocks,
                                    float *s) {
        if (c.pieces == kNarrowPieces) rows_m<Q, kNarrowPieces>(c, m, xrow, wr, blocks, s);
        else rows_m<Q, kPieces>(c, m, xrow, wr, blocks, s);
    }
};

// Rows [j0, j1) of y = act(x W^T + bias); false (nothing written) where x
// needs the f32 form.
template <typename Q, typename T>
static bool gemv(const T *x, const uchar *w, T *y, const T *bias, const QuantGemvParams *p, uint j0, uint j1,
                 uint64_t dispatch) {
    static thread_local XInt8 cache;
    const uint m = p->m < (uint)RLX_QGEMV_MAX_M ? p->m : (uint)RLX_QGEMV_MAX_M, k = p->k;
#if !defined(RLX_ARM64_DOTPROD)
    if (m > kNeonMaxM) return false;   // the f32 form costs fewer instructions there (Cost, above)
#endif
    if (k % Codes<Q>::BLOCK != 0u || !prepare(cache, x, m, k, p->x_stride, Codes<Q>::BLOCK, dispatch)) return false;
    const uint blocks = k / Codes<Q>::BLOCK;
    rlx_qint_rows<RowDots<Q>>(cache, w, (uint64_t)blocks * Codes<Q>::BYTES, blocks, y, bias, p, m, j0, j1);
    return true;
}

}  // namespace rlx_a64q

RLX_QINT_GEMV_KERNEL(gemv_q_arm64, rlx_a64q::gemv)

}  // namespace

// The exports, in the including file's level (its RLX_CPU_KERNEL_SUFFIX).
#define RLX_A64Q_GEMVS(fmt_type, fmt)                                    \
    RLX_CPU_EXPORT2(gemv_q_arm64, fmt_type, float, gemv_##fmt##_f32)     \
    RLX_CPU_EXPORT2(gemv_q_arm64, fmt_type, half, gemv_##fmt##_f16)      \
    RLX_CPU_EXPORT2(gemv_q_arm64, fmt_type, float, gemv1_##fmt##_f32)    \
    RLX_CPU_EXPORT2(gemv_q_arm64, fmt_type, half, gemv1_##fmt##_f16)
RLX_A64Q_GEMVS(QFmtQ8_0, q8_0)
RLX_A64Q_GEMVS(QFmtQ5_0, q5_0)
RLX_A64Q_GEMVS(QFmtQ2_K, q2_k)
RLX_A64Q_GEMVS(QFmtQ3_K, q3_k)
RLX_A64Q_GEMVS(QFmtQ4_K, q4_k)
RLX_A64Q_GEMVS(QFmtQ5_K, q5_k)
RLX_A64Q_GEMVS(QFmtQ6_K, q6_k)

#endif
