// The CUDA decode GEMV's integer form (gemv1i_q, m = 1; the lowering picks
// it over gemv1_q for groups of >= 32 rows) in dot products where the
// weights' codes stay int8 and meet x as int8 pieces in DP4A (four byte products a
// lane a instruction), for the formats whose codes are small integers under
// per-32 or per-16 scales (RlxQInt below). Included by quant.h; CUDA only
// (Metal has no byte dot product, and the CPU has its own integer forms in
// csrc/host_quant_vnni.h and csrc/host_quant_arm64.h).
//
// Why: the f32 form (rlx_q_chunk_dot) widens every code to a float (I2F,
// at an eighth of the FMA rate on sm_90), scales it and reads its x element
// from shared memory one at a time: ~170 instructions a lane per 32
// weights, and the vocabulary-sized GEMV was bound by issue at ~40% of the
// copy bandwidth. Here 32 weights cost 8 word reads and a few bit
// operations to form their codes, and 8 DP4A per piece of x.
//
// Precision: as csrc/host_quant_arm64.h's split, per 32-element chunk of x:
// x = s (p0 + p1 / 254 + p2 / 254^2 + ...), s = amax / 127, p0 = round(x /
// s), each next piece the rounded remainder of the previous times 254 (|p|
// <= 127). Three pieces leave an element amax * 2^-24; a chunk whose
// maximum is over 16 times its mean |x| (a spike beside small values) makes
// the whole x take five (amax * 2^-39), because the GEMV's bound is per
// output (sum |x||w|) and the small values must survive next to the spike.
// The integer sums are exact (|p q| <= 127 * 128, 32 a chunk); the pieces'
// sums combine in f32 (Horner in 1/254) and the chunk's float scales apply
// once. x with a NaN, an infinity or a chunk maximum under 1e-30 (127 /
// amax would overflow) takes the f32 form, which propagates them as every
// other kernel does; so does an x too long for the shared tile's pieces.
//
// Shared layout of x's pieces (the f32 tile's memory, which this form does
// not use): 16-byte units [piece][half][chunk] (lanes on consecutive chunks
// read consecutive units: no bank conflicts), then the chunk scales s
// (float[chunks]) and f32 sums of x over each 16 elements (float[2 chunks],
// for the min terms).
//
// The codes and the chunk dot (RlxQInt, RlxQDotPieces) also compile on the
// CPU under RLX_QPIECES_HOST_TEST, with host forms of the four intrinsics:
// tests/c/quant_pieces_host.cpp runs them against the float64 product in CI.
#if defined(RLX_TARGET_CUDA) || defined(RLX_QPIECES_HOST_TEST)

#define RLX_QX_PIECES 5u         // stored where the tile holds them
#define RLX_QX_NARROW_PIECES 3u  // where every chunk is narrow
#define RLX_QX_NARROW_RATIO 16.0f
#define RLX_QX_MIN_MAX 1e-30f
// Member functions of the dot policies (RLX_INLINE is static: for free
// functions and the traits' static members).
#ifdef RLX_TARGET_CUDA
#define RLX_QMEMBER __device__ __forceinline__
#else
#define RLX_QMEMBER inline
#endif

// Pieces of x the tile's bytes can hold for kp elements (0: none fit).
RLX_INLINE uint rlx_qx_stored_pieces(uint kp, uint tile_bytes) {
    const uint per_chunk_floats = 12u;   // a scale and two sums a chunk
    const uint extra = kp / 32u * per_chunk_floats;
    if (RLX_QX_PIECES * kp + extra <= tile_bytes) return RLX_QX_PIECES;
    if (RLX_QX_NARROW_PIECES * kp + extra <= tile_bytes) return RLX_QX_NARROW_PIECES;
    return 0u;
}

