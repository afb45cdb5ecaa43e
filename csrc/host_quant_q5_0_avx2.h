// The q5_0 decode GEMV y = x W^T on AVX2 (csrc/host_kernels_avx2.cpp, and
// csrc/host_kernels_avx2vnni.cpp with vpdpwssd), in vpmaddubsw: unsigned bytes
// times signed bytes, summed in pairs into 16 bits. Included after
// shaders/quant.h (the block layout, rlx_q_gemv_cpu: the f32 form); x's
// int8 pieces and their precision: csrc/host_quant_q5_0_pieces.h.
//
// Why: Gemma 3's 640-wide matrices are q5_0 (K-quants need K a multiple of
// 256), and the f32 form widens every code to a float: ~40 vector
// operations a 32-element block, which bound it at 4-5 GB/s of blocks a
// core on an AVX2-only AMD EPYC (benchmarks/README.md, "Quantized GEMV",
// session 17). Here a block's codes q (0..31, unsigned) stay bytes: ~10
// operations decode all 32, and each piece of x takes one vpmaddubsw and
// one vpmaddwd.
#ifndef RLX_HOST_QUANT_Q5_0_AVX2_H
#define RLX_HOST_QUANT_Q5_0_AVX2_H

#include "host_quant_q5_0_pieces.h"

namespace rlx_q5x8 {
namespace {

// A q5_0 block's 32 codes (0..31) as bytes in element order: element e < 16
// is the low nibble of byte e, 16 + e its high nibble; bit e of the u32 qh
// is element e's fifth bit.
RLX_Q5X8_INLINE __m256i codes(const uchar *b) {
    // The 16 nibble bytes in both lanes (a broadcast load), the high lane
    // shifted: a blend, where inserting the shifted half took a shuffle
    // (faster a block: benchmarks/README.md, "Quantized GEMV").
    const __m256i nib = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b + 6)));
    const __m256i q = _mm256_and_si256(_mm256_blend_epi32(nib, _mm256_srli_epi16(nib, 4), 0xF0), _mm256_set1_epi8(15));
    uint32_t qh;
    memcpy(&qh, b + 2, sizeof qh);
    // Byte e takes qh's byte e / 8; OR-ing every bit but e % 8 leaves 0xff
    // exactly where bit e is set.
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                                               _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll,
                                                                  0x0303030303030303ll));
    const __m256i others = _mm256_set1_epi64x((long long)0x7fbfdfeff7fbfdfeull);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi8(-1));
    return _mm256_or_si256(q, _mm256_and_si256(set, _mm256_set1_epi8(16)));
}

// Block b of a weight row against M rows of x: acc[r] += d s' P lane-wise
// (s' = s / 181^2), offset[r] += d (sum of x).
template <uint M>
RLX_Q5X8_INLINE void block(const uchar *wr, uint b, const int8_t *const *xp, const float *const *xs,
                           const float *const *xsum, __m256 *acc, float *offset) {
    const __m256i w0 = _mm256_set1_epi16((short)(kStep * kStep)), w1 = _mm256_set1_epi16((short)kStep),
                  w2 = _mm256_set1_epi16(1);
    const uchar *blk = wr + (uint64_t)b * 22u;
    const __m256i q = codes(blk);
    const __m256 d = _mm256_cvtph_ps(_mm_set1_epi16((short)rlx_q_u16(blk)));
    const float ds = _mm256_cvtss_f32(d);
    for (uint r = 0; r < M; ++r) {
        const int8_t *p = xp[r] + piece_at(b, 0);
        const __m256i s0 = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)p));
        const __m256i s1 = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(p + 64)));
        const __m256i s2 = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(p + 128)));
#if defined(RLX_CPU_AVXVNNI)   // the AVX-VNNI build: vpdpwssd for the second and third vpmaddwd and their adds
        const __m256i P = _mm256_dpwssd_avx_epi32(_mm256_dpwssd_avx_epi32(_mm256_madd_epi16(s0, w0), s1, w1), s2, w2);
#else
        const __m256i P = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(s0, w0), _mm256_madd_epi16(s1, w1)),
                                           _mm256_madd_epi16(s2, w2));
#endif
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(P), _mm256_mul_ps(d, _mm256_broadcast_ss(xs[r] + b)), acc[r]);
        offset[r] = fmaf(ds, xsum[r][b], offset[r]);
    }
}

// A weight row's sums against M rows of x (cache rows xrow[r]): blocks in
// pairs, each of a pair into its own accumulators (two FMA chains; an
// accumulator picked by b % 2 at run time lived on the stack).
template <uint M> struct Rows {
    RLX_Q5X8_INLINE void run(const XPieces &c, const uint *xrow, const uchar *wr, uint blocks, float *out) {
        __m256 even[M], odd[M];
        float offset[M], offset_odd[M];   // sums over blocks of d * (sum of x): the -16 of every code
        const int8_t *xp[M];
        const float *xs[M], *xsum[M];
        for (uint r = 0; r < M; ++r) {
            even[r] = odd[r] = _mm256_setzero_ps();
            offset[r] = offset_odd[r] = 0.0f;
            xp[r] = c.p.data() + (size_t)xrow[r] * row_pitch(blocks);
            xs[r] = c.scale.data() + (size_t)xrow[r] * blocks;
            xsum[r] = c.sum.data() + (size_t)xrow[r] * blocks;
        }
        uint b = 0;
        for (; b + 2u <= blocks; b += 2u) {
            block<M>(wr, b, xp, xs, xsum, even, offset);
            block<M>(wr, b + 1u, xp, xs, xsum, odd, offset_odd);
        }
        if (b < blocks) block<M>(wr, b, xp, xs, xsum, even, offset);
        for (uint r = 0; r < M; ++r) out[r] = hsum8(_mm256_add_ps(even[r], odd[r])) - 16.0f * (offset[r] + offset_odd[r]);
    }
};

// Rows [j0, j1) of y = act(x W^T + bias); false (nothing written) where x
// needs the f32 form.
template <typename Q, typename T>
static bool gemv(const T *x, const uchar *w, T *y, const T *bias, const QuantGemvParams *p, uint j0, uint j1,
                 uint64_t dispatch) {
    return rlx_q5x8::gemv_rows<rlx_q5x8::RowDots<Rows>>(x, w, y, bias, p, j0, j1, dispatch);
}

}  // namespace
}  // namespace rlx_q5x8

RLX_QINT_GEMV_KERNEL(gemv_q5_0_int8x, rlx_q5x8::gemv)

RLX_Q5_0_INT_EXPORTS(gemv_q5_0_int8x)

#endif
