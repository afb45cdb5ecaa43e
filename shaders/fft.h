// FFT along the last axis (rlx/ir/ops/fft.py); rlx/lowering/fft.py picks
// the algorithm per length N and chains these kernels:
//
//   fft_shared  N a power of two <= RLX_FFT_SHARED_MAX, one group per
//               group_rows rows (group_rows * N <= the maximum): on GPUs
//               from 32 to 4096 the register form (each row's elements in
//               its threads' registers across Stockham passes, below);
//               otherwise in-place decimation-in-time passes of radix 16
//               in registers, the first reading the source and the last
//               writing the destination (the digit passes). The CPU runs
//               its own form (fft_cpu.h: rows across vector lanes,
//               radix-8 passes, rfft/irfft unpacking fused, a four-step of
//               two dispatches above the shared limit), N = 2^a 3^b 5^c
//               up to the maximum included.
//   fft_mixed   GPUs' N = 2^a 3^b 5^c up to RLX_FFT_MIXED_MAX: Stockham
//               passes of radix 2, 3, 4, 5 and 8 between the two halves of
//               group memory (the mixed-radix form, below).
//   fft_stage   one Stockham pass of radix 2, 3, 4 or 5 over global memory
//               (out of place, natural order in and out: no bit reversal):
//               N = 2^a 3^b 5^c, and powers of two above the shared limit,
//               run one dispatch per pass.
//   Bluestein   any other N: the lowering chains a length-L transform
//               (L a power of two >= 2N - 1), a pointwise product with a
//               precomputed spectrum and the inverse transform, through the
//               same two kernels' pre-/post-multiply tables.
//   rfft_post     the real transform of an even length from a half-length
//                 complex transform of the packed signal (below).
//   irfft_pre     its inverse: the half-length spectrum whose inverse
//                 transform is the real signal packed in pairs (below).
//   complex_pack  c64 from f32 real and imaginary parts (g.complex).
//
// Complex data are interleaved float pairs (numpy's complex64). Every
// pass reads its input through the shared load helper (complex, real, or a
// half spectrum extended by Hermitian symmetry, with zero padding past
// src_len and an optional pre-multiply) and writes through the store helper
// (the first dst_count outputs, complex or real part, post-multiply and
// scale): the op's own input and output shapes are met in the first and
// last pass, the passes between use the plain complex form. Twiddles come
// from a table of exp(-2 pi i m / n), m < n, computed in float64 and
// rounded at lowering time (Metal and CUDA would otherwise differ in
// sin/cos accuracy, and the CPU's libm calls would not vectorize); the
// inverse direction conjugates them.
//
// All cooperative loops stride by the group size and every group-memory
// pass ends in a barrier, so the kernels are exact for any threads per
// group, including the CPU's one.
#define RLX_FFT_SHARED_MAX 4096u

struct FftParams {
    uint n;          // length of the transform these passes compute
    uint rows;       // rows (the batch: every leading dimension)
    uint radix;      // fft_stage: this pass's radix (2, 3, 4 or 5)
    uint span;       // fft_stage: product of the earlier passes' radices; fft_shared: log2 n;
                     // the mixed-radix form (radix 1): its passes' radices, 4 bits each
    uint inverse;    // 0: exp(-2 pi i jk / n); 1: exp(+2 pi i jk / n)
    uint load_mode;  // 0 complex, 1 real, 2 half spectrum (Hermitian extension); the CPU's
                     // fused modes in fft_cpu.h (3 irfft's half-length spectrum, 4 and 5 real rows in pairs)
    uint src_offset, src_row, src_step;   // floats: first element, between rows, between elements
    uint src_len;    // the sequence's elements; the rest up to n read as zeros
    uint herm_n;     // mode 2: length of the full spectrum
    uint src_avail;  // mode 2: bins present in each row (fewer: zeros; more: unused)
    uint pre_mul;    // 1: multiply element i < src_len by pre[i] (complex); 2: a real window,
                     // each loaded float times the window's float at its place in the row;
                     // 3: rows in blocks as columns of one sequence (the four-step's first
                     // dispatch): element i of row r is the sequence's g = i src_rpb +
                     // r mod src_rpb (at src_offset + (r / src_rpb) src_block + g src_row,
                     // in any load mode), times pre[g], and zero from g = limit on
                     // (Bluestein's chirp and zero padding)
    uint store_mode; // 0 complex, 1 real part only, 2 rfft's bins unpacked from the half-length
                     // transform (the lowering's STORE_RFFT), 3 those bins' power |X|^2, 4 the
                     // power of each output (one float: windowed_rfft_power); on the CPU 5 and 6
                     // two rows' rfft bins / irfft samples from one transform (fft_cpu.h)
    uint dst_offset, dst_row, dst_step;   // floats
    uint dst_count;  // outputs k < dst_count of each row are stored
    uint post_mul;   // 1: multiply output k by post[k] (complex) before the scale; 2 and 3:
                     // rows in blocks as columns (rlx_fft_store)
    float scale;
    uint group_rows; // fft_shared: rows per group
    uint swizzle;    // fft_shared: 1 = swizzled group-memory slots (GPUs)
    uint passes;     // fft_shared, mixed radix (radix 1): the passes whose radices span holds
    uint limit;      // pre_mul / post_mul 3: the whole sequence's elements (below); the CPU's
                     // real rows in pairs: the real rows
    // Rows in blocks (0: one stride): rows come in blocks of *_rpb rows,
    // *_block floats apart, so row r starts at (r / rpb) * block + (r % rpb)
    // * row. The source's on every target (a [B, frames, n] framing view of
    // a padded signal: its two leading strides do not merge); the
    // destination's in the CPU's four-step form of long powers of two
    // (fft_cpu.h), whose post_mul 2 multiplies output k of row r by
    // post[k * dst_rpb + r % dst_rpb].
    uint src_rpb, src_block, dst_rpb, dst_block;
    // A padded signal read in place (src_valid != 0; rows in blocks, one
    // block a signal): row r's floats sit at (r % rpb) * src_row + o in the
    // padded signal, whose floats [src_pad, src_pad + src_valid) are the
    // block's and the rest zeros, or with src_reflect the block mirrored
    // about its first and last float (numpy.pad's "reflect", once: src_pad
    // < src_valid): frames of rlx.signal's centre padding.
    uint src_pad, src_valid, src_reflect;
    // group_block != 0 (the CPU's four-step, whose blocks of columns are not
    // a multiple of its groups' rows): groups never straddle two blocks of
    // that many rows; each block's rows take ceil(group_block / group_rows)
    // groups, the last of them short, so every group reads and writes runs
    // of adjacent columns (fft_cpu.h rlx_fft_columns).
    uint group_block;
};

struct rlx_cf { float re, im; };
// Up to one radix-5 butterfly's values, passed by value (Metal would need an
// address space on a pointer to a thread-local array).
struct rlx_fft5 { rlx_cf v[5]; };

