// The CPU's chunk dots of the GEMV of GGUF block formats (generic, AVX-512,
// AVX2), part of quant_gemv.h (included from there, where the CPU's gemv_q
// row loop calls them). GPUs take the staged row loops of quant_gemv.h.
#ifdef RLX_TARGET_CPU
// One row of W against M rows of x (rows past m repeat row m - 1 and are
// dropped): each 32-element chunk is decoded once into a local array and
// dotted with every row, into 8-lane partial sums the compiler keeps in
// vector registers.
// Eight lanes as a GCC/clang vector type: the compiler left the dot of the
// decoded chunk with 8 scalar partial sums in scalar FMAs and lane
// extractions (q8_0 at a fifth of memory bandwidth); the vector type makes
// each 8 elements one multiply-add in whatever the build's instruction set
// is (SSE pairs, AVX2, AVX-512's ymm, NEON pairs).
typedef float rlx_q_v8 __attribute__((vector_size(32)));
// Passing these 32-byte vectors between the (always inlined) helpers below
// would change the ABI in the baseline (SSE) build; nothing crosses a call.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// Fused decode + dot of one 32-element chunk against f32 x, where it beats
// decoding the chunk to memory first: q5_0 (its fifth bits come from one
// u32 by lane shifts; 4096 x 4096, m = 1, 2 threads: 3.9 -> 1.9 ms). The
// same form measured slower for q8_0, q4_0, q4_k and q6_k (2.1 -> 3.2-3.5,
// 1.0 -> 1.8, 2.2 -> 3.2-4.3, 3.8-5.4 -> 5.8-6.3 ms), which keep the
// generic path. The scale comes out of the sum (d * sum x q): another
// rounding order, inside the GEMV's bound. Bytes become 32-bit lanes
// before floats (GCC 12 scalarizes a char -> float convertvector).
typedef unsigned char rlx_q_u8x8 __attribute__((vector_size(8)));
typedef int rlx_q_i32x8 __attribute__((vector_size(32)));
#define RLX_QDOT static inline __attribute__((always_inline))

RLX_QDOT rlx_q_v8 rlx_q_load8(const float *x) { rlx_q_v8 v; memcpy(&v, x, sizeof v); return v; }
RLX_QDOT rlx_q_i32x8 rlx_q_u8_to_i32(const uchar *b) {
    rlx_q_u8x8 v;
    memcpy(&v, b, sizeof v);
    return __builtin_convertvector(v, rlx_q_i32x8);
}
RLX_QDOT rlx_q_v8 rlx_q_f8(rlx_q_i32x8 v) { return __builtin_convertvector(v, rlx_q_v8); }
RLX_QDOT float rlx_q_hsum(rlx_q_v8 a) { return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])); }

template <typename Q> struct RlxQDot {
    static constexpr bool fused = false;
    RLX_QDOT void dot(const uchar *, uint, const float *, rlx_q_v8 &) {}
};
template <> struct RlxQDot<QFmtQ5_0> {
    static constexpr bool fused = true;
    RLX_QDOT void dot(const uchar *wr, uint c, const float *x, rlx_q_v8 &acc) {
        const uchar *b = wr + (uint64_t)c * 22u;
        const rlx_q_i32x8 bits = (rlx_q_i32x8){} + (int)rlx_q_u32(b + 2), lane = {0, 1, 2, 3, 4, 5, 6, 7};
        rlx_q_v8 s0 = {}, s1 = {};   // two chains, not one
        for (uint h = 0; h < 2u; ++h) {   // fifth bits: element e is bit e (any shift fill: e < 32)
            const rlx_q_i32x8 by = rlx_q_u8_to_i32(b + 6u + 8u * h);
            const rlx_q_i32x8 lo = (bits >> (lane + (int)(8u * h))) & 1, hi = (bits >> (lane + (int)(16u + 8u * h))) & 1;
            s0 += rlx_q_load8(x + 8u * h) * rlx_q_f8(((by & 15) | (lo << 4)) - 16);
            s1 += rlx_q_load8(x + 16u + 8u * h) * rlx_q_f8(((by >> 4) | (hi << 4)) - 16);
        }
        acc += (s0 + s1) * rlx_q_f16(b);
    }
};

