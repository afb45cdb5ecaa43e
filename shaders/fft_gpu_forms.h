// fft_shared's power-of-two forms on GPUs, part of fft.h (included from
// there, after the group-memory helpers they use): the digit passes of
// radix 16, and the register form (each row's elements in its threads'
// registers). Every target compiles them; the CPU runs fft_cpu.h's form.

// ---- fft_shared's power-of-two form on GPUs: digit passes in registers ----
//
// N = 2^bits as in-place decimation-in-time passes of radix 16 (the first
// one 2, 4, 8 or 16; one pass of N itself up to 16). Pass 0 reads the
// source straight into registers, butterfly t of a row taking elements
// t + r N / R0 (adjacent threads, adjacent elements), and writes its
// outputs to group memory in digit-reversed order; each later pass q (span
// h, the product of the radices before it) reads elements c h R + k + r h,
// twiddles element r by W_{hR}^{k r}, and writes its outputs back to the
// same slots; the last pass's outputs are the transform's elements
// k + r h in natural order and go straight to the destination. So a row of
// 256 makes one trip through group memory (a bit-reversed load into it,
// passes in place and a store out of it made three), and every barrier is
// between passes. benchmarks/gpu/fft_proto.cu is the standalone Stockham
// form first measured; fft_shared_bench.py times this one's compile-time
// variants. Each butterfly's values live in one thread's registers for
// one pass only, so the passes are exact for any threads per group, the
// CPU's one included.
//
// log2 of a pass's radix (1, 2, 4, 8 or 16).
RLX_INLINE uint rlx_fft_radix_bits(uint r) { return r == 16u ? 4u : r == 8u ? 3u : r == 4u ? 2u : r == 2u ? 1u : 0u; }

// The group-memory slot of element j of a row: pass 0 (radix 2^first_bits)
// has butterfly t = j mod (N / R0) hold j as its value j / (N / R0) and
// write it at c R0 + that, c = t's radix-16 digits (the later passes') in
// reverse order.
RLX_INLINE uint rlx_fft_digit_slot(uint j, uint bits, uint first_bits) {
    const uint tbits = bits - first_bits;
    const uint t = j & ((1u << tbits) - 1u);
    uint c = 0u;
    for (uint d = 0u; d < tbits; d += 4u) c |= ((t >> d) & 15u) << (tbits - 4u - d);
    return (c << first_bits) | (j >> tbits);
}

// Element e of a group's loop over its rows' elements: row-major, or with
// `across` (rows closer in memory than a row's elements: the four-step's
// columns) the rows fastest, so that adjacent threads read or write
// adjacent memory.
RLX_INLINE uint rlx_fft_loop_row(uint e, uint rows_here, uint bits, bool across) {
    return across ? e % rows_here : e >> bits;
}
RLX_INLINE uint rlx_fft_loop_element(uint e, uint rows_here, uint bits, bool across) {
    return across ? e / rows_here : e & ((1u << bits) - 1u);
}

// A source that is not plain, staged: every element j of the group's rows
// through the general load helper into slot digit_slot(j) of its row (the
// digit passes' pass-0 order; first_bits == bits gives natural order), then
// a barrier.
template <typename G>
RLX_INLINE void rlx_fft_stage_rows(RLX_DEVICE const float *src, RLX_DEVICE const float *pre, RLX_CONSTANT FftParams *p,
                                   G sc, uint row0, uint rows_here, uint bits, uint first_bits, uint swz, uint tid,
                                   uint nt) {
    const bool across = p->src_row < p->src_step;
    for (uint e = tid; e < (rows_here << bits); e += nt) {
        const uint lr = rlx_fft_loop_row(e, rows_here, bits, across);
        const uint j = rlx_fft_loop_element(e, rows_here, bits, across);
        const rlx_cf v = rlx_fft_load(src, pre, p, row0 + lr, j);
        sc[rlx_fft_pair_slot((lr << bits) + rlx_fft_digit_slot(j, bits, first_bits), swz)] = rlx_fft_pair(v);
    }
    rlx_barrier();
}

