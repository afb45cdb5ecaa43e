// The GEMV of GGUF block formats, part of quant.h (included from there,
// after the formats and the dequantize / gather kernels): the CPU's chunk
// dots (quant_gemv_cpu.h), the GPU's staging, pipelined and flattened row
// loops and the integer form's pieces (quant_pieces.h), and the gemv_q /
// gemv1_q / gemv1i_q kernels.
// ---- GEMV -----------------------------------------------------------------------
// y[r, j] = act(sum_kk x[r, kk] W[j, kk] + bias[j]) for r < m <= 8, j < n;
// group g takes W rows [g rows_per_group, min(n, (g + 1) rows_per_group)).
// Accumulates in f32.
#include "quant_gemv_cpu.h"


// Where element e of chunk c of an x row sits in the GEMV's shared tile,
// from the chunk's start (chunk c at c * RLX_QXT_PITCH, a row of kp
// elements rlx_q_xt_row(kp) long). CUDA pads each chunk to 36 elements: a
// lane reads its chunk in 16-byte (f32) or 8-byte (f16) loads at fixed
// offsets from the chunk's start, and lanes on consecutive chunks land 4
// (f32) or 2 (f16) banks apart, so a load's phase takes distinct banks with
// no per-load address arithmetic (the earlier swizzle, groups of four at
// (e / 4 ^ c % 8), cost two integer instructions a load: ~10% of the f32
// chunk dot's instructions). Elsewhere single elements swizzle (e ^ c % 32).
#ifdef RLX_TARGET_CUDA
#define RLX_QXT_PITCH 36u
RLX_INLINE uint rlx_q_xt_at(uint, uint e) { return e; }
#else
#define RLX_QXT_PITCH 32u
RLX_INLINE uint rlx_q_xt_at(uint c, uint e) { return e ^ (c & 31u); }
#endif
RLX_INLINE uint rlx_q_xt_row(uint kp) { return kp / 32u * RLX_QXT_PITCH; }

// Elements of x a thread of the GEMV's group loads before it stores any
// to the tile (rlx_q_stage_x, rlx_q_stage_x_glu): one load, then its store,
// then the next made each of a thread's elements a memory round trip of
// its own after the PDL wait (8 of them for k = 2048 on 256 threads).
#define RLX_QX_BATCH 8u

// The GEMV's x tile as rlx_q_stage_x (below) lays it out, for one row of
// x = act(gate) * up rounded to T (the glu kernel's values: shaders/glu.h),
// formed as it is staged: gemv1 with QuantGemvParams.x_glu.
template <typename T>
RLX_INLINE void rlx_q_stage_x_glu(RLX_DEVICE const T *gate, RLX_DEVICE const T *up, RLX_GROUP_MEM T *xt, uint k,
                                  uint kp, uint act, uint tid, uint nt) {
    for (uint e0 = tid; e0 < kp; e0 += RLX_QX_BATCH * nt) {
        float g[RLX_QX_BATCH], u[RLX_QX_BATCH];
        for (uint b = 0; b < RLX_QX_BATCH; ++b) {
            const uint e = e0 + b * nt;
            g[b] = e < k ? rlx_to_float(gate[e]) : 0.0f;
            u[b] = e < k ? rlx_to_float(up[e]) : 0.0f;
        }
        for (uint b = 0; b < RLX_QX_BATCH; ++b) {
            const uint e = e0 + b * nt, c = e >> 5u;
            const float v = e < k ? rlx_activation(act, g[b]) * u[b] : 0.0f;
            if (e < kp) xt[c * RLX_QXT_PITCH + rlx_q_xt_at(c, e & 31u)] = rlx_from_float<T>(v);
        }
    }
}

#include "norm_chain.h"

// rlx_norm_chain's sink for gemv1n: every value into the GEMV's x tile as
// rlx_q_stage_x lays it out, and with `store` (one group of the dispatch)
// the chain's output as rmsnorm_add writes it (the sums, or the normed
// sums then the sums), for the other readers of that value.
template <typename T> struct RlxQTileSink {
    RLX_GROUP_MEM T *xt;
    RLX_DEVICE T *sums;
    RLX_DEVICE T *normed;
    bool store;
};
template <typename T> RLX_INLINE RLX_GROUP_MEM T *rlx_q_tile_at(RlxQTileSink<T> k, uint i) {
    return k.xt + (i >> 5u) * RLX_QXT_PITCH + rlx_q_xt_at(i >> 5u, i & 31u);
}
template <typename T> RLX_INLINE void rlx_sink_sum(RlxQTileSink<T> k, uint i, T s) {
    *rlx_q_tile_at(k, i) = s;
    if (k.store) k.sums[i] = s;
}
template <typename T> RLX_INLINE T rlx_sink_sum_at(RlxQTileSink<T> k, uint i) { return *rlx_q_tile_at(k, i); }
template <typename T> RLX_INLINE void rlx_sink_out(RlxQTileSink<T> k, uint i, T v) {
    *rlx_q_tile_at(k, i) = v;
    if (k.store) k.normed[i] = v;
}

// The GEMV's x tile for x = the norm chain of shaders/norm.h's rmsnorm_add
// (QuantGemvParams.x_norm 1: s = r + rmsnorm(o, w); 2: rmsnorm(s, w_next);
// the arithmetic: norm_chain.h), formed as it is staged: gemv1n, whose
// lowering takes the rmsnorm_add dispatch before it into it (the kernel and
// its launch gone from a decode step). The tile holds what the GEMV would
// have read from rmsnorm_add's output, up to the order of the two sums of
// squares. k is whole chunks (kp = k). Rows of at most RLX_QX_BATCH
// elements a thread are read in one memory round trip after the PDL wait.
template <typename T>
RLX_INLINE void rlx_q_stage_x_norm(RLX_DEVICE const T *o, RLX_DEVICE const T *r, RLX_DEVICE const T *nw,
                                   RLX_DEVICE const T *nw_next, RLX_DEVICE T *out, bool store,
                                   RLX_GROUP_MEM T *xt, RLX_GROUP_MEM float *scratch, uint k,
                                   RLX_CONSTANT QuantGemvParams *p, uint tid, uint nt RLX_GROUP_IDS) {
    RlxNormChain chain;
    chain.eps = p->eps, chain.next_eps = p->next_eps, chain.then_norm = p->x_norm == 2u;
    chain.one = p->add_one ? 1.0f : 0.0f, chain.next_one = p->next_add_one ? 1.0f : 0.0f;
    RlxQTileSink<T> sink;
    sink.xt = xt, sink.normed = out, sink.sums = out + (chain.then_norm ? k : 0u), sink.store = store;
    rlx_norm_chain<T, RLX_QX_BATCH>(o + p->o_offset, r + p->resid_offset, nw, nw_next, k, chain, sink, scratch, tid,
                                    nt RLX_GROUP_IDS_ARGS);
}

#ifdef RLX_TARGET_CPU
// The weights stream from memory once. Narrow rows (under
// RLX_Q_PREFETCH_ROW_LIMIT bytes: 640-wide q8_0 is 680) are fetched
// RLX_Q_PREFETCH_AHEAD bytes ahead in software: the hardware prefetcher
// alone left a 262144 x 640 q8_0 GEMV at a third of the copy bandwidth on
// one machine, and on a 2-core AMD EPYC (session 40) 5.4 KB ahead beat 2.7
// (32-34 against 27 GB/s). Wide rows are left to the hardware prefetcher,
// which streams within a row: there a 4-row software fetch cost 4096 x 4096
// q8_0 15% (41 against 35 GB/s). A prefetch past the end never faults.
// Both helpers are forced inline: a prefetch has no effect the compiler
// must keep, and GCC 12 outlined the row loop (partial inlining), then
// deleted the call as free of side effects, so no GEMV prefetched
// (tests/runtime/test_host_prefetch.py checks the built library).
#define RLX_Q_PREFETCH_ROW_LIMIT 2048u
#define RLX_Q_PREFETCH_AHEAD 5632u
static inline __attribute__((always_inline)) uint64_t rlx_q_prefetch_distance(uint64_t row_bytes) {
    if (row_bytes == 0u || row_bytes >= RLX_Q_PREFETCH_ROW_LIMIT) return 0u;
    return (RLX_Q_PREFETCH_AHEAD + row_bytes - 1u) / row_bytes * row_bytes;
}
static inline __attribute__((always_inline)) void rlx_q_prefetch_row(const uchar *wr, uint64_t row_bytes,
                                                                    uint64_t distance) {
    if (distance)
        for (uint64_t off = 0; off < row_bytes; off += 64u) __builtin_prefetch(wr + distance + off, 0, 2);
}