RLX_INLINE rlx_cf rlx_cf_make(float re, float im) {
    rlx_cf c;
    c.re = re;
    c.im = im;
    return c;
}
RLX_INLINE rlx_cf rlx_cf_add(rlx_cf a, rlx_cf b) { return rlx_cf_make(a.re + b.re, a.im + b.im); }
RLX_INLINE rlx_cf rlx_cf_sub(rlx_cf a, rlx_cf b) { return rlx_cf_make(a.re - b.re, a.im - b.im); }
RLX_INLINE rlx_cf rlx_cf_mul(rlx_cf a, rlx_cf b) {
    return rlx_cf_make(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
RLX_INLINE rlx_cf rlx_cf_scale(rlx_cf a, float s) { return rlx_cf_make(a.re * s, a.im * s); }
// i * s * a for s = +-1: a quarter turn, exact.
RLX_INLINE rlx_cf rlx_cf_turn(rlx_cf a, float s) { return rlx_cf_make(-s * a.im, s * a.re); }

RLX_INLINE rlx_cf rlx_fft_twiddle(RLX_DEVICE const float *tw, uint m, uint inverse) {
    const float im = tw[2u * m + 1u];
    return rlx_cf_make(tw[2u * m], inverse ? -im : im);
}

// The first float of row r of rows in blocks of rpb (FftParams).
RLX_INLINE uint64_t rlx_fft_row_at(uint offset, uint row, uint rpb, uint block, uint r) {
    if (rpb == 0u) return (uint64_t)offset + (uint64_t)r * row;
    return (uint64_t)offset + (uint64_t)(r / rpb) * block + (uint64_t)(r % rpb) * row;
}

// Float o of row `row` of a padded source (FftParams.src_valid != 0):
// outside the signal's own floats zero or its mirror image.
RLX_INLINE float rlx_fft_padded(RLX_DEVICE const float *src, RLX_CONSTANT FftParams *p, uint row, uint64_t o) {
    uint64_t at = (uint64_t)(row % p->src_rpb) * p->src_row + o;   // in the padded signal
    const uint64_t lo = p->src_pad, hi = lo + p->src_valid;
    if (at < lo || at >= hi) {
        if (p->src_reflect == 0u) return 0.0f;
        at = at < lo ? 2u * lo - at : 2u * (hi - 1u) - at;   // about the first or the last float
    }
    return src[(uint64_t)p->src_offset + (uint64_t)(row / p->src_rpb) * p->src_block + (at - lo)];
}

// Element i of row `row` of the sequence the pass transforms.
RLX_INLINE rlx_cf rlx_fft_load(RLX_DEVICE const float *src, RLX_DEVICE const float *pre, RLX_CONSTANT FftParams *p,
                               uint row, uint i) {
    if (i >= p->src_len) return rlx_cf_make(0.0f, 0.0f);
    // The element's index in its sequence and the sequence's first float
    // and element step: the row's own, or with pre_mul 3 (columns of one
    // sequence: src_row is its element step) g and the block's.
    uint g = i;
    uint64_t base, step = p->src_step;
    if (p->pre_mul == 3u) {
        g = i * p->src_rpb + row % p->src_rpb;
        if (g >= p->limit) return rlx_cf_make(0.0f, 0.0f);   // not read: past the row
        base = (uint64_t)p->src_offset + (uint64_t)(row / p->src_rpb) * p->src_block;
        step = p->src_row;
    } else {
        base = rlx_fft_row_at(p->src_offset, p->src_row, p->src_rpb, p->src_block, row);
    }
    rlx_cf v = rlx_cf_make(0.0f, 0.0f);
    if (p->src_valid != 0u) {   // a padded signal (rfft's real or packed samples)
        const uint64_t o = (uint64_t)i * p->src_step;
        v = rlx_cf_make(rlx_fft_padded(src, p, row, o),
                        p->load_mode == 1u ? 0.0f : rlx_fft_padded(src, p, row, o + 1u));
    } else if (p->load_mode == 1u) {
        v.re = src[base + (uint64_t)g * step];
    } else if (p->load_mode == 2u) {
        // Y[g] = X[g] for g <= n/2, conj(X[n - g]) above; bins 0 and n/2
        // (even n) are real by symmetry, so their imaginary parts are
        // dropped, as numpy's irfft does.
        const uint hn = p->herm_n;
        const bool mirrored = g > hn / 2u;
        const uint k = mirrored ? hn - g : g;
        if (k < p->src_avail) {
            const uint64_t at = base + (uint64_t)k * step;
            const bool real_bin = k == 0u || 2u * k == hn;
            const float im = src[at + 1u];
            v = rlx_cf_make(src[at], real_bin ? 0.0f : (mirrored ? -im : im));
        }
    } else {
        const uint64_t at = base + (uint64_t)g * step;
        v = rlx_cf_make(src[at], src[at + 1u]);
    }
    if (p->pre_mul == 1u) v = rlx_cf_mul(v, rlx_cf_make(pre[2u * i], pre[2u * i + 1u]));
    if (p->pre_mul == 3u) v = rlx_cf_mul(v, rlx_cf_make(pre[2u * g], pre[2u * g + 1u]));
    if (p->pre_mul == 2u) {   // a window over the row's floats: one a real element, two (rfft's packed pairs)
        if (p->load_mode == 1u) v.re *= pre[i];
        else v = rlx_cf_make(v.re * pre[2u * i], v.im * pre[2u * i + 1u]);
    }
    return v;
}

// |v scale|^2: a bin's power (store modes 3 and 4).
RLX_INLINE float rlx_fft_power(rlx_cf v, float scale) {
    const float re = v.re * scale, im = v.im * scale;
    return re * re + im * im;
}

// Output k of row `row`: kept only for k < dst_count. post_mul 1
// multiplies it by post[k]; with rows in blocks of dst_rpb, output k of
// row r is the whole sequence's g = k dst_rpb + r mod dst_rpb: post_mul 2
// (the four-step's first dispatch) multiplies it by post[g], conjugated
// for the inverse, 3 (its second, Bluestein's) by post[g] and keeps it
// only for g < limit.
RLX_INLINE void rlx_fft_store(RLX_DEVICE float *dst, RLX_DEVICE const float *post, RLX_CONSTANT FftParams *p,
                              uint row, uint k, rlx_cf v) {
    if (k >= p->dst_count) return;
    if (p->post_mul == 1u) v = rlx_cf_mul(v, rlx_cf_make(post[2u * k], post[2u * k + 1u]));
    if (p->post_mul >= 2u) {
        const uint g = k * p->dst_rpb + row % p->dst_rpb;   // in the whole sequence
        if (p->post_mul == 3u && g >= p->limit) return;
        v = rlx_cf_mul(v, rlx_fft_twiddle(post, g, p->post_mul == 2u ? p->inverse : 0u));
    }
    const uint64_t at = rlx_fft_row_at(p->dst_offset, p->dst_row, p->dst_rpb, p->dst_block, row) +
                        (uint64_t)k * p->dst_step;
    if (p->store_mode == 4u) {   // the power of the scaled output
        dst[at] = rlx_fft_power(v, p->scale);
        return;
    }
    dst[at] = v.re * p->scale;
    if (p->store_mode == 0u) dst[at + 1u] = v.im * p->scale;
}

// y_q = sum_r x_r exp(sg 2 pi i q r / radix), sg = -1 forward, +1 inverse.
RLX_INLINE rlx_fft5 rlx_fft_dft(rlx_fft5 x, uint radix, uint inverse) {
    const float sg = inverse ? 1.0f : -1.0f;
    rlx_fft5 y = x;
    if (radix == 2u) {
        y.v[0] = rlx_cf_add(x.v[0], x.v[1]);
        y.v[1] = rlx_cf_sub(x.v[0], x.v[1]);
    } else if (radix == 4u) {
        const rlx_cf a = rlx_cf_add(x.v[0], x.v[2]), b = rlx_cf_sub(x.v[0], x.v[2]);
        const rlx_cf c = rlx_cf_add(x.v[1], x.v[3]), d = rlx_cf_turn(rlx_cf_sub(x.v[1], x.v[3]), sg);
        y.v[0] = rlx_cf_add(a, c);
        y.v[2] = rlx_cf_sub(a, c);
        y.v[1] = rlx_cf_add(b, d);
        y.v[3] = rlx_cf_sub(b, d);
    } else if (radix == 3u) {
        const rlx_cf t1 = rlx_cf_add(x.v[1], x.v[2]), t2 = rlx_cf_sub(x.v[1], x.v[2]);
        const rlx_cf m = rlx_cf_add(x.v[0], rlx_cf_scale(t1, -0.5f));
        const rlx_cf r = rlx_cf_turn(rlx_cf_scale(t2, 0.86602540378443865f), sg);   // i sg sin(2 pi / 3) t2
        y.v[0] = rlx_cf_add(x.v[0], t1);
        y.v[1] = rlx_cf_add(m, r);
        y.v[2] = rlx_cf_sub(m, r);
    } else {   // radix 5
        const float c1 = 0.30901699437494742f, c2 = -0.80901699437494742f;   // cos(2 pi / 5), cos(4 pi / 5)
        const float s1 = 0.95105651629515357f, s2 = 0.58778525229247313f;    // sin(2 pi / 5), sin(4 pi / 5)
        const rlx_cf t1 = rlx_cf_add(x.v[1], x.v[4]), t2 = rlx_cf_add(x.v[2], x.v[3]);
        const rlx_cf t3 = rlx_cf_sub(x.v[1], x.v[4]), t4 = rlx_cf_sub(x.v[2], x.v[3]);
        const rlx_cf m1 = rlx_cf_add(x.v[0], rlx_cf_add(rlx_cf_scale(t1, c1), rlx_cf_scale(t2, c2)));
        const rlx_cf m2 = rlx_cf_add(x.v[0], rlx_cf_add(rlx_cf_scale(t1, c2), rlx_cf_scale(t2, c1)));
        const rlx_cf n1 = rlx_cf_turn(rlx_cf_add(rlx_cf_scale(t3, s1), rlx_cf_scale(t4, s2)), sg);
        const rlx_cf n2 = rlx_cf_turn(rlx_cf_sub(rlx_cf_scale(t3, s2), rlx_cf_scale(t4, s1)), sg);
        y.v[0] = rlx_cf_add(x.v[0], rlx_cf_add(t1, t2));
        y.v[1] = rlx_cf_add(m1, n1);
        y.v[4] = rlx_cf_sub(m1, n1);
        y.v[2] = rlx_cf_add(m2, n2);
        y.v[3] = rlx_cf_sub(m2, n2);
    }
    return y;
}

// The templates are for RLX_INSTANTIATE only: the FFT reads and writes f32
// (c64 pairs) and has no f16 form (the precision pass keeps it in f32).
//
// The slot of element a in the array of pairs, by FftParams.swizzle (the
// lowering's slot_layout): 0 as is (the CPU); 1 (Metal) bits 4.. of a XORed
// into its low 4 bits; 2 (CUDA) a pair of padding after every 16. A SIMD
// group's 8-byte accesses are served sixteen lanes at a time, sixteen pairs
// to a row of banks, and the passes stride by powers of two of at least 16:
// either layout spreads sixteen such accesses over the banks. Padding
// costs an add where the XOR costs shifts and logic on every access (its
// offsets fold into immediates: session 33's SASS), but needs
// RLX_FFT_SHARED_PAIRS slots, more than Metal's 32 KB of group memory holds.
RLX_INLINE uint rlx_fft_pair_slot(uint a, uint swizzle) {
    return swizzle == 2u ? a + (a >> 4u) : swizzle ? a ^ (((a >> 4u) ^ (a >> 8u)) & 15u) : a;
}

// Element i of group memory from base: the mixed-radix form's separate
// real and imaginary arrays (never swizzled), or the digit passes' array
// of pairs (swizzled as above; the second pointer is unused).
RLX_INLINE rlx_cf rlx_fft_get(RLX_GROUP_MEM const float *re, RLX_GROUP_MEM const float *im, uint base, uint i,
                              uint) {   // the mixed-radix form's halves are not swizzled
    return rlx_cf_make(re[base + i], im[base + i]);
}
RLX_INLINE rlx_cf rlx_fft_get(RLX_GROUP_MEM const rlx_float2 *c, RLX_GROUP_MEM const rlx_float2 *, uint base, uint i,
                              uint swz) {
    const rlx_float2 v = c[base + rlx_fft_pair_slot(i, swz)];
    return rlx_cf_make(v.x, v.y);
}
RLX_INLINE rlx_float2 rlx_fft_pair(rlx_cf v) {
    rlx_float2 o;
    o.x = v.re;
    o.y = v.im;
    return o;
}

// A group's loop over (row, index) pairs, index < len, thread tid of nt
// starting at flat position tid and stepping by nt: the row and index
// advance by nt's quotient and remainder, so the loop divides once, not
// once an element (a division by a run-time value is a sequence of some
// twenty instructions on a GPU).
struct rlx_fft_walk { uint row, at, step_rows, step_at, len; };
RLX_INLINE rlx_fft_walk rlx_fft_walk_start(uint len, uint tid, uint nt) {
    rlx_fft_walk w;
    w.row = tid / len, w.at = tid - w.row * len, w.step_rows = nt / len, w.step_at = nt - w.step_rows * len;
    w.len = len;
    return w;
}
RLX_INLINE rlx_fft_walk rlx_fft_walk_next(rlx_fft_walk w) {
    w.at += w.step_at, w.row += w.step_rows;
    if (w.at >= w.len) w.at -= w.len, ++w.row;
    return w;
}

// A row's plain source and destination (complex pairs adjacent at even
// float offsets; no pre- or post-multiply, padding, zeros or rows in
// blocks): the passes read and write them directly, an element as one
// 8-byte unit. The digit passes stage any other load or store through
// group memory and the general helpers, out of their loops, whose
// radix-16 butterflies leave few registers for them; the mixed-radix
// passes call the general helpers in theirs.
RLX_INLINE bool rlx_fft_plain_src(RLX_CONSTANT FftParams *p) {
    return p->load_mode == 0u && p->pre_mul == 0u && p->src_valid == 0u && p->src_rpb == 0u && p->src_len >= p->n &&
           p->src_step == 2u && ((p->src_offset | p->src_row) & 1u) == 0u;
}
RLX_INLINE bool rlx_fft_plain_dst(RLX_CONSTANT FftParams *p) {
    return p->store_mode == 0u && p->post_mul == 0u && p->dst_rpb == 0u && p->dst_count >= p->n &&
           p->dst_step == 2u && ((p->dst_offset | p->dst_row) & 1u) == 0u;
}
// Element 0 of a plain row (the offsets count floats).
RLX_INLINE RLX_DEVICE const rlx_float2 *rlx_fft_src_row(RLX_DEVICE const float *src, RLX_CONSTANT FftParams *p,
                                                         uint row) {
    return (RLX_DEVICE const rlx_float2 *)(src + p->src_offset + (uint64_t)row * p->src_row);
}
RLX_INLINE RLX_DEVICE rlx_float2 *rlx_fft_dst_row(RLX_DEVICE float *dst, RLX_CONSTANT FftParams *p, uint row) {
    return (RLX_DEVICE rlx_float2 *)(dst + p->dst_offset + (uint64_t)row * p->dst_row);
}
RLX_INLINE rlx_float2 rlx_fft_scaled(rlx_cf v, float scale) {
    rlx_float2 o;
    o.x = v.re * scale;
    o.y = v.im * scale;
    return o;
}

// Twiddle m as one 8-byte read (the tables are resident buffers of their
// own, aligned far beyond 8 bytes: rlx/runtime/compiler.py).
RLX_INLINE rlx_cf rlx_fft_twiddle_pair(RLX_DEVICE const float *tw, uint m, uint inverse) {
    const rlx_float2 w = ((RLX_DEVICE const rlx_float2 *)tw)[m];
    return rlx_cf_make(w.x, inverse ? -w.y : w.y);
}

// store_mode 2 (rlx/lowering/fft.py STORE_RFFT) on GPUs, or 3 (the bins'
// power, one float each: windowed_rfft_power): group memory holds
// each row's length-m transform Z of the packed real signal (element
// row m + i at base, read through rlx_fft_get: either layout); the store writes bins k = 0..m of the length-2m
// real transform, X[k] = E[k] + W_2m^k O[k] (rfft_post's algebra below),
// with post the length-2m twiddles, so no second dispatch unpacks them.
// The CPU's rows-across-lanes form has its own (fft_cpu.h).
template <typename G>
RLX_INLINE void rlx_fft_store_rfft(RLX_DEVICE float *dst, RLX_DEVICE const float *post, RLX_CONSTANT FftParams *p,
                                   G sre, G sim, uint base, uint row0, uint rows_here, uint m, uint swz, uint tid,
                                   uint nt) {
    // The params in registers (the stores to dst could alias them, so the
    // compiler would reload them an element), bins as 8-byte units where
    // the rows allow.
    const uint offset = p->dst_offset, row_floats = p->dst_row, step = p->dst_step;
    const float scale = p->scale;
    const bool power = p->store_mode == 3u, pairs = !power && step == 2u && ((offset | row_floats) & 1u) == 0u;
    for (rlx_fft_walk w = rlx_fft_walk_start(m + 1u, tid, nt); w.row < rows_here; w = rlx_fft_walk_next(w)) {
        const uint lr = w.row, k = w.at;
        const uint a = k == m ? 0u : k, b = k == 0u ? 0u : m - k;   // k mod m, (m - k) mod m
        const rlx_cf za = rlx_fft_get(sre, sim, base, lr * m + a, swz);
        const rlx_cf zb_conj = rlx_fft_get(sre, sim, base, lr * m + b, swz);
        const rlx_cf zb = rlx_cf_make(zb_conj.re, -zb_conj.im);
        const rlx_cf even = rlx_cf_scale(rlx_cf_add(za, zb), 0.5f);
        const rlx_cf odd = rlx_cf_turn(rlx_cf_scale(rlx_cf_sub(za, zb), 0.5f), -1.0f);
        const rlx_cf x = rlx_cf_add(even, rlx_cf_mul(rlx_fft_twiddle_pair(post, k, 0u), odd));
        const uint64_t row_at = (uint64_t)offset + (uint64_t)(row0 + lr) * row_floats;
        if (power) {
            dst[row_at + (uint64_t)k * step] = rlx_fft_power(x, scale);
        } else if (pairs) {
            ((RLX_DEVICE rlx_float2 *)(dst + row_at))[k] = rlx_fft_scaled(x, scale);
        } else {
            dst[row_at + (uint64_t)k * step] = x.re * scale;
            dst[row_at + (uint64_t)k * step + 1u] = x.im * scale;
        }
    }
}

// R complex values passed by value (a thread array's pointer would need an
// address space on Metal).
template <uint R>
struct rlx_cfv {
    rlx_cf v[R];
};

// exp(sg 2 pi i k / 16), k < 8, from literals: with the loops unrolled k is
// a constant, so each is two immediates.
RLX_INLINE rlx_cf rlx_w16(uint k, float sg) {
    const float c1 = 0.92387953251128674f, s1 = 0.38268343236508977f, h = 0.70710678118654752f;
    const float re = k == 0u ? 1.0f : k == 1u ? c1 : k == 2u ? h : k == 3u ? s1
                   : k == 4u ? 0.0f : k == 5u ? -s1 : k == 6u ? -h : -c1;
    const float im = k == 0u ? 0.0f : k == 1u ? s1 : k == 2u ? h : k == 3u ? c1
                   : k == 4u ? 1.0f : k == 5u ? c1 : k == 6u ? h : s1;
    return rlx_cf_make(re, sg * im);
}

// DFTs of 1, 2, 4, 8 and 16 points, y_q = sum_r x_r exp(sg 2 pi i q r / R).
RLX_INLINE rlx_cfv<1> rlx_fft_dft_pow2(rlx_cfv<1> x, float) { return x; }
RLX_INLINE rlx_cfv<2> rlx_fft_dft_pow2(rlx_cfv<2> x, float) {
    rlx_cfv<2> y;
    y.v[0] = rlx_cf_add(x.v[0], x.v[1]);
    y.v[1] = rlx_cf_sub(x.v[0], x.v[1]);
    return y;
}
RLX_INLINE rlx_cfv<4> rlx_fft_dft_pow2(rlx_cfv<4> x, float sg) {
    const rlx_cf a = rlx_cf_add(x.v[0], x.v[2]), b = rlx_cf_sub(x.v[0], x.v[2]);
    const rlx_cf c = rlx_cf_add(x.v[1], x.v[3]), d = rlx_cf_turn(rlx_cf_sub(x.v[1], x.v[3]), sg);
    rlx_cfv<4> y;
    y.v[0] = rlx_cf_add(a, c);
    y.v[2] = rlx_cf_sub(a, c);
    y.v[1] = rlx_cf_add(b, d);
    y.v[3] = rlx_cf_sub(b, d);
    return y;
}
// 8 and 16 points: R / 2-point DFTs of the even and odd halves, then
// y_k = e_k + W_R^k o_k and y_{k + R/2} = e_k - W_R^k o_k (W_R^k =
// rlx_w16(16 k / R); a quarter turn exactly where it is +-i).
template <uint R>
RLX_INLINE rlx_cfv<R> rlx_fft_dft_pow2(rlx_cfv<R> x, float sg) {
    rlx_cfv<R / 2u> e, o;
    RLX_UNROLL
    for (uint i = 0u; i < R / 2u; ++i) {
        e.v[i] = x.v[2u * i];
        o.v[i] = x.v[2u * i + 1u];
    }
    e = rlx_fft_dft_pow2(e, sg);
    o = rlx_fft_dft_pow2(o, sg);
    rlx_cfv<R> y;
    RLX_UNROLL
    for (uint k = 0u; k < R / 2u; ++k) {
        const uint w = k * (16u / R);
        const rlx_cf t = k == 0u ? o.v[0] : w == 4u ? rlx_cf_turn(o.v[k], sg) : rlx_cf_mul(o.v[k], rlx_w16(w, sg));
        y.v[k] = rlx_cf_add(e.v[k], t);
        y.v[k + R / 2u] = rlx_cf_sub(e.v[k], t);
    }
    return y;
}

// One butterfly of the mixed-radix form: radix 8 through the power-of-two
// DFT, radices 2 to 5 through rlx_fft_dft.
RLX_INLINE rlx_cfv<8u> rlx_fft_dft_radix(rlx_cfv<8u> x, uint inverse) {
    return rlx_fft_dft_pow2(x, inverse ? 1.0f : -1.0f);
}
template <uint R>
RLX_INLINE rlx_cfv<R> rlx_fft_dft_radix(rlx_cfv<R> x, uint inverse) {
    rlx_fft5 f;
    RLX_UNROLL
    for (uint r = 0u; r < 5u; ++r) f.v[r] = r < R ? x.v[r] : rlx_cf_make(0.0f, 0.0f);
    f = rlx_fft_dft(f, R, inverse);
    rlx_cfv<R> y;
    RLX_UNROLL
    for (uint r = 0u; r < R; ++r) y.v[r] = f.v[r];
    return y;
}

// Where a pass of the mixed-radix form reads or writes (compile-time, so
// that the pass's loop is straight-line code whose loads the compiler
// issues together): a half of group memory, a plain row of the source or
// destination (rlx_fft_plain_src / _dst: an element as one 8-byte unit),
// frames of padded signals (below), or any other through the general
// helpers.
#define RLX_FFT_AT_GROUP 0u
#define RLX_FFT_AT_PLAIN 1u
#define RLX_FFT_AT_GENERAL 2u
#define RLX_FFT_AT_FRAMES 3u

// A source of frames of padded signals read in place (rlx.signal's centre
// padding: src_valid != 0) as complex pairs of adjacent floats (rfft's
// packed samples), at even float offsets, with at most a window
// (pre_mul 2): a frame wholly inside its signal reads its pairs as 8-byte
// units, one that reaches into the padding the general helper.
RLX_INLINE bool rlx_fft_frames_src(RLX_CONSTANT FftParams *p) {
    return p->src_valid != 0u && p->src_rpb != 0u && p->load_mode == 0u && p->src_step == 2u && p->src_len >= p->n &&
           (p->pre_mul == 0u || p->pre_mul == 2u) &&
           ((p->src_offset | p->src_row | p->src_block | p->src_pad) & 1u) == 0u;
}

// Elements j + r m (r < R) of a butterfly: from a row of 8-byte pairs, or
// through the general load helper.
template <uint R>
RLX_INLINE rlx_cfv<R> rlx_fft_pairs_at(RLX_DEVICE const rlx_float2 *in, uint j, uint m) {
    rlx_cfv<R> x;
    RLX_UNROLL
    for (uint r = 0u; r < R; ++r) {
        const rlx_float2 v = in[j + r * m];
        x.v[r] = rlx_cf_make(v.x, v.y);
    }
    return x;
}
template <uint R>
RLX_INLINE rlx_cfv<R> rlx_fft_loads_at(RLX_DEVICE const float *src, RLX_DEVICE const float *pre,
                                       RLX_CONSTANT FftParams *p, uint row, uint j, uint m) {
    rlx_cfv<R> x;
    RLX_UNROLL
    for (uint r = 0u; r < R; ++r) x.v[r] = rlx_fft_load(src, pre, p, row, j + r * m);
    return x;
}

// One Stockham pass of fft_stage's butterflies (natural order in and out)
// of compile-time radix R over span `span`, rows side by side: butterfly
// j = jq span + k (k < span) of row lr reads elements j + r m (m = n / R)
// from group memory at `from`, twiddled, or (FROM, pass 0 of two or more:
// span 1, no twiddles) from the source, and writes j's outputs to
// (j - k) R + k + r span at `to`, or (TO, the last pass: span m, elements
// j + r m) to the destination. j's quotient and remainder by span step as
// the walk's do. Twiddle r of butterfly j is W^(r k tstride) whatever k:
// at k = 0 the table's element 0, exactly 1, so no branch guards it.
template <uint R, uint FROM, uint TO, typename G>
RLX_INLINE void rlx_fft_group_pass(RLX_DEVICE const float *src, RLX_DEVICE float *dst, RLX_DEVICE const float *tw,
                                   RLX_DEVICE const float *pre, RLX_DEVICE const float *post,
                                   RLX_CONSTANT FftParams *p, G sre, G sim, uint from, uint to, uint n, uint span,
                                   uint row0, uint rows_here, uint inv, uint tid, uint nt) {
    const uint m = n / R, tstride = n / (span * R), spans = m / span;
    const float scale = p->scale;
    // The frames' params in registers (RLX_FFT_AT_FRAMES; the compiler
    // would reload them after every store, which might alias them).
    const uint rpb = p->src_rpb, hop = p->src_row, pad = p->src_pad, pad_end = pad + p->src_valid;
    const uint64_t offset = p->src_offset, block = p->src_block;
    const bool window = p->pre_mul == 2u;
    rlx_fft_walk w = rlx_fft_walk_start(m, tid, nt);
    uint jq = w.at / span, k = w.at - jq * span;
    const uint step_q = w.step_at / span, step_k = w.step_at - step_q * span;
    while (w.row < rows_here) {
        const uint j = jq * span + k, base = w.row * n, row = row0 + w.row;
        rlx_cfv<R> x;
        if (FROM == RLX_FFT_AT_PLAIN) {
            x = rlx_fft_pairs_at<R>(rlx_fft_src_row(src, p, row), j, m);
        } else if (FROM == RLX_FFT_AT_FRAMES) {
            // Frame f of signal b starts at float f src_row of the padded
            // signal, src_pad floats before the signal's own.
            const uint b = row / rpb, f = row - b * rpb, lo = f * hop;
            if (lo >= pad && lo + 2u * n <= pad_end) {
                x = rlx_fft_pairs_at<R>(
                    (RLX_DEVICE const rlx_float2 *)(src + offset + (uint64_t)b * block + (lo - pad)), j, m);
                if (window) {   // its floats one at a time: the window's view may start at an odd float
                    RLX_UNROLL
                    for (uint r = 0u; r < R; ++r) {
                        const uint i = j + r * m;
                        x.v[r] = rlx_cf_make(x.v[r].re * pre[2u * i], x.v[r].im * pre[2u * i + 1u]);
                    }
                }
            } else {
                x = rlx_fft_loads_at<R>(src, pre, p, row, j, m);
            }
        } else if (FROM == RLX_FFT_AT_GENERAL) {
            x = rlx_fft_loads_at<R>(src, pre, p, row, j, m);
        } else {
            RLX_UNROLL
            for (uint r = 0u; r < R; ++r) {
                const uint at = from + base + j + r * m;
                x.v[r] = rlx_cf_make(sre[at], sim[at]);
            }
            RLX_UNROLL
            for (uint r = 1u; r < R; ++r) x.v[r] = rlx_cf_mul(x.v[r], rlx_fft_twiddle_pair(tw, r * k * tstride, inv));
        }
        const rlx_cfv<R> y = rlx_fft_dft_radix(x, inv);
        const uint out0 = (j - k) * R + k;
        if (TO == RLX_FFT_AT_PLAIN) {
            RLX_DEVICE rlx_float2 *out = rlx_fft_dst_row(dst, p, row);
            RLX_UNROLL
            for (uint r = 0u; r < R; ++r) out[out0 + r * span] = rlx_fft_scaled(y.v[r], scale);
        } else if (TO == RLX_FFT_AT_GENERAL) {
            RLX_UNROLL
            for (uint r = 0u; r < R; ++r) rlx_fft_store(dst, post, p, row, out0 + r * span, y.v[r]);
        } else {
            RLX_UNROLL
            for (uint r = 0u; r < R; ++r) {
                sre[to + base + out0 + r * span] = y.v[r].re;
                sim[to + base + out0 + r * span] = y.v[r].im;
            }
        }
        // w.at = jq span + k, stepped by step_at = step_q span + step_k.
        k += step_k, jq += step_q;
        if (k >= span) k -= span, ++jq;
        w.row += w.step_rows;
        if (jq >= spans) jq -= spans, ++w.row;
    }
}

// A pass of radix R reading `in` and writing `out` (RLX_FFT_AT_*; never
// both outside group memory: the first and last passes are two).
template <uint R, typename G>
RLX_INLINE void rlx_fft_mixed_pass(uint in, uint out, RLX_DEVICE const float *src, RLX_DEVICE float *dst,
                                   RLX_DEVICE const float *tw, RLX_DEVICE const float *pre,
                                   RLX_DEVICE const float *post, RLX_CONSTANT FftParams *p, G sre, G sim, uint from,
                                   uint to, uint n, uint span, uint row0, uint rows_here, uint inv, uint tid,
                                   uint nt) {
    if (in == RLX_FFT_AT_PLAIN) {
        rlx_fft_group_pass<R, RLX_FFT_AT_PLAIN, RLX_FFT_AT_GROUP>(src, dst, tw, pre, post, p, sre, sim, from, to, n,
                                                                  span, row0, rows_here, inv, tid, nt);
    } else if (in == RLX_FFT_AT_FRAMES) {
        rlx_fft_group_pass<R, RLX_FFT_AT_FRAMES, RLX_FFT_AT_GROUP>(src, dst, tw, pre, post, p, sre, sim, from, to, n,
                                                                   span, row0, rows_here, inv, tid, nt);
    } else if (in == RLX_FFT_AT_GENERAL) {
        rlx_fft_group_pass<R, RLX_FFT_AT_GENERAL, RLX_FFT_AT_GROUP>(src, dst, tw, pre, post, p, sre, sim, from, to, n,
                                                                    span, row0, rows_here, inv, tid, nt);
    } else if (out == RLX_FFT_AT_PLAIN) {
        rlx_fft_group_pass<R, RLX_FFT_AT_GROUP, RLX_FFT_AT_PLAIN>(src, dst, tw, pre, post, p, sre, sim, from, to, n,
                                                                  span, row0, rows_here, inv, tid, nt);
    } else if (out == RLX_FFT_AT_GENERAL) {
        rlx_fft_group_pass<R, RLX_FFT_AT_GROUP, RLX_FFT_AT_GENERAL>(src, dst, tw, pre, post, p, sre, sim, from, to, n,
                                                                    span, row0, rows_here, inv, tid, nt);
    } else {
        rlx_fft_group_pass<R, RLX_FFT_AT_GROUP, RLX_FFT_AT_GROUP>(src, dst, tw, pre, post, p, sre, sim, from, to, n,
                                                                  span, row0, rows_here, inv, tid, nt);
    }
}

// The mixed-radix form (radix == 1, fft_mixed): N = 2^a 3^b 5^c up to
// `half` points of a group's rows (sre and sim hold two halves each),
// p->passes passes whose radices (2, 3, 4, 5, 8) sit 4 bits each in
// p->span, first pass lowest: rlx_fft_group_pass, from one half of the memory to
// the other. With two passes or more the first reads the
// source and, unless the store is rfft's unpacking (which reads the
// transform out of order), the last writes the destination: the group
// has read all its source before it writes any of its destination, as
// when it staged the rows first, so a transform in place stays correct.
// Every pass ends in a barrier (uniform: the pass count is the group's).
// Thread tid of nt strides the loops (Metal's ids are the kernel's
// parameters, so a helper takes them as arguments).
template <typename G>
RLX_INLINE void rlx_fft_mixed_group(RLX_DEVICE const float *src, RLX_DEVICE float *dst, RLX_DEVICE const float *tw,
                                    RLX_DEVICE const float *pre, RLX_DEVICE const float *post,
                                    RLX_CONSTANT FftParams *p, G sre, G sim, uint half, uint row0,
                                    uint rows_here, uint tid, uint nt) {
    const uint n = p->n, inv = p->inverse, passes = p->passes;
    const bool unpack = p->store_mode == 2u || p->store_mode == 3u, direct = passes >= 2u;
    if (!direct) {
        for (rlx_fft_walk w = rlx_fft_walk_start(n, tid, nt); w.row < rows_here; w = rlx_fft_walk_next(w)) {
            const rlx_cf v = rlx_fft_load(src, pre, p, row0 + w.row, w.at);
            sre[w.row * n + w.at] = v.re;
            sim[w.row * n + w.at] = v.im;
        }
        rlx_barrier();
    }
    // Where the first pass reads and the last writes: the source and the
    // destination themselves with two passes or more (not rfft's unpacking,
    // which reads the transform out of order), else group memory.
    const uint src_at = !direct                 ? RLX_FFT_AT_GROUP
                        : rlx_fft_plain_src(p)  ? RLX_FFT_AT_PLAIN
                        : rlx_fft_frames_src(p) ? RLX_FFT_AT_FRAMES
                                                : RLX_FFT_AT_GENERAL;
    const uint dst_at = !direct || unpack ? RLX_FFT_AT_GROUP
                        : rlx_fft_plain_dst(p) ? RLX_FFT_AT_PLAIN : RLX_FFT_AT_GENERAL;
    uint cur = 0u, span = 1u;
    for (uint q = 0u; q < passes; ++q) {
        const uint radix = (p->span >> (4u * q)) & 15u, from = cur * half, to = (cur ^ 1u) * half;
        const uint in = q == 0u ? src_at : RLX_FFT_AT_GROUP, out = q + 1u == passes ? dst_at : RLX_FFT_AT_GROUP;
        switch (radix) {   // uniform: the radix is the pass's
        case 2u:
            rlx_fft_mixed_pass<2u>(in, out, src, dst, tw, pre, post, p, sre, sim, from, to, n, span, row0, rows_here,
                                   inv, tid, nt);
            break;
        case 3u:
            rlx_fft_mixed_pass<3u>(in, out, src, dst, tw, pre, post, p, sre, sim, from, to, n, span, row0, rows_here,
                                   inv, tid, nt);
            break;
        case 4u:
            rlx_fft_mixed_pass<4u>(in, out, src, dst, tw, pre, post, p, sre, sim, from, to, n, span, row0, rows_here,
                                   inv, tid, nt);
            break;
        case 8u:
            rlx_fft_mixed_pass<8u>(in, out, src, dst, tw, pre, post, p, sre, sim, from, to, n, span, row0, rows_here,
                                   inv, tid, nt);
            break;
        default:
            rlx_fft_mixed_pass<5u>(in, out, src, dst, tw, pre, post, p, sre, sim, from, to, n, span, row0, rows_here,
                                   inv, tid, nt);
            break;
        }
        rlx_barrier();
        cur ^= 1u;
        span *= radix;
    }
    if (unpack) {
        rlx_fft_store_rfft(dst, post, p, sre, sim, cur * half, row0, rows_here, n, 0u, tid, nt);
    } else if (!direct) {
        for (rlx_fft_walk w = rlx_fft_walk_start(n, tid, nt); w.row < rows_here; w = rlx_fft_walk_next(w)) {
            const uint at = cur * half + w.row * n + w.at;
            rlx_fft_store(dst, post, p, row0 + w.row, w.at, rlx_cf_make(sre[at], sim[at]));
        }
    }
}

#include "fft_gpu_forms.h"

// On CUDA, the groups of 256 threads an SM fft_shared's registers must
// allow (__launch_bounds__): a compile-time switch, so that
// benchmarks/gpu/fft_shared_bench.py and kernel_defines.py can time the
// choices against each other in one process (benchmarks/README.md, "H200:
// FFT").
#ifndef RLX_FFT_MIN_GROUPS
#define RLX_FFT_MIN_GROUPS 4
#endif
// The slot layouts (rlx_fft_pair_slot) whose register form a target
// compiles: CUDA's padded one, Metal's XOR (its 32 KB of group memory
// hold no padding at N = 4096), both on the CPU, where
// tests/c/group_threads.cpp runs them with real threads. A layout not
// compiled runs the digit passes. Group memory holds the padded layout
// where it is compiled.
#ifndef RLX_FFT_PADDED_SLOTS
#ifdef RLX_TARGET_METAL
#define RLX_FFT_PADDED_SLOTS 0
#else
#define RLX_FFT_PADDED_SLOTS 1
#endif
#endif
#ifndef RLX_FFT_SWIZZLED_SLOTS
#ifdef RLX_TARGET_CUDA
#define RLX_FFT_SWIZZLED_SLOTS 0
#else
#define RLX_FFT_SWIZZLED_SLOTS 1
#endif
#endif
#if RLX_FFT_PADDED_SLOTS
#define RLX_FFT_SHARED_PAIRS (RLX_FFT_SHARED_MAX + RLX_FFT_SHARED_MAX / 16u)
#else
#define RLX_FFT_SHARED_PAIRS RLX_FFT_SHARED_MAX
#endif

#ifdef RLX_TARGET_CUDA
#define RLX_FFT_SHARED_BOUNDS __launch_bounds__(256, RLX_FFT_MIN_GROUPS)
#else
#define RLX_FFT_SHARED_BOUNDS
#endif

#ifdef RLX_TARGET_CPU
#include "fft_cpu.h"
#endif

// The rows group g of fft_shared or fft_mixed takes: group_rows of them
// from row0 (fewer at the end, or at the end of a block of group_block
// rows), none past the last row.
struct rlx_fft_rows { uint row0, here; };
RLX_INLINE rlx_fft_rows rlx_fft_group_rows(RLX_CONSTANT FftParams *p, uint g) {
    const uint gr = p->group_rows, gb = p->group_block;
    uint row0 = g * gr, block_end = p->rows;
    if (gb != 0u) {
        const uint per = (gb + gr - 1u) / gr, start = (g / per) * gb;
        row0 = start + (g % per) * gr;
        block_end = start + gb < p->rows ? start + gb : p->rows;
    }
    rlx_fft_rows r;
    r.row0 = row0;
    r.here = row0 >= block_end ? 0u : block_end - row0 < gr ? block_end - row0 : gr;
    return r;
}

template <typename T>
RLX_KERNEL RLX_FFT_SHARED_BOUNDS fft_shared(RLX_BUF(RLX_DEVICE const T *, src, 0), RLX_BUF(RLX_DEVICE T *, dst, 1),
                      RLX_BUF(RLX_DEVICE const T *, tw, 2), RLX_BUF(RLX_DEVICE const T *, pre, 3),
                      RLX_BUF(RLX_DEVICE const T *, post, 4), RLX_PARAMS(FftParams, p, 5) RLX_IDS) {
    // One array of pairs: the passes move an element as one 8-byte unit.
    RLX_SHARED(rlx_float2, spairs, RLX_FFT_SHARED_PAIRS);
    // group_rows rows per group (group_rows * n <= RLX_FFT_SHARED_MAX): short
    // rows share a group so that it has work for all its threads. The test is
    // uniform over the group, so the return skips no barrier of others.
    const uint gr = p->group_rows;
    const rlx_fft_rows rs = rlx_fft_group_rows(p, rlx_group_id.x);
    if (rs.here == 0u) return;
    const uint row0 = rs.row0, rows_here = rs.here, bits = p->span, swz = p->swizzle;
#ifdef RLX_TARGET_CPU
    // The lowering's CPU grid: rows across vector lanes (fft_cpu.h), the only
    // place the mixed-radix form (radix 1) comes to this kernel (GPUs: fft_mixed).
    if (gr <= RLX_FFT_CPU_ROWS && !swz) {
        (void)spairs, (void)bits;
        rlx_fft_shared_rows(src, dst, tw, pre, post, p, row0, rows_here);
        return;
    }
#endif
    const uint tid = rlx_local_id.x, nt = rlx_group_size.x;
    if (rlx_fft_register_form_applies(bits, swz, gr, nt)) {
#if RLX_FFT_PADDED_SLOTS
        if (swz == 2u) {
            rlx_fft_register_form<2u>(bits, src, dst, tw, pre, post, p, spairs, row0, rows_here, tid, nt);
            return;
        }
#endif
#if RLX_FFT_SWIZZLED_SLOTS
        if (swz == 1u) {
            rlx_fft_register_form<1u>(bits, src, dst, tw, pre, post, p, spairs, row0, rows_here, tid, nt);
            return;
        }
#endif
    }
    rlx_fft_digit_passes(src, dst, tw, pre, post, p, spairs, row0, rows_here, bits, swz, tid, nt);
}
RLX_INSTANTIATE(fft_shared, float, fft_shared_c64)

// fft_mixed: the mixed-radix form (rlx_fft_mixed_group) on GPUs, in a
// kernel of its own: its registers and code apart from fft_shared's
// power-of-two forms (3-6% faster than the same form inside fft_shared on
// an H100, benchmarks/README.md "H100, session 36"), two arrays of two
// 2048-point halves (32 KB, no padding: Metal's limit), at four groups an
// SM (the register budget of 64 that keeps it from spilling; six and
// eight spilled and ran slower, three lost 20% in session 35). The CPU's
// fft_shared form runs these lengths itself (fft_cpu.h).
#ifndef RLX_FFT_MIXED_MAX
#define RLX_FFT_MIXED_MAX 2048u   // rlx/lowering/fft.py MIXED_SHARED_MAX
#endif
#ifndef RLX_FFT_MIXED_MIN_GROUPS
#define RLX_FFT_MIXED_MIN_GROUPS 4
#endif
#ifdef RLX_TARGET_CUDA
#define RLX_FFT_MIXED_BOUNDS __launch_bounds__(256, RLX_FFT_MIXED_MIN_GROUPS)
#else
#define RLX_FFT_MIXED_BOUNDS
#endif

template <typename T>
RLX_KERNEL RLX_FFT_MIXED_BOUNDS fft_mixed(RLX_BUF(RLX_DEVICE const T *, src, 0), RLX_BUF(RLX_DEVICE T *, dst, 1),
                      RLX_BUF(RLX_DEVICE const T *, tw, 2), RLX_BUF(RLX_DEVICE const T *, pre, 3),
                      RLX_BUF(RLX_DEVICE const T *, post, 4), RLX_PARAMS(FftParams, p, 5) RLX_IDS) {
    RLX_SHARED(float, sre, 2u * RLX_FFT_MIXED_MAX);
    RLX_SHARED(float, sim, 2u * RLX_FFT_MIXED_MAX);
    const rlx_fft_rows rs = rlx_fft_group_rows(p, rlx_group_id.x);
    if (rs.here == 0u) return;   // uniform over the group
    rlx_fft_mixed_group(src, dst, tw, pre, post, p, sre, sim, RLX_FFT_MIXED_MAX, rs.row0, rs.here, rlx_local_id.x,
                        rlx_group_size.x);
}
RLX_INSTANTIATE(fft_mixed, float, fft_mixed_c64)

// One Stockham pass (radix R, span P = product of the earlier radices):
// butterfly j of a row reads elements j + r n / R, twiddles them by
// W_{PR}^{r k} (k = j mod P), and writes output q to (j - k) R + k + q P.
// After the last pass the row is the transform in natural order.
template <typename T>
RLX_KERNEL fft_stage(RLX_BUF(RLX_DEVICE const T *, src, 0), RLX_BUF(RLX_DEVICE T *, dst, 1),
                     RLX_BUF(RLX_DEVICE const T *, tw, 2), RLX_BUF(RLX_DEVICE const T *, pre, 3),
                     RLX_BUF(RLX_DEVICE const T *, post, 4), RLX_PARAMS(FftParams, p, 5) RLX_IDS) {
    const uint n = p->n, radix = p->radix, span = p->span, inv = p->inverse;
    const uint m = n / radix, tstride = n / (span * radix);
    RLX_FOR_RANGE(t, (uint64_t)p->rows * m) {
        const uint row = rlx_index_div(t, m), j = (uint)(t - (uint64_t)row * m);
        const uint k = j % span;
        rlx_fft5 x;   // all five slots, unrolled, the radix a guard (registers: rlx_fft_mixed_group)
        RLX_UNROLL
        for (uint r = 0u; r < 5u; ++r) {
            x.v[r] = rlx_cf_make(0.0f, 0.0f);
            if (r < radix) {
                rlx_cf v = rlx_fft_load(src, pre, p, row, j + r * m);
                if (r > 0u && k > 0u) v = rlx_cf_mul(v, rlx_fft_twiddle(tw, r * k * tstride, inv));
                x.v[r] = v;
            }
        }
        const rlx_fft5 y = rlx_fft_dft(x, radix, inv);
        const uint out0 = (j - k) * radix + k;
        RLX_UNROLL
        for (uint q = 0u; q < 5u; ++q) {
            if (q < radix) rlx_fft_store(dst, post, p, row, out0 + q * span, y.v[q]);
        }
    }
}
RLX_INSTANTIATE(fft_stage, float, fft_stage_c64)

struct ComplexPackParams {
    uint n, re_offset, im_offset, dst_offset;
};

// dst[i] = re[i] + i im[i] (dst in float pairs; offsets in floats).
template <typename T>
RLX_KERNEL complex_pack(RLX_BUF(RLX_DEVICE const T *, re, 0), RLX_BUF(RLX_DEVICE const T *, im, 1),
                        RLX_BUF(RLX_DEVICE T *, dst, 2), RLX_PARAMS(ComplexPackParams, p, 3) RLX_IDS) {
    RLX_FOR_RANGE(i, p->n) {
        dst[p->dst_offset + 2u * i] = re[p->re_offset + i];
        dst[p->dst_offset + 2u * i + 1u] = im[p->im_offset + i];
    }
}
RLX_INSTANTIATE(complex_pack, float, complex_pack_c64)

// rfft of an even length n from the length-m (m = n / 2) transform Z of the
// packed signal z[j] = x[2j] + i x[2j+1] (half the work of a full-length
// complex transform): E[k] = (Z[k] + conj Z[m-k]) / 2 and O[k] = -i (Z[k] -
// conj Z[m-k]) / 2 (indices mod m) are the transforms of the even and odd
// samples, and X[k] = E[k] + exp(-2 pi i k / n) O[k] for k = 0..m, scaled.
// z rows are dense (2 m floats); tw is the length-n twiddle table.
struct RfftPostParams {
    uint m, rows, dst_offset, dst_row;   // floats
    float scale;
    uint pad0, pad1, pad2;
};

template <typename T>
RLX_KERNEL rfft_post(RLX_BUF(RLX_DEVICE const T *, z, 0), RLX_BUF(RLX_DEVICE T *, dst, 1),
                     RLX_BUF(RLX_DEVICE const T *, tw, 2), RLX_PARAMS(RfftPostParams, p, 3) RLX_IDS) {
    const uint m = p->m, bins = m + 1u;
    RLX_FOR_RANGE(i, p->rows * bins) {
        const uint row = rlx_index_div(i, bins), k = (uint)(i - (uint64_t)row * bins);
        RLX_DEVICE const T *zr = z + (uint64_t)row * 2u * m;
        const uint a = k == m ? 0u : k, b = k == 0u ? 0u : m - k;   // k mod m, (m - k) mod m (k <= m)
        const rlx_cf za = rlx_cf_make(zr[2u * a], zr[2u * a + 1u]), zb = rlx_cf_make(zr[2u * b], -zr[2u * b + 1u]);
        const rlx_cf even = rlx_cf_scale(rlx_cf_add(za, zb), 0.5f);
        const rlx_cf odd = rlx_cf_turn(rlx_cf_scale(rlx_cf_sub(za, zb), 0.5f), -1.0f);
        const rlx_cf x = rlx_cf_add(even, rlx_cf_mul(rlx_fft_twiddle(tw, k, 0u), odd));
        const uint64_t at = (uint64_t)p->dst_offset + (uint64_t)row * p->dst_row + 2u * k;
        dst[at] = x.re * p->scale;
        dst[at + 1u] = x.im * p->scale;
    }
}
RLX_INSTANTIATE(rfft_post, float, rfft_post_c64)

// irfft of an even length n through a length-m (m = n / 2) inverse complex
// transform: with E[k] = (X[k] + conj X[m-k]) / 2 and O[k] = (X[k] - conj
// X[m-k]) exp(+2 pi i k / n) / 2, the transform of the even and odd samples,
// Z[k] = E[k] + i O[k] is the spectrum of z[j] = x[2j] + i x[2j+1], so the
// length-m inverse of Z, stored as complex pairs, is x in order (its
// scale, twice the full-length one, is the last pass's). X is read as the
// half-spectrum load does: bins past src_avail are zeros, and the
// imaginary parts of bins 0 and m are dropped (numpy's irfft). z rows are
// dense (2 m floats); tw is the length-n twiddle table.
struct IrfftPreParams {
    uint m, rows, src_offset, src_row, src_step, src_avail, pad0, pad1;   // floats
};

RLX_INLINE rlx_cf rlx_irfft_bin(RLX_DEVICE const float *x, RLX_CONSTANT IrfftPreParams *p, uint row, uint k) {
    if (k >= p->src_avail) return rlx_cf_make(0.0f, 0.0f);
    const uint64_t at = (uint64_t)p->src_offset + (uint64_t)row * p->src_row + (uint64_t)k * p->src_step;
    return rlx_cf_make(x[at], (k == 0u || k == p->m) ? 0.0f : x[at + 1u]);
}

template <typename T>
RLX_KERNEL irfft_pre(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE T *, z, 1),
                     RLX_BUF(RLX_DEVICE const T *, tw, 2), RLX_PARAMS(IrfftPreParams, p, 3) RLX_IDS) {
    const uint m = p->m;
    RLX_FOR_RANGE(i, (uint64_t)p->rows * m) {
        const uint row = rlx_index_div(i, m), k = (uint)(i - (uint64_t)row * m);
        const rlx_cf a = rlx_irfft_bin(x, p, row, k), b0 = rlx_irfft_bin(x, p, row, m - k);
        const rlx_cf b = rlx_cf_make(b0.re, -b0.im);   // conj X[m - k]
        const rlx_cf even = rlx_cf_scale(rlx_cf_add(a, b), 0.5f);
        const rlx_cf odd = rlx_cf_mul(rlx_cf_scale(rlx_cf_sub(a, b), 0.5f), rlx_fft_twiddle(tw, k, 1u));
        const rlx_cf v = rlx_cf_add(even, rlx_cf_turn(odd, 1.0f));   // E + i O
        z[i * 2u] = v.re;
        z[i * 2u + 1u] = v.im;
    }
}
RLX_INSTANTIATE(irfft_pre, float, irfft_pre_c64)