// The float factors of K-quant weights, shared by the AVX-512 and AVX2
// decoders below (the generic decoders' expressions, so the same
// rounding): q4_k's sub-block s of block b is dl * q - ml; q6_k's scale
// group g (16 elements, 0..15) of block b is d * sc * q.
struct RlxQ4kScale {
    float dl, ml;
};
RLX_QDOT RlxQ4kScale rlx_q4k_scale(const uchar *b, uint s) {
    const uint sm = rlx_q_k_scale_min(b + 4, s);
    return {rlx_q_f16(b) * (float)(sm & 255u), rlx_q_f16(b + 2) * (float)(sm >> 8u)};
}
RLX_QDOT float rlx_q6k_scale(const uchar *b, uint g) { return rlx_q_f16(b + 208) * (float)rlx_q_i8(b[192u + g]); }

#if defined(RLX_CPU_AVX512) || defined(__AVX512F__)
#include <immintrin.h>
#include <type_traits>
#define RLX_Q_AVX512 1
// Rows of q5_0, q8_0, q4_k and q6_k in 16-lane AVX-512 (the AVX-512 build
// of the host kernels, csrc/host_kernels_avx512.cpp, or an AVX-512 -march).
// A 32-element chunk becomes two vectors of its dequantized weights,
// rounded as the generic decoders round them (one rounding of dl * q - ml
// for q4_k, of dl * q for q6_k), dotted with every x row in f32 (another
// summation order, inside the GEMV's bound); q8_0 and q5_0 give their codes
// unscaled and their block scale multiplies the chunk's dot once, as the
// AVX2 form below does.
// q5_0's fifth bits are mask registers (a masked add of 16) and a
// two-table permute turns its 5-bit codes into q - 16: ~12 vector
// operations a chunk against ~30 in the 8-lane form above (4096 x 4096,
// one thread: 3.97 -> 1.96 ms). q4_0 measured slower this way (0.94 ->
// 1.55 ms) and keeps the generic path.
template <typename Q> struct RlxQ512 { static constexpr bool has = false, unscaled = false; };
// Formats whose two consecutive chunks decode cheaper together (one load of shared bytes).
template <typename Q> struct RlxQ512Pair { static constexpr bool has = false; };
template <> struct RlxQ512<QFmtQ8_0> {
    static constexpr bool has = true, unscaled = true;
    // The chunk's 32 codes as floats (exact); returns its scale d.
    static inline __attribute__((always_inline)) float codes(const uchar *wr, uint c, __m512 &q0, __m512 &q1) {
        const uchar *b = wr + (uint64_t)c * 34u;
        q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 2))));
        q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 18))));
        return rlx_q_f16(b);
    }
};
template <> struct RlxQ512<QFmtQ5_0> {
    static constexpr bool has = true, unscaled = true;
    // The chunk's 32 codes q - 16 as floats; returns its scale d.
    static inline __attribute__((always_inline)) float codes(const uchar *wr, uint c, __m512 &q0, __m512 &q1) {
        const uchar *b = wr + (uint64_t)c * 22u;
        const __m512 neg = _mm512_setr_ps(-16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1);
        const __m512 pos = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        const __m512i sixteen = _mm512_set1_epi32(16);
        const uint bits = rlx_q_u32(b + 2);
        const __m512i by = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b + 6)));
        const __m512i lo = _mm512_and_si512(by, _mm512_set1_epi32(15)), hi = _mm512_srli_epi32(by, 4);
        q0 = _mm512_permutex2var_ps(neg, _mm512_mask_add_epi32(lo, (__mmask16)(bits & 0xffffu), lo, sixteen),
                                    pos);   // elements 0..15
        q1 = _mm512_permutex2var_ps(neg, _mm512_mask_add_epi32(hi, (__mmask16)(bits >> 16), hi, sixteen),
                                    pos);   // 16..31
        return rlx_q_f16(b);
    }
};

