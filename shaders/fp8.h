// FP8 (rlx/ir/ops/fp8.py, rlx/lowering/fp8.py): the two 8-bit float
// formats of FP8 checkpoints and the kernels that make and read them.
//
//   fmt 0  e4m3 ("fn": bias 7, 3 mantissa bits, no infinities, S.1111.111
//          is NaN, largest finite 448)
//   fmt 1  e5m2 (bias 15, 2 mantissa bits, IEEE infinities and NaNs,
//          largest finite 57344; the top byte of an IEEE half)
//
//   cast_to_f8_<t>      x (f32/f16) -> fp8 codes, round to nearest even
//   cast_from_f8_<t>    fp8 codes -> f32/f16 (exact: both formats fit f16)
//   dequantize_f8_<t>   w [rows, cols] codes times a scale per block of
//                       block_rows x block_cols (one block: per tensor; rows
//                       of one: per channel)
//   gemv_f8_<t>         y = x w^T * scales + bias for m <= 8 rows of x,
//                       straight from the codes (the decode step)
//   fp8_gemm_epilogue_<t>  y = act(acc * x_scale[i] * w_scale[j] + bias[j])
//                       after an FP8 x FP8 gemm that left the unscaled f32
//                       product acc (CUDA's cuBLASLt FP8 path)
//
// Encoding follows ml_dtypes (the tests compare bit for bit): NaN keeps its
// sign (e4m3 S.1111.111, e5m2 S.11111.10); without saturation a value that
// rounds past the largest finite becomes NaN (e4m3, which has no infinity)
// or infinity (e5m2), and infinities map to NaN (e4m3) or themselves; with
// saturation finite overflows and infinities clamp to the largest finite
// of their sign (NVIDIA's cvt .satfinite; the quantizers' choice). The
// rounding is done on the integer bits, not with float rint, so no target's
// rounding mode or fast-math setting can change a code.

struct Fp8CastParams {
    uint n, fmt, saturate, pad0;
};

struct Fp8DequantParams {
    uint rows, cols, fmt, block_rows, block_cols, scale_cols, pad0, pad1;
};

struct Fp8EpilogueParams {
    uint m, n, x_scale_step, w_scale_step, has_bias, act, pad0, pad1;
};

struct Fp8GemvParams {
    uint m, n, k, fmt, block_rows, block_cols, scale_cols, rows_per_group;
    uint x_stride, y_stride, has_bias, act;
};

RLX_INLINE uint rlx_f8_encode(float f, uint fmt, uint saturate) {
    const uint bits = rlx_float_to_bits(f);
    const uint sign = (bits >> 24u) & 0x80u, mag = bits & 0x7FFFFFFFu;
    const uint ebias = fmt == 0u ? 7u : 15u, mbits = fmt == 0u ? 3u : 2u;
    const uint maxcode = fmt == 0u ? 0x7Eu : 0x7Bu;
    const uint overflow = saturate ? maxcode : (fmt == 0u ? 0x7Fu : 0x7Cu);
    if (mag > 0x7F800000u) return sign | (fmt == 0u ? 0x7Fu : 0x7Eu);               // NaN
    if (mag == 0x7F800000u) return sign | (saturate ? maxcode : (fmt == 0u ? 0x7Fu : 0x7Cu));   // +-inf
    const uint e32 = mag >> 23u;
    if (e32 == 0u) return sign;   // zero and f32 subnormals: far below half the smallest fp8 subnormal
    // value = sig * 2^(e32 - 150), sig a 24-bit integer; the fp8 quantum is
    // 2^(e - mbits) for normal exponents e >= 1 - ebias, 2^(1 - ebias - mbits) below.
    const uint sig = (mag & 0x7FFFFFu) | 0x800000u;
    const int e = (int)e32 - 127, emin = 1 - (int)ebias;
    int shift = 23 - (int)mbits + (e < emin ? emin - e : 0);
    if (shift > 25) return sign;   // below half the smallest subnormal
    const uint half_ulp = 1u << (uint)(shift - 1), kept = sig >> (uint)shift;
    const uint rest = sig & ((1u << (uint)shift) - 1u);
    const uint rounded = kept + ((rest > half_ulp || (rest == half_ulp && (kept & 1u))) ? 1u : 0u);
    // Normal: the mantissa's carry moves into the exponent by itself;
    // subnormal: rounded is the code (2^mbits is the smallest normal's).
    const uint code = e < emin ? rounded : ((uint)(e + (int)ebias) << mbits) + rounded - (1u << mbits);
    return sign | (code > maxcode ? overflow : code);
}