// The group's transforms, in group memory in natural order, to a
// destination that is not plain: rfft's unpacking (store_mode 2) or the
// general store helper.
template <typename G>
RLX_INLINE void rlx_fft_store_rows(RLX_DEVICE float *dst, RLX_DEVICE const float *post, RLX_CONSTANT FftParams *p,
                                   G sc, uint row0, uint rows_here, uint bits, uint swz, uint tid, uint nt) {
    if (p->store_mode == 2u || p->store_mode == 3u) {
        rlx_fft_store_rfft(dst, post, p, sc, sc, 0u, row0, rows_here, 1u << bits, swz, tid, nt);
        return;
    }
    const bool across = p->dst_row < p->dst_step;
    for (uint e = tid; e < (rows_here << bits); e += nt) {
        const uint lr = rlx_fft_loop_row(e, rows_here, bits, across);
        const uint k = rlx_fft_loop_element(e, rows_here, bits, across);
        rlx_fft_store(dst, post, p, row0 + lr, k, rlx_fft_get(sc, sc, 0u, (lr << bits) + k, swz));
    }
}

// Pass 0 of radix R = N / 2^tbits from a plain source (to_dst: the only
// pass, its outputs in natural order to a plain destination).
template <uint R, typename G>
RLX_INLINE void rlx_fft_first_pass(RLX_DEVICE const float *src, RLX_DEVICE float *dst, RLX_CONSTANT FftParams *p,
                                   G sc, uint row0, uint rows_here, uint bits, bool to_dst,
                                   uint swz, uint tid, uint nt) {
    const uint first_bits = rlx_fft_radix_bits(R);
    const uint tbits = bits - first_bits, per = 1u << tbits;
    const float sg = p->inverse ? 1.0f : -1.0f, scale = p->scale;   // read once (see rlx_fft_register_rows)
    for (uint g = tid; g < (rows_here << tbits); g += nt) {
        const uint lr = g >> tbits, t = g & (per - 1u);
        RLX_DEVICE const rlx_float2 *in = rlx_fft_src_row(src, p, row0 + lr) + t;
        rlx_cfv<R> x;
        RLX_UNROLL
        for (uint r = 0u; r < R; ++r) {
            const rlx_float2 v = in[r * per];
            x.v[r] = rlx_cf_make(v.x, v.y);
        }
        x = rlx_fft_dft_pow2(x, sg);
        if (to_dst) {   // per == 1: the outputs in natural order
            RLX_DEVICE rlx_float2 *out = rlx_fft_dst_row(dst, p, row0 + lr);
            RLX_UNROLL
            for (uint r = 0u; r < R; ++r) out[r] = rlx_fft_scaled(x.v[r], scale);
            continue;
        }
        const uint base = (lr << bits) + rlx_fft_digit_slot(t, bits, first_bits);
        RLX_UNROLL
        for (uint r = 0u; r < R; ++r) {
            sc[rlx_fft_pair_slot(base + r, swz)] = rlx_fft_pair(x.v[r]);
        }
    }
}

// Pass q of radix R over span h = 2^hbits (pass 0 too, hbits 0, when the
// source was staged in group memory), in place, or (to_dst: the last pass)
// from group memory to a plain destination in natural order.
template <uint R, typename G>
RLX_INLINE void rlx_fft_digit_pass(RLX_DEVICE float *dst, RLX_DEVICE const float *tw, RLX_CONSTANT FftParams *p,
                                   G sc, uint row0, uint rows_here, uint bits, uint hbits, bool to_dst,
                                   uint swz, uint tid, uint nt) {
    const uint rbits = rlx_fft_radix_bits(R);
    const uint gbits = bits - rbits, h = 1u << hbits, twshift = bits - hbits - rbits, inv = p->inverse;
    const float sg = inv ? 1.0f : -1.0f, scale = p->scale;   // read once (see rlx_fft_register_rows)
    for (uint g = tid; g < (rows_here << gbits); g += nt) {
        const uint lr = g >> gbits, u = g & ((1u << gbits) - 1u), k = u & (h - 1u);
        const uint base = (lr << bits) + ((u >> hbits) << (hbits + rbits)) + k;
        rlx_cfv<R> x;
        RLX_UNROLL
        for (uint r = 0u; r < R; ++r) {
            const rlx_float2 q = sc[rlx_fft_pair_slot(base + r * h, swz)];
            rlx_cf v = rlx_cf_make(q.x, q.y);
            // Every lane multiplies (k = 0's twiddle is exactly 1): a
            // per-lane branch would keep the loads from being issued
            // together.
            if (r > 0u && hbits > 0u) v = rlx_cf_mul(v, rlx_fft_twiddle_pair(tw, (k * r) << twshift, inv));
            x.v[r] = v;
        }
        x = rlx_fft_dft_pow2(x, sg);
        if (to_dst) {   // the last pass: u < h, so these are elements k + r h of the transform
            RLX_DEVICE rlx_float2 *out = rlx_fft_dst_row(dst, p, row0 + lr) + k;
            RLX_UNROLL
            for (uint r = 0u; r < R; ++r) out[r * h] = rlx_fft_scaled(x.v[r], scale);
            continue;
        }
        RLX_UNROLL
        for (uint r = 0u; r < R; ++r) {
            sc[rlx_fft_pair_slot(base + r * h, swz)] = rlx_fft_pair(x.v[r]);
        }
    }
}