// 16 bytes at p as 32-bit lanes.
static inline __attribute__((always_inline)) __m512i rlx_q_u8x16(const uchar *p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}
template <> struct RlxQ512<QFmtQ4_K> {   // chunk c: sub-block c % 8 of block c / 8
    static constexpr bool has = true, unscaled = false;
    static inline __attribute__((always_inline)) void chunk(const uchar *wr, uint c, __m512 &w0, __m512 &w1) {
        const uchar *b = wr + (uint64_t)(c >> 3u) * 144u;
        const uint s = c & 7u;
        const RlxQ4kScale f = rlx_q4k_scale(b, s);
        const __m512 dl = _mm512_set1_ps(f.dl), ml = _mm512_set1_ps(f.ml);
        const uchar *qs = b + 16u + 32u * (s >> 1u);
        const __m512i shift = _mm512_set1_epi32((int)(4u * (s & 1u))), low4 = _mm512_set1_epi32(15);
        const __m512i q0 = _mm512_and_si512(_mm512_srlv_epi32(rlx_q_u8x16(qs), shift), low4);
        const __m512i q1 = _mm512_and_si512(_mm512_srlv_epi32(rlx_q_u8x16(qs + 16), shift), low4);
        w0 = _mm512_fmsub_ps(dl, _mm512_cvtepi32_ps(q0), ml);   // dl * q is exact: one rounding either way
        w1 = _mm512_fmsub_ps(dl, _mm512_cvtepi32_ps(q1), ml);
    }
};
// q4_k's sub-blocks 2j and 2j + 1 are the low and high nibbles of the same
// 32 bytes: a pair of chunks decodes from one load of them.
template <> struct RlxQ512Pair<QFmtQ4_K> {
    static constexpr bool has = true;
    static inline __attribute__((always_inline)) void pair(const uchar *wr, uint c2, __m512 w[4]) {
        const uchar *b = wr + (uint64_t)(c2 >> 2u) * 144u;
        const uint j = c2 & 3u;
        const RlxQ4kScale f0 = rlx_q4k_scale(b, 2u * j), f1 = rlx_q4k_scale(b, 2u * j + 1u);
        const __m512 dl0 = _mm512_set1_ps(f0.dl), ml0 = _mm512_set1_ps(f0.ml);
        const __m512 dl1 = _mm512_set1_ps(f1.dl), ml1 = _mm512_set1_ps(f1.ml);
        const uchar *qs = b + 16u + 32u * j;
        const __m512i low4 = _mm512_set1_epi32(15), by0 = rlx_q_u8x16(qs), by1 = rlx_q_u8x16(qs + 16);
        w[0] = _mm512_fmsub_ps(dl0, _mm512_cvtepi32_ps(_mm512_and_si512(by0, low4)), ml0);
        w[1] = _mm512_fmsub_ps(dl0, _mm512_cvtepi32_ps(_mm512_and_si512(by1, low4)), ml0);
        w[2] = _mm512_fmsub_ps(dl1, _mm512_cvtepi32_ps(_mm512_srli_epi32(by0, 4)), ml1);
        w[3] = _mm512_fmsub_ps(dl1, _mm512_cvtepi32_ps(_mm512_srli_epi32(by1, 4)), ml1);
    }
};
template <> struct RlxQ512<QFmtQ6_K> {   // chunk c: 32 elements of block c / 8, two int8 scales
    static constexpr bool has = true, unscaled = false;
    static inline __attribute__((always_inline)) void chunk(const uchar *wr, uint c, __m512 &w0, __m512 &w1) {
        const uchar *b = wr + (uint64_t)(c >> 3u) * 210u;
        const uint s = c & 7u, g = s >> 2u, t = s & 3u;
        const __m512 dl0 = _mm512_set1_ps(rlx_q6k_scale(b, 2u * s)), dl1 = _mm512_set1_ps(rlx_q6k_scale(b, 2u * s + 1u));
        const uchar *ql = b + 64u * g + 32u * (t & 1u), *qh = b + 128u + 32u * g;
        const __m512i ls = _mm512_set1_epi32((int)(4u * (t >> 1u))), hs = _mm512_set1_epi32((int)(2u * t));
        const __m512i low4 = _mm512_set1_epi32(15), low2 = _mm512_set1_epi32(3), bias = _mm512_set1_epi32(32);
        __m512i q[2];
        for (uint h = 0; h < 2u; ++h) {
            const __m512i lo = _mm512_and_si512(_mm512_srlv_epi32(rlx_q_u8x16(ql + 16u * h), ls), low4);
            const __m512i hi = _mm512_and_si512(_mm512_srlv_epi32(rlx_q_u8x16(qh + 16u * h), hs), low2);
            q[h] = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), bias);
        }
        w0 = _mm512_mul_ps(dl0, _mm512_cvtepi32_ps(q[0]));
        w1 = _mm512_mul_ps(dl1, _mm512_cvtepi32_ps(q[1]));
    }
};