RLX_INLINE float rlx_f8_decode(uint b, uint fmt) {
    if (fmt != 0u) return rlx_half_bits_to_float(b << 8u);   // e5m2 is the top byte of a half
    const uint sign = (b & 0x80u) << 24u, mag = b & 0x7Fu;
    if (mag == 0x7Fu) return rlx_bits_to_float(sign | 0x7FC00000u);
    const uint e = mag >> 3u, m = mag & 7u;
    if (e == 0u) return rlx_bits_to_float(sign | rlx_float_to_bits((float)m * 0.001953125f));   // m 2^-9
    return rlx_bits_to_float(sign | ((e + 120u) << 23u) | (m << 20u));
}

template <typename T>
RLX_KERNEL cast_to_f8(RLX_BUF(RLX_DEVICE const T *, src, 0), RLX_BUF(RLX_DEVICE uchar *, dst, 1),
                      RLX_PARAMS(Fp8CastParams, p, 2) RLX_IDS) {
    const uint fmt = p->fmt, sat = p->saturate;
    RLX_FOR_RANGE(i, p->n) {
        const float v = rlx_to_float(src[i]);
        uint code = rlx_f8_encode(v, fmt, sat);
        // A half NaN's sign from its own bits: CUDA's half -> float gives
        // every NaN the canonical (positive) one.
        if (sizeof(T) == 2u && v != v) code = (code & 0x7Fu) | ((((RLX_DEVICE const ushort *)src)[i] >> 8u) & 0x80u);
        dst[i] = (uchar)code;
    }
}
RLX_INSTANTIATE(cast_to_f8, float, cast_to_f8_f32)
RLX_INSTANTIATE(cast_to_f8, half, cast_to_f8_f16)

template <typename T>
RLX_KERNEL cast_from_f8(RLX_BUF(RLX_DEVICE const uchar *, src, 0), RLX_BUF(RLX_DEVICE T *, dst, 1),
                        RLX_PARAMS(Fp8CastParams, p, 2) RLX_IDS) {
    const uint fmt = p->fmt;
    RLX_FOR_RANGE(i, p->n) { dst[i] = rlx_from_float<T>(rlx_f8_decode((uint)src[i], fmt)); }
}
RLX_INSTANTIATE(cast_from_f8, float, cast_from_f8_f32)
RLX_INSTANTIATE(cast_from_f8, half, cast_from_f8_f16)

// The scale of element (r, c): scales are f32, [ceil(rows / block_rows),
// scale_cols] row-major.
RLX_INLINE float rlx_f8_scale(RLX_DEVICE const float *scale, uint r, uint c, uint block_rows, uint block_cols,
                              uint scale_cols) {
    return scale[(r / block_rows) * scale_cols + c / block_cols];
}

template <typename T>
RLX_KERNEL dequantize_f8(RLX_BUF(RLX_DEVICE const uchar *, w, 0), RLX_BUF(RLX_DEVICE const float *, scale, 1),
                         RLX_BUF(RLX_DEVICE T *, out, 2), RLX_PARAMS(Fp8DequantParams, p, 3) RLX_IDS) {
    const uint cols = p->cols, fmt = p->fmt, br = p->block_rows, bc = p->block_cols, sc = p->scale_cols;
    RLX_FOR_RANGE(i, (uint64_t)p->rows * cols) {
        const uint r = rlx_index_div(i, cols), c = (uint)(i - (uint64_t)r * cols);
        out[i] = rlx_from_float<T>(rlx_f8_decode((uint)w[i], fmt) * rlx_f8_scale(scale, r, c, br, bc, sc));
    }
}
RLX_INSTANTIATE(dequantize_f8, float, dequantize_f8_f32)
RLX_INSTANTIATE(dequantize_f8, half, dequantize_f8_f16)