#ifdef RLX_TARGET_CUDA
// Chunks of x a SIMD group splits together (rlx_qx_split): their loads
// issue together and the next batch's while this one reduces, and their
// reductions interleave. One chunk at a time, each chunk was an L2 round
// trip then a chain of ~15 dependent shuffles: for k = 4096 a group's 16
// chunks took ~9K cycles a SIMD group, which was most of gemv1i's time on
// weights of a few thousand rows (benchmarks/README.md, "H100, session 37").
#ifndef RLX_QX_SPLIT_BATCH   // an experiment's KERNEL_DEFINES may set another
#define RLX_QX_SPLIT_BATCH 4u
#endif

// x's row (k = 32 chunks elements) into its pieces in the tile, a SIMD group
// a chunk, a lane an element. Every thread of the group calls it (full
// warps: nt % 32 == 0). Returns bit 0: some chunk needs the f32 form; bit
// 1: some chunk is wide. Both are uniform across the group (it ends in a
// group barrier, so the pieces are visible on return).
template <typename T>
RLX_INLINE uint rlx_qx_split(RLX_DEVICE const T *x, uchar *xq, uint chunks, uint stored, uint tid, uint nt) {
    const uint B = RLX_QX_SPLIT_BATCH;
    const uint lane = tid & 31u, warp = tid >> 5u, warps = nt >> 5u;
    float *scale = (float *)(xq + stored * chunks * 32u), *sum16 = scale + chunks;
    int special = 0, wide = 0;
    // Chunk i of a batch starting at c0 is c0 + i warps (warp-uniform
    // bounds: full-mask shuffles); chunks past the end load 0 and store nothing.
    float next[B];
#pragma unroll
    for (uint i = 0; i < B; ++i) next[i] = warp + i * warps < chunks ? rlx_to_float(x[(warp + i * warps) * 32u + lane]) : 0.0f;
    for (uint c0 = warp; c0 < chunks; c0 += B * warps) {
        float v[B], amax[B], asum[B], s16[B];
        bool finite[B];
#pragma unroll
        for (uint i = 0; i < B; ++i) {
            v[i] = next[i];
            const uint cn = c0 + (B + i) * warps;
            next[i] = cn < chunks ? rlx_to_float(x[cn * 32u + lane]) : 0.0f;
            finite[i] = isfinite(v[i]);
            amax[i] = asum[i] = finite[i] ? fabsf(v[i]) : 0.0f;
            s16[i] = finite[i] ? v[i] : 0.0f;
        }
#pragma unroll
        for (uint off = 16u; off > 0u; off >>= 1u) {
#pragma unroll
            for (uint i = 0; i < B; ++i) {
                amax[i] = fmaxf(amax[i], __shfl_xor_sync(0xffffffffu, amax[i], off));
                asum[i] += __shfl_xor_sync(0xffffffffu, asum[i], off);
                if (off < 16u) s16[i] += __shfl_xor_sync(0xffffffffu, s16[i], off);   // within each half
            }
        }
#pragma unroll
        for (uint i = 0; i < B; ++i) {
            const uint c = c0 + i * warps;
            if (c >= chunks) break;   // uniform
            if (!__all_sync(0xffffffffu, finite[i]) || (amax[i] != 0.0f && amax[i] < RLX_QX_MIN_MAX)) special = 1;
            if (amax[i] * 32.0f > RLX_QX_NARROW_RATIO * asum[i]) wide = 1;
            float t = amax[i] > 0.0f && finite[i] ? v[i] * (127.0f / amax[i]) : 0.0f;
            for (uint p = 0; p < stored; ++p) {
                const float r = rintf(t);
                xq[((2u * p + (lane >> 4u)) * chunks + c) * 16u + (lane & 15u)] = (uchar)(int)r;
                t = (t - r) * 254.0f;
            }
            if (lane == 0u) scale[c] = amax[i] / 127.0f;
            if ((lane & 15u) == 0u) sum16[2u * c + (lane >> 4u)] = s16[i];
        }
    }
    const uint flags = __syncthreads_or(special) ? 1u : 0u;
    return flags | (__syncthreads_or(wide) ? 2u : 0u);
}
#endif