template <typename G>
RLX_INLINE void rlx_fft_digit_pass_of(uint rb, RLX_DEVICE float *dst, RLX_DEVICE const float *tw,
                                      RLX_CONSTANT FftParams *p, G sc, uint row0, uint rows_here, uint bits,
                                      uint hbits, bool to_dst, uint swz, uint tid, uint nt) {
    if (rb == 4u) rlx_fft_digit_pass<16u>(dst, tw, p, sc, row0, rows_here, bits, hbits, to_dst, swz, tid, nt);
    if (rb == 3u) rlx_fft_digit_pass<8u>(dst, tw, p, sc, row0, rows_here, bits, hbits, to_dst, swz, tid, nt);
    if (rb == 2u) rlx_fft_digit_pass<4u>(dst, tw, p, sc, row0, rows_here, bits, hbits, to_dst, swz, tid, nt);
    if (rb == 1u) rlx_fft_digit_pass<2u>(dst, tw, p, sc, row0, rows_here, bits, hbits, to_dst, swz, tid, nt);
    if (rb == 0u) rlx_fft_digit_pass<1u>(dst, tw, p, sc, row0, rows_here, bits, hbits, to_dst, swz, tid, nt);
}

// The whole power-of-two transform of the group's rows (see above).
template <typename G>
RLX_INLINE void rlx_fft_digit_passes(RLX_DEVICE const float *src, RLX_DEVICE float *dst, RLX_DEVICE const float *tw,
                                     RLX_DEVICE const float *pre, RLX_DEVICE const float *post,
                                     RLX_CONSTANT FftParams *p, G sc, uint row0, uint rows_here, uint bits,
                                     uint swz, uint tid, uint nt) {
    const uint passes = bits <= 4u ? 1u : (bits + 3u) / 4u;
    // The radix that is not 16 (if any) comes first: pass 0's scattered
    // writes then land on distinct banks (measured faster than last at
    // N = 512 to 2048: benchmarks/README.md, "H100, session 32").
    const uint first_bits = bits <= 4u ? bits : bits - 4u * (passes - 1u);
    const bool plain_dst = rlx_fft_plain_dst(p);
    if (rlx_fft_plain_src(p)) {
        const bool only = passes == 1u && plain_dst;
        if (first_bits == 4u) rlx_fft_first_pass<16u>(src, dst, p, sc, row0, rows_here, bits, only, swz, tid, nt);
        if (first_bits == 3u) rlx_fft_first_pass<8u>(src, dst, p, sc, row0, rows_here, bits, only, swz, tid, nt);
        if (first_bits == 2u) rlx_fft_first_pass<4u>(src, dst, p, sc, row0, rows_here, bits, only, swz, tid, nt);
        if (first_bits == 1u) rlx_fft_first_pass<2u>(src, dst, p, sc, row0, rows_here, bits, only, swz, tid, nt);
        if (first_bits == 0u) rlx_fft_first_pass<1u>(src, dst, p, sc, row0, rows_here, bits, only, swz, tid, nt);
        if (only) return;
    } else {   // staged: every element at its pass-0 slot, then pass 0 in place
        rlx_fft_stage_rows(src, pre, p, sc, row0, rows_here, bits, first_bits, swz, tid, nt);
        const bool only = passes == 1u && plain_dst;
        rlx_fft_digit_pass_of(first_bits, dst, tw, p, sc, row0, rows_here, bits, 0u, only, swz, tid, nt);
        if (only) return;
    }
    rlx_barrier();
    for (uint q = 1u; q < passes; ++q) {
        const bool to_dst = q + 1u == passes && plain_dst;
        const uint hbits = first_bits + 4u * (q - 1u);
        rlx_fft_digit_pass<16u>(dst, tw, p, sc, row0, rows_here, bits, hbits, to_dst, swz, tid, nt);
        if (to_dst) return;
        rlx_barrier();
    }
    rlx_fft_store_rows(dst, post, p, sc, row0, rows_here, bits, swz, tid, nt);
}

