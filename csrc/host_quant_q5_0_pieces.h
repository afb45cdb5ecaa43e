// x as int8 pieces for the q5_0 decode GEMVs from bytes on x86
// (csrc/host_quant_q5_0_avx2.h, csrc/host_quant_q5_0_avx512.h): each
// translation unit that includes it keeps its own copy (an anonymous
// namespace: the AVX2 and AVX-512 builds compile it with different
// instruction sets, and a shared symbol could be taken from either).
//
// Precision: x is split per 32-element block as x = s (p0 + p1 / 181 +
// p2 / 181^2) with s = amax / 127, p0 = round(x / s) and each next piece
// the rounded remainder times 181 (|p0| <= 127, |p1|, |p2| <= 91: bytes),
// leaving an element amax * 2^-23 (the f32 form's own rounding is 2^-24 of
// each product). The block's sum is then sum q x = s / 181^2 * P with
// P = sum q (181^2 p0 + 181 p1 + p2), which vpmaddwd forms lane-wise from
// the three vpmaddubsw results with the multipliers 181^2 = 32761, 181 and
// 1 (181: the largest base whose square fits its int16 operand; one
// conversion and one FMA a block, where a base of 254 took two of each:
// benchmarks/README.md, "Quantized GEMV"), exact in 32 bits (a lane: 4
// products of at most 31 * (127 * 32761 + 91 * 182)). w = d (q - 16) gives
// d (sum q x - 16 sum x), sum x in f32. A block is narrow where its sum
// |x| minus its maximum is at least kWideFloor times the maximum: the
// ARM64 form's rule (csrc/host_quant_arm64.h, where three pieces measured
// far inside the tests' bound), which a 32-element block of Gaussian x
// passes at ~11 times the maximum and a 30-sigma outlier in it fails (the
// small values' error would be the maximum's times 2^-23). A wide block
// whose other 31 elements are narrow (a spike: Gemma's activations have
// them in a few channels, which sent whole dispatches to the f32 form)
// keeps its largest element apart: the pieces and the f32 sum hold the
// rest, and each weight row adds that element's product in f32
// (XPieces::add_spikes). A block wide without its largest element (two
// spikes) sends the dispatch to the f32 form; so do NaN, infinities and a
// maximum under 1e-24 (above it the block's scale d s / 181^2 is a normal
// float for every f16 d from 6e-8 up), which the f32 form propagates as
// every other kernel does, and a failed allocation.
//
// x is converted once per dispatch and thread (rlx_ids::dispatch), as in
// csrc/host_quant_vnni.h: the groups of one dispatch share x.
#ifndef RLX_HOST_QUANT_Q5_0_PIECES_H
#define RLX_HOST_QUANT_Q5_0_PIECES_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "host_heap_buffer.h"
#include "host_quant_int_rows.h"

namespace rlx_q5x8 {
namespace {


#define RLX_Q5X8_INLINE static inline __attribute__((always_inline))

constexpr float kRange = 127.0f;       // |p0| <= 127
constexpr float kStep = 181.0f;        // p(i + 1) = round(remainder(i) * 181), |.| <= 91
constexpr float kMinBlockMax = 1e-24f;   // see "Precision" above
constexpr float kWideFloor = 1.0f;     // see "Precision" above

// Where piece `piece` of block b of an x row starts in XPieces::p, from the
// row's start: blocks in pairs, each piece of a pair's two blocks side by
// side ([pair][piece][2][32]), so the AVX-512 form loads a piece of two
// blocks in one 64-byte load and the AVX2 form a block's piece in 32 bytes.
RLX_Q5X8_INLINE size_t piece_at(uint b, uint piece) { return 192u * (b >> 1u) + 64u * piece + 32u * (b & 1u); }
// An x row's bytes in XPieces::p: whole pairs (the last of an odd count's
// second half zero).
RLX_Q5X8_INLINE size_t row_pitch(uint blocks) { return 192u * ((blocks + 1u) >> 1u); }

// A wide block's largest element, kept out of the pieces (see "Precision").
struct Spike {
    uint block, element;
    float x;
};

// x rows as three int8 pieces a 32-element block.
struct XPieces : RlxXKey {
    bool usable = false;
    bool any_spike = false;
    RlxHeapBuffer<Spike> spikes;   // [m][k / 32]: row r's first spike_count[r]
    RlxHeapBuffer<uint> spike_count;   // [m]
    RlxHeapBuffer<int8_t> p;      // [m][row_pitch(k / 32)]: piece_at
    RlxHeapBuffer<float> scale;   // [m][k / 32]: s / 181^2, P's scale
    RlxHeapBuffer<float> sum;     // [m][k / 32]: f32 sum of the block's x
    // [m][pair][32], the AVX-512 form's lanes of a pair of blocks b, b + 1:
    // 16 lanes of P's scale (b's eight, then b + 1's), then 16 of 2 sum x
    // (a block's eight lanes of P add up to its sum of q x, so eight lanes
    // of 2 sum x take its 16 sum x; times 2 is exact). An odd count's
    // missing block is zeros.
    RlxHeapBuffer<float> lanes;