// ---- reading a block's codes from the stage ---------------------------------------
// N 32-bit words from p (any alignment) in the stage: aligned words and
// funnel shifts. Reads up to 3 bytes before p (the stage is 4-aligned, so
// not before it) and, at an unaligned p, 3 after the N words (the GEMV
// leaves that slack at the stage's end). ALIGNED: p is 16-byte aligned
// and N a multiple of 4, so the words are whole vector reads (the compiler
// cannot see the alignment of a stage's blocks by itself).
template <uint N, bool ALIGNED = false>
RLX_INLINE void rlx_qi_words(const uchar *p, uint *w) {
    if constexpr (ALIGNED) {
        static_assert(N % 4u == 0u, "whole 16-byte vectors");
        for (uint i = 0; i < N / 4u; ++i) {
            const uint4 v = ((const uint4 *)p)[i];
            w[4u * i] = v.x, w[4u * i + 1u] = v.y, w[4u * i + 2u] = v.z, w[4u * i + 3u] = v.w;
        }
        return;
    }
    // p less its offset mod 4 by pointer arithmetic: an integer round trip
    // would hide from the compiler that p is in shared memory (generic
    // 64-bit loads instead of LDS).
    const uint off = (uint)(unsigned long long)p & 3u, sh = off * 8u;
    const uint *a = (const uint *)(p - off);
    uint prev = a[0];
#pragma unroll
    for (uint i = 0; i < N; ++i) {
        const uint next = (sh != 0u || i + 1u < N) ? a[i + 1u] : 0u;
        w[i] = __funnelshift_r(prev, next, sh);
        prev = next;
    }
}

// Bits 0..3 of t to bit 4 of bytes 0..3 (the four shifted copies of t do
// not overlap, so the multiply carries nothing between them).
RLX_INLINE uint rlx_qi_spread4_bit4(uint t) { return (t * 0x02040810u) & 0x10101010u; }

// Per format: has; SPLIT16 (the two 16-element halves of a chunk have their
// own scales); MINS (a term on x's sums). codes(b, s, w): chunk s of the
// block at b as 8 words of int8 codes in element order (q4_k and q5_k,
// whose blocks are whole 16-byte vectors, also take codes<true> for a
// 16-byte aligned b: RlxQDotPieces in aligned stages); scales(b, s, f0,
// f1): the multipliers of the halves' integer dots (f0 == f1 without
// SPLIT16); mins(b, s, x0, x1): the term on the halves' sums of x.
template <typename Q>
struct RlxQInt {
    enum { has = 0, SPLIT16 = 0, MINS = 0 };
    RLX_INLINE void codes(const uchar *, uint, uint *) {}
    RLX_INLINE void scales(const uchar *, uint, float &f0, float &f1) { f0 = f1 = 0.0f; }
    RLX_INLINE float mins(const uchar *, uint, float, float) { return 0.0f; }
};

// 16 bytes of nibbles (low: elements 0-15, high: 16-31) as 8 words of codes.
RLX_INLINE void rlx_qi_nibbles16(const uchar *p, uint *w) {
    uint q[4];
    rlx_qi_words<4>(p, q);
    for (uint i = 0; i < 4u; ++i) w[i] = q[i] & 0x0F0F0F0Fu, w[4u + i] = (q[i] >> 4u) & 0x0F0F0F0Fu;
}

// The fifth bits of q5_0 / q5_1 (bit e of qh: element e) into bit 4 of each code.
RLX_INLINE void rlx_qi_fifth_bits(uint qh, uint *w) {
    for (uint i = 0; i < 8u; ++i) w[i] |= rlx_qi_spread4_bit4((qh >> (4u * i)) & 15u);
}

// The codes of a q5_0 / q5_1 block: its u32 of fifth bits at qh, nibbles at qs.
RLX_INLINE void rlx_qi_five_bit_codes(const uchar *qh, const uchar *qs, uint *w) {
    uint h;
    rlx_qi_words<1>(qh, &h);
    rlx_qi_nibbles16(qs, w);
    rlx_qi_fifth_bits(h, w);
}

