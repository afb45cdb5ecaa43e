// The q5_0 decode GEMV y = x W^T on AVX-512 with VNNI
// (csrc/host_kernels_avx512vnni.cpp): the AVX2 form's arithmetic
// (csrc/host_quant_q5_0_avx2.h: a block's codes stay bytes, x's three int8
// pieces from csrc/host_quant_q5_0_pieces.h, the same exact integer sum P a
// block) on two blocks a 64-byte register, where the AVX-512 build had the
// f32 form (shaders/quant_gemv.h: every code widened to a float). Included
// after shaders/quant.h (the block layout, rlx_q_gemv_cpu).
//
// Why: Gemma 3 270M's q/k/v and gate/up matrices are q5_0, 36 GEMVs of a
// decode step, and the f32 form ran them from cache at ~14 GB/s on two
// cores of an Intel Xeon (benchmarks/README.md, "CPU (2026-12-05, session
// 31)"), bound by its instructions. Here the fifth bits are a mask register
// (one masked byte add of 16 for the AVX2 form's five operations), and
// vpdpwssd folds each piece's multiplier and the sum into one instruction.
#ifndef RLX_HOST_QUANT_Q5_0_AVX512_H
#define RLX_HOST_QUANT_Q5_0_AVX512_H

#include "host_quant_q5_0_pieces.h"

namespace rlx_q5x16 {
namespace {

using rlx_q5x8::kStep;
using rlx_q5x8::lanes_at;
using rlx_q5x8::piece_at;
using rlx_q5x8::row_pitch;
using rlx_q5x8::XPieces;

#define RLX_Q5X16_INLINE static inline __attribute__((always_inline))

// The codes (0..31) of blocks b (bytes 0..31) and b + 1 (32..63) in element
// order, blk at block b; with `two` false the upper block's codes are zero
// (an odd count's last block). Element e < 16 of a block is the low nibble
// of its byte e, 16 + e the high nibble; bit e of its u32 qh is element e's
// fifth bit.
RLX_Q5X16_INLINE __m512i codes(const uchar *blk, bool two) {
    const __m256i n0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(blk + 6)));
    const __m256i n1 = two ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(blk + 28)))
                           : _mm256_setzero_si256();
    __m512i nib = _mm512_inserti64x4(_mm512_castsi256_si512(n0), n1, 1);   // 128-bit lanes: n0 n0 n1 n1
    nib = _mm512_mask_srli_epi16(nib, (__mmask32)0xFF00FF00u, nib, 4);      // lanes 1 and 3: the high nibbles
    const __m512i q = _mm512_and_si512(nib, _mm512_set1_epi8(15));
    uint32_t qh0, qh1 = 0;
    memcpy(&qh0, blk + 2, sizeof qh0);
    if (two) memcpy(&qh1, blk + 24, sizeof qh1);
    return _mm512_mask_add_epi8(q, (__mmask64)qh0 | ((__mmask64)qh1 << 32), q, _mm512_set1_epi8(16));
}

// The f16 scales of blocks b (lanes 0-7) and b + 1 (8-15; zero where
// `two` is false) as floats, blk at block b.
RLX_Q5X16_INLINE __m512 scales(const uchar *blk, bool two) {
    uint16_t h0, h1 = 0;
    memcpy(&h0, blk, sizeof h0);
    if (two) memcpy(&h1, blk + 22, sizeof h1);
    const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short)h0)),
                                              _mm_set1_epi16((short)h1), 1);
    return _mm512_cvtph_ps(h);
}