template <typename Q, uint M>
static inline void rlx_q_rows_avx512(const float *const *xr, const uchar *wr, uint chunks, float *out) {
    __m512 acc[M][2];
    for (uint r = 0; r < M; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    uint c = 0;
    if constexpr (RlxQ512Pair<Q>::has) {
        for (; c + 2u <= chunks; c += 2u) {   // chunks is a multiple of 8 for the K-quants
            __m512 w[4];
            RlxQ512Pair<Q>::pair(wr, c >> 1u, w);
            for (uint r = 0; r < M; ++r) {
                const float *xc = xr[r] + 32u * c;
                acc[r][0] = _mm512_fmadd_ps(w[0], _mm512_loadu_ps(xc), acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(w[1], _mm512_loadu_ps(xc + 16), acc[r][1]);
                acc[r][0] = _mm512_fmadd_ps(w[2], _mm512_loadu_ps(xc + 32), acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(w[3], _mm512_loadu_ps(xc + 48), acc[r][1]);
            }
        }
    }
    // Chunk c into chain a (two chains a row: a chunk does not wait for the
    // previous one's FMAs). The loop below passes a as a constant: indexed
    // by c & 1 at run time, the accumulators lived on the stack and every
    // chunk waited on a store and a reload (262144 x 640 q8_0, two threads:
    // 24 -> 32 GB/s).
    const auto chunk = [&](uint c, uint a) __attribute__((always_inline)) {
        if constexpr (RlxQ512<Q>::unscaled) {
            // The chunk's dot with its codes, then the scale once (one
            // multiply a chunk where scaling both halves of the weights took two).
            __m512 q0, q1;
            const __m512 d = _mm512_set1_ps(RlxQ512<Q>::codes(wr, c, q0, q1));
            for (uint r = 0; r < M; ++r) {
                const float *xc = xr[r] + 32u * c;
                const __m512 t = _mm512_fmadd_ps(q1, _mm512_loadu_ps(xc + 16), _mm512_mul_ps(q0, _mm512_loadu_ps(xc)));
                acc[r][a] = _mm512_fmadd_ps(t, d, acc[r][a]);
            }
        } else {
            __m512 w0, w1;
            RlxQ512<Q>::chunk(wr, c, w0, w1);
            for (uint r = 0; r < M; ++r) {
                const float *xc = xr[r] + 32u * c;
                acc[r][a] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xc), acc[r][a]);
                acc[r][a] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xc + 16), acc[r][a]);
            }
        }
    };
    for (; c + 2u <= chunks; c += 2u) {
        chunk(c, 0u);
        chunk(c + 1u, 1u);
    }
    if (c < chunks) chunk(c, 0u);
    for (uint r = 0; r < M; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
}
#endif

