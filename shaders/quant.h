// GGUF block formats: dequantize, mat-vec (GEMV) and row gather straight
// from the blocks, on every target.
//
// A weight of logical shape [n, k] (k contiguous, a multiple of the block) is
// n rows of k / BLOCK consecutive blocks of BYTES bytes: exactly the tensor
// data of a GGUF file. Each format is a traits struct:
//   enum { BLOCK, BYTES }                    elements and bytes of one block
//   elem(b, j)    element j (0 <= j < BLOCK) of the block at b
//   sub(b, s)     elements [32 s, 32 s + 32) of the block at b, as a whole
//                 (BLOCK is 32 or a multiple, except bf16 whose sub reads 32
//                 consecutive one-element blocks)
// and the kernels are templates over the traits and the float type:
//   dequantize_<fmt>_<t>  (blocks, out, QuantParams)
//   gemv_<fmt>_<t>        (x, w, y, bias, QuantGemvParams)
//   gather_<fmt>_<t>      (table, indices, out, GatherParams of movement.h)
//
// The decoders follow gguf.quants' dequantize_blocks operation by operation
// (the layouts are documented there). Every product they form (an f16 scale
// times a small integer scale times a small integer or grid value, a power
// of two times an E2M1 value) is exact in f32, and each element then takes
// at most one rounding (the min subtracted in q4_1 / q5_1 / q2_k / q4_k /
// q5_k), so the values are bit for bit gguf's on every target, whatever
// order the compiler evaluates the products in, with or without FMA
// contraction. Bytes are read one at a time (blocks of 17, 22 or 110 bytes
// leave wider fields unaligned); the CPU compiler merges the loads.
//
// Threads: dequantize and gather take any grid (a grid-stride loop); gemv
// takes one group per rows_per_group rows of W, any number of threads: on a
// GPU one SIMD group per row, its lanes splitting the row's 32-element
// chunks, then a SIMD reduction per row of x (gemv_q below).
#include "quant_tables.h"

struct QuantParams {
    uint n, pad0, pad1, pad2;
};

// x_glu: 0, or (gemv1 on GPUs: m = 1, k whole chunks, the f32 form; the
// lowering sends it nowhere else) x = glu(gate, up) formed as x is staged,
// with gate and up at those element offsets of x's binding and x_glu the
// glu's activation code (rlx/lowering/quant.py glu_gemv).
// x_norm: 0, or (gemv1n only, m = 1, k whole chunks) x is the norm chain
// of shaders/norm.h's rmsnorm_add formed as x is staged: 1, x = r + rmsnorm(o,
// w) (rmsnorm_add), 2, x = rmsnorm(that, w_next) (rmsnorm_add_rmsnorm), with
// o and r at o_offset / resid_offset of their bindings and eps, add_one as
// that kernel has them (rlx/lowering/quant.py norm_gemv).
struct QuantGemvParams {
    uint m, n, k, x_stride, y_stride, rows_per_group, has_bias, act;
    uint x_glu, gate_offset, up_offset, x_norm;
    uint o_offset, resid_offset;
    float eps, next_eps;
    uint add_one, next_add_one, pad0, pad1;
};

#define RLX_QGEMV_MAX_M 8
// gemv1_q's k at most (its shared x tile; rlx/lowering/quant.py's GEMV1_MAX_K).
#define RLX_QGEMV1_MAX_K 8192u
// GPU gemv: the SIMD groups of a group that take rows (each with a shared
// tile of 1024 x elements: 32 KiB of f32 for 8, Metal's threadgroup limit);
// rlx/lowering/quant.py's GEMV_SIMD_GROUPS mirrors it.
#define RLX_QGEMV_SIMD_GROUPS 8u
// CUDA gemv: bytes of one weight row's pass a SIMD group stages in shared
// memory (7.5 KiB for the group beside the 32 KiB x tile, under the 48 KiB
// of static shared memory a CUDA block may have).
#define RLX_QGEMV_STAGE_BYTES 960u

#include "quant_formats.h"