// Rows [j0, j1) of y = x W^T + bias for the m (<= RLX_QGEMV_MAX_M) rows of x.
template <typename Q, typename T>
static inline void rlx_q_gemv_cpu(const T *x, const uchar *w, T *y, const T *bias, const QuantGemvParams *p,
                                  uint j0, uint j1) {
    const uint m = p->m, k = p->k, xs = p->x_stride, ys = p->y_stride, has_bias = p->has_bias, act = p->act;
    const uint64_t row_bytes = (uint64_t)(k / (uint)Q::BLOCK) * (uint)Q::BYTES;
    const uint chunks = k / 32u, tail = chunks * 32u;   // tail < k for bf16 only
    const uint64_t ahead = rlx_q_prefetch_distance(row_bytes);
    for (uint j = j0; j < j1; ++j) {
        const uchar *wr = w + (uint64_t)j * row_bytes;
        rlx_q_prefetch_row(wr, row_bytes, ahead);
        float s[RLX_QGEMV_MAX_M];
        if (m <= 1u) rlx_q_gemv_row_cpu<Q, T, 1>(x, xs, m, wr, chunks, s);
        else if (m <= 2u) rlx_q_gemv_row_cpu<Q, T, 2>(x, xs, m, wr, chunks, s);
        else if (m <= 4u) rlx_q_gemv_row_cpu<Q, T, 4>(x, xs, m, wr, chunks, s);
        else rlx_q_gemv_row_cpu<Q, T, 8>(x, xs, m, wr, chunks, s);
        const float bv = has_bias ? rlx_to_float(bias[j]) : 0.0f;
        for (uint r = 0; r < m && r < RLX_QGEMV_MAX_M; ++r) {
            float v = s[r];
            for (uint i = tail; i < k; ++i) v += rlx_to_float(x[(uint64_t)r * xs + i]) * rlx_q_get<Q>(wr, i);
            y[(uint64_t)r * ys + j] = rlx_from_float<T>(rlx_activation(act, v + bv));
        }
    }
}
#else
#ifdef RLX_TARGET_CUDA
// Copies bytes [src, src + nbytes) into stage (shared memory, 4-byte
// aligned) with the 4-byte loads of the whole words inside the range (the
// partial words at its ends a byte at a time: the range may start and end
// anywhere and must not be overread), keeping src's alignment mod 4.
// Returns where src's first byte landed. Every lane of the SIMD group calls
// it; the caller brackets it with SIMD barriers.
RLX_INLINE const uchar *rlx_q_stage(const uchar *src, uint nbytes, uint *stage, uint lane, uint lanes) {
    const uint shift = (uint)((unsigned long long)src & 3ull);
    const uint head = shift ? 4u - shift : 0u;   // bytes before the first whole word
    uchar *bytes = (uchar *)stage;
    if (head >= nbytes) {
        for (uint i = lane; i < nbytes; i += lanes) bytes[shift + i] = src[i];
        return bytes + shift;
    }
    const uint words = (nbytes - head) / 4u, done = head + words * 4u;
    const uint *src_words = (const uint *)(src + head);
    for (uint i = lane; i < words; i += lanes) stage[(shift + head) / 4u + i] = __ldg(src_words + i);
    for (uint i = lane; i < head; i += lanes) bytes[shift + i] = src[i];
    for (uint i = done + lane; i < nbytes; i += lanes) bytes[shift + i] = src[i];
    return bytes + shift;
}

// The software-pipelined form of the stage for full 32-lane SIMD groups:
// rlx_q_stage_load issues a pass's global loads into registers (16-byte
// loads for the aligned interior, a byte a lane for the ends) and
// rlx_q_stage_store writes them into the stage, keeping src's alignment
// mod 16. The GEMV loads the next pass between the two while the lanes
// decode the current one, so a SIMD group always has a pass in flight:
// with one load, barrier and decode after another (rlx_q_stage), each row
// of a tall, narrow weight (262144 x 640, the vocabulary projection) cost
// a full memory latency and the kernel streamed at a third of the copy
// bandwidth.
#define RLX_QSTAGE_VECS ((RLX_QGEMV_STAGE_BYTES + 511u) / 512u)   // 16-byte loads a lane holds
struct RlxQStageRegs {
    uint4 v[RLX_QSTAGE_VECS];
    uchar head, tail;
};

struct RlxQStageSplit {
    uint shift, head, vecs, tail;   // src mod 16; bytes before the first aligned vector; vectors; bytes after
};

RLX_INLINE RlxQStageSplit rlx_q_stage_split(const uchar *src, uint nbytes) {
    RlxQStageSplit s;
    s.shift = (uint)((unsigned long long)src & 15ull);
    s.head = s.shift ? (16u - s.shift < nbytes ? 16u - s.shift : nbytes) : 0u;
    s.vecs = (nbytes - s.head) / 16u;
    s.tail = nbytes - s.head - 16u * s.vecs;
    return s;
}

// The SIMD groups' weight stages, one array a group however many functions
// use it (a function-scope __shared__ variable is allocated once a block).
RLX_INLINE uint4 *rlx_q_stage_area() {
    __shared__ uint4 wt[RLX_QGEMV_SIMD_GROUPS * (RLX_QGEMV_STAGE_BYTES / 16u)];
    return wt;
}

// gemv1i_q's shared memory, all of a CUDA block's 48 KiB of static shared
// memory, in one of two layouts: the integer form's x pieces
// (RLX_QGEMV1I_PIECES_BYTES) then two RLX_QGEMV1I_SLOT_BYTES slots a SIMD
// group for its asynchronous passes (RlxQAsyncStage; 64 chunks a pass for
// the K-quants); or the f32 fallback's x tile (RLX_QGEMV1_MAX_K elements)
// then its stage at RLX_QGEMV1I_STAGE_AT. The fallback starts only after
// every copy of the integer form has landed (rlx_q_gemv1_rows).
#define RLX_QGEMV1I_SHARED_BYTES 49152u
#define RLX_QGEMV1I_PIECES_BYTES 16384u
#define RLX_QGEMV1I_SLOT_BYTES 2048u
#define RLX_QGEMV1I_STAGE_AT 36864u   // the fallback's f32 tile: rlx_q_xt_row(RLX_QGEMV1_MAX_K) floats
RLX_INLINE uint4 *rlx_q_gemv1i_shared() {
    __shared__ uint4 raw[RLX_QGEMV1I_SHARED_BYTES / 16u];
    return raw;
}

// Whether a pass of nbytes fits the registers of 32 lanes (the ends take
// lanes 0..15 and 16..31).
RLX_INLINE bool rlx_q_stage_pipelined(uint nbytes) { return nbytes + 15u <= 32u * 16u * RLX_QSTAGE_VECS; }

RLX_INLINE void rlx_q_stage_load(const uchar *src, uint nbytes, RlxQStageRegs &r, uint lane) {
    const RlxQStageSplit s = rlx_q_stage_split(src, nbytes);
    const uint4 *vec = (const uint4 *)(src + s.head);
#pragma unroll
    for (uint u = 0; u < RLX_QSTAGE_VECS; ++u) {
        const uint i = lane + 32u * u;
        if (i < s.vecs) r.v[u] = __ldg(vec + i);
    }
    r.head = lane < s.head ? src[lane] : (uchar)0;
    r.tail = lane >= 16u && lane - 16u < s.tail ? src[s.head + 16u * s.vecs + (lane - 16u)] : (uchar)0;
}

// Returns where src's first byte landed in the stage (16 bytes of slack
// in front of the pass).
RLX_INLINE const uchar *rlx_q_stage_store(const uchar *src, uint nbytes, const RlxQStageRegs &r, uint4 *stage,
                                          uint lane) {
    const RlxQStageSplit s = rlx_q_stage_split(src, nbytes);
    uchar *bytes = (uchar *)stage;
    const uint first = s.head ? 1u : 0u;   // the aligned interior starts at stage[1] after a head
#pragma unroll
    for (uint u = 0; u < RLX_QSTAGE_VECS; ++u) {
        const uint i = lane + 32u * u;
        if (i < s.vecs) stage[first + i] = r.v[u];
    }
    if (lane < s.head) bytes[s.shift + lane] = r.head;
    if (lane >= 16u && lane - 16u < s.tail) bytes[s.shift + s.head + 16u * s.vecs + (lane - 16u)] = r.tail;
    return bytes + s.shift;
}
#endif

// The end of weight row j for one row of x (xr): the lanes' partial sum
// acc plus bf16's last k % 32 elements (adjacent lanes on adjacent x),
// summed over the SIMD group, bias and activation, and y_row[j] written by
// lane 0. Every lane of the SIMD group calls it (the sum is a SIMD
// reduction).
template <typename Q, typename T>
RLX_INLINE void rlx_q_gemv_finish(float acc, RLX_DEVICE const uchar *wr, RLX_DEVICE const T *xr, uint tail, uint k,
                                  uint lane, uint lanes, RLX_DEVICE const T *bias, uint has_bias, uint act,
                                  RLX_DEVICE T *y_row, uint j) {
    for (uint i = tail + lane; i < k; i += lanes) acc += rlx_to_float(xr[i]) * rlx_q_get<Q>(wr, i);
    const float v = rlx_simd_sum(acc);
    if (lane == 0u) y_row[j] = rlx_from_float<T>(rlx_activation(act, v + (has_bias ? rlx_to_float(bias[j]) : 0.0f)));
}