// Each code's byte minus bias (signed int8 codes from biased unsigned ones).
RLX_INLINE void rlx_qi_unbias(uint *w, uint bias) {
    for (uint i = 0; i < 8u; ++i) w[i] = __vsub4(w[i], bias * 0x01010101u);
}

// The legacy formats' scales: an f16 d at the block's start, one a chunk,
// and (RlxQIntDM) an f16 m after it whose term is m times the chunk's sum of x.
struct RlxQIntD {
    enum { has = 1, SPLIT16 = 0, MINS = 0 };
    RLX_INLINE void scales(const uchar *b, uint, float &f0, float &f1) { f0 = f1 = rlx_q_f16(b); }
    RLX_INLINE float mins(const uchar *, uint, float, float) { return 0.0f; }
};
struct RlxQIntDM : RlxQIntD {
    enum { MINS = 1 };
    RLX_INLINE float mins(const uchar *b, uint, float x0, float x1) { return rlx_q_f16(b + 2) * (x0 + x1); }
};

template <>
struct RlxQInt<QFmtQ8_0> : RlxQIntD {
    RLX_INLINE void codes(const uchar *b, uint, uint *w) { rlx_qi_words<8>(b + 2, w); }
};

template <>
struct RlxQInt<QFmtQ4_0> : RlxQIntD {   // q - 8
    RLX_INLINE void codes(const uchar *b, uint, uint *w) {
        rlx_qi_nibbles16(b + 2, w);
        rlx_qi_unbias(w, 8u);
    }
};

template <>
struct RlxQInt<QFmtQ4_1> : RlxQIntDM {   // d q + m
    RLX_INLINE void codes(const uchar *b, uint, uint *w) { rlx_qi_nibbles16(b + 4, w); }
};

template <>
struct RlxQInt<QFmtQ5_0> : RlxQIntD {   // q - 16
    RLX_INLINE void codes(const uchar *b, uint, uint *w) {
        rlx_qi_five_bit_codes(b + 2, b + 6, w);
        rlx_qi_unbias(w, 16u);
    }
};

template <>
struct RlxQInt<QFmtQ5_1> : RlxQIntDM {   // d q + m
    RLX_INLINE void codes(const uchar *b, uint, uint *w) { rlx_qi_five_bit_codes(b + 4, b + 8, w); }
};

// K-quants: chunk s of 8 (16-element scales: halves s 2 and s 2 + 1).
template <>
struct RlxQInt<QFmtQ2_K> {   // d (sc & 15) q - dmin (sc >> 4), per 16
    enum { has = 1, SPLIT16 = 1, MINS = 1 };
    RLX_INLINE void codes(const uchar *b, uint s, uint *w) {
        rlx_qi_words<8>(b + 16u + 32u * (s >> 2u), w);
        const uint shift = 2u * (s & 3u);
        for (uint i = 0; i < 8u; ++i) w[i] = (w[i] >> shift) & 0x03030303u;
    }
    RLX_INLINE void scales(const uchar *b, uint s, float &f0, float &f1) {
        const float d = rlx_q_f16(b + 80);
        f0 = d * (float)(b[2u * s] & 15u), f1 = d * (float)(b[2u * s + 1u] & 15u);
    }
    RLX_INLINE float mins(const uchar *b, uint s, float x0, float x1) {
        return -rlx_q_f16(b + 82) * ((float)(b[2u * s] >> 4u) * x0 + (float)(b[2u * s + 1u] >> 4u) * x1);
    }
};