#ifdef RLX_TARGET_CPU
// bf16 bits as an output element type of the host's dequantize_q: a
// quantized linear's prefill tiles under precision="bf16" (rlx/lowering/quant.py),
// which the shim's gemm reads as its bf16 B (csrc/host_bf16.h). Rounded to
// nearest even; a NaN stays a (quiet) NaN, infinities stay infinite.
struct rlx_bf16_bits {
    ushort bits;
};
template <>
inline rlx_bf16_bits rlx_from_float<rlx_bf16_bits>(float v) {   // no storage class on a specialization
    uint u = rlx_float_to_bits(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return rlx_bf16_bits{(ushort)((u >> 16) | 0x40u)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return rlx_bf16_bits{(ushort)(u >> 16)};
}
#endif

// ---- dequantize -----------------------------------------------------------------
// out[i] = element i of the tensor, i < n (n a multiple of the block).
template <typename Q, typename T>
RLX_KERNEL dequantize_q(RLX_BUF(RLX_DEVICE const uchar *, blocks, 0), RLX_BUF(RLX_DEVICE T *, out, 1),
                        RLX_PARAMS(QuantParams, p, 2) RLX_IDS) {
    const uint n = p->n;
#ifdef RLX_TARGET_CPU
    // A chunk of 32 at a time: a group's range is contiguous here, and the
    // whole-chunk decode vectorizes.
    const uint chunks = n / 32u;
    RLX_FOR_RANGE(c, chunks) {
        const rlx_q32 v = rlx_q_chunk<Q>(blocks, c);
        T *o = out + c * 32u;
        for (uint e = 0; e < 32u; ++e) o[e] = rlx_from_float<T>(v.v[e]);
    }
    RLX_FOR_RANGE(t, n - chunks * 32u) {   // bf16's last n % 32
        const uint64_t i = (uint64_t)chunks * 32u + t;
        out[i] = rlx_from_float<T>(rlx_q_get<Q>(blocks, i));
    }
#else
    // One element per thread: neighbouring threads write neighbouring outputs.
    RLX_FOR_RANGE(i, n) { out[i] = rlx_from_float<T>(rlx_q_get<Q>(blocks, i)); }
#endif
}

// ---- gather ---------------------------------------------------------------------
// out[i, :] = row idx[i] of the table (dim / BLOCK blocks a row), with
// gather's clamping and int64 low-word reads (movement.h).
template <typename Q, typename T>
RLX_KERNEL gather_q(RLX_BUF(RLX_DEVICE const uchar *, table, 0), RLX_BUF(RLX_DEVICE const int *, indices, 1),
                    RLX_BUF(RLX_DEVICE T *, out, 2), RLX_PARAMS(GatherParams, p, 3) RLX_IDS) {
    const uint dim = p->dim, rows = p->rows, is_i64 = p->index_is_i64;
    const uint64_t row_bytes = (uint64_t)(dim / (uint)Q::BLOCK) * (uint)Q::BYTES;
    RLX_FOR_RANGE(i, (uint64_t)p->n_indices * dim) {
        const uint r = (uint)(i / dim), c = (uint)(i % dim);
        int idx = is_i64 ? indices[2u * r] : indices[r];
        idx = idx < 0 ? 0 : (idx >= (int)rows ? (int)rows - 1 : idx);
        out[i] = rlx_from_float<T>(rlx_q_get<Q>(table + (uint64_t)idx * row_bytes, c));
    }
}

#include "quant_gemv.h"

// ---- instantiations: dequantize_<fmt>_<t>, gemv_<fmt>_<t>, gather_<fmt>_<t> ----
// The K-quants' gemv_ / gemv1_: a CPU build with their integer form
// (csrc/host_kernels_avx2.cpp, csrc/host_quant_vnni.h) exports those instead;
// q5_0's likewise (RLX_CPU_INT_Q5_0_GEMV, csrc/host_quant_q5_0_avx2.h).
// Plain RLX_INSTANTIATE2 lines inside #ifndef: the CUDA shim and
// rlx/runtime/shader_source.py read instantiations line by line.
#ifndef RLX_CPU_INT_KQUANT_GEMV
RLX_INSTANTIATE2(gemv_q, QFmtQ2_K, float, gemv_q2_k_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtQ2_K, float, gemv1_q2_k_f32)
RLX_INSTANTIATE2(gemv_q, QFmtQ2_K, half, gemv_q2_k_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtQ2_K, half, gemv1_q2_k_f16)
RLX_INSTANTIATE2(gemv_q, QFmtQ3_K, float, gemv_q3_k_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtQ3_K, float, gemv1_q3_k_f32)
RLX_INSTANTIATE2(gemv_q, QFmtQ3_K, half, gemv_q3_k_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtQ3_K, half, gemv1_q3_k_f16)
RLX_INSTANTIATE2(gemv_q, QFmtQ4_K, float, gemv_q4_k_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtQ4_K, float, gemv1_q4_k_f32)
RLX_INSTANTIATE2(gemv_q, QFmtQ4_K, half, gemv_q4_k_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtQ4_K, half, gemv1_q4_k_f16)
RLX_INSTANTIATE2(gemv_q, QFmtQ5_K, float, gemv_q5_k_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtQ5_K, float, gemv1_q5_k_f32)
RLX_INSTANTIATE2(gemv_q, QFmtQ5_K, half, gemv_q5_k_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtQ5_K, half, gemv1_q5_k_f16)
RLX_INSTANTIATE2(gemv_q, QFmtQ6_K, float, gemv_q6_k_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtQ6_K, float, gemv1_q6_k_f32)
RLX_INSTANTIATE2(gemv_q, QFmtQ6_K, half, gemv_q6_k_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtQ6_K, half, gemv1_q6_k_f16)
#endif

RLX_INSTANTIATE2(dequantize_q, QFmtQ4_0, float, dequantize_q4_0_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtQ4_0, half, dequantize_q4_0_f16)
RLX_INSTANTIATE2(gemv_q, QFmtQ4_0, float, gemv_q4_0_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtQ4_0, float, gemv1_q4_0_f32)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ4_0, float, gemv1i_q4_0_f32)
RLX_INSTANTIATE2(gemv_q, QFmtQ4_0, half, gemv_q4_0_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtQ4_0, half, gemv1_q4_0_f16)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ4_0, half, gemv1i_q4_0_f16)
RLX_INSTANTIATE2(gather_q, QFmtQ4_0, float, gather_q4_0_f32)
RLX_INSTANTIATE2(gather_q, QFmtQ4_0, half, gather_q4_0_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtQ4_1, float, dequantize_q4_1_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtQ4_1, half, dequantize_q4_1_f16)
RLX_INSTANTIATE2(gemv_q, QFmtQ4_1, float, gemv_q4_1_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtQ4_1, float, gemv1_q4_1_f32)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ4_1, float, gemv1i_q4_1_f32)
RLX_INSTANTIATE2(gemv_q, QFmtQ4_1, half, gemv_q4_1_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtQ4_1, half, gemv1_q4_1_f16)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ4_1, half, gemv1i_q4_1_f16)
RLX_INSTANTIATE2(gather_q, QFmtQ4_1, float, gather_q4_1_f32)
RLX_INSTANTIATE2(gather_q, QFmtQ4_1, half, gather_q4_1_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtQ5_0, float, dequantize_q5_0_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtQ5_0, half, dequantize_q5_0_f16)
#ifndef RLX_CPU_INT_Q5_0_GEMV
RLX_INSTANTIATE2(gemv_q, QFmtQ5_0, float, gemv_q5_0_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtQ5_0, float, gemv1_q5_0_f32)
#endif
RLX_INSTANTIATE2(gemv1i_q, QFmtQ5_0, float, gemv1i_q5_0_f32)
#ifndef RLX_CPU_INT_Q5_0_GEMV
RLX_INSTANTIATE2(gemv_q, QFmtQ5_0, half, gemv_q5_0_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtQ5_0, half, gemv1_q5_0_f16)
#endif
RLX_INSTANTIATE2(gemv1i_q, QFmtQ5_0, half, gemv1i_q5_0_f16)
RLX_INSTANTIATE2(gather_q, QFmtQ5_0, float, gather_q5_0_f32)
RLX_INSTANTIATE2(gather_q, QFmtQ5_0, half, gather_q5_0_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtQ5_1, float, dequantize_q5_1_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtQ5_1, half, dequantize_q5_1_f16)
RLX_INSTANTIATE2(gemv_q, QFmtQ5_1, float, gemv_q5_1_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtQ5_1, float, gemv1_q5_1_f32)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ5_1, float, gemv1i_q5_1_f32)
RLX_INSTANTIATE2(gemv_q, QFmtQ5_1, half, gemv_q5_1_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtQ5_1, half, gemv1_q5_1_f16)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ5_1, half, gemv1i_q5_1_f16)
RLX_INSTANTIATE2(gather_q, QFmtQ5_1, float, gather_q5_1_f32)
RLX_INSTANTIATE2(gather_q, QFmtQ5_1, half, gather_q5_1_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtQ8_0, float, dequantize_q8_0_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtQ8_0, half, dequantize_q8_0_f16)
RLX_INSTANTIATE2(gemv_q, QFmtQ8_0, float, gemv_q8_0_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtQ8_0, float, gemv1_q8_0_f32)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ8_0, float, gemv1i_q8_0_f32)
RLX_INSTANTIATE2(gemv_q, QFmtQ8_0, half, gemv_q8_0_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtQ8_0, half, gemv1_q8_0_f16)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ8_0, half, gemv1i_q8_0_f16)
RLX_INSTANTIATE2(gather_q, QFmtQ8_0, float, gather_q8_0_f32)
RLX_INSTANTIATE2(gather_q, QFmtQ8_0, half, gather_q8_0_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtQ2_K, float, dequantize_q2_k_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtQ2_K, half, dequantize_q2_k_f16)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ2_K, float, gemv1i_q2_k_f32)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ2_K, half, gemv1i_q2_k_f16)
RLX_INSTANTIATE2(gather_q, QFmtQ2_K, float, gather_q2_k_f32)
RLX_INSTANTIATE2(gather_q, QFmtQ2_K, half, gather_q2_k_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtQ3_K, float, dequantize_q3_k_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtQ3_K, half, dequantize_q3_k_f16)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ3_K, float, gemv1i_q3_k_f32)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ3_K, half, gemv1i_q3_k_f16)
RLX_INSTANTIATE2(gather_q, QFmtQ3_K, float, gather_q3_k_f32)
RLX_INSTANTIATE2(gather_q, QFmtQ3_K, half, gather_q3_k_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtQ4_K, float, dequantize_q4_k_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtQ4_K, half, dequantize_q4_k_f16)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ4_K, float, gemv1i_q4_k_f32)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ4_K, half, gemv1i_q4_k_f16)
RLX_INSTANTIATE2(gather_q, QFmtQ4_K, float, gather_q4_k_f32)
RLX_INSTANTIATE2(gather_q, QFmtQ4_K, half, gather_q4_k_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtQ5_K, float, dequantize_q5_k_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtQ5_K, half, dequantize_q5_k_f16)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ5_K, float, gemv1i_q5_k_f32)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ5_K, half, gemv1i_q5_k_f16)
RLX_INSTANTIATE2(gather_q, QFmtQ5_K, float, gather_q5_k_f32)
RLX_INSTANTIATE2(gather_q, QFmtQ5_K, half, gather_q5_k_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtQ6_K, float, dequantize_q6_k_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtQ6_K, half, dequantize_q6_k_f16)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ6_K, float, gemv1i_q6_k_f32)
RLX_INSTANTIATE2(gemv1i_q, QFmtQ6_K, half, gemv1i_q6_k_f16)
RLX_INSTANTIATE2(gather_q, QFmtQ6_K, float, gather_q6_k_f32)
RLX_INSTANTIATE2(gather_q, QFmtQ6_K, half, gather_q6_k_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ4_NL, float, dequantize_iq4_nl_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ4_NL, half, dequantize_iq4_nl_f16)
RLX_INSTANTIATE2(gemv_q, QFmtIQ4_NL, float, gemv_iq4_nl_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ4_NL, float, gemv1_iq4_nl_f32)
RLX_INSTANTIATE2(gemv_q, QFmtIQ4_NL, half, gemv_iq4_nl_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ4_NL, half, gemv1_iq4_nl_f16)
RLX_INSTANTIATE2(gather_q, QFmtIQ4_NL, float, gather_iq4_nl_f32)
RLX_INSTANTIATE2(gather_q, QFmtIQ4_NL, half, gather_iq4_nl_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ4_XS, float, dequantize_iq4_xs_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ4_XS, half, dequantize_iq4_xs_f16)
RLX_INSTANTIATE2(gemv_q, QFmtIQ4_XS, float, gemv_iq4_xs_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ4_XS, float, gemv1_iq4_xs_f32)
RLX_INSTANTIATE2(gemv_q, QFmtIQ4_XS, half, gemv_iq4_xs_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ4_XS, half, gemv1_iq4_xs_f16)
RLX_INSTANTIATE2(gather_q, QFmtIQ4_XS, float, gather_iq4_xs_f32)
RLX_INSTANTIATE2(gather_q, QFmtIQ4_XS, half, gather_iq4_xs_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtTQ1_0, float, dequantize_tq1_0_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtTQ1_0, half, dequantize_tq1_0_f16)
RLX_INSTANTIATE2(gemv_q, QFmtTQ1_0, float, gemv_tq1_0_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtTQ1_0, float, gemv1_tq1_0_f32)
RLX_INSTANTIATE2(gemv_q, QFmtTQ1_0, half, gemv_tq1_0_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtTQ1_0, half, gemv1_tq1_0_f16)
RLX_INSTANTIATE2(gather_q, QFmtTQ1_0, float, gather_tq1_0_f32)
RLX_INSTANTIATE2(gather_q, QFmtTQ1_0, half, gather_tq1_0_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtTQ2_0, float, dequantize_tq2_0_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtTQ2_0, half, dequantize_tq2_0_f16)
RLX_INSTANTIATE2(gemv_q, QFmtTQ2_0, float, gemv_tq2_0_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtTQ2_0, float, gemv1_tq2_0_f32)
RLX_INSTANTIATE2(gemv_q, QFmtTQ2_0, half, gemv_tq2_0_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtTQ2_0, half, gemv1_tq2_0_f16)
RLX_INSTANTIATE2(gather_q, QFmtTQ2_0, float, gather_tq2_0_f32)
RLX_INSTANTIATE2(gather_q, QFmtTQ2_0, half, gather_tq2_0_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtMXFP4, float, dequantize_mxfp4_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtMXFP4, half, dequantize_mxfp4_f16)
RLX_INSTANTIATE2(gemv_q, QFmtMXFP4, float, gemv_mxfp4_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtMXFP4, float, gemv1_mxfp4_f32)
RLX_INSTANTIATE2(gemv_q, QFmtMXFP4, half, gemv_mxfp4_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtMXFP4, half, gemv1_mxfp4_f16)
RLX_INSTANTIATE2(gather_q, QFmtMXFP4, float, gather_mxfp4_f32)
RLX_INSTANTIATE2(gather_q, QFmtMXFP4, half, gather_mxfp4_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtNVFP4, float, dequantize_nvfp4_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtNVFP4, half, dequantize_nvfp4_f16)
RLX_INSTANTIATE2(gemv_q, QFmtNVFP4, float, gemv_nvfp4_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtNVFP4, float, gemv1_nvfp4_f32)
RLX_INSTANTIATE2(gemv_q, QFmtNVFP4, half, gemv_nvfp4_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtNVFP4, half, gemv1_nvfp4_f16)
RLX_INSTANTIATE2(gather_q, QFmtNVFP4, float, gather_nvfp4_f32)
RLX_INSTANTIATE2(gather_q, QFmtNVFP4, half, gather_nvfp4_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtBF16, float, dequantize_bf16_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtBF16, half, dequantize_bf16_f16)
RLX_INSTANTIATE2(gemv_q, QFmtBF16, float, gemv_bf16_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtBF16, float, gemv1_bf16_f32)
RLX_INSTANTIATE2(gemv_q, QFmtBF16, half, gemv_bf16_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtBF16, half, gemv1_bf16_f16)
RLX_INSTANTIATE2(gather_q, QFmtBF16, float, gather_bf16_f32)
RLX_INSTANTIATE2(gather_q, QFmtBF16, half, gather_bf16_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ1_S, float, dequantize_iq1_s_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ1_S, half, dequantize_iq1_s_f16)
RLX_INSTANTIATE2(gemv_q, QFmtIQ1_S, float, gemv_iq1_s_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ1_S, float, gemv1_iq1_s_f32)
RLX_INSTANTIATE2(gemv_q, QFmtIQ1_S, half, gemv_iq1_s_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ1_S, half, gemv1_iq1_s_f16)
RLX_INSTANTIATE2(gather_q, QFmtIQ1_S, float, gather_iq1_s_f32)
RLX_INSTANTIATE2(gather_q, QFmtIQ1_S, half, gather_iq1_s_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ1_M, float, dequantize_iq1_m_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ1_M, half, dequantize_iq1_m_f16)
RLX_INSTANTIATE2(gemv_q, QFmtIQ1_M, float, gemv_iq1_m_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ1_M, float, gemv1_iq1_m_f32)
RLX_INSTANTIATE2(gemv_q, QFmtIQ1_M, half, gemv_iq1_m_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ1_M, half, gemv1_iq1_m_f16)
RLX_INSTANTIATE2(gather_q, QFmtIQ1_M, float, gather_iq1_m_f32)
RLX_INSTANTIATE2(gather_q, QFmtIQ1_M, half, gather_iq1_m_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ2_XXS, float, dequantize_iq2_xxs_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ2_XXS, half, dequantize_iq2_xxs_f16)
RLX_INSTANTIATE2(gemv_q, QFmtIQ2_XXS, float, gemv_iq2_xxs_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ2_XXS, float, gemv1_iq2_xxs_f32)
RLX_INSTANTIATE2(gemv_q, QFmtIQ2_XXS, half, gemv_iq2_xxs_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ2_XXS, half, gemv1_iq2_xxs_f16)
RLX_INSTANTIATE2(gather_q, QFmtIQ2_XXS, float, gather_iq2_xxs_f32)
RLX_INSTANTIATE2(gather_q, QFmtIQ2_XXS, half, gather_iq2_xxs_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ2_XS, float, dequantize_iq2_xs_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ2_XS, half, dequantize_iq2_xs_f16)
RLX_INSTANTIATE2(gemv_q, QFmtIQ2_XS, float, gemv_iq2_xs_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ2_XS, float, gemv1_iq2_xs_f32)
RLX_INSTANTIATE2(gemv_q, QFmtIQ2_XS, half, gemv_iq2_xs_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ2_XS, half, gemv1_iq2_xs_f16)
RLX_INSTANTIATE2(gather_q, QFmtIQ2_XS, float, gather_iq2_xs_f32)
RLX_INSTANTIATE2(gather_q, QFmtIQ2_XS, half, gather_iq2_xs_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ2_S, float, dequantize_iq2_s_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ2_S, half, dequantize_iq2_s_f16)
RLX_INSTANTIATE2(gemv_q, QFmtIQ2_S, float, gemv_iq2_s_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ2_S, float, gemv1_iq2_s_f32)
RLX_INSTANTIATE2(gemv_q, QFmtIQ2_S, half, gemv_iq2_s_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ2_S, half, gemv1_iq2_s_f16)
RLX_INSTANTIATE2(gather_q, QFmtIQ2_S, float, gather_iq2_s_f32)
RLX_INSTANTIATE2(gather_q, QFmtIQ2_S, half, gather_iq2_s_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ3_XXS, float, dequantize_iq3_xxs_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ3_XXS, half, dequantize_iq3_xxs_f16)
RLX_INSTANTIATE2(gemv_q, QFmtIQ3_XXS, float, gemv_iq3_xxs_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ3_XXS, float, gemv1_iq3_xxs_f32)
RLX_INSTANTIATE2(gemv_q, QFmtIQ3_XXS, half, gemv_iq3_xxs_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ3_XXS, half, gemv1_iq3_xxs_f16)
RLX_INSTANTIATE2(gather_q, QFmtIQ3_XXS, float, gather_iq3_xxs_f32)
RLX_INSTANTIATE2(gather_q, QFmtIQ3_XXS, half, gather_iq3_xxs_f16)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ3_S, float, dequantize_iq3_s_f32)
RLX_INSTANTIATE2(dequantize_q, QFmtIQ3_S, half, dequantize_iq3_s_f16)
RLX_INSTANTIATE2(gemv_q, QFmtIQ3_S, float, gemv_iq3_s_f32)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ3_S, float, gemv1_iq3_s_f32)
RLX_INSTANTIATE2(gemv_q, QFmtIQ3_S, half, gemv_iq3_s_f16)
RLX_INSTANTIATE2(gemv1_q, QFmtIQ3_S, half, gemv1_iq3_s_f16)
RLX_INSTANTIATE2(gather_q, QFmtIQ3_S, float, gather_iq3_s_f32)
RLX_INSTANTIATE2(gather_q, QFmtIQ3_S, half, gather_iq3_s_f16)