// x rows [0, m) into the shared tile xt, kp = k rounded up to 32 elements
// a row (zeros past k), element e of chunk c of row r at r * rlx_q_xt_row(kp)
// + c * RLX_QXT_PITCH + rlx_q_xt_at(c, e). Every thread of the group calls it; the caller
// follows it with a group barrier.
template <typename T>
RLX_INLINE void rlx_q_stage_x(RLX_DEVICE const T *x, RLX_GROUP_MEM T *xt, uint m, uint k, uint kp, uint xs,
                              uint tid, uint nt) {
    for (uint r = 0; r < m; ++r) {
        RLX_DEVICE const T *xr = x + (uint64_t)r * xs;
        RLX_GROUP_MEM T *tr = xt + r * rlx_q_xt_row(kp);
        for (uint e0 = tid; e0 < kp; e0 += RLX_QX_BATCH * nt) {
            T v[RLX_QX_BATCH];
            for (uint b = 0; b < RLX_QX_BATCH; ++b) {
                const uint e = e0 + b * nt;
                v[b] = e < k ? xr[e] : rlx_from_float<T>(0.0f);
            }
            for (uint b = 0; b < RLX_QX_BATCH; ++b) {
                const uint e = e0 + b * nt, c = e >> 5u;
                if (e < kp) tr[c * RLX_QXT_PITCH + rlx_q_xt_at(c, e & 31u)] = v[b];
            }
        }
    }
}

#ifdef RLX_TARGET_CUDA
// Elements 4 g .. 4 g + 3 of chunk c from its place in the tile (xc: the
// chunk's start), in one vector load.
RLX_INLINE float4 rlx_q_xt_group(const float *xc, uint c, uint g) {
    return *(const float4 *)(xc + rlx_q_xt_at(c, 4u * g));
}
RLX_INLINE float4 rlx_q_xt_group(const half *xc, uint c, uint g) {
    const uint2 u = *(const uint2 *)(xc + rlx_q_xt_at(c, 4u * g));
    const float2 a = __half22float2(*(const __half2 *)&u.x), b = __half22float2(*(const __half2 *)&u.y);
    return make_float4(a.x, a.y, b.x, b.y);
}
#endif

// A lane's partial sums for the m <= M rows of x (a struct, passed by
// value: Metal would need an address space on a pointer to them).
template <uint M>
struct RlxQAcc {
    float v[M];
};

// acc plus chunk i of src (a pass's blocks) dotted with chunk c of the m
// <= M rows of x in the shared tile.
template <typename Q, typename T, uint M>
RLX_INLINE RlxQAcc<M> rlx_q_chunk_dot(RLX_DEVICE const uchar *src, uint i, uint c, RLX_GROUP_MEM const T *xt,
                                      uint kp, uint m, RlxQAcc<M> acc) {
    const rlx_q32 v = rlx_q_chunk<Q>(src, i);
    for (uint r = 0; r < M; ++r) {
        if (r < m) {
            RLX_GROUP_MEM const T *xc = xt + r * rlx_q_xt_row(kp) + c * RLX_QXT_PITCH;
            float sum = 0.0f;
#ifdef RLX_TARGET_CUDA
            for (uint g = 0; g < 8u; ++g) {
                const float4 x4 = rlx_q_xt_group(xc, c, g);
                sum += x4.x * v.v[4u * g] + x4.y * v.v[4u * g + 1u] + x4.z * v.v[4u * g + 2u] + x4.w * v.v[4u * g + 3u];
            }
#else
            for (uint e = 0; e < 32u; ++e) sum += rlx_to_float(xc[rlx_q_xt_at(c, e)]) * v.v[e];
#endif
            acc.v[r] += sum;
        }
    }
    return acc;
}

// Chunks [cb, cb + cnt) of a weight row, lane l decoding chunk cb + l from
// src (where chunk c0 of the row lies), added to acc. Lanes diverge here
// only; no barrier inside.
template <typename Q, typename T, uint M>
RLX_INLINE RlxQAcc<M> rlx_q_pass_dot(RLX_DEVICE const uchar *src, uint c0, uint cb, uint cnt, uint lane,
                                     RLX_GROUP_MEM const T *xt, uint kp, uint m, RlxQAcc<M> acc) {
    if (lane >= cnt) return acc;
    return rlx_q_chunk_dot<Q, T, M>(src, cb + lane - c0, cb + lane, xt, kp, m, acc);
}

#ifdef RLX_TARGET_CUDA
template <typename Q>
struct RlxQInt;   // quant_pieces.h: a format's int8 codes, where it has them
template <typename Q, typename T, uint M>
struct RlxQDotCodes;   // quant_pieces.h: the f32 chunk dot from those codes

// rlx_q_gemv_flat's dot policy for the f32 form: chunk i of the staged pass
// (a pass starts on a block) against chunk c of the m <= M rows of x in the
// shared f32 tile; from the format's codes where it has them (the codes'
// reads need rlx_qi_words' slack, RLX_QGEMV_CODES_SLACK, at the stage's end).
template <typename Q, typename T, uint M>
struct RlxQDotTile {
    RLX_GROUP_MEM const T *xt;
    uint kp, m;
    __device__ __forceinline__ RlxQAcc<M> operator()(const uchar *staged, uint i, uint c, RlxQAcc<M> acc) const {
        if (RlxQInt<Q>::has) {
            const RlxQDotCodes<Q, T, M> codes = {xt, kp, m};
            return codes(staged, i, c, acc);
        }
        return rlx_q_chunk_dot<Q, T, M>(staged, i, c, xt, kp, m, acc);
    }
};
// Bytes the pipelined stage keeps free at its end: the pass's slack in
// front (up to 15) and rlx_qi_words' reads up to 3 bytes past an unaligned
// run of codes (RlxQDotTile).
#define RLX_QGEMV_CODES_SLACK 20u
// The least chunks a weight row has for gemv1's direct rows (rlx_q_gemv_whole_x).
#define RLX_QGEMV_DIRECT_CHUNKS 32u
// Chunks of a row a lane has in flight there: four were 2-6% faster than two
// at 4096 x 4096 (H100, session 37). An experiment's KERNEL_DEFINES may set another.
#ifndef RLX_QGEMV_DIRECT_UNROLL
#define RLX_QGEMV_DIRECT_UNROLL 4
#endif
// rlx_q_gemv_flat's pre step for the f32 form: none.
struct RlxQNoPre {
    template <typename Dot>
    __device__ __forceinline__ bool operator()(Dot &) const { return true; }
};
#endif

#ifdef RLX_TARGET_CUDA
// y[r, j] = act(v[r] + bias[j]) for the m <= M rows of x, written by the calling lane.
template <typename T, uint M>
RLX_INLINE void rlx_q_gemv_store(RlxQAcc<M> v, uint m, RLX_DEVICE T *y, uint ys, uint j, RLX_DEVICE const T *bias,
                                 uint has_bias, uint act) {
    const float b = has_bias ? rlx_to_float(bias[j]) : 0.0f;
    for (uint r = 0; r < M; ++r)
        if (r < m) y[(uint64_t)r * ys + j] = rlx_from_float<T>(rlx_activation(act, v.v[r] + b));
}

// rlx_q_gemv_flat's stages: where a pass's blocks wait in shared memory
// for the lanes to decode them, with the next pass already on its way.
// first(src, n) starts the first pass; begin(next, nn) returns the current
// pass staged and starts the next (nn > 0); end() follows the decode.
// Every lane of the SIMD group calls each, the same number of times.
//
// RlxQRegStage: the next pass in registers (rlx_q_stage_load) while the
// current one decodes from the SIMD group's stage.
struct RlxQRegStage {
    uint4 *stage;
    RlxQStageRegs regs;
    const uchar *src;
    uint nbytes;
    __device__ __forceinline__ void first(const uchar *s, uint n, uint lane) {
        src = s, nbytes = n;
        rlx_q_stage_load(s, n, regs, lane);
    }
    __device__ __forceinline__ const uchar *begin(const uchar *next, uint nn, uint lane) {
        rlx_simd_barrier();   // the previous pass's reads are done
        const uchar *staged = rlx_q_stage_store(src, nbytes, regs, stage, lane);
        rlx_simd_barrier();   // the copy is visible to every lane
        if (nn > 0u) {
            src = next, nbytes = nn;
            rlx_q_stage_load(next, nn, regs, lane);
        }
        return staged;
    }
    __device__ __forceinline__ void end() {}
    __device__ __forceinline__ void drain() {}
};