template <>
struct RlxQInt<QFmtQ3_K> {   // d sc (q - 4 + 4 h), per 16
    enum { has = 1, SPLIT16 = 1, MINS = 0 };
    RLX_INLINE void codes(const uchar *b, uint s, uint *w) {
        uint h[8];
        rlx_qi_words<8>(b + 32u + 32u * (s >> 2u), w);
        rlx_qi_words<8>(b, h);
        const uint shift = 2u * (s & 3u);
        for (uint i = 0; i < 8u; ++i)
            w[i] = __vsub4(((w[i] >> shift) & 0x03030303u) | (((h[i] >> s) & 0x01010101u) << 2u), 0x04040404u);
    }
    RLX_INLINE void scales(const uchar *b, uint s, float &f0, float &f1) {
        const float d = rlx_q_f16(b + 108);
        f0 = d * (float)rlx_q_q3k_scale(b + 96, 2u * s), f1 = d * (float)rlx_q_q3k_scale(b + 96, 2u * s + 1u);
    }
    RLX_INLINE float mins(const uchar *, uint, float, float) { return 0.0f; }
};

// q4_k / q5_k: d sc per 32 elements, minus dmin m times the chunk's sum of x.
struct RlxQIntK45 {
    enum { has = 1, SPLIT16 = 0, MINS = 1 };
    RLX_INLINE void scales(const uchar *b, uint s, float &f0, float &f1) {
        f0 = f1 = rlx_q_f16(b) * (float)(rlx_q_k_scale_min(b + 4, s) & 255u);
    }
    RLX_INLINE float mins(const uchar *b, uint s, float x0, float x1) {
        return -rlx_q_f16(b + 2) * (float)(rlx_q_k_scale_min(b + 4, s) >> 8u) * (x0 + x1);
    }
};

template <>
struct RlxQInt<QFmtQ4_K> : RlxQIntK45 {   // d sc q - dmin m
    template <bool ALIGNED = false>
    RLX_INLINE void codes(const uchar *b, uint s, uint *w) {
        rlx_qi_words<8, ALIGNED>(b + 16u + 32u * (s >> 1u), w);
        const uint shift = 4u * (s & 1u);
        for (uint i = 0; i < 8u; ++i) w[i] = (w[i] >> shift) & 0x0F0F0F0Fu;
    }
};

template <>
struct RlxQInt<QFmtQ5_K> : RlxQIntK45 {   // d sc (q + 16 h) - dmin m
    template <bool ALIGNED = false>
    RLX_INLINE void codes(const uchar *b, uint s, uint *w) {
        uint h[8];
        rlx_qi_words<8, ALIGNED>(b + 48u + 32u * (s >> 1u), w);
        rlx_qi_words<8, ALIGNED>(b + 16u, h);
        const uint shift = 4u * (s & 1u);
        for (uint i = 0; i < 8u; ++i) w[i] = ((w[i] >> shift) & 0x0F0F0F0Fu) | (((h[i] >> s) & 0x01010101u) << 4u);
    }
};

template <>
struct RlxQInt<QFmtQ6_K> {   // d sc (q - 32), per 16
    enum { has = 1, SPLIT16 = 1, MINS = 0 };
    RLX_INLINE void codes(const uchar *b, uint s, uint *w) {
        const uint g = s >> 2u, t = s & 3u;
        uint h[8];
        rlx_qi_words<8>(b + 64u * g + 32u * (t & 1u), w);
        rlx_qi_words<8>(b + 128u + 32u * g, h);
        const uint lshift = 4u * (t >> 1u), hshift = 2u * t;
        for (uint i = 0; i < 8u; ++i)
            w[i] = __vsub4(((w[i] >> lshift) & 0x0F0F0F0Fu) | (((h[i] >> hshift) & 0x03030303u) << 4u), 0x20202020u);
    }
    RLX_INLINE void scales(const uchar *b, uint s, float &f0, float &f1) {
        const float d = rlx_q_f16(b + 208);
        f0 = d * (float)rlx_q_i8(b[192u + 2u * s]), f1 = d * (float)rlx_q_i8(b[193u + 2u * s]);
    }
    RLX_INLINE float mins(const uchar *, uint, float, float) { return 0.0f; }
};