#define RLX_F8_GEMV_MAX_M 8u

#ifdef RLX_TARGET_CPU
#if defined(RLX_CPU_AVX2) || defined(RLX_CPU_AVX512)
#include <immintrin.h>
#endif
typedef uchar rlx_f8_b8 __attribute__((vector_size(8)));
typedef uint rlx_f8_u8 __attribute__((vector_size(32)));
typedef int rlx_f8_i8 __attribute__((vector_size(32)));

// The x86 builds (F16C) decode through f16, which holds both formats
// exactly: an e5m2 code is the top byte of its f16, and an e4m3 code's
// magnitude shifted into f16's exponent and mantissa is its value times
// 2^-8 (f16's exponent bias is 8 above e4m3's, subnormals included), so
// the GEMV scales those sums by rlx_f8_f16_unscale once a block. The
// e4m3 NaN code (S.1111.111) is ORed up to an f16 NaN. One widen, a few
// 16-bit operations and one vcvtph2ps for eight codes, where the f32 form
// below took a dozen 32-bit ones; no f32 subnormal is an operand anywhere
// (each costs a microcode assist on x86): vcvtph2ps widens f16 subnormals
// to f32 normals.
#if defined(RLX_CPU_AVX2) || defined(RLX_CPU_AVX512)
template <uint FMT>
static inline float rlx_f8_f16_unscale() { return FMT == 0u ? 256.0f : 1.0f; }
template <uint FMT>
static inline rlx_q_v8 rlx_f8_decode8(const uchar *c) {
    const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)c));
    __m128i h;
    if (FMT == 0u) {
        const __m128i mag = _mm_and_si128(b, _mm_set1_epi16(0x7F));
        h = _mm_or_si128(_mm_slli_epi16(mag, 7), _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8));
        h = _mm_or_si128(h, _mm_and_si128(_mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7F)), _mm_set1_epi16(0x7E00)));
    } else {
        h = _mm_slli_epi16(b, 8);
    }
    const __m256 f = _mm256_cvtph_ps(h);
    rlx_q_v8 out;
    memcpy(&out, &f, sizeof out);
    return out;
}
#else
template <uint FMT>
static inline float rlx_f8_f16_unscale() { return 1.0f; }
// Eight codes to floats in vector arithmetic (no table gather, no f32
// subnormal operand anywhere: those cost a microcode assist each on x86),
// exactly rlx_f8_decode: a normal code's bits are its magnitude shifted
// into the f32 mantissa plus the exponent rebias, a subnormal code is its
// magnitude times the quantum (an exact int -> float conversion and
// product), and the NaN / infinity codes are selected in.
template <uint FMT>
static inline rlx_q_v8 rlx_f8_decode8(const uchar *c) {
    rlx_f8_b8 raw;
    memcpy(&raw, c, sizeof raw);
    const rlx_f8_u8 b = __builtin_convertvector(raw, rlx_f8_u8);
    const rlx_f8_u8 mag = b & 0x7Fu, sign = (b & 0x80u) << 24u;
    const rlx_q_v8 sub = __builtin_convertvector((rlx_f8_i8)mag, rlx_q_v8) * (FMT == 0u ? 0.001953125f : 1.52587890625e-05f);
    rlx_f8_u8 sub_bits;
    memcpy(&sub_bits, &sub, sizeof sub_bits);
    const rlx_f8_u8 none = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};   // + a scalar broadcasts it
    rlx_f8_u8 bits;
    if (FMT == 0u) {   // e4m3: subnormal below 8, NaN at 0x7F
        const rlx_f8_u8 normal = (mag << 20u) + (120u << 23u);
        bits = mag < 8u ? sub_bits : normal;
        bits = mag == 0x7Fu ? none + 0x7FC00000u : bits;
    } else {           // e5m2: subnormal below 4, infinity at 0x7C, NaN above
        const rlx_f8_u8 normal = (mag << 21u) + (112u << 23u);
        bits = mag < 4u ? sub_bits : normal;
        bits = mag >= 0x7Cu ? (mag == 0x7Cu ? none + 0x7F800000u : none + 0x7FC00000u) : bits;
    }
    bits |= sign;
    rlx_q_v8 out;
    memcpy(&out, &bits, sizeof out);
    return out;
}
#endif