// gemv1n_<fmt>_<t>: gemv1's f32 form over x formed by the rmsnorm_add chain
// (every target: the lowering takes it on GPUs only).
RLX_INSTANTIATE2(gemv1n_q, QFmtQ2_K, float, gemv1n_q2_k_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ2_K, half, gemv1n_q2_k_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ3_K, float, gemv1n_q3_k_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ3_K, half, gemv1n_q3_k_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ4_K, float, gemv1n_q4_k_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ4_K, half, gemv1n_q4_k_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ5_K, float, gemv1n_q5_k_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ5_K, half, gemv1n_q5_k_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ6_K, float, gemv1n_q6_k_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ6_K, half, gemv1n_q6_k_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ4_0, float, gemv1n_q4_0_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ4_0, half, gemv1n_q4_0_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ4_1, float, gemv1n_q4_1_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ4_1, half, gemv1n_q4_1_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ5_0, float, gemv1n_q5_0_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ5_0, half, gemv1n_q5_0_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ5_1, float, gemv1n_q5_1_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ5_1, half, gemv1n_q5_1_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ8_0, float, gemv1n_q8_0_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtQ8_0, half, gemv1n_q8_0_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ4_NL, float, gemv1n_iq4_nl_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ4_NL, half, gemv1n_iq4_nl_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ4_XS, float, gemv1n_iq4_xs_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ4_XS, half, gemv1n_iq4_xs_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtTQ1_0, float, gemv1n_tq1_0_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtTQ1_0, half, gemv1n_tq1_0_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtTQ2_0, float, gemv1n_tq2_0_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtTQ2_0, half, gemv1n_tq2_0_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtMXFP4, float, gemv1n_mxfp4_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtMXFP4, half, gemv1n_mxfp4_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtNVFP4, float, gemv1n_nvfp4_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtNVFP4, half, gemv1n_nvfp4_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtBF16, float, gemv1n_bf16_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtBF16, half, gemv1n_bf16_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ1_S, float, gemv1n_iq1_s_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ1_S, half, gemv1n_iq1_s_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ1_M, float, gemv1n_iq1_m_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ1_M, half, gemv1n_iq1_m_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ2_XXS, float, gemv1n_iq2_xxs_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ2_XXS, half, gemv1n_iq2_xxs_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ2_XS, float, gemv1n_iq2_xs_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ2_XS, half, gemv1n_iq2_xs_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ2_S, float, gemv1n_iq2_s_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ2_S, half, gemv1n_iq2_s_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ3_XXS, float, gemv1n_iq3_xxs_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ3_XXS, half, gemv1n_iq3_xxs_f16)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ3_S, float, gemv1n_iq3_s_f32)
RLX_INSTANTIATE2(gemv1n_q, QFmtIQ3_S, half, gemv1n_iq3_s_f16)