// RlxQAsyncStage: two slots of SLOT bytes a SIMD group, each pass copied
// into one by cp.async (rlx_async_copy16: no registers hold the bytes in
// flight, so passes can be long). A pass's copy is the 16-byte aligned
// cover of its bytes, so the weight's base must be 16-byte aligned (the
// cover never starts before it; its last vector reads only the pass's
// bytes); the pass lands at its address mod 16 in the slot. ALIGNED: every
// pass starts 16-byte aligned (blocks of a multiple of 16 bytes), so each
// lands at its slot's start, with no offset to compute (RlxQDotPieces then
// reads such blocks' codes as whole vectors).
template <uint SLOT, bool ALIGNED>
struct RlxQAsyncStage {
    uint4 *slots;   // 2 SLOT bytes
    uint cur, shift;
    // One 16-byte copy a lane a step, the addresses advanced, not
    // recomputed: unrolled, the compiler's 64-bit address arithmetic and
    // remainder paths cost more than the copies.
    __device__ __forceinline__ static uint copy(uint4 *slot, const uchar *src, uint nbytes, uint lane) {
        const uint sh = ALIGNED ? 0u : (uint)((unsigned long long)src & 15ull), end = sh + nbytes;
        const uchar *from = src - sh + 16u * lane;
        uint to = rlx_shared_address(slot + lane), left = end - 16u * lane;
#pragma unroll 1
        for (uint at = 16u * lane; at < end; at += 512u, from += 512, to += 512u, left -= 512u)
            rlx_async_copy16(to, from, left < 16u ? left : 16u);
        rlx_async_commit();
        return sh;
    }
    __device__ __forceinline__ void first(const uchar *s, uint n, uint lane) {
        cur = 0u;
        shift = copy(slots, s, n, lane);
    }
    __device__ __forceinline__ const uchar *begin(const uchar *next, uint nn, uint lane) {
        uint next_shift = 0u;
        if (nn > 0u) {   // into the other slot, whose last reads ended at the previous end()
            next_shift = copy(slots + (cur ^ 1u) * (SLOT / 16u), next, nn, lane);
            rlx_async_wait<1>();
        } else {
            rlx_async_wait<0>();
        }
        rlx_simd_barrier();   // every lane's copies of this pass are visible
        const uchar *staged = (const uchar *)(slots + cur * (SLOT / 16u)) + shift;
        cur ^= 1u, shift = next_shift;
        return staged;
    }
    __device__ __forceinline__ void end() { rlx_simd_barrier(); }   // this slot's reads are done
    __device__ __forceinline__ void drain() { rlx_async_wait<0>(); }
};

// rlx_q_gemv_whole_x's rows for a full 32-lane SIMD group when k is whole
// chunks, with the (row, chunk) pairs flattened over the lanes: the SIMD
// group takes a contiguous range of rows, whose blocks are one contiguous
// run of bytes, and each pass is the next pp chunks of that run whatever
// rows they belong to. Rows narrower than the SIMD group (the vocabulary
// projection's 640 columns are 20 chunks) then keep every lane decoding,
// where one row a pass left 12 of 32 idle. Lane l decodes chunks l, l +
// 32, ... (U of them, pp <= 32 U) of each pass: a pass's fixed costs
// (staging, barriers, loop control) are shared by U chunks a lane.
// A pass's row sums come from one segmented scan over its positions; a row
// still open at the end of a pass carries its running sum into the next
// pass's first position, and the lane at a row's last chunk stores it
// (not lane 0 after a reduction a row: a pass of the vocabulary
// projection ends about three rows). Each lane tracks the row and column
// of its chunks as the passes advance (no division in the loop). Passes
// go through `stage` (RlxQRegStage or RlxQAsyncStage); every loop bound
// is uniform across the SIMD group.
// dot(staged, i, c, acc) adds chunk i of the staged pass against chunk c
// of x: the f32 tile (RlxQDotTile) or x's int8 pieces (RlxQDotPieces).
// pre(dot) runs once the first pass's loads are in flight (every SIMD
// group of the group calls it, those without rows too: the integer form
// splits x there, behind a group barrier, while the weights arrive) and
// may refuse; then the function returns false, writes nothing and leaves
// no copy in flight.
template <typename Q, typename T, uint M, uint U, typename Dot, typename Pre, typename Stage>
RLX_INLINE bool rlx_q_gemv_flat(RLX_DEVICE const uchar *w, RLX_DEVICE T *y, RLX_DEVICE const T *bias, Dot dot,
                                Pre pre, Stage &stage, uint m, uint k, uint ys, uint has_bias, uint act, uint j0,
                                uint j1, uint sid, uint n_work, uint lane, uint pp) {
    const uint chunks = k / 32u;
    const uint per_sg = (j1 - j0 + n_work - 1u) / n_work;   // rows a SIMD group
    const uint ra = j0 + sid * per_sg;
    if (ra >= j1 || chunks == 0u) return pre(dot);
    const uint rb = per_sg < j1 - ra ? ra + per_sg : j1;
    const uint total = (rb - ra) * chunks;   // flat chunks of the range (rows a group are few)
    RLX_DEVICE const uchar *base = w + (uint64_t)ra * ((uint64_t)(k / (uint)Q::BLOCK) * (uint)Q::BYTES);
    // Passes start on a block (pp is whole blocks), so chunk f of the range starts at byte f 32 / BLOCK * BYTES.
    stage.first(base, (pp < total ? pp : total) * 32u / (uint)Q::BLOCK * (uint)Q::BYTES, lane);
    if (!pre(dot)) {
        stage.drain();
        return false;
    }
    uint row[U], col[U];   // the row and column (in chunks) of the lane's chunk u of the pass
    for (uint u = 0; u < U; ++u) row[u] = (lane + 32u * u) / chunks, col[u] = lane + 32u * u - row[u] * chunks;
    const uint step_rows = pp / chunks, step_cols = pp - step_rows * chunks;   // a pass's advance
    uint first_col = 0u;   // the column of the pass's first chunk (uniform)
    RlxQAcc<M> open;
    for (uint r = 0; r < M; ++r) open.v[r] = 0.0f;
    for (uint f0 = 0u;;) {
        const uint cnt = pp < total - f0 ? pp : total - f0, nf = f0 + cnt;
        const uint next_bytes = nf < total ? (pp < total - nf ? pp : total - nf) * 32u / (uint)Q::BLOCK * (uint)Q::BYTES : 0u;
        const uchar *staged = stage.begin(base + (uint64_t)nf * 32u / (uint)Q::BLOCK * (uint)Q::BYTES, next_bytes, lane);
        RlxQAcc<M> v[U];
        for (uint u = 0; u < U; ++u) {
            for (uint r = 0; r < M; ++r) v[u].v[r] = 0.0f;
            if (lane + 32u * u < cnt) v[u] = dot(staged, lane + 32u * u, col[u], v[u]);
        }
        // Each row's sum by one segmented scan over the pass's positions (the
        // rows are contiguous runs of them), not a reduction a row: the
        // lane at a row's last chunk then holds the row's sum and stores it.
        // The part of a row that an earlier pass began (open, uniform) joins
        // at position 0.
        if (first_col != 0u && lane == 0u)
            for (uint r = 0; r < M; ++r) v[0].v[r] += open.v[r];
        for (uint u = 0; u < U; ++u) {
            // How many of u's 32 positions before the lane's belong to its row.
            const uint reach = col[u] < lane ? col[u] : lane;
            const bool carried = col[u] > lane;   // the row also holds position 32 u - 1
            for (uint r = 0; r < M; ++r) {
                if (r >= m) continue;   // uniform
                float s = v[u].v[r];
                for (uint d = 1u; d < 32u; d <<= 1) {
                    const float t = __shfl_up_sync(0xffffffffu, s, d);
                    if (d <= reach) s += t;
                }
                if (u > 0u) {
                    const float c = __shfl_sync(0xffffffffu, v[u - 1u].v[r], 31);
                    if (carried) s += c;
                }
                v[u].v[r] = s;
            }
        }
        const uint last = cnt - 1u;   // the pass's last position: the running sum of a row still open
        for (uint r = 0; r < M; ++r) {
            float o = v[0].v[r];
            for (uint u = 1; u < U; ++u) o = last / 32u == u ? v[u].v[r] : o;
            open.v[r] = __shfl_sync(0xffffffffu, o, last & 31u);
        }
        for (uint u = 0; u < U; ++u)
            if (lane + 32u * u < cnt && col[u] + 1u == chunks)
                rlx_q_gemv_store<T, M>(v[u], m, y, ys, ra + row[u], bias, has_bias, act);
        stage.end();
        if (nf >= total) return true;
        f0 = nf;
        first_col += step_cols;
        if (first_col >= chunks) first_col -= chunks;
        for (uint u = 0; u < U; ++u) {
            row[u] += step_rows, col[u] += step_cols;
            if (col[u] >= chunks) col[u] -= chunks, ++row[u];
        }
    }
}