#if !defined(RLX_Q_AVX512) && (defined(RLX_CPU_AVX2) || defined(__AVX2__))
#include <immintrin.h>
#define RLX_Q_AVX2 1
// Rows of q8_0, q5_0, q4_k and q6_k in 8-lane AVX2 (the AVX2 and AVX-VNNI
// builds of the host kernels, or an AVX2 -march): a chunk's 32 weights
// decoded straight into four registers, as RlxQ512 does in two, with the
// generic decoders' rounding (d * q exact for q8_0 and q5_0, one rounding of
// dl * q - ml for q4_k, of dl * q for q6_k). The generic path below decodes a chunk into
// memory (rlx_q_chunk) in 16-byte stores and reads it back in 32-byte
// loads, a store-forwarding stall each: at the AVX2 level the three ran at
// 4-10x the copy's time (benchmarks/README.md, "Quantized GEMV", session 14).
template <typename Q> struct RlxQ256 { static constexpr bool has = false, unscaled = false; };
// Eight bytes at p as 32-bit lanes, unsigned.
static inline __attribute__((always_inline)) __m256i rlx_q_u8x8_epi32(const uchar *p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}
// q8_0 and q5_0 give their codes unscaled (codes(): the chunk's 32 codes as
// floats, exact, and d) and the rows loop applies d once per chunk: a
// multiply a vector fewer, and for q5_0 the fifth bit as one mask (clear:
// subtract 16) instead of a variable shift, a mask, a shift and an OR.
// ~20% fewer vector operations; on an AVX2-only AMD EPYC these two formats
// are bound by them (benchmarks/README.md, "Quantized GEMV", session 17).
template <> struct RlxQ256<QFmtQ8_0> {
    static constexpr bool has = true, unscaled = true;
    static inline __attribute__((always_inline)) __m256 codes(const uchar *wr, uint c, __m256 q[4]) {
        const uchar *b = wr + (uint64_t)c * 34u;
        for (uint i = 0; i < 4u; ++i)
            q[i] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2u + 8u * i))));
        return _mm256_set1_ps(rlx_q_f16(b));
    }
};
template <> struct RlxQ256<QFmtQ5_0> {   // element e: nibble e % 16 (low, then high), fifth bit e of qh
    static constexpr bool has = true, unscaled = true;
    static inline __attribute__((always_inline)) __m256 codes(const uchar *wr, uint c, __m256 q[4]) {
        const uchar *b = wr + (uint64_t)c * 22u;
        const __m256i bits = _mm256_set1_epi32((int)rlx_q_u32(b + 2));
        const __m256i low4 = _mm256_set1_epi32(15), minus16 = _mm256_set1_epi32(-16);
        for (uint i = 0; i < 4u; ++i) {
            const uint b0 = 8u * i;   // the lanes' bits of qh: b0 .. b0 + 7
            const __m256i lane_bit = _mm256_setr_epi32((int)(1u << b0), (int)(1u << (b0 + 1u)), (int)(1u << (b0 + 2u)),
                                                       (int)(1u << (b0 + 3u)), (int)(1u << (b0 + 4u)),
                                                       (int)(1u << (b0 + 5u)), (int)(1u << (b0 + 6u)),
                                                       (int)(1u << (b0 + 7u)));
            const __m256i by = rlx_q_u8x8_epi32(b + 6u + 8u * (i & 1u));
            const __m256i nib = i < 2u ? _mm256_and_si256(by, low4) : _mm256_srli_epi32(by, 4);
            const __m256i clear = _mm256_cmpeq_epi32(_mm256_and_si256(bits, lane_bit), _mm256_setzero_si256());
            q[i] = _mm256_cvtepi32_ps(_mm256_add_epi32(nib, _mm256_and_si256(clear, minus16)));   // q - 16
        }
        return _mm256_set1_ps(rlx_q_f16(b));
    }
};
template <> struct RlxQ256<QFmtQ4_K> {   // chunk c: sub-block c % 8 of block c / 8
    static constexpr bool has = true, unscaled = false;
    static inline __attribute__((always_inline)) void chunk(const uchar *wr, uint c, __m256 w[4]) {
        const uchar *b = wr + (uint64_t)(c >> 3u) * 144u;
        const uint s = c & 7u;
        const RlxQ4kScale f = rlx_q4k_scale(b, s);
        const __m256 dl = _mm256_set1_ps(f.dl), ml = _mm256_set1_ps(f.ml);
        const uchar *qs = b + 16u + 32u * (s >> 1u);
        const __m128i shift = _mm_cvtsi32_si128((int)(4u * (s & 1u)));
        const __m256i low4 = _mm256_set1_epi32(15);
        for (uint i = 0; i < 4u; ++i) {
            const __m256i q = _mm256_and_si256(_mm256_srl_epi32(rlx_q_u8x8_epi32(qs + 8u * i), shift), low4);
            w[i] = _mm256_fmsub_ps(dl, _mm256_cvtepi32_ps(q), ml);   // dl * q is exact: one rounding either way
        }
    }
};
// Formats whose chunks decode cheaper two at a time (one load of shared
// bytes), as RlxQ512Pair: pair p gives chunks first(p) and second(p)
// (pairs 0 .. chunks / 2 - 1 cover every chunk once).
template <typename Q> struct RlxQ256Pair { static constexpr bool has = false; };
template <> struct RlxQ256Pair<QFmtQ4_K> {   // sub-blocks 2j and 2j + 1: the two nibbles of 32 bytes
    static constexpr bool has = true;
    static inline uint first(uint p) { return 2u * p; }
    static inline uint second(uint p) { return 2u * p + 1u; }
    static inline __attribute__((always_inline)) void pair(const uchar *wr, uint c2, __m256 w[8]) {
        const uchar *b = wr + (uint64_t)(c2 >> 2u) * 144u;
        const uint j = c2 & 3u;
        const RlxQ4kScale f0 = rlx_q4k_scale(b, 2u * j), f1 = rlx_q4k_scale(b, 2u * j + 1u);
        const __m256 dl0 = _mm256_set1_ps(f0.dl), ml0 = _mm256_set1_ps(f0.ml);
        const __m256 dl1 = _mm256_set1_ps(f1.dl), ml1 = _mm256_set1_ps(f1.ml);
        const uchar *qs = b + 16u + 32u * j;
        const __m256i low4 = _mm256_set1_epi32(15);
        for (uint i = 0; i < 4u; ++i) {
            const __m256i by = rlx_q_u8x8_epi32(qs + 8u * i);
            w[i] = _mm256_fmsub_ps(dl0, _mm256_cvtepi32_ps(_mm256_and_si256(by, low4)), ml0);
            w[4u + i] = _mm256_fmsub_ps(dl1, _mm256_cvtepi32_ps(_mm256_srli_epi32(by, 4)), ml1);
        }
    }
};
// q6_k's chunks t and t + 2 of a 128-element group read the same low-bit
// bytes (low and high nibbles) and the same high-bit bytes (shifts 2t and
// 2t + 4): pair p is chunks 4g + t and 4g + t + 2 of its block.
template <> struct RlxQ256Pair<QFmtQ6_K> {
    static constexpr bool has = true;
    static inline uint first(uint p) { return 8u * (p >> 2u) + 4u * ((p >> 1u) & 1u) + (p & 1u); }
    static inline uint second(uint p) { return first(p) + 2u; }
    static inline __attribute__((always_inline)) void pair(const uchar *wr, uint p, __m256 w[8]) {
        const uchar *b = wr + (uint64_t)(p >> 2u) * 210u;
        const uint g = (p >> 1u) & 1u, t = p & 1u, s0 = 4u * g + t, s1 = s0 + 2u;
        const __m256 dl[4] = {_mm256_set1_ps(rlx_q6k_scale(b, 2u * s0)), _mm256_set1_ps(rlx_q6k_scale(b, 2u * s0 + 1u)),
                              _mm256_set1_ps(rlx_q6k_scale(b, 2u * s1)), _mm256_set1_ps(rlx_q6k_scale(b, 2u * s1 + 1u))};
        const uchar *ql = b + 64u * g + 32u * t, *qh = b + 128u + 32u * g;
        const __m128i hs0 = _mm_cvtsi32_si128((int)(2u * t)), hs1 = _mm_cvtsi32_si128((int)(2u * t + 4u));
        const __m256i low4 = _mm256_set1_epi32(15), low2 = _mm256_set1_epi32(3), bias = _mm256_set1_epi32(32);
        for (uint i = 0; i < 4u; ++i) {
            const __m256i lb = rlx_q_u8x8_epi32(ql + 8u * i), hb = rlx_q_u8x8_epi32(qh + 8u * i);
            const __m256i h0 = _mm256_and_si256(_mm256_srl_epi32(hb, hs0), low2);
            const __m256i h1 = _mm256_and_si256(_mm256_srl_epi32(hb, hs1), low2);
            const __m256i q0 = _mm256_sub_epi32(_mm256_or_si256(_mm256_and_si256(lb, low4), _mm256_slli_epi32(h0, 4)), bias);
            const __m256i q1 = _mm256_sub_epi32(_mm256_or_si256(_mm256_srli_epi32(lb, 4), _mm256_slli_epi32(h1, 4)), bias);
            w[i] = _mm256_mul_ps(dl[i >> 1u], _mm256_cvtepi32_ps(q0));
            w[4u + i] = _mm256_mul_ps(dl[2u + (i >> 1u)], _mm256_cvtepi32_ps(q1));
        }
    }
};
template <> struct RlxQ256<QFmtQ6_K> {   // chunk c: 32 elements of block c / 8, an int8 scale a 16
    static constexpr bool has = true, unscaled = false;
    static inline __attribute__((always_inline)) void chunk(const uchar *wr, uint c, __m256 w[4]) {
        const uchar *b = wr + (uint64_t)(c >> 3u) * 210u;
        const uint s = c & 7u, g = s >> 2u, t = s & 3u;
        const __m256 dl[2] = {_mm256_set1_ps(rlx_q6k_scale(b, 2u * s)), _mm256_set1_ps(rlx_q6k_scale(b, 2u * s + 1u))};
        const uchar *ql = b + 64u * g + 32u * (t & 1u), *qh = b + 128u + 32u * g;
        const __m128i ls = _mm_cvtsi32_si128((int)(4u * (t >> 1u))), hs = _mm_cvtsi32_si128((int)(2u * t));
        const __m256i low4 = _mm256_set1_epi32(15), low2 = _mm256_set1_epi32(3), bias = _mm256_set1_epi32(32);
        for (uint i = 0; i < 4u; ++i) {
            const __m256i lo = _mm256_and_si256(_mm256_srl_epi32(rlx_q_u8x8_epi32(ql + 8u * i), ls), low4);
            const __m256i hi = _mm256_and_si256(_mm256_srl_epi32(rlx_q_u8x8_epi32(qh + 8u * i), hs), low2);
            const __m256i q = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), bias);
            w[i] = _mm256_mul_ps(dl[i >> 1u], _mm256_cvtepi32_ps(q));
        }
    }
};