#ifdef RLX_TARGET_CPU   // bf16 prefill tiles: the host only (its gemm reads bf16 B); not RLX_INSTANTIATE2 lines,
                        // which the CUDA shim's name scan reads whatever the #if (csrc/cuda/device.inc.c)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtQ4_0, rlx_bf16_bits, dequantize_q4_0_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtQ4_1, rlx_bf16_bits, dequantize_q4_1_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtQ5_0, rlx_bf16_bits, dequantize_q5_0_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtQ5_1, rlx_bf16_bits, dequantize_q5_1_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtQ8_0, rlx_bf16_bits, dequantize_q8_0_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtQ2_K, rlx_bf16_bits, dequantize_q2_k_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtQ3_K, rlx_bf16_bits, dequantize_q3_k_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtQ4_K, rlx_bf16_bits, dequantize_q4_k_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtQ5_K, rlx_bf16_bits, dequantize_q5_k_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtQ6_K, rlx_bf16_bits, dequantize_q6_k_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtIQ4_NL, rlx_bf16_bits, dequantize_iq4_nl_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtIQ4_XS, rlx_bf16_bits, dequantize_iq4_xs_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtTQ1_0, rlx_bf16_bits, dequantize_tq1_0_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtTQ2_0, rlx_bf16_bits, dequantize_tq2_0_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtMXFP4, rlx_bf16_bits, dequantize_mxfp4_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtNVFP4, rlx_bf16_bits, dequantize_nvfp4_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtIQ1_S, rlx_bf16_bits, dequantize_iq1_s_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtIQ1_M, rlx_bf16_bits, dequantize_iq1_m_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtIQ2_XXS, rlx_bf16_bits, dequantize_iq2_xxs_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtIQ2_XS, rlx_bf16_bits, dequantize_iq2_xs_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtIQ2_S, rlx_bf16_bits, dequantize_iq2_s_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtIQ3_XXS, rlx_bf16_bits, dequantize_iq3_xxs_bf16)
RLX_HOST_INSTANTIATE2(dequantize_q, QFmtIQ3_S, rlx_bf16_bits, dequantize_iq3_s_bf16)
#endif