// rlx_q_gemv_whole_x's rows for a full 32-lane SIMD group, software
// pipelined: the (row, pass) items run in order and each item's loads
// (rlx_q_stage_load) are issued before the previous item is decoded. The
// barriers are as in rlx_q_gemv_whole_x (every bound is uniform across the
// SIMD group), and the registers carry a pass from one item to the next.
template <typename Q, typename T, uint M>
RLX_INLINE void rlx_q_gemv_pipelined(RLX_DEVICE const uchar *w, RLX_DEVICE T *y, RLX_DEVICE const T *bias,
                                     RLX_DEVICE const T *x, RLX_GROUP_MEM const T *xt, uint m, uint k, uint kp,
                                     uint xs, uint ys, uint has_bias, uint act, uint j0, uint j1, uint sid,
                                     uint n_work, uint lane, uint pp, uint4 *stage) {
    const uint64_t row_bytes = (uint64_t)(k / (uint)Q::BLOCK) * (uint)Q::BYTES;
    const uint chunks = k / 32u, tail = chunks * 32u;
    uint j = j0 + sid, cb = 0u;
    if (j >= j1) return;
    RlxQStageRegs regs;
    const uchar *src = w + (uint64_t)j * row_bytes;
    uint nbytes = (pp < chunks ? pp : chunks) * 32u / (uint)Q::BLOCK * (uint)Q::BYTES;
    rlx_q_stage_load(src, nbytes, regs, lane);
    RlxQAcc<M> acc;
    for (uint r = 0; r < M; ++r) acc.v[r] = 0.0f;
    for (;;) {
        const uint cnt = pp < chunks - cb ? pp : chunks - cb;
        rlx_simd_barrier();   // the previous pass's reads are done
        const uchar *staged = rlx_q_stage_store(src, nbytes, regs, stage, lane);
        rlx_simd_barrier();   // the copy is visible to every lane
        uint nj = j, ncb = cb + pp;
        if (ncb >= chunks) nj = j + n_work, ncb = 0u;
        if (nj < j1) {   // the next item's loads fly while this one decodes
            src = w + (uint64_t)nj * row_bytes + ncb * 32u / (uint)Q::BLOCK * (uint)Q::BYTES;
            nbytes = (pp < chunks - ncb ? pp : chunks - ncb) * 32u / (uint)Q::BLOCK * (uint)Q::BYTES;
            rlx_q_stage_load(src, nbytes, regs, lane);
        }
        acc = rlx_q_pass_dot<Q, T, M>(staged, cb, cb, cnt, lane, xt, kp, m, acc);
        if (ncb == 0u) {   // row j is complete
            for (uint r = 0; r < M; ++r) {
                if (r < m)   // uniform across the SIMD group
                    rlx_q_gemv_finish<Q, T>(acc.v[r], w + (uint64_t)j * row_bytes, x + (uint64_t)r * xs, tail, k,
                                            lane, 32u, bias, has_bias, act, y + (uint64_t)r * ys, j);
                acc.v[r] = 0.0f;
            }
        }
        if (nj >= j1) return;
        j = nj, cb = ncb;
    }
}
#endif

#ifdef RLX_TARGET_CUDA
// The direct rows: rows j0 + sid, j0 + sid + n_work, ... (< j1) of
// y = x W^T + bias for one row of x in the shared tile, k in whole chunks,
// a format with int8 codes. A SIMD group takes a weight row; lane l takes
// chunks l, l + lanes, ... read straight from the weight (through L1),
// RLX_QGEMV_DIRECT_UNROLL of them in flight, then one SIMD reduction a row.
// No stage copy, barriers or segmented scan: those pay off only on narrow
// rows (the vocabulary projection's 20 chunks would leave 12 of 32 lanes
// idle here); on rows of >= RLX_QGEMV_DIRECT_CHUNKS chunks they cost more
// than they save (H100, session 37: 4096 x 4096 10.5-12.5 -> 7.8-10.3 us,
// 640 x 2048 3.2-3.9 -> 2.9-3.4 us).
template <typename Q, typename T>
RLX_INLINE void rlx_q_gemv_direct(RLX_DEVICE const uchar *w, RLX_DEVICE T *y, RLX_DEVICE const T *bias,
                                  RLX_DEVICE const T *x, RLX_GROUP_MEM const T *xt, uint k, uint kp, uint has_bias,
                                  uint act, uint j0, uint j1, uint sid, uint n_work, uint lane, uint lanes) {
    const uint64_t row_bytes = (uint64_t)(k / (uint)Q::BLOCK) * (uint)Q::BYTES;
    const uint chunks = k / 32u;
    const RlxQDotTile<Q, T, 1> dot = {xt, kp, 1u};
    for (uint j = j0 + sid; j < j1; j += n_work) {
        RLX_DEVICE const uchar *wr = w + (uint64_t)j * row_bytes;
        RlxQAcc<1> acc;
        acc.v[0] = 0.0f;
        constexpr int unroll = RLX_QGEMV_DIRECT_UNROLL;   // a macro is not expanded in the pragma
#pragma unroll(unroll)
        for (uint c = lane; c < chunks; c += lanes) acc = dot(wr, c, c, acc);
        rlx_q_gemv_finish<Q, T>(acc.v[0], wr, x, k, k, lane, lanes, bias, has_bias, act, y, j);
    }
}
#endif

// The rows j0 + sid, j0 + sid + n_work, ... (< j1) of y = x W^T + bias, for
// the m <= M rows of x already in the shared tile (rlx_q_stage_x): the
// SIMD group's lanes split each row's chunks, passes of pp whole blocks.
// No group barrier inside, so a SIMD group may call it alone. On CUDA the
// SIMD group first copies each pass's blocks into its own shared staging
// area and the lanes decode from there: decoding straight from global
// memory reads a block a byte at a time, and with lanes one block apart
// each such load touches ~9 cache lines, which bounded the kernel (L1
// throughput, not DRAM). Full SIMD groups take the pipelined form
// (rlx_q_gemv_pipelined); smaller ones stage with 4-byte loads
// (rlx_q_stage). The staging is the SIMD group's own, bracketed by SIMD
// barriers (pass bounds are uniform). Metal's decoders take device
// pointers, so Metal decodes from global memory. M is a compile-time bound
// on m: M = 1 keeps the kernel's registers low enough for five groups an
// SM (the decode step's case, gemv1_q). PIPELINED = false leaves out the
// pipelined forms (gemv1_q's fallback beside its integer form, which is
// rare and would otherwise add the pipelined form's registers).
template <typename Q, typename T, uint M, bool PIPELINED = true>
RLX_INLINE void rlx_q_gemv_whole_x(RLX_DEVICE const uchar *w, RLX_DEVICE T *y, RLX_DEVICE const T *bias,
                                   RLX_DEVICE const T *x, RLX_GROUP_MEM const T *xt, uint m, uint k, uint kp,
                                   uint xs, uint ys, uint has_bias, uint act, uint j0, uint j1, uint sid,
                                   uint n_work, uint lane, uint lanes) {
    const uint64_t row_bytes = (uint64_t)(k / (uint)Q::BLOCK) * (uint)Q::BYTES;
    const uint chunks = k / 32u, tail = chunks * 32u;   // tail < k for bf16 only
    const uint per = lanes < 32u ? lanes : 32u;
#ifdef RLX_TARGET_CUDA
    const uint cpb = (uint)Q::BLOCK >= 32u ? (uint)Q::BLOCK / 32u : 1u;   // chunks a block
    // gemv1i's fallback (PIPELINED false) stages in that kernel's own shared memory.
    uint4 *area;
    if constexpr (PIPELINED) area = rlx_q_stage_area();
    else area = rlx_q_gemv1i_shared() + RLX_QGEMV1I_STAGE_AT / 16u;
    uint4 *stage = area + sid * (RLX_QGEMV_STAGE_BYTES / 16u);
    // One row of x (gemv1, gemv1n) over rows of at least RLX_QGEMV_DIRECT_CHUNKS
    // chunks, in formats with int8 codes: the direct rows (rlx_q_gemv_direct).
    if (PIPELINED && M == 1u && lanes == 32u && tail == k && RlxQInt<Q>::has && chunks >= RLX_QGEMV_DIRECT_CHUNKS) {
        rlx_q_gemv_direct<Q, T>(w, y, bias, x, xt, k, kp, has_bias, act, j0, j1, sid, n_work, lane, lanes);
        return;
    }
    if (PIPELINED && lanes == 32u) {   // the pipelined form keeps up to 15 bytes of slack in front of a pass
        const uint fit16 = ((RLX_QGEMV_STAGE_BYTES - RLX_QGEMV_CODES_SLACK) / (uint)Q::BYTES) * (uint)Q::BLOCK / 32u;
        const uint pp16 = ((32u < fit16 ? 32u : fit16) / cpb) * cpb;
        if (pp16 > 0u && rlx_q_stage_pipelined(pp16 * 32u / (uint)Q::BLOCK * (uint)Q::BYTES)) {
            if (tail == k) {
                const RlxQDotTile<Q, T, M> dot = {xt, kp, m};
                RlxQRegStage st;
                st.stage = stage;
                rlx_q_gemv_flat<Q, T, M, 1>(w, y, bias, dot, RlxQNoPre(), st, m, k, ys, has_bias, act, j0, j1, sid,
                                            n_work, lane, pp16);
                return;
            }
            rlx_q_gemv_pipelined<Q, T, M>(w, y, bias, x, xt, m, k, kp, xs, ys, has_bias, act, j0, j1, sid, n_work,
                                          lane, pp16, stage);
            return;
        }
    }
    const uint fit = ((RLX_QGEMV_STAGE_BYTES - 4u) / (uint)Q::BYTES) * (uint)Q::BLOCK / 32u;
    const uint pp_fit = ((per < fit ? per : fit) / cpb) * cpb;
    const bool staged = pp_fit > 0u;   // not with fewer lanes than a block has chunks
    const uint pp = staged ? pp_fit : per;
#else
    const uint pp = per;
#endif
    for (uint j = j0 + sid; j < j1; j += n_work) {
        RLX_DEVICE const uchar *wr = w + (uint64_t)j * row_bytes;
        RlxQAcc<M> acc;
        for (uint r = 0; r < M; ++r) acc.v[r] = 0.0f;
        for (uint cb = 0; cb < chunks; cb += pp) {
            const uint cnt = pp < chunks - cb ? pp : chunks - cb;
            RLX_DEVICE const uchar *src = wr;   // where chunk c0 + i of the row is read
            uint c0 = 0u;
#ifdef RLX_TARGET_CUDA
            if (staged) {
                const uint off = cb * 32u / (uint)Q::BLOCK * (uint)Q::BYTES;   // passes start on a block
                rlx_simd_barrier();   // the previous pass's reads are done
                src = rlx_q_stage(wr + off, cnt * 32u / (uint)Q::BLOCK * (uint)Q::BYTES, (uint *)stage, lane, lanes);
                rlx_simd_barrier();   // the copy is visible to every lane
                c0 = cb;
            }
#endif
            acc = rlx_q_pass_dot<Q, T, M>(src, c0, cb, cnt, lane, xt, kp, m, acc);
        }
        for (uint r = 0; r < M; ++r)
            if (r < m)   // uniform across the SIMD group
                rlx_q_gemv_finish<Q, T>(acc.v[r], wr, x + (uint64_t)r * xs, tail, k, lane, lanes, bias, has_bias, act,
                                        y + (uint64_t)r * ys, j);
    }
}
#endif