// Blocks b and b + 1 (b even; only b where `two` is false) of W weight
// rows against M rows of x: acc[w][r] += d (s' P - 2 sum x) lane-wise
// (lanes 0-7 block b, 8-15 block b + 1; s' = s / 181^2; XPieces::lanes),
// whose eight lanes a block add up to d (sum q x - 16 sum x), the block's
// sum of w x. Why the scales and the -16 are lanes: as scalars (d s'
// twice, a broadcast pair, two FMAs of d sum x a pair and a row) they cost
// ~5% of this form's time. Why W: with one x row each weight row reloaded
// x's five 64-byte vectors, and two weight rows a pass share them (640-wide
// rows on a 2-core AMD EPYC, session 40: 4096 rows 82 -> 67 us, 262144
// rows 5.5 -> 4.8 ms).
template <uint M, uint W>
RLX_Q5X16_INLINE void pair(const uchar *const *wr, uint b, bool two, const int8_t *const *xp, const float *const *xl,
                           __m512 (*acc)[M]) {
    const __m512i w0 = _mm512_set1_epi16((short)(kStep * kStep)), w1 = _mm512_set1_epi16((short)kStep),
                  w2 = _mm512_set1_epi16(1);
    __m512i q[W];
    __m512 d[W];
    for (uint w = 0; w < W; ++w) {
        const uchar *blk = wr[w] + (uint64_t)b * 22u;
        q[w] = codes(blk, two);
        d[w] = scales(blk, two);
    }
    for (uint r = 0; r < M; ++r) {
        const int8_t *p = xp[r] + piece_at(b, 0);
        const __m512i x0 = _mm512_loadu_si512((const void *)p), x1 = _mm512_loadu_si512((const void *)(p + 64)),
                      x2 = _mm512_loadu_si512((const void *)(p + 128));
        const float *lanes = xl[r] + lanes_at(b);
        const __m512 scale = _mm512_loadu_ps(lanes), offset = _mm512_loadu_ps(lanes + 16);
        for (uint w = 0; w < W; ++w) {
            const __m512i s0 = _mm512_maddubs_epi16(q[w], x0), s1 = _mm512_maddubs_epi16(q[w], x1),
                          s2 = _mm512_maddubs_epi16(q[w], x2);
            const __m512i P = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(_mm512_madd_epi16(s0, w0), s1, w1), s2, w2);
            acc[w][r] = _mm512_fmadd_ps(_mm512_fmsub_ps(_mm512_cvtepi32_ps(P), scale, offset), d[w], acc[w][r]);
        }
    }
}

// W weight rows' sums against M rows of x (cache rows xrow[r]) into
// out[w][r]: blocks in pairs, two pairs an iteration into their own
// accumulators (two FMA chains a row).
template <uint M, uint W>
RLX_Q5X16_INLINE void rows(const XPieces &c, const uint *xrow, const uchar *const *wr, uint blocks, float (*out)[M]) {
    __m512 even[W][M], odd[W][M];
    const int8_t *xp[M];
    const float *xl[M];
    for (uint r = 0; r < M; ++r) {
        for (uint w = 0; w < W; ++w) even[w][r] = odd[w][r] = _mm512_setzero_ps();
        xp[r] = c.p.data() + (size_t)xrow[r] * row_pitch(blocks);
        xl[r] = c.lanes.data() + (size_t)xrow[r] * lanes_at(blocks + 1u);
    }
    uint b = 0;
    for (; b + 4u <= blocks; b += 4u) {
        pair<M, W>(wr, b, true, xp, xl, even);
        pair<M, W>(wr, b + 2u, true, xp, xl, odd);
    }
    for (; b < blocks; b += 2u) pair<M, W>(wr, b, b + 1u < blocks, xp, xl, even);
    for (uint w = 0; w < W; ++w)
        for (uint r = 0; r < M; ++r) out[w][r] = _mm512_reduce_add_ps(_mm512_add_ps(even[w][r], odd[w][r]));
}

// One weight row against M rows of x (rlx_q5x8::RowDots' form).
template <uint M> struct Rows {
    RLX_Q5X16_INLINE void run(const XPieces &c, const uint *xrow, const uchar *wr, uint blocks, float *out) {
        rows<M, 1u>(c, xrow, &wr, blocks, (float(*)[M])out);
    }
};

// RowDots with two weight rows at once against one row of x.
struct Dots : rlx_q5x8::RowDots<Rows> {
    RLX_Q5X16_INLINE void run_pair(const XPieces &c, const uchar *wr, uint64_t row_bytes, uint blocks, float *s) {
        const uint xrow[1] = {0u};
        const uchar *two_rows[2] = {wr, wr + row_bytes};
        rows<1u, 2u>(c, xrow, two_rows, blocks, (float(*)[1])s);
    }
};

// Rows [j0, j1) of y = act(x W^T + bias); false (nothing written) where x
// needs the f32 form.
template <typename Q, typename T>
static bool gemv(const T *x, const uchar *w, T *y, const T *bias, const QuantGemvParams *p, uint j0, uint j1,
                 uint64_t dispatch) {
    return rlx_q5x8::gemv_rows<Dots>(x, w, y, bias, p, j0, j1, dispatch);
}

}  // namespace
}  // namespace rlx_q5x16

RLX_QINT_GEMV_KERNEL(gemv_q5_0_int8x16, rlx_q5x16::gemv)

RLX_Q5_0_INT_EXPORTS(gemv_q5_0_int8x16)

#endif