// Eight elements of x as floats: f32 x in one vector load (GCC built the
// element loop below from eight scalar loads and inserts, the FP8 GEMV's
// largest cost after the decode), f16 x in one load and one conversion on
// x86, others element by element.
template <typename T>
static inline rlx_q_v8 rlx_f8_x8(const T *p) {
    float xf[8];
    for (uint i = 0u; i < 8u; ++i) xf[i] = rlx_to_float(p[i]);
    rlx_q_v8 xv;
    memcpy(&xv, xf, sizeof xv);
    return xv;
}
static inline rlx_q_v8 rlx_f8_x8(const float *p) { return rlx_q_load8(p); }
#if defined(RLX_CPU_AVX2) || defined(RLX_CPU_AVX512)
static inline rlx_q_v8 rlx_f8_x8(const half *p) {   // f16 x: one load and one vcvtph2ps (F16C)
    const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    rlx_q_v8 xv;
    memcpy(&xv, &f, sizeof xv);
    return xv;
}
#endif

// part[r][a] += x[r][e, e + 8) * w[e, e + 8) for every row r of x.
template <typename T, uint M, uint FMT, uint A>
static inline void rlx_f8_step(const T *const *xr, const uchar *wr, uint e, rlx_q_v8 (&part)[M][A], uint a) {
    const rlx_q_v8 wv = rlx_f8_decode8<FMT>(wr + e);
    for (uint r = 0u; r < M; ++r) part[r][a] += rlx_f8_x8(xr[r] + e) * wv;
}