// ---- The register form ------------------------------------------------
// fft_shared's power-of-two form on GPUs, 32 <= N <= 4096, where the group
// has exactly T = N / P threads a row (the lowering's GPU grid,
// rlx/lowering/fft.py register_threads): each thread holds P = 8 or 16 of
// its row's elements in registers for the whole transform, as Stockham
// passes of radix P (the last one smaller where log2 N is not a multiple of
// log2 P). Pass q's butterfly b (b = t + i T, i < P / R) reads elements
// b + r N / R (r < R), twiddles them by W_{SR}^{r (b mod S)} (S: the
// product of the earlier radices) and writes its outputs to
// (b / S) S R + b mod S + q' S. So the first pass reads a plain source and
// the last writes a plain destination in natural order, adjacent threads
// on adjacent elements, and each pass between is one round of barrier,
// write, barrier, read through group memory. N, P and the radices are
// compile-time (a switch over log2 N), so the slots' offsets fold into
// immediates. benchmarks/gpu/fft_proto.cu measured this form beside cuFFT
// first (benchmarks/README.md, "H100, session 33"). Other sources and
// destinations go through group memory in natural order and the general
// helpers, before the first pass and after the last.
//
// log2 P at log2 N = bits (8 points a thread at 32, 64 and 512, where the
// radices then divide log2 N evenly or the rows get twice the threads).
RLX_INLINE uint rlx_fft_register_per_bits(uint bits) { return bits == 5u || bits == 6u || bits == 9u ? 3u : 4u; }

// Whether fft_shared runs the register form: a uniform test on the group
// (p->swizzle: a GPU's slot layout; nt: the group's threads).
RLX_INLINE bool rlx_fft_register_form_applies(uint bits, uint swz, uint group_rows, uint nt) {
    return bits >= 5u && bits <= 12u && swz != 0u && nt == (group_rows << (bits - rlx_fft_register_per_bits(bits)));
}

// Slot of element a + d from a, d a compile-time multiple of 16 (padded
// layout: the padding of a plus d's own).
template <uint L>
RLX_INLINE uint rlx_fft_slot_plus(uint a, uint d) {
    return L == 2u && (d & 15u) == 0u ? a + (a >> 4u) + d + (d >> 4u) : rlx_fft_pair_slot(a + d, L);
}

// The inverse transform as the forward one of the conjugate, conjugated
// (conj(F conj(x)) = n F^-1 x): the passes then always run forward, with
// every twiddle sign and quarter turn a compile-time constant (the sign of
// a run-time direction cost a multiply a turn and a select a twiddle),
// and the direction costs one multiply an element at the load and none at
// the store (folded into the scale). On an H100 the inverse so takes the
// forward's time (session 35); the run-time sign it replaced is gone.

// Twiddle m of a butterfly's wk (rlx_fft_register_butterflies): on
// CUDA optionally through the read-only path (RLX_FFT_TWIDDLE_LDG, an A/B
// switch, off: session 38 measured it 0.4-0.7 us faster at N = 1024-4096
// and 0.45 slower at 256), whose loads the compiler may move above a barrier.
RLX_INLINE rlx_cf rlx_fft_register_twiddle(RLX_DEVICE const float *wk, uint m) {
#if defined(RLX_TARGET_CUDA) && defined(RLX_FFT_TWIDDLE_LDG) && RLX_FFT_TWIDDLE_LDG
    const rlx_float2 w = __ldg((const rlx_float2 *)wk + m);
#else
    const rlx_float2 w = ((RLX_DEVICE const rlx_float2 *)wk)[m];
#endif
    return rlx_cf_make(w.x, w.y);
}