// y[r, j] = act(x[r] . W[j] + bias[j]) for r < m <= RLX_QGEMV_MAX_M (any k):
// decode steps with k past gemv1_q's tile, speculative and batched decoding.
template <typename Q, typename T>
RLX_KERNEL gemv_q(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const uchar *, w, 1),
                  RLX_BUF(RLX_DEVICE T *, y, 2), RLX_BUF(RLX_DEVICE const T *, bias, 3),
                  RLX_PARAMS(QuantGemvParams, p, 4) RLX_IDS) {
    const uint m = p->m, n = p->n, k = p->k, xs = p->x_stride, ys = p->y_stride, rpg = p->rows_per_group;
    const uint has_bias = p->has_bias, act = p->act;
    const uint j0 = rlx_group_id.x * rpg;
    if (j0 >= n || m == 0u) return;
    const uint j1 = rpg < n - j0 ? j0 + rpg : n;
#ifdef RLX_TARGET_CPU
    (void)has_bias, (void)act, (void)xs, (void)ys, (void)k;
    rlx_q_gemv_cpu<Q, T>(x, w, y, bias, p, j0, j1);
#else
    const uint64_t row_bytes = (uint64_t)(k / (uint)Q::BLOCK) * (uint)Q::BYTES;
    const uint chunks = k / 32u, tail = chunks * 32u;   // tail < k for bf16 only
    // One SIMD group per W row: the group's first n_work SIMD groups take
    // its rows in turn (row j0 + sid, then + n_work, ...), and the lanes of a
    // SIMD group split the row's 32-element chunks, a pass of up to 32
    // consecutive chunks at a time (lane l decodes chunk cb + l: the lanes'
    // block reads are independent and adjacent). x is not read straight from
    // global memory per lane (lane l's 32 elements lie in their own cache
    // line, so each load instruction touched 32 lines, which is what bound
    // the earlier kernel): the SIMD group copies the pass's 32 cnt elements of
    // x row r into its own tile of shared memory with neighbouring lanes on
    // neighbouring elements, then each lane reads its chunk from the tile.
    // The tile is swizzled (element e of chunk c at c * 32 + (e ^ c)) so
    // both the copy (lanes on one chunk) and the reads (lanes on one
    // element of different chunks) hit distinct banks, for f32 and f16.
    //
    // Why this is race-free without a group barrier: (1) each SIMD group
    // uses only its own tile (xt[sid * 1024, sid * 1024 + 1024)), and rows
    // are partitioned between SIMD groups (j = j0 + sid mod n_work), so two
    // SIMD groups share neither shared memory nor an output; (2) within a
    // SIMD group, every tile refill is bracketed by rlx_simd_barrier: the
    // one before it orders the previous pass's (or x row's) reads before the
    // overwrite, the one after it makes the copy visible before the reads;
    // all the loops around them (rows j, passes cb, x rows r < m) have
    // bounds uniform across the SIMD group, so every existing lane reaches
    // each barrier and each rlx_simd_sum the same number of times (lanes
    // with no chunk in a pass still take part, with a zero contribution);
    // (3) y[r, j] is written only by lane 0 of the SIMD group that owns row
    // j, after the sum. The CUDA forms (prelude/cuda.h) take the mask of the
    // lanes that exist, so a group smaller than a warp, or a partial last
    // warp, neither waits for nor reads an absent lane; Metal's simd_sum and
    // simdgroup_barrier act on the active lanes.
    //
    // Small groups: with T < SIMD width threads the group is one partial SIMD
    // group of T lanes and a pass is T chunks (T = 1: one lane, a chunk a
    // pass). Groups of more than RLX_QGEMV_SIMD_GROUPS SIMD groups leave the
    // rest idle (the shared tiles are sized for that many); SIMD groups of
    // more than 32 lanes leave lanes past 32 without chunks. Rows per group
    // need not be a multiple of n_work (the stride loop ends at j1).
#ifdef RLX_TARGET_CUDA
    __shared__ __align__(16) T xt[RLX_QGEMV_SIMD_GROUPS * 32u * RLX_QXT_PITCH];   // rlx_q_xt_group's vector loads
#else
    RLX_SHARED(T, xt, RLX_QGEMV_SIMD_GROUPS * 32u * RLX_QXT_PITCH);
#endif
    const uint nt = rlx_group_size.x, sw = rlx_simd_width, sid = rlx_simd_id, lane = rlx_simd_lane;
    const uint n_simd = (nt + sw - 1u) / sw;
    const uint n_work = n_simd < RLX_QGEMV_SIMD_GROUPS ? n_simd : RLX_QGEMV_SIMD_GROUPS;
    const uint lanes = nt - sid * sw < sw ? nt - sid * sw : sw;   // lanes this SIMD group has
    const uint per = lanes < 32u ? lanes : 32u;                    // chunks a pass
    // All m rows of x fit the tile: stage x once for the group, behind one
    // group barrier, and stream the rows with no further copies (the tiled
    // loop below reads x from L2 once per weight row: for a 262144 x 640
    // weight four times the weight's own bytes). The condition is uniform
    // across the group (params only), so every thread reaches the barrier.
    const uint kp = (k + 31u) & ~31u;
    if ((uint64_t)m * kp <= (uint64_t)RLX_QGEMV_SIMD_GROUPS * 1024u) {
        rlx_q_stage_x<T>(x, xt, m, k, kp, xs, rlx_local_id.x, nt);
        rlx_barrier();
        if (sid >= n_work) return;   // no barrier follows
        rlx_q_gemv_whole_x<Q, T, RLX_QGEMV_MAX_M>(w, y, bias, x, xt, m, k, kp, xs, ys, has_bias, act, j0, j1, sid,
                                                   n_work, lane, lanes);
        return;
    }
    if (sid >= n_work) return;   // no group barrier below, so idle SIMD groups may leave
    const uint tb = sid * 1024u;                                   // this SIMD group's tile
    for (uint j = j0 + sid; j < j1; j += n_work) {
        RLX_DEVICE const uchar *wr = w + (uint64_t)j * row_bytes;
        float acc[RLX_QGEMV_MAX_M];
        for (uint r = 0; r < RLX_QGEMV_MAX_M; ++r) acc[r] = 0.0f;
        for (uint cb = 0; cb < chunks; cb += per) {
            const uint cnt = per < chunks - cb ? per : chunks - cb;   // chunks in this pass
            const bool mine = lane < cnt;
            // Lanes without a chunk decode chunk cb again (no divergence, a
            // cached read) and drop it.
            const rlx_q32 v = rlx_q_chunk<Q>(wr, mine ? cb + lane : cb);
            for (uint r = 0; r < RLX_QGEMV_MAX_M; ++r) {
                if (r < m) {
                    RLX_DEVICE const T *xr = x + (uint64_t)r * xs + 32u * cb;
                    rlx_simd_barrier();   // the tile's previous reads are done
                    for (uint e = lane; e < 32u * cnt; e += lanes) {
                        const uint ci = e >> 5u;
                        xt[tb + ci * 32u + ((e & 31u) ^ ci)] = xr[e];
                    }
                    rlx_simd_barrier();   // the copy is visible to every lane
                    if (mine) {
                        float sum = 0.0f;
                        for (uint e = 0; e < 32u; ++e) sum += rlx_to_float(xt[tb + lane * 32u + (e ^ lane)]) * v.v[e];
                        acc[r] += sum;
                    }
                }
            }
        }
        for (uint r = 0; r < RLX_QGEMV_MAX_M; ++r)
            if (r < m)   // uniform across the SIMD group
                rlx_q_gemv_finish<Q, T>(acc[r], wr, x + (uint64_t)r * xs, tail, k, lane, lanes, bias, has_bias, act,
                                        y + (uint64_t)r * ys, j);
    }
#endif
}