// ---- the chunk dot ------------------------------------------------------------
// The integer dot of 4 code words with 4 words of an x piece, added to acc.
RLX_INLINE int rlx_qi_dot4(const uint *w, uint4 x, int acc) {
    acc = __dp4a((int)w[0], (int)x.x, acc);
    acc = __dp4a((int)w[1], (int)x.y, acc);
    acc = __dp4a((int)w[2], (int)x.z, acc);
    return __dp4a((int)w[3], (int)x.w, acc);
}

// The GEMV's dot policy for rlx_q_gemv_flat (m = 1): chunk i of the staged
// pass against chunk c of x's pieces (the first `pieces` of them).
template <typename Q>
struct RlxQDotPieces {
    const uint4 *xq;      // the pieces' units
    const float *scale;   // s per chunk
    const float *sum16;   // two sums per chunk
    uint chunks, pieces;
    RLX_QMEMBER RlxQAcc<1> operator()(const uchar *staged, uint i, uint c, RlxQAcc<1> acc) const {
        typedef RlxQInt<Q> F;
        const uchar *b = staged + (i * 32u / (uint)Q::BLOCK) * (uint)Q::BYTES;
        const uint s = (i * 32u % (uint)Q::BLOCK) / 32u;
        uint w[8];
        // Blocks of whole 16-byte vectors lie 16-byte aligned in the stage
        // (gemv1i's passes start on blocks of a 16-byte aligned weight).
        if constexpr ((uint)Q::BYTES % 16u == 0u) F::template codes<true>(b, s, w);
        else F::codes(b, s, w);
        float a0 = 0.0f, a1 = 0.0f;   // the halves' dots in units of s, by Horner from the last piece
        // One piece at a time: unrolled, the pieces' loads were hoisted and
        // the kernel took ~150 registers (one group an SM).
#pragma unroll 1
        for (uint q = pieces; q-- > 0u;) {
            const int d0 = rlx_qi_dot4(w, xq[(2u * q) * chunks + c], 0);
            const int d1 = rlx_qi_dot4(w + 4, xq[(2u * q + 1u) * chunks + c], F::SPLIT16 ? 0 : d0);
            if (F::SPLIT16) a0 = a0 * (1.0f / 254.0f) + (float)d0;
            a1 = a1 * (1.0f / 254.0f) + (float)d1;
        }
        float f0, f1;
        F::scales(b, s, f0, f1);
        float v = scale[c] * (F::SPLIT16 ? f0 * a0 + f1 * a1 : f1 * a1);
        if (F::MINS) v += F::mins(b, s, sum16[2u * c], sum16[2u * c + 1u]);
        acc.v[0] += v;
        return acc;
    }
};

// ---- the f32 chunk dot from the codes ------------------------------------------
// The f32 form's chunk dot (gemv1_q and gemv_q on CUDA, RlxQDotTile) for
// the formats with int8 codes: the codes as RlxQInt forms them from word
// reads of the stage, each made a float by one byte permute and one add,
// against x's f32 elements in the shared tile. rlx_q_chunk_dot decoded
// through the format's float decoder instead: a byte load from the stage
// and an I2F (an eighth of the FMA rate on sm_90) per weight, ~21
// instructions a weight on an H200 (Nsight Compute), issue-bound at under
// a tenth of the DRAM bandwidth on a 4096 x 4096 Q4_K weight.
// Code byte j of w biased by 128 (w ^ 0x80808080) as a float: the byte in
// the low mantissa bits of 2^23, then 2^23 + 128 taken off (both exact).
RLX_INLINE float rlx_qi_code_float(uint w, uint j) {
    return __int_as_float((int)__byte_perm(w, 0x4B000000u, 0x7540u | j)) - 8388736.0f;
}