// Element r of butterfly i of a thread's P values, twiddled and
// transformed: the radix-R butterflies of one pass over span S, always
// forward (the inverse runs on the conjugate). Twiddle W_{S R}^{k r}
// lies at r S + k of the pass's block in the table past its natural N
// (rlx/lowering/fft.py register_twiddles: the pass at span P at 0, the one
// at P^2 at P^2), so a butterfly's loads share one address and differ in
// constant offsets, and a SIMD group's (consecutive k) read consecutive
// pairs. Read as k r N / (S R) of the natural table, the compiler chained
// the addresses (each the last plus k's stride) and a load's register
// could be rewritten only once that load had read it: a wait on the
// memory pipe a twiddle (session 38's stall samples).
template <uint N, uint P, uint R, uint S>
RLX_INLINE rlx_cfv<P> rlx_fft_register_butterflies(rlx_cfv<P> v, RLX_DEVICE const float *tw, uint t) {
    RLX_UNROLL
    for (uint i = 0u; i < P / R; ++i) {
        const uint k = (t + i * (N / P)) & (S - 1u);
        RLX_DEVICE const float *wk = tw + 2u * (N + (S == P ? 0u : S) + k);
        rlx_cfv<R> x;
        RLX_UNROLL
        for (uint r = 0u; r < R; ++r) {
            x.v[r] = v.v[i * R + r];
            if (S > 1u && r > 0u) x.v[r] = rlx_cf_mul(x.v[r], rlx_fft_register_twiddle(wk, r * S));
        }
        x = rlx_fft_dft_pow2(x, -1.0f);
        RLX_UNROLL
        for (uint r = 0u; r < R; ++r) v.v[i * R + r] = x.v[r];
    }
    return v;
}

// A pass's inputs from group memory: butterfly b's element r is b + r N / R
// of the row at slot base a0 (the row's first element).
template <uint N, uint P, uint R, uint L, typename G>
RLX_INLINE rlx_cfv<P> rlx_fft_register_read(G sc, uint a0, uint t) {
    rlx_cfv<P> v;
    RLX_UNROLL
    for (uint i = 0u; i < P / R; ++i) {
        const uint a = a0 + t + i * (N / P);
        RLX_UNROLL
        for (uint r = 0u; r < R; ++r) {
            const rlx_float2 q = sc[rlx_fft_slot_plus<L>(a, r * (N / R))];
            v.v[i * R + r] = rlx_cf_make(q.x, q.y);
        }
    }
    return v;
}

// A pass's outputs to group memory: butterfly b's output r goes to
// (b / S) S R + b mod S + r S.
template <uint N, uint P, uint R, uint S, uint L, typename G>
RLX_INLINE void rlx_fft_register_write(G sc, rlx_cfv<P> v, uint a0, uint t) {
    RLX_UNROLL
    for (uint i = 0u; i < P / R; ++i) {
        const uint b = t + i * (N / P), o = a0 + (b / S) * S * R + (b & (S - 1u));
        RLX_UNROLL
        for (uint r = 0u; r < R; ++r) {
            // S = 1, R = 16: o is a multiple of 16 and r its offset in o's
            // block of 16 (padded: one add).
            const uint slot = S == 1u && R == 16u && L != 1u ? rlx_fft_pair_slot(o, L) + r
                                                             : rlx_fft_slot_plus<L>(o, r * S);
            sc[slot] = rlx_fft_pair(v.v[i * R + r]);
        }
    }
}