// The integer form's codes and dot (CUDA; the CPU harness of
// tests/c/quant_pieces_host.cpp), after quant.h's GPU GEMV helpers.
#include "quant_pieces.h"

#ifdef RLX_TARGET_CUDA
// gemv1_q's rows for one row of x in integer dot products (quant_pieces.h),
// where the format has int8 codes, the group is whole SIMD groups (at most
// RLX_QGEMV_SIMD_GROUPS: every one takes rows), x's pieces fit the tile
// and x has no chunk that needs the f32 form. (How many rows a group
// repay the split, a pass over x a group, is the lowering's choice:
// GEMV1I_MIN_ROWS in rlx/lowering/quant.py.) Every
// thread of the group calls it; the result is uniform across the group,
// and false leaves the tile to the caller (behind the split's barrier).
template <typename Q, typename T>
RLX_INLINE bool rlx_q_gemv1_pieces(RLX_DEVICE const T *x, RLX_DEVICE const uchar *w, RLX_DEVICE T *y,
                                   RLX_DEVICE const T *bias, uchar *tile, uint k, uint has_bias, uint act, uint j0,
                                   uint j1, uint nt, uint sid, uint lane) {
    if (!RlxQInt<Q>::has || (nt & 31u) != 0u || nt > 32u * RLX_QGEMV_SIMD_GROUPS || (k & 31u) != 0u) return false;
    const uint chunks = k / 32u, stored = rlx_qx_stored_pieces(k, RLX_QGEMV1I_PIECES_BYTES);
    // Passes of up to 64 chunks (two a lane), whole blocks, with
    // RLX_QGEMV_CODES_SLACK bytes of a slot free for the pass's offset mod 16
    // and rlx_qi_words' reads past an unaligned run.
    const uint cpb = (uint)Q::BLOCK >= 32u ? (uint)Q::BLOCK / 32u : 1u;
    const uint fit = ((RLX_QGEMV1I_SLOT_BYTES - RLX_QGEMV_CODES_SLACK) / (uint)Q::BYTES) * (uint)Q::BLOCK / 32u;
    const uint pp = ((64u < fit ? 64u : fit) / cpb) * cpb;
    if (stored == 0u || pp == 0u || ((unsigned long long)w & 15ull) != 0ull) return false;
    // Passes start on blocks and w is 16-byte aligned: blocks of a multiple of 16 bytes keep every pass aligned.
    RlxQAsyncStage<RLX_QGEMV1I_SLOT_BYTES, (uint)Q::BYTES % 16u == 0u> stage;
    stage.slots = rlx_q_gemv1i_shared() + (RLX_QGEMV1I_PIECES_BYTES + 2u * sid * RLX_QGEMV1I_SLOT_BYTES) / 16u;
    const RlxQDotPieces<Q> dot = {(const uint4 *)tile, (const float *)(tile + stored * chunks * 32u),
                                  (const float *)(tile + stored * chunks * 32u) + chunks, chunks, 0u};
    const RlxQSplitPre<T> pre = {x, tile, chunks, stored, nt};
    return rlx_q_gemv_flat<Q, T, 1, 2>(w, y, bias, dot, pre, stage, 1u, k, 0u, has_bias, act, j0, j1, sid, nt / 32u,
                                       lane, pp);
}
#endif

// The decode step: gemv_q for m = 1 and k <= RLX_QGEMV1_MAX_K (the lowering
// routes other shapes to gemv_q), in a kernel of its own so that it keeps
// the registers of one x row (gemv_q's eight rows of accumulators cost it
// three quarters of its occupancy on CUDA). m > 1 is still computed, one x
// row at a time.
// gemv1i_q<Q, T> is the CUDA integer form of gemv1_q for the formats with
// int8 codes, which the lowering picks for groups of at least
// GEMV1I_MIN_ROWS rows (the vocabulary projection) and k <= 4096 (x's
// pieces fit RLX_QGEMV1I_PIECES_BYTES); elsewhere, and on every
// other target, it computes as gemv1_q. A kernel of its own because its
// registers and shared memory differ: bounded to four groups of 256
// threads an SM (64 registers, stacks of 0-40 bytes; its 48 KiB of shared
// memory allow four), faster than three at 80 registers (the kernel is
// bound by issue: more warps hide more latency; benchmarks/README.md,
// "H200, session 21"); unbounded the integer form took ~95 a thread (two
// groups an SM, fewer loads in flight). Beside it an f32 fallback without
// the pipelined staging (rare x only; the pipelined form's registers
// spilled ~100 bytes). The lowering launches at most GEMV_THREADS (256)
// threads a group.
#ifdef RLX_TARGET_CUDA
#define RLX_QGEMV1I_BOUNDS __launch_bounds__(256, 4)
#else
#define RLX_QGEMV1I_BOUNDS
#endif
// gemv1_q is bounded to two groups of 256 threads an SM (128 registers):
// unbounded, the compiler's choice moves between formats and builds (72-96
// registers in session 10; 122-131 for most formats in session 23, but 143
// for q5_k, 156 for q6_k, i.e. one group an SM, and gemv1_q6_k at 4096 x
// 4096 went from 13.1 to 15.1 us). A bound of three groups (80 registers)
// was no faster (session 22). An experiment's KERNEL_DEFINES may set another.
#ifndef RLX_QGEMV1_BOUNDS
#ifdef RLX_TARGET_CUDA
#define RLX_QGEMV1_BOUNDS __launch_bounds__(256, 2)
#else
#define RLX_QGEMV1_BOUNDS
#endif
#endif

#ifndef RLX_TARGET_CPU
// Row r of x staged into the group's tile xt (with x_glu, the glu of gate
// and up formed as it is staged; k is then whole chunks, so the finish's
// bf16 tail, which reads x itself, is empty), then the group's barrier.
template <typename T>
RLX_INLINE void rlx_q_gemv1_stage_row(RLX_DEVICE const T *x, RLX_GROUP_MEM T *xt, uint r, uint k, uint kp, uint xs,
                                      uint x_glu, uint gate_offset, uint up_offset, uint tid, uint nt) {
    if (x_glu != 0u)
        rlx_q_stage_x_glu<T>(x + gate_offset, x + up_offset, xt, k, kp, x_glu, tid, nt);
    else
        rlx_q_stage_x<T>(x + (uint64_t)r * xs, xt, 1u, k, kp, xs, tid, nt);
    rlx_barrier();
}

// The GPU rows of gemv1_q (INTEGER false) and gemv1i_q (true) for group j0..j1:
// each row of x staged into the group's tile xt (RLX_QGEMV1_MAX_K elements
// of T; on CUDA 16-byte aligned, the integer form's pieces share it).
template <typename Q, typename T, bool INTEGER>
RLX_INLINE void rlx_q_gemv1_rows(RLX_DEVICE const T *x, RLX_DEVICE const uchar *w, RLX_DEVICE T *y,
                                 RLX_DEVICE const T *bias, RLX_GROUP_MEM T *xt, uint m, uint k, uint xs, uint ys,
                                 uint has_bias, uint act, uint x_glu, uint gate_offset, uint up_offset, uint j0,
                                 uint j1, uint tid, uint nt, uint sw, uint sid, uint lane) {
    const uint kp = (k + 31u) & ~31u;
    if (kp > RLX_QGEMV1_MAX_K) return;   // the lowering never sends it (gemv_q takes any k)
    const uint n_simd = (nt + sw - 1u) / sw;
    const uint n_work = n_simd < RLX_QGEMV_SIMD_GROUPS ? n_simd : RLX_QGEMV_SIMD_GROUPS;
    const uint lanes = nt - sid * sw < sw ? nt - sid * sw : sw;
    for (uint r = 0; r < m; ++r) {   // uniform: every thread reaches both barriers
        if (r > 0u) rlx_barrier();   // every SIMD group is done with row r - 1
#ifdef RLX_TARGET_CUDA
        if (INTEGER && x_glu == 0u &&
            rlx_q_gemv1_pieces<Q, T>(x + (uint64_t)r * xs, w, y + (uint64_t)r * ys, bias, (uchar *)xt, k, has_bias,
                                     act, j0, j1, nt, sid, lane))
            continue;   // else x takes the f32 form below
        if (INTEGER) rlx_barrier();   // the f32 tile overlaps the integer form's slots: every copy has landed
#endif
        rlx_q_gemv1_stage_row<T>(x, xt, r, k, kp, xs, x_glu, gate_offset, up_offset, tid, nt);
        if (sid < n_work)
            rlx_q_gemv_whole_x<Q, T, 1, !INTEGER>(w, y + (uint64_t)r * ys, bias, x + (uint64_t)r * xs, xt, 1u, k, kp,
                                                 xs, ys, has_bias, act, j0, j1, sid, n_work, lane, lanes);
    }
}
#endif