// A chains a row of x, as rlx_q_gemv_row_cpu's generic path keeps them.
template <typename Q, uint M>
static inline void rlx_q_rows_avx2(const float *const *xr, const uchar *wr, uint chunks, float *out) {
    constexpr uint A = M >= 4u ? 1u : 4u / M;
    __m256 acc[M][A];
    for (uint r = 0; r < M; ++r)
        for (uint a = 0; a < A; ++a) acc[r][a] = _mm256_setzero_ps();
    uint c = 0;
    if constexpr (RlxQ256Pair<Q>::has) {
        for (; c + 2u <= chunks; c += 2u) {   // chunks is a multiple of 8 for the K-quants
            __m256 w[8];
            const uint p = c >> 1u, c0 = RlxQ256Pair<Q>::first(p), c1 = RlxQ256Pair<Q>::second(p);
            RlxQ256Pair<Q>::pair(wr, p, w);
            for (uint r = 0; r < M; ++r) {
                const float *x0 = xr[r] + 32u * c0, *x1 = xr[r] + 32u * c1;
                for (uint i = 0; i < 4u; ++i)
                    acc[r][i % A] = _mm256_fmadd_ps(w[i], _mm256_loadu_ps(x0 + 8u * i), acc[r][i % A]);
                for (uint i = 0; i < 4u; ++i)
                    acc[r][i % A] = _mm256_fmadd_ps(w[4u + i], _mm256_loadu_ps(x1 + 8u * i), acc[r][i % A]);
            }
        }
    }
    if constexpr (RlxQ256<Q>::unscaled) {
        // Each row's chunk sum in two chains (a multiply, then an FMA, each),
        // scaled into the row's accumulators round robin: A chunks an
        // iteration, so each chain's index is a constant (rlx_q_rows_avx512).
        const auto chunk = [&](uint c, uint a) __attribute__((always_inline)) {
            __m256 q[4];
            const __m256 d = RlxQ256<Q>::codes(wr, c, q);
            for (uint r = 0; r < M; ++r) {
                const float *xc = xr[r] + 32u * c;
                const __m256 t0 = _mm256_fmadd_ps(q[2], _mm256_loadu_ps(xc + 16u),
                                                  _mm256_mul_ps(q[0], _mm256_loadu_ps(xc)));
                const __m256 t1 = _mm256_fmadd_ps(q[3], _mm256_loadu_ps(xc + 24u),
                                                  _mm256_mul_ps(q[1], _mm256_loadu_ps(xc + 8u)));
                acc[r][a] = _mm256_fmadd_ps(_mm256_add_ps(t0, t1), d, acc[r][a]);
            }
        };
        for (; c + A <= chunks; c += A)
            for (uint a = 0; a < A; ++a) chunk(c + a, a);
        for (uint a = 0; a < A; ++a)
            if (c + a < chunks) chunk(c + a, a);
    } else {
        for (; c < chunks; ++c) {
            __m256 w[4];
            RlxQ256<Q>::chunk(wr, c, w);
            for (uint r = 0; r < M; ++r) {
                const float *xc = xr[r] + 32u * c;
                for (uint i = 0; i < 4u; ++i)
                    acc[r][i % A] = _mm256_fmadd_ps(w[i], _mm256_loadu_ps(xc + 8u * i), acc[r][i % A]);
            }
        }
    }
    for (uint r = 0; r < M; ++r) {
        __m256 t = acc[r][0];
        for (uint a = 1; a < A; ++a) t = _mm256_add_ps(t, acc[r][a]);
        rlx_q_v8 v;
        memcpy(&v, &t, sizeof v);
        out[r] = rlx_q_hsum(v);
    }
}
#endif