    // Adds each of the first `rows` x rows' spikes times weight row wr
    // (q5_0 blocks) to its sum s[r].
    void add_spikes(const uchar *wr, float *s, uint rows) const {
        if (!any_spike) return;
        const uint blocks = k / 32u;
        for (uint r = 0; r < rows; ++r) {
            const Spike *sp = spikes.data() + (size_t)r * blocks;
            for (uint i = 0; i < spike_count[r]; ++i)
                s[r] += QFmtQ5_0::elem(wr + 22u * (uint64_t)sp[i].block, sp[i].element) * sp[i].x;
        }
    }
};

// Where pair b / 2's lanes (XPieces::lanes) start in an x row's.
RLX_Q5X8_INLINE size_t lanes_at(uint b) { return 32u * (b >> 1u); }

RLX_Q5X8_INLINE __m256 load8(const float *p) { return _mm256_loadu_ps(p); }
RLX_Q5X8_INLINE __m256 load8(const half *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

RLX_Q5X8_INLINE float hsum8(__m256 v) {
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps(d, d, 1)));
}
RLX_Q5X8_INLINE float hmax8(__m256 v) {
    const __m128 q = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 d = _mm_max_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_max_ss(d, _mm_shuffle_ps(d, d, 1)));
}

// Four vectors of 8 rounded values as 32 int8 in element order.
RLX_Q5X8_INLINE __m256i pack32(__m256 a, __m256 b, __m256 c, __m256 d) {
    const __m256i ab = _mm256_packs_epi32(_mm256_cvtps_epi32(a), _mm256_cvtps_epi32(b));   // per 128-bit lane
    const __m256i cd = _mm256_packs_epi32(_mm256_cvtps_epi32(c), _mm256_cvtps_epi32(d));
    const __m256i bytes = _mm256_packs_epi16(ab, cd);
    // The two in-lane packs leave the 4-element groups as 0 2 4 6 1 3 5 7.
    return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// A wide block (v: its 32 elements) without its largest element, which
// goes to row r's spikes; a (the block's maximum |x|) and sum (of x) become
// the rest's. False where the rest is not narrow either (or is under
// kMinBlockMax): the f32 form.
RLX_Q5X8_INLINE bool take_spike(XPieces &c, uint r, uint blocks, uint b, __m256 v[4], float &a, float &sum) {
    float e[32];
    for (uint i = 0; i < 4u; ++i) _mm256_storeu_ps(e + 8u * i, v[i]);
    uint top = 0;
    for (uint i = 1; i < 32u; ++i)
        if (fabsf(e[i]) > fabsf(e[top])) top = i;
    const float spike = e[top];
    e[top] = 0.0f;
    float rest_max = 0.0f, rest_abs = 0.0f, rest_sum = 0.0f;
    for (uint i = 0; i < 32u; ++i) {
        rest_max = fmaxf(rest_max, fabsf(e[i]));
        rest_abs += fabsf(e[i]);
        rest_sum += e[i];
    }
    if (rest_max != 0.0f && (rest_max < kMinBlockMax || rest_abs - rest_max < kWideFloor * rest_max)) return false;
    c.spikes[(size_t)r * blocks + c.spike_count[r]++] = Spike{b, top, spike};
    c.any_spike = true;
    for (uint i = 0; i < 4u; ++i) v[i] = _mm256_loadu_ps(e + 8u * i);
    a = rest_max;
    sum = rest_sum;
    return true;
}

// Fills c for this dispatch's x (m rows of k, k a multiple of 32); false
// where x needs the f32 form.
template <typename T>
static bool prepare(XPieces &c, const T *x, uint m, uint k, uint stride, uint64_t dispatch) {
    const RlxXKey want{dispatch, x, m, k, stride, 0};
    if (rlx_x_key_holds(c, want)) return c.usable;
    c.dispatch = 0;   // stays invalid until filled
    const uint blocks = k / 32u;
    const size_t lane_pitch = lanes_at(blocks + 1u);
    if (!c.p.reserve((size_t)m * row_pitch(blocks)) || !c.scale.reserve((size_t)m * blocks) ||
        !c.sum.reserve((size_t)m * blocks) || !c.lanes.reserve((size_t)m * lane_pitch) ||
        !c.spikes.reserve((size_t)m * blocks) || !c.spike_count.reserve(m))
        return false;
    c.any_spike = false;
    for (uint r = 0; r < m; ++r) c.spike_count[r] = 0u;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    c.usable = true;
    for (uint r = 0; r < m && c.usable; ++r) {
        int8_t *row = c.p.data() + (size_t)r * row_pitch(blocks);
        if (blocks & 1u)   // the last pair's empty half: zeros, which the AVX-512 form multiplies by zero codes
            for (uint piece = 0; piece < 3u; ++piece) memset(row + piece_at(blocks, piece), 0, 32u);
        for (uint b = 0; b < blocks; ++b) {
            const T *xb = x + (uint64_t)r * stride + 32u * b;
            __m256 v[4], amax = _mm256_setzero_ps(), abs_sum = _mm256_setzero_ps(), sum = _mm256_setzero_ps(),
                         unordered = _mm256_setzero_ps();
            for (uint i = 0; i < 4u; ++i) {
                v[i] = load8(xb + 8u * i);
                const __m256 a = _mm256_andnot_ps(sign, v[i]);
                amax = _mm256_max_ps(amax, a);
                abs_sum = _mm256_add_ps(abs_sum, a);
                sum = _mm256_add_ps(sum, v[i]);
                const __m256 z = _mm256_sub_ps(v[i], v[i]);   // NaN exactly for NaN and +-inf
                unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(z, z, _CMP_UNORD_Q));
            }
            float a = hmax8(amax), block_sum = hsum8(sum);
            const float total = hsum8(abs_sum);
            if (_mm256_movemask_ps(unordered) != 0 || (a != 0.0f && a < kMinBlockMax) ||
                (a != 0.0f && total - a < kWideFloor * a && !take_spike(c, r, blocks, b, v, a, block_sum))) {
                c.usable = false;
                break;
            }
            const size_t at = (size_t)r * blocks + b;
            c.scale[at] = a / (kRange * kStep * kStep);
            c.sum[at] = block_sum;
            float *lanes = c.lanes.data() + (size_t)r * lane_pitch + lanes_at(b) + 8u * (b & 1u);
            for (uint i = 0; i < 8u; ++i) lanes[i] = c.scale[at], lanes[16u + i] = 2.0f * c.sum[at];
            if ((b & 1u) == 0u && b + 1u == blocks)
                for (uint i = 0; i < 8u; ++i) lanes[8u + i] = lanes[24u + i] = 0.0f;
            const __m256 inv = _mm256_set1_ps(a > 0.0f ? kRange / a : 0.0f), step = _mm256_set1_ps(kStep);
            __m256 t[4], p[4];
            for (uint i = 0; i < 4u; ++i) t[i] = _mm256_mul_ps(v[i], inv);
            for (uint piece = 0; piece < 3u; ++piece) {
                for (uint i = 0; i < 4u; ++i) {
                    p[i] = _mm256_round_ps(t[i], kNearest);
                    t[i] = _mm256_mul_ps(_mm256_sub_ps(t[i], p[i]), step);   // |remainder| <= 1/2
                }
                _mm256_storeu_si256((__m256i *)(row + piece_at(b, piece)), pack32(p[0], p[1], p[2], p[3]));
            }
        }
    }
    rlx_x_key_store(c, want);
    return c.usable;
}