// The group's rows (row0 + tid / T, thread t = tid mod T of its row) in
// the register form of log2 N = BITS, slot layout L.
template <uint BITS, uint L, typename G>
RLX_INLINE void rlx_fft_register_rows(RLX_DEVICE const float *src, RLX_DEVICE float *dst, RLX_DEVICE const float *tw,
                                      RLX_DEVICE const float *pre, RLX_DEVICE const float *post,
                                      RLX_CONSTANT FftParams *p, G sc, uint row0, uint rows_here, uint tid,
                                      uint nt) {
    // PB: rlx_fft_register_per_bits(BITS), spelled out as a constant expression.
    const uint N = 1u << BITS, PB = (BITS == 5u || BITS == 6u || BITS == 9u) ? 3u : 4u, P = 1u << PB;
    const uint T = N / P, Q = (BITS + PB - 1u) / PB;                 // threads a row, passes (2 or 3)
    const uint RL = 1u << (BITS - PB * (Q - 1u));                    // the last pass's radix
    const uint R1 = Q == 2u ? RL : P, R2 = Q == 3u ? RL : 1u;      // pass 0's radix is P
    const uint lr = tid / T, t = tid & (T - 1u), a0 = lr << BITS;
    const bool live = lr < rows_here, plain_src = rlx_fft_plain_src(p), plain_dst = rlx_fft_plain_dst(p);
    const float conj = p->inverse ? -1.0f : 1.0f;     // the passes run forward on the conjugate
    rlx_cfv<P> v;
    if (plain_src) {
        RLX_DEVICE const rlx_float2 *in = rlx_fft_src_row(src, p, row0 + (live ? lr : 0u)) + t;
        RLX_UNROLL
        for (uint r = 0u; r < P; ++r) {   // pass 0: one butterfly a thread, b = t
            const rlx_float2 q = in[r * T];
            v.v[r] = rlx_cf_make(q.x, q.y * conj);
        }
    } else {
        rlx_fft_stage_rows(src, pre, p, sc, row0, rows_here, BITS, BITS, L, tid, nt);
        v = rlx_fft_register_read<N, P, P, L>(sc, a0, t);
        RLX_UNROLL
        for (uint r = 0u; r < P; ++r) v.v[r].im *= conj;
        rlx_barrier();   // every thread has its inputs before pass 0's outputs overwrite them
    }
    v = rlx_fft_register_butterflies<N, P, P, 1u>(v, tw, t);
    rlx_fft_register_write<N, P, P, 1u, L>(sc, v, a0, t);
    rlx_barrier();
    v = rlx_fft_register_read<N, P, R1, L>(sc, a0, t);
    v = rlx_fft_register_butterflies<N, P, R1, P>(v, tw, t);
    if (Q == 3u) {
        rlx_barrier();
        rlx_fft_register_write<N, P, R1, P, L>(sc, v, a0, t);
        rlx_barrier();
        v = rlx_fft_register_read<N, P, R2, L>(sc, a0, t);
        v = rlx_fft_register_butterflies<N, P, R2, P * P>(v, tw, t);
    }
    // The last pass's butterfly b (< N / RL, its span) has outputs b + r N / RL.
    if (plain_dst) {
        if (!live) return;   // no barrier follows
        // The scale read once: the destination may alias the params for
        // all the compiler knows, so it would reload them after each store.
        const float scale = p->scale, scale_im = scale * conj;
        RLX_DEVICE rlx_float2 *out = rlx_fft_dst_row(dst, p, row0 + lr) + t;
        RLX_UNROLL
        for (uint i = 0u; i < P / RL; ++i) {
            RLX_UNROLL
            for (uint r = 0u; r < RL; ++r) {
                rlx_float2 o;
                o.x = v.v[i * RL + r].re * scale;
                o.y = v.v[i * RL + r].im * scale_im;
                out[i * T + r * (N / RL)] = o;
            }
        }
        return;
    }
    RLX_UNROLL
    for (uint r = 0u; r < P; ++r) v.v[r].im *= conj;   // the transform itself, for the general store
    rlx_barrier();
    rlx_fft_register_write<N, P, RL, N / RL, L>(sc, v, a0, t);
    rlx_barrier();
    rlx_fft_store_rows(dst, post, p, sc, row0, rows_here, BITS, L, tid, nt);
}

// The register form at run-time log2 N (5..12).
template <uint L, typename G>
RLX_INLINE void rlx_fft_register_form(uint bits, RLX_DEVICE const float *src, RLX_DEVICE float *dst,
                                      RLX_DEVICE const float *tw, RLX_DEVICE const float *pre,
                                      RLX_DEVICE const float *post, RLX_CONSTANT FftParams *p, G sc, uint row0,
                                      uint rows_here, uint tid, uint nt) {
    switch (bits) {
    case 5u: rlx_fft_register_rows<5u, L>(src, dst, tw, pre, post, p, sc, row0, rows_here, tid, nt); break;
    case 6u: rlx_fft_register_rows<6u, L>(src, dst, tw, pre, post, p, sc, row0, rows_here, tid, nt); break;
    case 7u: rlx_fft_register_rows<7u, L>(src, dst, tw, pre, post, p, sc, row0, rows_here, tid, nt); break;
    case 8u: rlx_fft_register_rows<8u, L>(src, dst, tw, pre, post, p, sc, row0, rows_here, tid, nt); break;
    case 9u: rlx_fft_register_rows<9u, L>(src, dst, tw, pre, post, p, sc, row0, rows_here, tid, nt); break;
    case 10u: rlx_fft_register_rows<10u, L>(src, dst, tw, pre, post, p, sc, row0, rows_here, tid, nt); break;
    case 11u: rlx_fft_register_rows<11u, L>(src, dst, tw, pre, post, p, sc, row0, rows_here, tid, nt); break;
    default: rlx_fft_register_rows<12u, L>(src, dst, tw, pre, post, p, sc, row0, rows_here, tid, nt); break;
    }
}