// A accumulators a row of x (4 for one row, 2 for two, 1 from four on):
// one accumulator made each chunk wait for the previous chunk's FMAs (a
// chain of 4 FMA latencies a chunk), which bound the one-row GEMV on
// 640-wide rows (the vocabulary projection) well below the copy bandwidth.
template <typename Q, typename T, uint M>
static inline void rlx_q_gemv_row_cpu(const T *x, uint x_stride, uint m, const uchar *wr, uint chunks,
                                      float *out) {
    constexpr uint A = M >= 4u ? 1u : 4u / M;
    const T *xr[M];
    for (uint r = 0; r < M; ++r) xr[r] = x + (uint64_t)(r < m ? r : m - 1u) * x_stride;
#if defined(RLX_Q_AVX512)
    if constexpr (RlxQ512<Q>::has && sizeof(T) == sizeof(float)) {
        rlx_q_rows_avx512<Q, M>((const float *const *)xr, wr, chunks, out);
        return;
    }
#elif defined(RLX_Q_AVX2)
    if constexpr (RlxQ256<Q>::has && sizeof(T) == sizeof(float)) {
        rlx_q_rows_avx2<Q, M>((const float *const *)xr, wr, chunks, out);
        return;
    }
#endif
    rlx_q_v8 acc[M][A];
    for (uint r = 0; r < M; ++r)
        for (uint a = 0; a < A; ++a) acc[r][a] = rlx_q_v8{0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (RlxQDot<Q>::fused && sizeof(T) == sizeof(float)) {
        // A chunks an iteration: each chain's index a constant (rlx_q_rows_avx512).
        for (uint c0 = 0; c0 < chunks; c0 += A)
            for (uint a = 0; a < A; ++a)
                if (c0 + a < chunks)
                    for (uint r = 0; r < M; ++r)
                        RlxQDot<Q>::dot(wr, c0 + a, (const float *)xr[r] + 32u * (c0 + a), acc[r][a]);
    } else {
        for (uint c = 0; c < chunks; ++c) {
            const rlx_q32 w = rlx_q_chunk<Q>(wr, c);
            rlx_q_v8 wv[4];
            memcpy(wv, w.v, sizeof wv);
            for (uint r = 0; r < M; ++r) {
                const T *xc = xr[r] + 32u * c;
                float xf[32];
                for (uint e = 0; e < 32u; ++e) xf[e] = rlx_to_float(xc[e]);
                rlx_q_v8 xv[4];
                memcpy(xv, xf, sizeof xv);
                for (uint q = 0; q < 4u; ++q) acc[r][q % A] += xv[q] * wv[q];
            }
        }
    }
    for (uint r = 0; r < M; ++r) {
        rlx_q_v8 total = acc[r][0];
        for (uint a = 1; a < A; ++a) total += acc[r][a];
        out[r] = rlx_q_hsum(total);
    }
}
#endif
