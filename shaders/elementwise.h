// The elementwise family: binary ops with broadcasting (add, sub, mul, div,
// maximum, minimum) and unary ops (activations, tanh, exp, log, neg, sqrt, rsqrt,
// scale_shift).

// Binary elementwise ops with broadcasting through strides.
// out[i] = op(a[a_offset + sum(idx_d * a_strides[d])], b[...]) over the output
// shape; a stride of 0 broadcasts that dimension. Strides and offsets are in
// elements, so views need no copy.


struct BinaryParams {
    uint n;          // output elements
    uint ndim;
    uint op;         // 0 add, 1 mul, 2 sub, 3 div, 4 max, 5 min
    uint contiguous; // 1: a, b and out share the output's dense layout
    uint a_offset, b_offset, pad0, pad1;
    uint shape[RLX_MAX_DIMS];
    uint a_strides[RLX_MAX_DIMS];
    uint b_strides[RLX_MAX_DIMS];
};

RLX_INLINE float rlx_binary_apply(uint op, float x, float y) {
    switch (op) {
        case 0u: return x + y;
        case 1u: return x * y;
        case 2u: return x - y;
        case 3u: return x / y;
        case 4u: return rlx_maximum(x, y);   // NaN-propagating (common.h)
        default: return rlx_minimum(x, y);
    }
}

#ifdef RLX_TARGET_CPU
// The strided form on the CPU: both operands walked (RlxWalk, no index
// division per element).
template <typename T>
RLX_INLINE void rlx_binary_walk(const T *a, const T *b, T *out, const BinaryParams *p, uint64_t begin, uint64_t end) {
    const uint *strides[2] = {p->a_strides, p->b_strides};
    const uint64_t offsets[2] = {p->a_offset, p->b_offset};
    RlxWalk<2> w(p->shape, p->ndim, strides, offsets, begin);
    for (uint64_t i = begin; i < end; ++i) {
        out[i] = rlx_from_float<T>(rlx_binary_apply(p->op, rlx_to_float(a[w.at[0]]), rlx_to_float(b[w.at[1]])));
        w.advance(1u);
    }
}
#endif

template <typename T>
RLX_KERNEL binary(RLX_BUF(RLX_DEVICE const T *, a, 0), RLX_BUF(RLX_DEVICE const T *, b, 1),
                  RLX_BUF(RLX_DEVICE T *, out, 2), RLX_PARAMS(BinaryParams, p, 3) RLX_IDS) {
    // Params into registers before the first index read: on CUDA that read
    // waits for the previous kernel (see the prelude), so loads issued before
    // it overlap that kernel instead of following it.
    const uint op = p->op, n = p->n, a_offset = p->a_offset, b_offset = p->b_offset;
    rlx_let_next_kernel_launch();  // the branch below waits for p->contiguous
    if (p->contiguous) {
        RLX_FOR_RANGE(i, n) {
            out[i] = rlx_from_float<T>(rlx_binary_apply(op, rlx_to_float(a[a_offset + i]),
                                                        rlx_to_float(b[b_offset + i])));
        }
        return;
    }
#ifdef RLX_TARGET_CPU
    {
        uint64_t begin, end;
        rlx_group_chunk(n, rlx_group_id.x, rlx_num_groups.x, &begin, &end);
        if (begin < end) rlx_binary_walk(a, b, out, p, begin, end);
        return;
    }
#endif
    RLX_FOR_RANGE(i, p->n) {
        uint rest = (uint)i, ia = p->a_offset, ib = p->b_offset;
        for (int d = (int)p->ndim - 1; d >= 0; --d) {
            uint coord = rest % p->shape[d];
            rest /= p->shape[d];
            ia += coord * p->a_strides[d];
            ib += coord * p->b_strides[d];
        }
        out[i] = rlx_from_float<T>(rlx_binary_apply(op, rlx_to_float(a[ia]), rlx_to_float(b[ib])));
    }
}
RLX_INSTANTIATE(binary, float, binary_f32)
RLX_INSTANTIATE(binary, half, binary_f16)

// Unary elementwise ops over a contiguous range. The op code picks the
// function, so one pipeline serves every unary op (fewer pipelines to build
// and cache on Metal and CUDA).
struct UnaryParams {
    uint n;
    uint op;  // see rlx/runtime/params.py UNARY_OPS
    uint in_offset, out_offset;
    float scale, shift;
    uint pad0, pad1;
};