// Elements 4 g .. 4 g + 3 of chunk c of an x row in the tile (xc: the
// chunk's start): rlx_q_xt_group's vector load on CUDA, else (the host
// harness) four reads through rlx_q_xt_at.
template <typename T>
RLX_INLINE float4 rlx_qi_x_group(RLX_GROUP_MEM const T *xc, uint c, uint g) {
#ifdef RLX_TARGET_CUDA
    return rlx_q_xt_group(xc, c, g);
#else
    float4 v;
    v.x = rlx_to_float(xc[rlx_q_xt_at(c, 4u * g)]), v.y = rlx_to_float(xc[rlx_q_xt_at(c, 4u * g + 1u)]);
    v.z = rlx_to_float(xc[rlx_q_xt_at(c, 4u * g + 2u)]), v.w = rlx_to_float(xc[rlx_q_xt_at(c, 4u * g + 3u)]);
    return v;
#endif
}

// x's tile as rlx_q_stage_x writes it (rlx_q_xt_row(kp) a row, chunk c at
// c * RLX_QXT_PITCH; on CUDA read a group of four at a time).
// Formats with a min term (scale * code + min) form each weight as the
// float decoders do (one FMA) before it meets x: folding the min onto a
// sum of x instead turns an infinite x over a zero weight into a NaN where
// the dequantized product has an infinity. Formats with one scale a chunk
// and no min (q4_0, q5_0, q8_0: weight = scale * code) take the scale out
// of the chunk's sum (scale * sum x code): the same infinities and NaNs
// (an infinite x over a zero code is NaN either way), another rounding
// order inside the GEMV's bound, and 32 multiplies a chunk fewer (H200,
// session 23: the f32 form's chunk dot is bound by issue). Formats with a
// scale a half (q3_k, q6_k) keep the per-weight form: their scale-out form
// (two sums a half) was timed only in a build where gemv1_q6_k took 156
// registers (one group an SM, with the padded tile; 4096 x 4096 13.1 ->
// 15.1 us), so it is not known to be faster. Four partial sums a row (two
// where the scale comes out) keep the adds' dependency chains short.
// RLX_QDOT_SPLIT_SCALE_OUT 1 (the default): q3_k and q6_k take each half's
// scale out of that half's sum as well (two sums a half and row), not one
// FMA a weight. With the direct rows it is the faster form (H100, session
// 39, CUPTI: 4096 x 4096 q6_k 10.36 -> 9.35 us, q3_k 10.06 -> 9.40; the
// decode step's shapes 3-4% faster; the vocabulary's gemv1i unchanged).
// 0 (an experiment's KERNEL_DEFINES) keeps the per-weight form; the CPU
// harness checks both forms.
#ifndef RLX_QDOT_SPLIT_SCALE_OUT
#define RLX_QDOT_SPLIT_SCALE_OUT 1
#endif
template <typename Q, typename T, uint M>
struct RlxQDotCodes {
    RLX_GROUP_MEM const T *xt;
    uint kp, m;
    RLX_QMEMBER RlxQAcc<M> operator()(const uchar *staged, uint i, uint c, RlxQAcc<M> acc) const {
        typedef RlxQInt<Q> F;
        const uchar *b = staged + (i * 32u / (uint)Q::BLOCK) * (uint)Q::BYTES;
        const uint s = (i * 32u % (uint)Q::BLOCK) / 32u;
        uint w[8];
        F::codes(b, s, w);
        float f[2];
        F::scales(b, s, f[0], f[1]);
        const uint row = rlx_q_xt_row(kp);
        if constexpr (F::SPLIT16 && !F::MINS && RLX_QDOT_SPLIT_SCALE_OUT) {   // a scale a half, none a weight
            float d[M][2][2];
            for (uint r = 0; r < M; ++r) d[r][0][0] = d[r][0][1] = d[r][1][0] = d[r][1][1] = 0.0f;
            for (uint g = 0; g < 8u; ++g) {   // elements 4 g .. 4 g + 3: code word g, half g / 4
                const uint wg = w[g] ^ 0x80808080u, hf = g >> 2u;
                float q[4];
                for (uint t = 0; t < 4u; ++t) q[t] = rlx_qi_code_float(wg, t);
                for (uint r = 0; r < M; ++r) {
                    if (r < m) {
                        const float4 x4 = rlx_qi_x_group(xt + r * row + c * RLX_QXT_PITCH, c, g);
                        d[r][hf][0] = fmaf(x4.z, q[2], fmaf(x4.x, q[0], d[r][hf][0]));
                        d[r][hf][1] = fmaf(x4.w, q[3], fmaf(x4.y, q[1], d[r][hf][1]));
                    }
                }
            }
            for (uint r = 0; r < M; ++r)
                if (r < m) acc.v[r] += f[0] * (d[r][0][0] + d[r][0][1]) + f[1] * (d[r][1][0] + d[r][1][1]);
        } else if constexpr (F::MINS || F::SPLIT16) {
            const float mn[2] = {F::MINS ? F::mins(b, s, 1.0f, 0.0f) : 0.0f, F::MINS ? F::mins(b, s, 0.0f, 1.0f) : 0.0f};
            float d[M][4];
            for (uint r = 0; r < M; ++r) d[r][0] = d[r][1] = d[r][2] = d[r][3] = 0.0f;
            for (uint g = 0; g < 8u; ++g) {   // elements 4 g .. 4 g + 3: code word g, half g / 4
                const uint wg = w[g] ^ 0x80808080u;
                float wv[4];
                for (uint t = 0; t < 4u; ++t) wv[t] = fmaf(f[g >> 2u], rlx_qi_code_float(wg, t), mn[g >> 2u]);
                for (uint r = 0; r < M; ++r) {
                    if (r < m) {
                        const float4 x4 = rlx_qi_x_group(xt + r * row + c * RLX_QXT_PITCH, c, g);
                        d[r][0] += x4.x * wv[0], d[r][1] += x4.y * wv[1], d[r][2] += x4.z * wv[2], d[r][3] += x4.w * wv[3];
                    }
                }
            }
            for (uint r = 0; r < M; ++r)
                if (r < m) acc.v[r] += (d[r][0] + d[r][1]) + (d[r][2] + d[r][3]);
        } else {   // one scale a chunk: f[0] == f[1]
            float d[M][2];
            for (uint r = 0; r < M; ++r) d[r][0] = d[r][1] = 0.0f;
            for (uint g = 0; g < 8u; ++g) {
                const uint wg = w[g] ^ 0x80808080u;
                float q[4];
                for (uint t = 0; t < 4u; ++t) q[t] = rlx_qi_code_float(wg, t);
                for (uint r = 0; r < M; ++r) {
                    if (r < m) {
                        const float4 x4 = rlx_qi_x_group(xt + r * row + c * RLX_QXT_PITCH, c, g);
                        d[r][0] = fmaf(x4.z, q[2], fmaf(x4.x, q[0], d[r][0]));
                        d[r][1] = fmaf(x4.w, q[3], fmaf(x4.y, q[1], d[r][1]));
                    }
                }
            }
            for (uint r = 0; r < M; ++r)
                if (r < m) acc.v[r] += f[0] * (d[r][0] + d[r][1]);
        }
        return acc;
    }
};

#ifdef RLX_TARGET_CUDA
// rlx_q_gemv_flat's pre step for the integer form: x's row into its pieces
// (rlx_qx_split), and the piece count into the dot; false where x needs
// the f32 form (a NaN, an infinity or a tiny chunk; a wide chunk with
// room for three pieces only).
template <typename T>
struct RlxQSplitPre {
    RLX_DEVICE const T *x;
    uchar *tile;
    uint chunks, stored, nt;
    template <typename Q>
    RLX_QMEMBER bool operator()(RlxQDotPieces<Q> &dot) const {
        const uint flags = rlx_qx_split<T>(x, tile, chunks, stored, rlx_local_id.x, nt);
        const bool wide = (flags & 2u) != 0u;
        dot.pieces = wide ? RLX_QX_PIECES : RLX_QX_NARROW_PIECES;
        return (flags & 1u) == 0u && (!wide || stored >= RLX_QX_PIECES);
    }
};
#endif

#endif
