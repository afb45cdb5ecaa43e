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

// Blocks b and b + 1 (b even; only b where `two` is false) of a weight row
// against M rows of x: acc[r] += (d s') P lane-wise (lanes 0-7 block b,
// 8-15 block b + 1; s' = s / 181^2, d s' rounded once as the AVX2 form
// rounds it), offset[r] += d (sum of x) for each block.
template <uint M>
RLX_Q5X16_INLINE void pair(const uchar *wr, uint b, bool two, const int8_t *const *xp, const float *const *xs,
                           const float *const *xsum, __m512 *acc, float *offset) {
    const __m512i w0 = _mm512_set1_epi16((short)(kStep * kStep)), w1 = _mm512_set1_epi16((short)kStep),
                  w2 = _mm512_set1_epi16(1);
    const uchar *blk = wr + (uint64_t)b * 22u;
    const __m512i q = codes(blk, two);
    const float d0 = rlx_q_f16(blk), d1 = two ? rlx_q_f16(blk + 22) : 0.0f;
    for (uint r = 0; r < M; ++r) {
        const int8_t *p = xp[r] + piece_at(b, 0);
        const __m512i s0 = _mm512_maddubs_epi16(q, _mm512_loadu_si512((const void *)p));
        const __m512i s1 = _mm512_maddubs_epi16(q, _mm512_loadu_si512((const void *)(p + 64)));
        const __m512i s2 = _mm512_maddubs_epi16(q, _mm512_loadu_si512((const void *)(p + 128)));
        const __m512i P = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(_mm512_madd_epi16(s0, w0), s1, w1), s2, w2);
        const float f1 = two ? d1 * xs[r][b + 1u] : 0.0f;
        const __m512 f = _mm512_insertf32x8(_mm512_set1_ps(d0 * xs[r][b]), _mm256_set1_ps(f1), 1);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(P), f, acc[r]);
        offset[r] = fmaf(d0, xsum[r][b], offset[r]);
        if (two) offset[r] = fmaf(d1, xsum[r][b + 1u], offset[r]);
    }
}

// A weight row's sums against M rows of x (cache rows xrow[r]): blocks in
// pairs, two pairs an iteration into their own accumulators (two FMA
// chains a row).
template <uint M> struct Rows {
    RLX_Q5X16_INLINE void run(const XPieces &c, const uint *xrow, const uchar *wr, uint blocks, float *out) {
        __m512 even[M], odd[M];
        float offset[M], offset_odd[M];   // sums over blocks of d * (sum of x): the -16 of every code
        const int8_t *xp[M];
        const float *xs[M], *xsum[M];
        for (uint r = 0; r < M; ++r) {
            even[r] = odd[r] = _mm512_setzero_ps();
            offset[r] = offset_odd[r] = 0.0f;
            xp[r] = c.p.data() + (size_t)xrow[r] * row_pitch(blocks);
            xs[r] = c.scale.data() + (size_t)xrow[r] * blocks;
            xsum[r] = c.sum.data() + (size_t)xrow[r] * blocks;
        }
        uint b = 0;
        for (; b + 4u <= blocks; b += 4u) {
            pair<M>(wr, b, true, xp, xs, xsum, even, offset);
            pair<M>(wr, b + 2u, true, xp, xs, xsum, odd, offset_odd);
        }
        for (; b < blocks; b += 2u) pair<M>(wr, b, b + 1u < blocks, xp, xs, xsum, even, offset);
        for (uint r = 0; r < M; ++r)
            out[r] = _mm512_reduce_add_ps(_mm512_add_ps(even[r], odd[r])) - 16.0f * (offset[r] + offset_odd[r]);
    }
};

// Rows [j0, j1) of y = act(x W^T + bias); false (nothing written) where x
// needs the f32 form.
template <typename Q, typename T>
static bool gemv(const T *x, const uchar *w, T *y, const T *bias, const QuantGemvParams *p, uint j0, uint j1,
                 uint64_t dispatch) {
    return rlx_q5x8::gemv_rows<Rows>(x, w, y, bias, p, j0, j1, dispatch);
}

}  // namespace
}  // namespace rlx_q5x16

RLX_QINT_GEMV_KERNEL(gemv_q5_0_int8x16, rlx_q5x16::gemv)

RLX_Q5_0_INT_EXPORTS(gemv_q5_0_int8x16)

#endif
