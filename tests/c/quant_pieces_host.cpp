// The CUDA decode GEMV's integer chunk dot (shaders/quant_pieces.h:
// RlxQInt's codes, scales and mins, RlxQDotPieces' piece layout and
// Horner sums) and its f32 chunk dot from the same codes (RlxQDotCodes)
// compiled for the CPU, with host forms of the CUDA
// intrinsics it uses, so CI checks its bit manipulations against the
// float64 product (tests/ops/test_quant_pieces_host.py) before a GPU runs
// it. x's split into pieces comes from the test (numpy), in the layout the
// kernel's rlx_qx_split writes.
#include <stdint.h>
#include <string.h>

#include "prelude/cpu.h"

struct uint4 {
    uint x, y, z, w;
};
struct float4 {
    float x, y, z, w;
};
template <uint M>
struct RlxQAcc {   // quant.h's GPU accumulator (the CPU build has none)
    float v[M];
};

static inline int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; ++i) c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
}
static inline uint __vsub4(uint a, uint b) {
    uint r = 0;
    for (int i = 0; i < 4; ++i) r |= (((a >> (8 * i)) - (b >> (8 * i))) & 255u) << (8 * i);
    return r;
}
static inline uint __funnelshift_r(uint lo, uint hi, uint sh) {
    return (uint)((((uint64_t)hi << 32) | lo) >> (sh & 31u));
}
static inline uint __byte_perm(uint x, uint y, uint s) {   // result byte n = byte (s >> 4 n) & 7 of y:x
    const uint64_t v = ((uint64_t)y << 32) | x;
    uint r = 0;
    for (int n = 0; n < 4; ++n) r |= (uint)((v >> (8u * ((s >> (4 * n)) & 7u))) & 255u) << (8 * n);
    return r;
}
static inline float __int_as_float(int i) {
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

#define RLX_QPIECES_HOST_TEST 1
#include "all.h"

// y[j] = sum over the row's chunks of RlxQDotPieces<Q, P> (each chunk's
// contribution in f32, added in order), for n rows of w at w (row_bytes
// apart; any alignment) against x's pieces at xq (chunks units a piece and
// half), scale[chunks] and sum16[2 chunks]. Formats whose blocks are whole
// 16-byte vectors are read from a 16-byte aligned copy of the row, as
// gemv1i's stage holds them; the others where they lie.
template <typename Q, uint P>
static void dot_rows(const uchar *w, uint n, uint k, const uchar *xq, const float *scale, const float *sum16,
                     float *y) {
    const uint chunks = k / 32u;
    const uint64_t row_bytes = (uint64_t)(k / (uint)Q::BLOCK) * (uint)Q::BYTES;
    uint4 units[5 * 2 * 256];
    memcpy(units, xq, (size_t)P * 2u * chunks * 16u);
    const RlxQDotPieces<Q> dot = {units, scale, sum16, chunks, P};
    alignas(16) uchar aligned[8192u / 32u * 34u];   // the longest row: q8_0 at k = 8192
    for (uint j = 0; j < n; ++j) {
        const uchar *row = w + j * row_bytes;
        if ((uint)Q::BYTES % 16u == 0u) row = (const uchar *)memcpy(aligned, row, row_bytes);
        RlxQAcc<1> acc = {{0.0f}};
        for (uint c = 0; c < chunks; ++c) acc = dot(row, c, c, acc);
        y[j] = acc.v[0];
    }
}

#define RLX_QPH_FORMATS(X) \
    X(QFmtQ4_0, 0) X(QFmtQ4_1, 1) X(QFmtQ5_0, 2) X(QFmtQ5_1, 3) X(QFmtQ8_0, 4) X(QFmtQ2_K, 5) X(QFmtQ3_K, 6) \
    X(QFmtQ4_K, 7) X(QFmtQ5_K, 8) X(QFmtQ6_K, 9)

// fmt: the index in RLX_QPH_FORMATS; pieces: 3 or 5; k <= 8192. Returns 0,
// or -1 for an unknown format / piece count.
extern "C" int qph_dot(int fmt, uint pieces, const uchar *w, uint n, uint k, const uchar *xq, const float *scale,
                       const float *sum16, float *y) {
    if (k > 8192u || (pieces != 3u && pieces != 5u)) return -1;
#define RLX_QPH_CASE(Q, i)                                                   \
    if (fmt == i) {                                                          \
        if (pieces == 3u) dot_rows<Q, 3>(w, n, k, xq, scale, sum16, y);      \
        else dot_rows<Q, 5>(w, n, k, xq, scale, sum16, y);                   \
        return 0;                                                            \
    }
    RLX_QPH_FORMATS(RLX_QPH_CASE)
#undef RLX_QPH_CASE
    return -1;
}

// y[r n + j] = sum over row j's chunks of RlxQDotCodes<Q, float, M> against
// x row r (m <= M rows of k floats), which go into the tile as
// rlx_q_stage_x lays it out (rlx_q_xt_row(k) apart).
template <typename Q, uint M>
static void dot_rows_f32(const uchar *w, uint n, uint k, uint m, const float *x, float *y) {
    const uint chunks = k / 32u;
    const uint64_t row_bytes = (uint64_t)(k / (uint)Q::BLOCK) * (uint)Q::BYTES;
    static float tile[8192];
    for (uint r = 0; r < m; ++r)
        for (uint e = 0; e < k; ++e)
            tile[r * rlx_q_xt_row(k) + (e >> 5u) * RLX_QXT_PITCH + rlx_q_xt_at(e >> 5u, e & 31u)] = x[r * k + e];
    const RlxQDotCodes<Q, float, M> dot = {tile, k, m};
    for (uint j = 0; j < n; ++j) {
        RlxQAcc<M> acc;
        for (uint r = 0; r < M; ++r) acc.v[r] = 0.0f;
        for (uint c = 0; c < chunks; ++c) acc = dot(w + j * row_bytes, c, c, acc);
        for (uint r = 0; r < m; ++r) y[r * n + j] = acc.v[r];
    }
}

// fmt: as qph_dot; m rows of x (1: the decode step's M = 1 form; 2..8:
// gemv_q's M = 8 form), m k <= 8192 and whole chunks. Returns 0, or -1.
extern "C" int qph_dot_f32(int fmt, const uchar *w, uint n, uint k, uint m, const float *x, float *y) {
    if (m == 0u || m > 8u || m * k > 8192u || k % 32u != 0u) return -1;
#define RLX_QPH_CASE(Q, i)                                          \
    if (fmt == i) {                                                 \
        if (m == 1u) dot_rows_f32<Q, 1>(w, n, k, 1u, x, y);         \
        else dot_rows_f32<Q, 8>(w, n, k, m, x, y);                  \
        return 0;                                                   \
    }
    RLX_QPH_FORMATS(RLX_QPH_CASE)
#undef RLX_QPH_CASE
    return -1;
}

// The decode GEMV's x tile when it forms x = act(gate) * up as it stages it
// (rlx_q_stage_x_glu, quant.h; gemv1 with QuantGemvParams.x_glu), written by
// `threads` interleaved "threads" of one group, un-swizzled into x[kp]: the
// elements past k are the tile's zeros.
extern "C" int qph_stage_glu(uint act, const float *gate, const float *up, uint k, uint threads, float *x) {
    const uint kp = (k + 31u) & ~31u;
    if (kp > 8192u || threads == 0u) return -1;
    static float tile[8192];
    for (uint t = 0; t < threads; ++t) rlx_q_stage_x_glu<float>(gate, up, tile, k, kp, act, t, threads);
    for (uint e = 0; e < kp; ++e) x[e] = tile[(e >> 5u) * RLX_QXT_PITCH + rlx_q_xt_at(e >> 5u, e & 31u)];
    return 0;
}