// One loop per op (the op is uniform across the dispatch): a per-element
// switch would stop the CPU target's vectorizer.
#define RLX_UNARY_LOOP(expr)                                                         \
    RLX_FOR_RANGE(i, n) {                                                            \
        const float v = rlx_to_float(src[i]);                                        \
        dst[i] = rlx_from_float<T>(expr);                                            \
    }                                                                                \
    break

template <typename T>
RLX_KERNEL unary(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE T *, y, 1),
                 RLX_PARAMS(UnaryParams, p, 2) RLX_IDS) {
    const float scale = p->scale, shift = p->shift;   // params before the first index read (binary.h)
    const uint n = p->n;
    RLX_DEVICE const T *src = x + p->in_offset;
    RLX_DEVICE T *dst = y + p->out_offset;
    rlx_let_next_kernel_launch();  // the switch below waits for p->op
    switch (p->op) {
        case 0u: RLX_UNARY_LOOP(rlx_gelu_erf(v));
        case 1u: RLX_UNARY_LOOP(rlx_gelu_tanh(v));
        case 2u: RLX_UNARY_LOOP(rlx_silu(v));
        case 3u: RLX_UNARY_LOOP(rlx_relu(v));
        case 4u: RLX_UNARY_LOOP(rlx_tanh(v));
        case 5u: RLX_UNARY_LOOP(rlx_exp(v));
        case 6u: RLX_UNARY_LOOP(-v);
        case 7u: RLX_UNARY_LOOP(rlx_sqrt(v));
        case 8u: RLX_UNARY_LOOP(rlx_rsqrt(v));
        case 10u: RLX_UNARY_LOOP(rlx_log(v));
        default: RLX_UNARY_LOOP(v * scale + shift);
    }
}
#undef RLX_UNARY_LOOP
RLX_INSTANTIATE(unary, float, unary_f32)
RLX_INSTANTIATE(unary, half, unary_f16)

// A chain of elementwise ops fused into one pass (rlx/opt/fusion.py's
// elementwise chains, op fused_elementwise): up to RLX_EW_MAX_INPUTS inputs
// read through broadcast strides, up to RLX_EW_MAX_STEPS steps computed in
// f32 registers, one store. Slot j < RLX_EW_MAX_INPUTS holds input j,
// slot RLX_EW_MAX_INPUTS + t step t's result (the lowering renumbers the
// IR's compact slots so), so every write goes to a slot known once the
// step loop is unrolled; the last step is the output. Step t's code word:
// bits 0-7 the op (0-5 the binary ops of rlx_binary_apply, 16 + the unary
// kernel's op code), bits 8-15 and 16-23 its operand slots (the second
// unused by unary ops). Intermediates never reach memory, so a chain costs
// one read of each input and one write, not one pass per op.
#define RLX_EW_MAX_INPUTS 4u
#define RLX_EW_MAX_STEPS 8u
#define RLX_EW_SLOTS 12u
#define RLX_EW_UNARY 16u
// Slot i of the register array v (GPUs: constant indices only, so v stays
// in registers).
#define RLX_EW_PICK(v, i)                                                                            \
    ((i) < 4u ? ((i) < 2u ? ((i) == 0u ? v[0] : v[1]) : ((i) == 2u ? v[2] : v[3]))                  \
              : (i) < 8u ? ((i) < 6u ? ((i) == 4u ? v[4] : v[5]) : ((i) == 6u ? v[6] : v[7]))        \
                         : ((i) < 10u ? ((i) == 8u ? v[8] : v[9]) : ((i) == 10u ? v[10] : v[11])))

struct EwChainParams {
    uint n;          // output elements
    uint ndim;
    uint n_inputs, n_steps;
    uint contiguous; // 1: every input dense in the output's layout (offsets aside)
    uint pad0, pad1, pad2;
    uint offsets[RLX_EW_MAX_INPUTS];
    uint shape[RLX_MAX_DIMS];
    uint strides[RLX_EW_MAX_INPUTS * RLX_MAX_DIMS];   // input i's strides at [i * RLX_MAX_DIMS]
    uint steps[RLX_EW_MAX_STEPS];
    float scale[RLX_EW_MAX_STEPS], shift[RLX_EW_MAX_STEPS];   // scale_shift's constants
};

// The unary kernel's op codes (rlx/lowering/elementwise.py UNARY_OPS).
RLX_INLINE float rlx_unary_apply(uint op, float v, float scale, float shift) {
    switch (op) {
        case 0u: return rlx_gelu_erf(v);
        case 1u: return rlx_gelu_tanh(v);
        case 2u: return rlx_silu(v);
        case 3u: return rlx_relu(v);
        case 4u: return rlx_tanh(v);
        case 5u: return rlx_exp(v);
        case 6u: return -v;
        case 7u: return rlx_sqrt(v);
        case 8u: return rlx_rsqrt(v);
        case 10u: return rlx_log(v);
        default: return v * scale + shift;
    }
}