// rlx_qint_rows' Dot over a form's Rows<M> (a weight row's sums against M
// rows of x): the rows of x in tiles of 1, 2, 4 or 8.
template <template <uint> class Rows> struct RowDots {
    RLX_Q5X8_INLINE void run(const XPieces &c, uint m, const uint *xrow, const uchar *wr, uint blocks, float *s) {
        if (m <= 1u) Rows<1>::run(c, xrow, wr, blocks, s);
        else if (m <= 2u) Rows<2>::run(c, xrow, wr, blocks, s);
        else if (m <= 4u) Rows<4>::run(c, xrow, wr, blocks, s);
        else Rows<8>::run(c, xrow, wr, blocks, s);
    }
};

// Rows [j0, j1) of y = act(x W^T + bias) through a form's Dot (RowDots of
// its Rows, or one that adds run_pair); false (nothing written) where x
// needs the f32 form.
template <typename Dot, typename T>
static bool gemv_rows(const T *x, const uchar *w, T *y, const T *bias, const QuantGemvParams *p, uint j0, uint j1,
                      uint64_t dispatch) {
    static thread_local XPieces cache;
    const uint m = p->m < (uint)RLX_QGEMV_MAX_M ? p->m : (uint)RLX_QGEMV_MAX_M, k = p->k;
    if (!prepare(cache, x, m, k, p->x_stride, dispatch)) return false;
    const uint blocks = k / 32u;
    rlx_qint_rows<Dot>(cache, w, (uint64_t)blocks * 22u, blocks, y, bias, p, m, j0, j1);
    return true;
}

}  // namespace
}  // namespace rlx_q5x8

// A form's kernel as q5_0's exports: gemv_ and gemv1_ are one computation on
// the CPU (as in quant.h).
#define RLX_Q5_0_INT_EXPORTS(kernel)                          \
    RLX_CPU_EXPORT2(kernel, QFmtQ5_0, float, gemv_q5_0_f32)   \
    RLX_CPU_EXPORT2(kernel, QFmtQ5_0, half, gemv_q5_0_f16)    \
    RLX_CPU_EXPORT2(kernel, QFmtQ5_0, float, gemv1_q5_0_f32)  \
    RLX_CPU_EXPORT2(kernel, QFmtQ5_0, half, gemv1_q5_0_f16)

#endif