// The CPU's rows: eight codes at a time decoded in vectors
// (rlx_f8_decode8) and multiplied into GCC vectors (quant.h's rlx_q_v8),
// with several accumulators per row of x for one or two rows (a single one
// chains every FMA on the previous) and the rows prefetched a few ahead.
template <typename T, uint M, uint FMT>
static inline void rlx_f8_gemv_cpu(const T *x, const uchar *w, const float *scale, T *y, const T *bias,
                                   const Fp8GemvParams *p, uint j0, uint j1) {
    constexpr uint A = M >= 4u ? 1u : 4u / M;
    const uint m = p->m, k = p->k, xs = p->x_stride, ys = p->y_stride, br = p->block_rows, bc = p->block_cols;
    const uint sc = p->scale_cols;
    const T *xr[M];
    for (uint r = 0u; r < M; ++r) xr[r] = x + (uint64_t)(r < m ? r : m - 1u) * xs;
    for (uint j = j0; j < j1; ++j) {
        const uchar *wr = w + (uint64_t)j * k;
        for (uint off = 0u; off < k; off += 64u) __builtin_prefetch(wr + 4u * (uint64_t)k + off, 0, 2);
        float acc[M];
        for (uint r = 0u; r < M; ++r) acc[r] = 0.0f;
        for (uint kb = 0u; kb < k; kb += bc) {
            const uint kend = kb + bc < k ? kb + bc : k;
            rlx_q_v8 part[M][A];
            for (uint r = 0u; r < M; ++r)
                for (uint a = 0u; a < A; ++a) part[r][a] = rlx_q_v8{0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            // A steps of eight a turn, accumulator a for step a: a constant
            // index once unrolled (a run-time one kept the sums in memory).
            uint e = kb;
            for (; e + 8u * A <= kend; e += 8u * A)
                for (uint a = 0u; a < A; ++a) rlx_f8_step<T, M, FMT>(xr, wr, e + 8u * a, part, a);
            for (; e + 8u <= kend; e += 8u) rlx_f8_step<T, M, FMT>(xr, wr, e, part, 0u);
            const float s = rlx_f8_scale(scale, j, kb, br, bc, sc);
            for (uint r = 0u; r < M; ++r) {
                rlx_q_v8 total = part[r][0];
                for (uint a = 1u; a < A; ++a) total += part[r][a];
                float v = rlx_q_hsum(total) * rlx_f8_f16_unscale<FMT>();   // exact: a power of two
                for (uint t = e; t < kend; ++t) v += rlx_to_float(xr[r][t]) * rlx_f8_decode((uint)wr[t], FMT);
                acc[r] += v * s;
            }
        }
        const float bv = p->has_bias ? rlx_to_float(bias[j]) : 0.0f;
        for (uint r = 0u; r < m && r < M; ++r)
            y[(uint64_t)r * ys + j] = rlx_from_float<T>(rlx_activation(p->act, acc[r] + bv));
    }
}

template <typename T, uint FMT>
static inline void rlx_f8_gemv_cpu_m(const T *x, const uchar *w, const float *scale, T *y, const T *bias,
                                     const Fp8GemvParams *p, uint j0, uint j1) {
    if (p->m <= 1u) rlx_f8_gemv_cpu<T, 1, FMT>(x, w, scale, y, bias, p, j0, j1);
    else if (p->m <= 2u) rlx_f8_gemv_cpu<T, 2, FMT>(x, w, scale, y, bias, p, j0, j1);
    else if (p->m <= 4u) rlx_f8_gemv_cpu<T, 4, FMT>(x, w, scale, y, bias, p, j0, j1);
    else rlx_f8_gemv_cpu<T, 8, FMT>(x, w, scale, y, bias, p, j0, j1);
}
#endif

#ifndef RLX_TARGET_CPU
// The GPUs' pieces of 16 codes: one 16-byte load of a weight row decoded
// (rlx_f8_decode, code by code), and the 16 elements of an x row beside
// them in 16-byte loads (x rows start 16-byte aligned where the pieces are
// taken: k a multiple of 16, x at its storage's start).
RLX_INLINE void rlx_f8_decode16(rlx_uint4 c, uint fmt, RLX_THREAD float *v) {
    const uint words[4] = {c.x, c.y, c.z, c.w};
    for (uint i = 0u; i < 16u; ++i) v[i] = rlx_f8_decode((words[i >> 2u] >> (8u * (i & 3u))) & 0xFFu, fmt);
}
RLX_INLINE void rlx_f8_x16(RLX_DEVICE const float *p, RLX_THREAD float *out) {
    RLX_DEVICE const rlx_float4 *q = (RLX_DEVICE const rlx_float4 *)p;
    for (uint i = 0u; i < 4u; ++i) {
        const rlx_float4 f = q[i];
        out[4u * i] = f.x, out[4u * i + 1u] = f.y, out[4u * i + 2u] = f.z, out[4u * i + 3u] = f.w;
    }
}
RLX_INLINE void rlx_f8_x16(RLX_DEVICE const half *p, RLX_THREAD float *out) {
    RLX_DEVICE const rlx_uint4 *q = (RLX_DEVICE const rlx_uint4 *)p;
    for (uint i = 0u; i < 2u; ++i) {
        const rlx_uint4 c = q[i];
        const uint words[4] = {c.x, c.y, c.z, c.w};
        for (uint h = 0u; h < 4u; ++h) {
            out[8u * i + 2u * h] = rlx_half_bits_to_float(words[h] & 0xFFFFu);
            out[8u * i + 2u * h + 1u] = rlx_half_bits_to_float(words[h] >> 16u);
        }
    }
}

// Row j of y for every row of x from the SIMD group's partial sums acc:
// summed across the lanes, lane 0 adds the bias and applies the activation.
template <typename T>
RLX_INLINE void rlx_f8_gemv_store(RLX_THREAD const float *acc, uint m, uint j, RLX_DEVICE T *y,
                                  RLX_DEVICE const T *bias, RLX_CONSTANT Fp8GemvParams *p, uint lane) {
    for (uint r = 0u; r < RLX_F8_GEMV_MAX_M; ++r) {
        if (r < m) {   // uniform across the SIMD group
            const float v = rlx_simd_sum(acc[r]);
            if (lane == 0u)
                y[(uint64_t)r * p->y_stride + j] = rlx_from_float<T>(
                    rlx_activation(p->act, v + (p->has_bias ? rlx_to_float(bias[j]) : 0.0f)));
        }
    }
}
#endif

// Rows [j0, j1) of y: on GPUs one SIMD group per weight row (the group's
// SIMD groups take the rows in turn); the CPU's one thread walks the rows.
// On GPUs, where a row is whole 16-code pieces that each sit in one scale
// block (k a multiple of 16, and block_cols too or one block a row), a lane
// takes a piece a step: one 16-byte load of codes and 16 elements of each x
// row, its 16 products summed, then scaled. A SIMD group then reads 512
// bytes of the row a step where one code a lane read 32, which left the
// GEMV waiting on its loads (times: benchmarks/README.md, "H100, session
// 45"). Other rows keep one code a lane, neighbouring lanes on
// neighbouring bytes, the k axis a scale block at a time: the block's
// products summed unscaled, then scaled once. All sums in f32.
template <typename T>
RLX_KERNEL gemv_f8(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const uchar *, w, 1),
                   RLX_BUF(RLX_DEVICE const float *, scale, 2), RLX_BUF(RLX_DEVICE T *, y, 3),
                   RLX_BUF(RLX_DEVICE const T *, bias, 4), RLX_PARAMS(Fp8GemvParams, p, 5) RLX_IDS) {
    const uint m = p->m < RLX_F8_GEMV_MAX_M ? p->m : RLX_F8_GEMV_MAX_M;
    const uint n = p->n, k = p->k, fmt = p->fmt, br = p->block_rows, bc = p->block_cols, sc = p->scale_cols;
    const uint xs = p->x_stride, rpg = p->rows_per_group;
    const uint j0 = rlx_group_id.x * rpg;
    if (j0 >= n) return;
    const uint j1 = rpg < n - j0 ? j0 + rpg : n;
#ifdef RLX_TARGET_CPU
    (void)m, (void)k, (void)br, (void)bc, (void)sc, (void)xs;
    if (fmt == 0u) rlx_f8_gemv_cpu_m<T, 0u>(x, w, scale, y, bias, p, j0, j1);
    else rlx_f8_gemv_cpu_m<T, 1u>(x, w, scale, y, bias, p, j0, j1);
#else
    const uint nt = rlx_group_size.x, sw = rlx_simd_width, sid = rlx_simd_id, lane = rlx_simd_lane;
    const uint n_simd = (nt + sw - 1u) / sw;
    const uint lanes = nt - sid * sw < sw ? nt - sid * sw : sw;   // lanes this SIMD group has
    if (k % 16u == 0u && (bc >= k || bc % 16u == 0u)) {   // whole pieces (uniform over the dispatch)
        for (uint j = j0 + sid; j < j1; j += n_simd) {
            RLX_DEVICE const rlx_uint4 *wr = (RLX_DEVICE const rlx_uint4 *)(w + (uint64_t)j * k);
            float acc[RLX_F8_GEMV_MAX_M];
            for (uint r = 0u; r < RLX_F8_GEMV_MAX_M; ++r) acc[r] = 0.0f;
            for (uint e = lane * 16u; e < k; e += lanes * 16u) {
                float v[16], xv[16];
                rlx_f8_decode16(wr[e >> 4u], fmt, v);
                const float s = rlx_f8_scale(scale, j, e, br, bc, sc);
                for (uint r = 0u; r < RLX_F8_GEMV_MAX_M; ++r) {
                    if (r < m) {
                        rlx_f8_x16(x + (uint64_t)r * xs + e, xv);
                        float d = 0.0f;
                        for (uint i = 0u; i < 16u; ++i) d += xv[i] * v[i];
                        acc[r] += d * s;
                    }
                }
            }
            rlx_f8_gemv_store<T>(acc, m, j, y, bias, p, lane);
        }
        return;
    }
    for (uint j = j0 + sid; j < j1; j += n_simd) {
        RLX_DEVICE const uchar *wr = w + (uint64_t)j * k;
        float acc[RLX_F8_GEMV_MAX_M];
        for (uint r = 0u; r < RLX_F8_GEMV_MAX_M; ++r) acc[r] = 0.0f;
        for (uint kb = 0u; kb < k; kb += bc) {
            const uint kend = kb + bc < k ? kb + bc : k;
            float part[RLX_F8_GEMV_MAX_M];
            for (uint r = 0u; r < RLX_F8_GEMV_MAX_M; ++r) part[r] = 0.0f;
            for (uint e = kb + lane; e < kend; e += lanes) {
                const float v = rlx_f8_decode((uint)wr[e], fmt);
                for (uint r = 0u; r < RLX_F8_GEMV_MAX_M; ++r)
                    if (r < m) part[r] += rlx_to_float(x[(uint64_t)r * xs + e]) * v;
            }
            const float s = rlx_f8_scale(scale, j, kb, br, bc, sc);
            for (uint r = 0u; r < RLX_F8_GEMV_MAX_M; ++r) acc[r] += part[r] * s;
        }
        rlx_f8_gemv_store<T>(acc, m, j, y, bias, p, lane);
    }
#endif
}
RLX_INSTANTIATE(gemv_f8, float, gemv_f8_f32)
RLX_INSTANTIATE(gemv_f8, half, gemv_f8_f16)