// Element e of input j: its flat index under broadcast strides (one
// dimension, as merged views of real or imaginary parts are: a multiply).
RLX_INLINE uint rlx_ew_index(RLX_CONSTANT EwChainParams *p, uint j, uint e) {
    if (p->contiguous) return p->offsets[j] + e;
    if (p->ndim == 1u) return p->offsets[j] + e * p->strides[j * RLX_MAX_DIMS];
    uint rest = e, at = p->offsets[j];
    for (int d = (int)p->ndim - 1; d >= 0; --d) {
        const uint coord = rest % p->shape[d];
        rest /= p->shape[d];
        at += coord * p->strides[j * RLX_MAX_DIMS + (uint)d];
    }
    return at;
}

#ifdef RLX_TARGET_CPU
// The CPU walks its chunk in blocks of RLX_EW_BLOCK elements, each step a
// plain loop over the block with its op fixed, so the compiler vectorizes
// every step (a per-element switch would not vectorize).
#define RLX_EW_BLOCK 256u
#define RLX_EW_STEP_LOOP(expr)                                                      \
    for (uint t = 0; t < len; ++t) {                                                \
        const float lhs = a[t], rhs = b[t];                                             \
        (void)rhs;                                                                  \
        d[t] = (expr);                                                              \
    }                                                                               \
    break
// Elements b0 .. b0 + len - 1 of input j through its strides (RlxWalk:
// rlx_ew_index's division per dimension and element cost more than the
// whole chain, 6 ms for a transposed [4, 3001, 80] input), a run of the
// innermost dimension at a time: a plain strided loop (the real and
// imaginary parts of a spectrum, stride 2, were an odometer step an
// element).
template <typename T>
RLX_INLINE void rlx_ew_gather_cpu(const T *src, RLX_CONSTANT EwChainParams *p, uint j, uint64_t b0, uint len,
                                  float *d) {
    const uint *strides[1] = {p->strides + j * RLX_MAX_DIMS};
    const uint64_t offsets[1] = {p->offsets[j]};
    RlxWalk<1> w(p->shape, p->ndim, strides, offsets, b0);
    const uint64_t step = strides[0][p->ndim - 1u];
    for (uint t = 0; t < len;) {
        const uint run = len - t < w.row_left() ? len - t : w.row_left();
        const T *q = src + w.at[0];
        for (uint u = 0; u < run; ++u) d[t + u] = rlx_to_float(q[u * step]);
        t += run;
        w.advance(run);
    }
}

template <typename T>
RLX_INLINE void rlx_ew_chain_cpu(const T *const *in, T *out, RLX_CONSTANT EwChainParams *p, uint64_t begin,
                                 uint64_t end) {
    float slots[RLX_EW_SLOTS][RLX_EW_BLOCK];
    const uint ni = p->n_inputs, ns = p->n_steps;
    for (uint64_t b0 = begin; b0 < end; b0 += RLX_EW_BLOCK) {
        const uint len = (uint)(end - b0 < RLX_EW_BLOCK ? end - b0 : RLX_EW_BLOCK);
        for (uint j = 0; j < ni; ++j) {
            float *d = slots[j];
            if (p->contiguous) {
                const T *src = in[j] + p->offsets[j] + b0;
                for (uint t = 0; t < len; ++t) d[t] = rlx_to_float(src[t]);
            } else {
                rlx_ew_gather_cpu(in[j], p, j, b0, len, d);
            }
        }
        for (uint s = 0; s < ns; ++s) {
            const uint code = p->steps[s], op = code & 255u;
            const float *a = slots[(code >> 8) & 255u], *b = slots[(code >> 16) & 255u];
            float *d = slots[RLX_EW_MAX_INPUTS + s];
            const float scale = p->scale[s], shift = p->shift[s];
            switch (op) {
                case 0u: RLX_EW_STEP_LOOP(lhs + rhs);
                case 1u: RLX_EW_STEP_LOOP(lhs * rhs);
                case 2u: RLX_EW_STEP_LOOP(lhs - rhs);
                case 3u: RLX_EW_STEP_LOOP(lhs / rhs);
                case 4u: RLX_EW_STEP_LOOP(rlx_maximum(lhs, rhs));
                case 5u: RLX_EW_STEP_LOOP(rlx_minimum(lhs, rhs));
                case RLX_EW_UNARY + 0u: RLX_EW_STEP_LOOP(rlx_gelu_erf(lhs));
                case RLX_EW_UNARY + 1u: RLX_EW_STEP_LOOP(rlx_gelu_tanh(lhs));
                case RLX_EW_UNARY + 2u: RLX_EW_STEP_LOOP(rlx_silu(lhs));
                case RLX_EW_UNARY + 3u: RLX_EW_STEP_LOOP(rlx_relu(lhs));
                case RLX_EW_UNARY + 4u: RLX_EW_STEP_LOOP(rlx_tanh(lhs));
                case RLX_EW_UNARY + 5u: RLX_EW_STEP_LOOP(rlx_exp(lhs));
                case RLX_EW_UNARY + 6u: RLX_EW_STEP_LOOP(-lhs);
                case RLX_EW_UNARY + 7u: RLX_EW_STEP_LOOP(rlx_sqrt(lhs));
                case RLX_EW_UNARY + 8u: RLX_EW_STEP_LOOP(rlx_rsqrt(lhs));
                case RLX_EW_UNARY + 10u: RLX_EW_STEP_LOOP(rlx_log(lhs));
                default: RLX_EW_STEP_LOOP(lhs * scale + shift);
            }
        }
        const float *r = slots[RLX_EW_MAX_INPUTS + ns - 1u];
        for (uint t = 0; t < len; ++t) out[b0 + t] = rlx_from_float<T>(r[t]);
    }
}
#undef RLX_EW_STEP_LOOP
#endif