// The x tile of gemv1_q (RLX_QGEMV1_TILE_false) and gemv1i_q (_true: on
// CUDA inside rlx_q_gemv1i_shared, whose layouts hold both forms).
#ifdef RLX_TARGET_CUDA
#define RLX_QGEMV1_TILE_false(T) __shared__ uint4 xtile[RLX_QGEMV1_MAX_K / 32u * RLX_QXT_PITCH * sizeof(T) / 16u]; T *xt = (T *)xtile
#define RLX_QGEMV1_TILE_true(T) T *xt = (T *)rlx_q_gemv1i_shared()
#else
#define RLX_QGEMV1_TILE_false(T) RLX_SHARED(T, xt, RLX_QGEMV1_MAX_K / 32u * RLX_QXT_PITCH)
#define RLX_QGEMV1_TILE_true(T) RLX_QGEMV1_TILE_false(T)
#endif

// The body of both kernels: INTEGER as above.
#ifdef RLX_TARGET_CPU
#define RLX_QGEMV1_PREFETCH() ((void)0)
#define RLX_QGEMV1_BODY(INTEGER)                                                                  \
    const uint rpg = p->rows_per_group, j0 = rlx_group_id.x * rpg;                                \
    if (j0 >= p->n || p->m == 0u) return;                                                         \
    rlx_q_gemv_cpu<Q, T>(x, w, y, bias, p, j0, rpg < p->n - j0 ? j0 + rpg : p->n)
#else
#ifdef RLX_TARGET_CUDA
// The first RLX_QGEMV1_PREFETCH_BYTES of the group's weight rows, prefetched
// into L2 before the PDL wait (prelude/cuda.h): weights are written only
// when they are loaded, and a decode step's small GEMVs (8 rows a group,
// a pass a row) otherwise paid their first memory latency after the wait.
// Capped so that a tall GEMV's groups (256 rows) do not flood L2 ahead of
// their passes.
#define RLX_QGEMV1_PREFETCH_BYTES 16384u
template <typename Q>
RLX_INLINE void rlx_q_gemv1_prefetch_lines(RLX_DEVICE const uchar *w, RLX_CONSTANT QuantGemvParams *p) {
    const uint rpg = p->rows_per_group, n = p->n, j0 = rlx_group_id_early.x * rpg;
    if (j0 >= n || p->m == 0u) return;
    const uint64_t row_bytes = (uint64_t)(p->k / (uint)Q::BLOCK) * (uint)Q::BYTES;
    const uint64_t bytes = (uint64_t)(rpg < n - j0 ? rpg : n - j0) * row_bytes;
    const uint lines = (uint)(((bytes < RLX_QGEMV1_PREFETCH_BYTES ? bytes : RLX_QGEMV1_PREFETCH_BYTES) + 127u) / 128u);
    RLX_DEVICE const uchar *base = w + (uint64_t)j0 * row_bytes;
    for (uint i = rlx_local_id_early.x; i < lines; i += blockDim.x) rlx_prefetch_l2(base + 128u * i);
}
template <typename Q>
RLX_INLINE void rlx_q_gemv1_prefetch(RLX_DEVICE const uchar *w, RLX_CONSTANT QuantGemvParams *p) {
    rlx_pdl_prefetch_begin();
    rlx_q_gemv1_prefetch_lines<Q>(w, p);
    rlx_pdl_prefetch_end();
}
#define RLX_QGEMV1_PREFETCH() rlx_q_gemv1_prefetch<Q>(w, p)
#else
#define RLX_QGEMV1_PREFETCH() ((void)0)
#endif
#define RLX_QGEMV1_BODY(INTEGER)                                                                  \
    RLX_QGEMV1_PREFETCH();                                                                        \
    const uint rpg = p->rows_per_group, j0 = rlx_group_id.x * rpg;                                \
    if (j0 >= p->n || p->m == 0u) return;                                                         \
    RLX_QGEMV1_TILE_##INTEGER(T);                                                                 \
    rlx_q_gemv1_rows<Q, T, INTEGER>(x, w, y, bias, xt, p->m, p->k, p->x_stride, p->y_stride, p->has_bias, \
                                    p->act, p->x_glu, p->gate_offset, p->up_offset, j0,                    \
                                    rpg < p->n - j0 ? j0 + rpg : p->n, rlx_local_id.x, rlx_group_size.x,  \
                                    rlx_simd_width, rlx_simd_id, rlx_simd_lane)
#endif

template <typename Q, typename T>
RLX_KERNEL RLX_QGEMV1_BOUNDS gemv1_q(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const uchar *, w, 1),
                                     RLX_BUF(RLX_DEVICE T *, y, 2), RLX_BUF(RLX_DEVICE const T *, bias, 3),
                                     RLX_PARAMS(QuantGemvParams, p, 4) RLX_IDS) {
    RLX_QGEMV1_BODY(false);
}

template <typename Q, typename T>
RLX_KERNEL RLX_QGEMV1I_BOUNDS gemv1i_q(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const uchar *, w, 1),
                                       RLX_BUF(RLX_DEVICE T *, y, 2), RLX_BUF(RLX_DEVICE const T *, bias, 3),
                                       RLX_PARAMS(QuantGemvParams, p, 4) RLX_IDS) {
    // Params read in place: its stage and x's pieces fill the 48 KiB of
    // static shared memory a CUDA block may have, leaving no room to stage them.
    RLX_QGEMV1_BODY(true);
}

// gemv1_q's f32 form over x = the rmsnorm_add chain of o, r and the norm
// weights (QuantGemvParams.x_norm, rlx_q_stage_x_norm), group 0 writing the
// chain's output to `out`: the decode step's residual norm and the GEMV
// after it in one dispatch. m = 1 and k whole chunks (the lowering sends no
// other). On the CPU (one-thread groups, each of which would form the chain
// again) the lowering does not take it, but it computes the same values
// there: the tests check its staging and the GEMV on the CPU as well.
// gemv1n's k at most: two chunk rows of the x tile under RLX_QGEMV1_MAX_K
// stay free (Metal's reduction scratch: 32 floats, in f16 rows too);
// rlx/lowering/quant.py's GEMV1N_MAX_K.
#define RLX_QGEMV1N_MAX_K (RLX_QGEMV1_MAX_K - 64u)

template <typename Q, typename T>
RLX_KERNEL RLX_QGEMV1_BOUNDS gemv1n_q(RLX_BUF(RLX_DEVICE const T *, o, 0), RLX_BUF(RLX_DEVICE const uchar *, w, 1),
                                      RLX_BUF(RLX_DEVICE T *, y, 2), RLX_BUF(RLX_DEVICE const T *, bias, 3),
                                      RLX_BUF(RLX_DEVICE const T *, r, 4), RLX_BUF(RLX_DEVICE const T *, nw, 5),
                                      RLX_BUF(RLX_DEVICE const T *, nw_next, 6), RLX_BUF(RLX_DEVICE T *, out, 7),
                                      RLX_PARAMS(QuantGemvParams, p, 8) RLX_IDS) {
    // The norm weights are not prefetched before the wait as the GEMV's rows
    // are: in session 24's PDL-off trace that made the kernel 0.5 us slower.
    RLX_QGEMV1_PREFETCH();
    const uint rpg = p->rows_per_group, j0 = rlx_group_id.x * rpg, k = p->k;
    if (j0 >= p->n || p->m != 1u || k % 32u != 0u || k > RLX_QGEMV1N_MAX_K) return;   // never sent
    RLX_QGEMV1_TILE_false(T);
#ifdef RLX_TARGET_METAL
    // Metal's 32 KiB of group memory hold the f32 tile and nothing more: the
    // reductions' scratch is the tile's last two chunk rows, past any k sent.
    RLX_GROUP_MEM float *scratch = (RLX_GROUP_MEM float *)(xt + rlx_q_xt_row(RLX_QGEMV1N_MAX_K));
#else
    RLX_SHARED(float, scratch, 32);
#endif
    const uint tid = rlx_local_id.x, nt = rlx_group_size.x, j1 = rpg < p->n - j0 ? j0 + rpg : p->n;
    rlx_q_stage_x_norm<T>(o, r, nw, nw_next, out, rlx_group_id.x == 0u, xt, scratch, k, p, tid, nt RLX_GROUP_IDS_ARGS);
#ifdef RLX_TARGET_CPU
    // The CPU GEMV reads x in order: the tile un-swizzled.
    T x[RLX_QGEMV1_MAX_K];
    for (uint e = 0; e < k; ++e) x[e] = xt[(e >> 5u) * RLX_QXT_PITCH + rlx_q_xt_at(e >> 5u, e & 31u)];
    rlx_q_gemv_cpu<Q, T>(x, w, y, bias, p, j0, j1);
#else
    rlx_barrier();
    const uint sw = rlx_simd_width, sid = rlx_simd_id;
    const uint n_simd = (nt + sw - 1u) / sw;
    const uint n_work = n_simd < RLX_QGEMV_SIMD_GROUPS ? n_simd : RLX_QGEMV_SIMD_GROUPS;
    const uint lanes = nt - sid * sw < sw ? nt - sid * sw : sw;
    if (sid < n_work)
        rlx_q_gemv_whole_x<Q, T, 1, true>(w, y, bias, o, xt, 1u, k, k, k, p->y_stride, p->has_bias, p->act, j0, j1,
                                          sid, n_work, rlx_simd_lane, lanes);
#endif
}