// After an FP8 x FP8 gemm with unit scales: acc [m, n] f32 holds the sums
// of code products, and y = act(acc * x_scale[i] * w_scale[j] + bias[j]).
// The scales are per row of x / per row of w (step 1) or per tensor (step
// 0): cuBLASLt's FP8 matmul takes one scale per operand, so per-token and
// per-channel scales are applied here, in the one pass the bias and the
// activation need anyway. One group per row, as bias_act; acc and y are
// distinct buffers.
template <typename T>
RLX_KERNEL fp8_gemm_epilogue(RLX_BUF(RLX_DEVICE const float *, acc, 0),
                             RLX_BUF(RLX_DEVICE const float *, x_scale, 1),
                             RLX_BUF(RLX_DEVICE const float *, w_scale, 2), RLX_BUF(RLX_DEVICE T *, y, 3),
                             RLX_BUF(RLX_DEVICE const T *, bias, 4),
                             RLX_PARAMS(Fp8EpilogueParams, p, 5) RLX_IDS) {
    const uint m = p->m, n = p->n, ws = p->w_scale_step, has_bias = p->has_bias, act = p->act;
    const uint row = rlx_group_id.x;
    if (row >= m) return;
    const float xs = x_scale[row * p->x_scale_step];
    RLX_DEVICE const float *ar = acc + (uint64_t)row * n;
    RLX_DEVICE T *yr = y + (uint64_t)row * n;
    RLX_FOR_GROUP(c, n) {
        const float v = ar[c] * (xs * w_scale[c * ws]) + (has_bias ? rlx_to_float(bias[c]) : 0.0f);
        yr[c] = rlx_from_float<T>(rlx_activation(act, v));
    }
}
RLX_INSTANTIATE(fp8_gemm_epilogue, float, fp8_gemm_epilogue_f32)
RLX_INSTANTIATE(fp8_gemm_epilogue, half, fp8_gemm_epilogue_f16)