template <typename T>
RLX_KERNEL ew_chain(RLX_BUF(RLX_DEVICE const T *, in0, 0), RLX_BUF(RLX_DEVICE const T *, in1, 1),
                    RLX_BUF(RLX_DEVICE const T *, in2, 2), RLX_BUF(RLX_DEVICE const T *, in3, 3),
                    RLX_BUF(RLX_DEVICE T *, out, 4), RLX_PARAMS(EwChainParams, p, 5) RLX_IDS) {
    const uint n = p->n, ni = p->n_inputs, ns = p->n_steps;   // params before the first index read (binary)
#ifdef RLX_TARGET_CPU
    {
        const T *in[RLX_EW_MAX_INPUTS] = {in0, in1, in2, in3};
        uint64_t begin, end;
        rlx_group_chunk(n, rlx_group_id.x, rlx_num_groups.x, &begin, &end);
        if (begin < end) rlx_ew_chain_cpu(in, out, p, begin, end);
        (void)ni, (void)ns;
        return;
    }
#else
    rlx_let_next_kernel_launch();  // the loads below wait for the params
    RLX_FOR_RANGE(i, n) {
        // Registers, not a stack array: reads pick their slot through
        // selects (the program is uniform over the dispatch), and the
        // unrolled loop writes constant slots.
        float v[RLX_EW_SLOTS];
        const uint e = (uint)i;
        v[0] = rlx_to_float(in0[rlx_ew_index(p, 0u, e)]);
        v[1] = ni > 1u ? rlx_to_float(in1[rlx_ew_index(p, 1u, e)]) : 0.0f;
        v[2] = ni > 2u ? rlx_to_float(in2[rlx_ew_index(p, 2u, e)]) : 0.0f;
        v[3] = ni > 3u ? rlx_to_float(in3[rlx_ew_index(p, 3u, e)]) : 0.0f;
        for (uint s = 4u; s < RLX_EW_SLOTS; ++s) v[s] = 0.0f;
        RLX_UNROLL
        for (uint s = 0; s < RLX_EW_MAX_STEPS; ++s) {
            if (s < ns) {
                const uint code = p->steps[s], op = code & 255u, ia = (code >> 8) & 255u, ib = (code >> 16) & 255u;
                const float x = RLX_EW_PICK(v, ia), y = RLX_EW_PICK(v, ib);
                v[RLX_EW_MAX_INPUTS + s] = op < RLX_EW_UNARY ? rlx_binary_apply(op, x, y)
                                                             : rlx_unary_apply(op - RLX_EW_UNARY, x, p->scale[s],
                                                                               p->shift[s]);
            }
        }
        out[i] = rlx_from_float<T>(RLX_EW_PICK(v, RLX_EW_MAX_INPUTS + ns - 1u));
    }
#endif
}
RLX_INSTANTIATE(ew_chain, float, ew_chain_f32)
RLX_INSTANTIATE(ew_chain, half, ew_chain_f16)
