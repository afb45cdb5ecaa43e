// fft_shared on the CPU (included by fft.h under RLX_TARGET_CPU only): the
// host runs a group on one thread, so a group's rows go one per vector lane
// (RLX_FFT_LANES rows a chunk, up to RLX_FFT_CPU_ROWS a group) and every
// butterfly is a few vector instructions with no shuffles. What keeps it
// fast (issue 19's CPU target, benchmarks/README.md "CPU: FFT"):
// - rows in and out through 8x8 register transposes of eight complex
//   values of eight rows (complex rows of unit step, the common case),
//   instead of one scalar load per element and lane, whose lane-by-lane
//   vector builds stalled on store forwarding;
// - power-of-two lengths as radix-8 passes (three radix-2 stages in
//   registers) after at most one radix-2 or radix-4 pass: a third fewer
//   sweeps over the rows' buffer than radix 4 (16 rows of 4096 points are
//   512 KB, in L2, so each sweep costs bandwidth); in the mixed-radix
//   form the 3s two at a time as radix 9, for the same reason;
// - AVX-512 builds 16 lanes a vector, others 8 (a 16-lane vector there is
//   two registers' worth of work with no gain);
// - the rfft and irfft half-length forms (rfft_post / irfft_pre) fused into
//   the store and load: store_mode 2 unpacks the half-length transform into
//   the N / 2 + 1 bins, load_mode 3 builds the half-length spectrum (the
//   length-2n twiddles ride in the post / pre bindings);
// - odd lengths' rfft, irfft and transforms of real rows two rows a
//   transform (rlx_fft_pairs: load and store modes 4-6);
// - powers of two above the shared limit as a four-step of two dispatches
//   (rlx/lowering/fft.py _four_step): rows in blocks (src_rpb / dst_rpb),
//   the column transforms' lanes adjacent complex values, so their loads and
//   stores are whole vectors, and post_mul 2's per-lane twiddle table.
// Only the CPU lowering asks for the modes and blocks.
#define RLX_FFT_CPU_ROWS 16u   // the lowering's rows per CPU group (CPU_ROWS in rlx/lowering/fft.py)
#define RLX_FFT_STORE_RFFT 2u  // store_mode: Z of length n -> bins 0..n of the length-2n real transform
#define RLX_FFT_STORE_RFFT_POWER 3u  // the same bins' power |X|^2, one float each
#define RLX_FFT_LOAD_IRFFT 3u  // load_mode: bins 0..n of a length-2n spectrum -> Z of length n
// Real rows two to a transform (odd n: rlx_fft_pairs below). The params'
// rows are pairs, their strides a real row's, `limit` the real rows.
#define RLX_FFT_LOAD_REAL_PAIRS 4u   // load_mode: real rows 2r and 2r + 1 as row r's real and imaginary parts
#define RLX_FFT_LOAD_HALF_PAIRS 5u   // load_mode: the half spectra of rows 2r and 2r + 1 (irfft)
#define RLX_FFT_STORE_RFFT_PAIRS 5u  // store_mode: rfft's bins of rows 2r and 2r + 1
#define RLX_FFT_STORE_REAL_PAIRS 6u  // store_mode: irfft's samples of rows 2r and 2r + 1

#if defined(RLX_CPU_AVX512)
#define RLX_FFT_LANES 16u
typedef float rlx_fft_v __attribute__((vector_size(64)));
#else
#define RLX_FFT_LANES 8u
typedef float rlx_fft_v __attribute__((vector_size(32)));
#endif
typedef float rlx_fft_v8 __attribute__((vector_size(32)));
// Two-operand shuffles of 8- and 16-float vectors (the result as wide as the
// operands): clang and GCC 12+ take the indices as arguments; older GCC has
// only __builtin_shuffle, with an index vector of the operands' width.
#if defined(__clang__) || !defined(__GNUC__) || __GNUC__ >= 12
#define RLX_FFT_SHUFFLE8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#define RLX_FFT_SHUFFLE16(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
typedef int rlx_fft_i8 __attribute__((vector_size(32)));
typedef int rlx_fft_i16 __attribute__((vector_size(64)));
#define RLX_FFT_SHUFFLE8(a, b, ...) __builtin_shuffle(a, b, (rlx_fft_i8){__VA_ARGS__})
#define RLX_FFT_SHUFFLE16(a, b, ...) __builtin_shuffle(a, b, (rlx_fft_i16){__VA_ARGS__})
#endif
// The butterflies' loops over a pass's R values unrolled, so the values stay
// in registers (rolled, the pass took twice the time).
#if defined(__clang__)
#define RLX_FFT_UNROLL _Pragma("unroll")
#else
#define RLX_FFT_UNROLL _Pragma("GCC unroll 16")
#endif

// v * w for a vector of complex lanes (re, im) and one complex scalar w.
RLX_INLINE void rlx_fft_vmul(rlx_fft_v &re, rlx_fft_v &im, rlx_cf w) {
    const rlx_fft_v r = re * w.re - im * w.im;
    im = re * w.im + im * w.re;
    re = r;
}
// The same with a factor a lane (wr, wi).
RLX_INLINE void rlx_fft_vmul(rlx_fft_v &re, rlx_fft_v &im, rlx_fft_v wr, rlx_fft_v wi) {
    const rlx_fft_v r = re * wr - im * wi;
    im = re * wi + im * wr;
    re = r;
}

// rlx_fft_dft on lane vectors, radix 2, 3, 4 or 5, in place (radix 9: rlx_fft_dft9_v).
RLX_INLINE void rlx_fft_dft_v(rlx_fft_v *xr, rlx_fft_v *xi, uint radix, uint inverse) {
    const float sg = inverse ? 1.0f : -1.0f;
    if (radix == 2u) {
        const rlx_fft_v ar = xr[0] + xr[1], ai = xi[0] + xi[1];
        xr[1] = xr[0] - xr[1]; xi[1] = xi[0] - xi[1];
        xr[0] = ar; xi[0] = ai;
    } else if (radix == 4u) {
        const rlx_fft_v ar = xr[0] + xr[2], ai = xi[0] + xi[2], br = xr[0] - xr[2], bi = xi[0] - xi[2];
        const rlx_fft_v cr = xr[1] + xr[3], ci = xi[1] + xi[3];
        const rlx_fft_v dr = -sg * (xi[1] - xi[3]), di = sg * (xr[1] - xr[3]);   // i sg (x1 - x3)
        xr[0] = ar + cr; xi[0] = ai + ci;
        xr[2] = ar - cr; xi[2] = ai - ci;
        xr[1] = br + dr; xi[1] = bi + di;
        xr[3] = br - dr; xi[3] = bi - di;
    } else if (radix == 3u) {
        const rlx_fft_v t1r = xr[1] + xr[2], t1i = xi[1] + xi[2], t2r = xr[1] - xr[2], t2i = xi[1] - xi[2];
        const rlx_fft_v mr = xr[0] - 0.5f * t1r, mi = xi[0] - 0.5f * t1i;
        const float c = 0.86602540378443865f;
        const rlx_fft_v rr = -sg * c * t2i, ri = sg * c * t2r;
        xr[0] = xr[0] + t1r; xi[0] = xi[0] + t1i;
        xr[1] = mr + rr; xi[1] = mi + ri;
        xr[2] = mr - rr; xi[2] = mi - ri;
    } else {
        const float c1 = 0.30901699437494742f, c2 = -0.80901699437494742f;
        const float s1 = 0.95105651629515357f, s2 = 0.58778525229247313f;
        const rlx_fft_v t1r = xr[1] + xr[4], t1i = xi[1] + xi[4], t2r = xr[2] + xr[3], t2i = xi[2] + xi[3];
        const rlx_fft_v t3r = xr[1] - xr[4], t3i = xi[1] - xi[4], t4r = xr[2] - xr[3], t4i = xi[2] - xi[3];
        const rlx_fft_v m1r = xr[0] + (t1r * c1 + t2r * c2), m1i = xi[0] + (t1i * c1 + t2i * c2);
        const rlx_fft_v m2r = xr[0] + (t1r * c2 + t2r * c1), m2i = xi[0] + (t1i * c2 + t2i * c1);
        const rlx_fft_v u1r = t3r * s1 + t4r * s2, u1i = t3i * s1 + t4i * s2;   // then times i sg
        const rlx_fft_v u2r = t3r * s2 - t4r * s1, u2i = t3i * s2 - t4i * s1;
        const rlx_fft_v n1r = -sg * u1i, n1i = sg * u1r, n2r = -sg * u2i, n2i = sg * u2r;
        xr[0] = xr[0] + (t1r + t2r); xi[0] = xi[0] + (t1i + t2i);
        xr[1] = m1r + n1r; xi[1] = m1i + n1i;
        xr[4] = m1r - n1r; xi[4] = m1i - n1i;
        xr[2] = m2r + n2r; xi[2] = m2i + n2i;
        xr[3] = m2r - n2r; xi[3] = m2i - n2i;
    }
}

// Radix 9 as 3 x 3 in registers (the CPU's passes pair their 3s: a sweep
// over the row fewer for every two): x[n2 + 3 n1] -> a radix-3 DFT over n1
// for each n2, times W_9^(n2 k1), then one over n2 gives X[k1 + 3 k2].
RLX_INLINE void rlx_fft_dft9_v(rlx_fft_v *xr, rlx_fft_v *xi, uint inverse) {
    const float sg = inverse ? 1.0f : -1.0f;
    // cos and sin of 2 pi m / 9 for m = 1, 2, 4 (n2 k1 takes 0, 1, 2, 4)
    const float wc[5] = {1.0f, 0.76604444311897804f, 0.17364817766693035f, 0.0f, -0.93969262078590838f};
    const float ws[5] = {0.0f, 0.64278760968653933f, 0.98480775301220806f, 0.0f, 0.34202014332566873f};
    rlx_fft_v yr[9], yi[9];
    for (uint n2 = 0u; n2 < 3u; ++n2) {
        rlx_fft_v tr[3] = {xr[n2], xr[n2 + 3u], xr[n2 + 6u]}, ti[3] = {xi[n2], xi[n2 + 3u], xi[n2 + 6u]};
        rlx_fft_dft_v(tr, ti, 3u, inverse);
        for (uint k1 = 0u; k1 < 3u; ++k1) {
            yr[3u * n2 + k1] = tr[k1], yi[3u * n2 + k1] = ti[k1];
            if (n2 * k1 != 0u) rlx_fft_vmul(yr[3u * n2 + k1], yi[3u * n2 + k1],
                                            rlx_cf_make(wc[n2 * k1], sg * ws[n2 * k1]));
        }
    }
    for (uint k1 = 0u; k1 < 3u; ++k1) {
        rlx_fft_v tr[3] = {yr[k1], yr[3u + k1], yr[6u + k1]}, ti[3] = {yi[k1], yi[3u + k1], yi[6u + k1]};
        rlx_fft_dft_v(tr, ti, 3u, inverse);
        for (uint k2 = 0u; k2 < 3u; ++k2) xr[k1 + 3u * k2] = tr[k2], xi[k1 + 3u * k2] = ti[k2];
    }
}

// In-place 8x8 transpose: afterwards r[c] lane l holds what r[l] lane c did.
// Each round interleaves r[i] with r[i + 4], which rotates the six index
// bits (vector, lane) by one; three rounds swap them.
RLX_INLINE void rlx_fft_t8(rlx_fft_v8 *r) {
    for (int s = 0; s < 3; ++s) {
        rlx_fft_v8 t[8];
        for (int i = 0; i < 4; ++i) {
            t[2 * i] = RLX_FFT_SHUFFLE8(r[i], r[i + 4], 0, 8, 1, 9, 2, 10, 3, 11);
            t[2 * i + 1] = RLX_FFT_SHUFFLE8(r[i], r[i + 4], 4, 12, 5, 13, 6, 14, 7, 15);
        }
        for (int i = 0; i < 8; ++i) r[i] = t[i];
    }
}

// Radix-2 DIT stages s .. s + log2 R - 1 of a bit-reversed power-of-two
// row on the R values x[t] = slot b0 + k + t h (h = 2^s, k < h), in
// registers. Stage j pairs t and t + 2^j (bit j of t clear) with the
// twiddle W_M^(k + (t mod 2^j) h), M = 2^(j+1) h, which is
// tw[(k + (t mod 2^j) h) n / M]: one exact table entry each.
template <uint R>
RLX_INLINE void rlx_fft_pow2_block(rlx_fft_v *xr, rlx_fft_v *xi, const float *tw, uint n, uint s, uint k, uint inv) {
    const uint h = 1u << s;
    RLX_FFT_UNROLL for (uint j = 0u, half = 1u; half < R; ++j, half *= 2u) {
        const uint scale = n >> (s + j + 1u);
        RLX_FFT_UNROLL for (uint t = 0u; t < R; ++t) {
            if (t & half) continue;
            const uint u = t & (half - 1u);
            if (k + u > 0u) rlx_fft_vmul(xr[t + half], xi[t + half], rlx_fft_twiddle(tw, (k + u * h) * scale, inv));
            const rlx_fft_v ar = xr[t] + xr[t + half], ai = xi[t] + xi[t + half];
            xr[t + half] = xr[t] - xr[t + half];
            xi[t + half] = xi[t] - xi[t + half];
            xr[t] = ar;
            xi[t] = ai;
        }
    }
}

// One pass of rlx_fft_pow2_block over the row: log2 R stages a sweep.
template <uint R>
static inline void rlx_fft_pow2_pass(rlx_fft_v *re, rlx_fft_v *im, const float *tw, uint n, uint s, uint inv) {
    const uint h = 1u << s;
    for (uint b = 0u; b < n; b += R * h) {
        for (uint k = 0u; k < h; ++k) {
            rlx_fft_v xr[R], xi[R];
            RLX_FFT_UNROLL for (uint t = 0u; t < R; ++t) {
                xr[t] = re[b + k + t * h];
                xi[t] = im[b + k + t * h];
            }
            rlx_fft_pow2_block<R>(xr, xi, tw, n, s, k, inv);
            RLX_FFT_UNROLL for (uint t = 0u; t < R; ++t) {
                re[b + k + t * h] = xr[t];
                im[b + k + t * h] = xi[t];
            }
        }
    }
}

// Bit reversal of i < 2^bits.
RLX_INLINE uint rlx_fft_bitrev(uint i, uint bits) {
    uint r = 0u;
    for (uint b = 0u; b < bits; ++b) r |= ((i >> b) & 1u) << (bits - 1u - b);
    return r;
}

// Rows in and out through the transpose: elements i .. i + 7 of eight rows
// (rowp[0..7], complex pairs of unit step) are 16 loads of 32 bytes and
// two transposes away from eight-lane vectors of re and im.
RLX_INLINE void rlx_fft_load8x8(const float *const *rowp, uint i, rlx_fft_v8 *re8, rlx_fft_v8 *im8) {
    rlx_fft_v8 t[2][8];
    for (uint l = 0u; l < 8u; ++l) {
        memcpy(&t[0][l], rowp[l] + 2u * i, sizeof(rlx_fft_v8));
        memcpy(&t[1][l], rowp[l] + 2u * i + 8u, sizeof(rlx_fft_v8));
    }
    rlx_fft_t8(t[0]);
    rlx_fft_t8(t[1]);
    for (uint q = 0u; q < 8u; ++q) {
        re8[q] = t[q >> 2u][2u * (q & 3u)];
        im8[q] = t[q >> 2u][2u * (q & 3u) + 1u];
    }
}

// Elements i .. i + 7 of every lane's row (rows past the chunk repeat a
// real one) as lane vectors re8[q], im8[q]. Loads, unlike stores (below),
// take both halves of the lanes at once: whole-vector writes to the slots
// measured faster than two half writes, and sixteen read streams do not
// stall as sixteen write streams do.
RLX_INLINE void rlx_fft_load_block(const float *const *rowp, uint i, rlx_fft_v *re8, rlx_fft_v *im8) {
    rlx_fft_v8 r8[RLX_FFT_LANES / 8u][8], i8[RLX_FFT_LANES / 8u][8];
    for (uint h = 0u; h < RLX_FFT_LANES / 8u; ++h) rlx_fft_load8x8(rowp + 8u * h, i, r8[h], i8[h]);
    for (uint q = 0u; q < 8u; ++q) {   // the halves side by side
        for (uint h = 0u; h < RLX_FFT_LANES / 8u; ++h) {
            memcpy((float *)&re8[q] + 8u * h, &r8[h][q], sizeof(rlx_fft_v8));
            memcpy((float *)&im8[q] + 8u * h, &i8[h][q], sizeof(rlx_fft_v8));
        }
    }
}

// Elements 0 .. count - 1 of the chunk's rows into slots re[i], im[i], or
// at the bit reversal of i (bits > 0).
static inline void rlx_fft_load_rows(const float *const *rowp, uint count, uint bits, rlx_fft_v *re,
                                     rlx_fft_v *im) {
    uint i = 0u;
    for (; i + 8u <= count; i += 8u) {
        rlx_fft_v r8[8], i8[8];
        rlx_fft_load_block(rowp, i, r8, i8);
        for (uint q = 0u; q < 8u; ++q) {
            const uint at = bits ? rlx_fft_bitrev(i + q, bits) : i + q;
            re[at] = r8[q];
            im[at] = i8[q];
        }
    }
    for (; i < count; ++i) {
        const uint at = bits ? rlx_fft_bitrev(i, bits) : i;
        for (uint l = 0u; l < RLX_FFT_LANES; ++l) {
            re[at][l] = rowp[l][2u * i];
            im[at][l] = rowp[l][2u * i + 1u];
        }
    }
}

// The bit-reversed load of an n = 2^bits row with its first log2 R stages
// done on the way (saving the sweep over the row they would take): slots
// r(e) .. r(e) + R - 1 (r: bit reversal, e < n / R) hold the R-point DFT of
// elements e + j n / R, j < R (rlx_fft_pow2_block on them in bit-reversed
// order of j). Needs n / R >= 8; tw is the length-n table.
template <uint R>
static inline void rlx_fft_load_first(const float *const *rowp, const float *tw, uint n, uint bits, uint inv,
                                      rlx_fft_v *re, rlx_fft_v *im) {
    const uint part = n / R, rbits = R == 2u ? 1u : (R == 4u ? 2u : 3u);
    for (uint i = 0u; i < part; i += 8u) {
        rlx_fft_v r8[R][8], i8[R][8];
        RLX_FFT_UNROLL for (uint j = 0u; j < R; ++j) rlx_fft_load_block(rowp, i + j * part, r8[j], i8[j]);
        for (uint q = 0u; q < 8u; ++q) {
            rlx_fft_v xr[R], xi[R];
            RLX_FFT_UNROLL for (uint j = 0u; j < R; ++j) {
                const uint t = rlx_fft_bitrev(j, rbits);
                xr[t] = r8[j][q];
                xi[t] = i8[j][q];
            }
            rlx_fft_pow2_block<R>(xr, xi, tw, n, 0u, 0u, inv);
            const uint at = rlx_fft_bitrev(i + q, bits);
            RLX_FFT_UNROLL for (uint t = 0u; t < R; ++t) {
                re[at + t] = xr[t];
                im[at + t] = xi[t];
            }
        }
    }
}

// Slots 0 .. count - 1, times scale, to the rows rowp[l] for l < nrows:
// eight rows at a time, all of their elements before the next eight (a
// half of each sixteen-lane slot at a time). Rows of a power-of-two length
// are a multiple of 4 KB apart, all in one L1 set, and sixteen rows' lines
// written at once overflowed its ways and fill buffers (1.6x the time).
static inline void rlx_fft_store_rows(float *const *rowp, uint nrows, uint count, const rlx_fft_v *re,
                                      const rlx_fft_v *im, float scale) {
    for (uint h = 0u; h < RLX_FFT_LANES / 8u && 8u * h < nrows; ++h) {
        const uint ln = nrows - 8u * h < 8u ? nrows - 8u * h : 8u;
        uint k = 0u;
        for (; k + 8u <= count; k += 8u) {
            rlx_fft_v8 t[2][8];
            for (uint q = 0u; q < 8u; ++q) {
                rlx_fft_v8 vr, vi;
                memcpy(&vr, (const float *)&re[k + q] + 8u * h, sizeof vr);
                memcpy(&vi, (const float *)&im[k + q] + 8u * h, sizeof vi);
                t[q >> 2u][2u * (q & 3u)] = vr * scale;
                t[q >> 2u][2u * (q & 3u) + 1u] = vi * scale;
            }
            rlx_fft_t8(t[0]);
            rlx_fft_t8(t[1]);
            for (uint l = 0u; l < ln; ++l) {
                memcpy(rowp[8u * h + l] + 2u * k, &t[0][l], sizeof(rlx_fft_v8));
                memcpy(rowp[8u * h + l] + 2u * k + 8u, &t[1][l], sizeof(rlx_fft_v8));
            }
        }
        for (; k < count; ++k) {
            for (uint l = 0u; l < ln; ++l) {
                rowp[8u * h + l][2u * k] = re[k][8u * h + l] * scale;
                rowp[8u * h + l][2u * k + 1u] = im[k][8u * h + l] * scale;
            }
        }
    }
}

// Real rows of unit step in and out through the transpose (the pairs'
// rfft samples and irfft outputs, rlx_fft_pairs): elements i .. i + 7 of
// eight rows are eight loads or stores of 32 bytes and one transpose from
// eight-lane vectors; element by element they took most of an odd-length
// rfft's time. Loads: slots v[0 .. count - 1] from the rows rowp[l] (every
// lane's pointer valid: rows past the chunk repeat a real one).
static inline void rlx_fft_load_real_rows(const float *const *rowp, uint count, rlx_fft_v *v) {
    uint i = 0u;
    for (; i + 8u <= count; i += 8u) {
        rlx_fft_v8 r8[RLX_FFT_LANES / 8u][8];
        for (uint h = 0u; h < RLX_FFT_LANES / 8u; ++h) {
            for (uint l = 0u; l < 8u; ++l) memcpy(&r8[h][l], rowp[8u * h + l] + i, sizeof(rlx_fft_v8));
            rlx_fft_t8(r8[h]);
        }
        for (uint q = 0u; q < 8u; ++q)
            for (uint h = 0u; h < RLX_FFT_LANES / 8u; ++h) memcpy((float *)&v[i + q] + 8u * h, &r8[h][q], sizeof(rlx_fft_v8));
    }
    for (; i < count; ++i)
        for (uint l = 0u; l < RLX_FFT_LANES; ++l) v[i][l] = rowp[l][i];
}

// An odd-n half spectrum's Hermitian extension (load mode 2's values) from
// rows of complex bins of unit step: bins k < min(avail, n / 2 + 1) through
// the transposes, zeros past avail, bin 0's imaginary part dropped, and
// X[n - k] = conj X[k].
static inline void rlx_fft_load_half_rows(const float *const *rowp, uint n, uint avail, rlx_fft_v *re,
                                          rlx_fft_v *im) {
    const uint half = n / 2u + 1u, count = avail < half ? avail : half;
    rlx_fft_load_rows(rowp, count, 0u, re, im);
    for (uint k = count; k < half; ++k) re[k] = im[k] = rlx_fft_v{};
    im[0] = rlx_fft_v{};
    for (uint k = 1u; k < half; ++k) {
        re[n - k] = re[k];
        im[n - k] = -im[k];
    }
}

// Stores: slots v[0 .. count - 1] times scale to the rows rowp[l], l < nrows,
// eight rows at a time (as rlx_fft_store_rows, for the same L1 sets).
static inline void rlx_fft_store_real_rows(float *const *rowp, uint nrows, uint count, const rlx_fft_v *v,
                                           float scale) {
    for (uint h = 0u; h < RLX_FFT_LANES / 8u && 8u * h < nrows; ++h) {
        const uint ln = nrows - 8u * h < 8u ? nrows - 8u * h : 8u;
        uint k = 0u;
        for (; k + 8u <= count; k += 8u) {
            rlx_fft_v8 t[8];
            for (uint q = 0u; q < 8u; ++q) {
                memcpy(&t[q], (const float *)&v[k + q] + 8u * h, sizeof(rlx_fft_v8));
                t[q] *= scale;
            }
            rlx_fft_t8(t);
            for (uint l = 0u; l < ln; ++l) memcpy(rowp[8u * h + l] + k, &t[l], sizeof(rlx_fft_v8));
        }
        for (; k < count; ++k)
            for (uint l = 0u; l < ln; ++l) rowp[8u * h + l][k] = v[k][8u * h + l] * scale;
    }
}

// First float of row r of the source / destination (rows in blocks: rlx_fft_row_at, fft.h).
RLX_INLINE uint64_t rlx_fft_src_at(const FftParams *p, uint r) {
    return rlx_fft_row_at(p->src_offset, p->src_row, p->src_rpb, p->src_block, r);
}
RLX_INLINE uint64_t rlx_fft_dst_at(const FftParams *p, uint r) {
    return rlx_fft_row_at(p->dst_offset, p->dst_row, p->dst_rpb, p->dst_block, r);
}

// Each lane's first float of rows row0 .. row0 + nrows - 1 of the source /
// destination; lanes past nrows point at row0, a row that exists, so a
// whole-chunk load reads valid memory (its values are never stored).
RLX_INLINE void rlx_fft_src_rows(const float *src, const FftParams *p, uint row0, uint nrows, const float **rowp) {
    for (uint l = 0u; l < RLX_FFT_LANES; ++l) rowp[l] = src + rlx_fft_src_at(p, row0 + (l < nrows ? l : 0u));
}
RLX_INLINE void rlx_fft_dst_rows(float *dst, const FftParams *p, uint row0, uint nrows, float **rowp) {
    for (uint l = 0u; l < RLX_FFT_LANES; ++l) rowp[l] = dst + rlx_fft_dst_at(p, row0 + (l < nrows ? l : 0u));
}

// The chunk's source rows as pointers when they are complex pairs of unit
// step read whole (load mode 0, no pre-multiply but a window): the fast path.
RLX_INLINE bool rlx_fft_row_ptrs(const float *src, const FftParams *p, uint row0, uint nrows,
                                 const float **rowp) {
    if (p->load_mode != 0u || p->src_step != 2u || p->pre_mul == 1u || p->pre_mul == 3u || p->src_len != p->n)
        return false;
    if (p->src_valid != 0u) {   // a padded signal: only rows wholly inside its own floats
        for (uint l = 0u; l < RLX_FFT_LANES; ++l) {
            const uint r = row0 + (l < nrows ? l : 0u);
            const uint64_t at = (uint64_t)(r % p->src_rpb) * p->src_row;
            if (at < p->src_pad || at + 2u * (uint64_t)p->n > (uint64_t)p->src_pad + p->src_valid) return false;
            rowp[l] = src + p->src_offset + (uint64_t)(r / p->src_rpb) * p->src_block + (at - p->src_pad);
        }
        return true;
    }
    rlx_fft_src_rows(src, p, row0, nrows, rowp);
    return true;
}

// The four-step's columns: the chunk's rows are adjacent complex values
// (row stride 2 floats) inside one block, so element i of every lane is
// one run of RLX_FFT_LANES pairs, split into re and im.
RLX_INLINE void rlx_fft_split(const float *at, rlx_fft_v &re, rlx_fft_v &im) {
    rlx_fft_v a, b;
    memcpy(&a, at, sizeof a);
    memcpy(&b, at + RLX_FFT_LANES, sizeof b);
#if RLX_FFT_LANES == 16u
    re = RLX_FFT_SHUFFLE16(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    im = RLX_FFT_SHUFFLE16(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
#else
    re = RLX_FFT_SHUFFLE8(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
    im = RLX_FFT_SHUFFLE8(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
#endif
}
RLX_INLINE void rlx_fft_merge(float *at, rlx_fft_v re, rlx_fft_v im) {
#if RLX_FFT_LANES == 16u
    const rlx_fft_v a = RLX_FFT_SHUFFLE16(re, im, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const rlx_fft_v b = RLX_FFT_SHUFFLE16(re, im, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
#else
    const rlx_fft_v a = RLX_FFT_SHUFFLE8(re, im, 0, 8, 1, 9, 2, 10, 3, 11);
    const rlx_fft_v b = RLX_FFT_SHUFFLE8(re, im, 4, 12, 5, 13, 6, 14, 7, 15);
#endif
    memcpy(at, &a, sizeof a);
    memcpy(at + RLX_FFT_LANES, &b, sizeof b);
}
// The four-step's columns of complex values (`real` false: pairs) or of
// real samples (one float each), lanes' elements g .. g + lanes - 1 at
// `at` (lanes <= RLX_FFT_LANES: the last group of a block may be short;
// the others read zeros); with pre_mul 3 times pre[g ..] and zero from
// g = limit on (not read: past the source's row).
RLX_INLINE void rlx_fft_load_column(const float *at, bool real, const float *pre, bool chirp, uint limit, uint g,
                                    uint lanes, rlx_fft_v &re, rlx_fft_v &im) {
    if (lanes == RLX_FFT_LANES && (!chirp || g + RLX_FFT_LANES <= limit)) {
        if (real) {
            memcpy(&re, at, sizeof re);
            im = rlx_fft_v{};
        } else {
            rlx_fft_split(at, re, im);
        }
        if (!chirp) return;
        rlx_fft_v wr, wi;
        rlx_fft_split(pre + 2u * (uint64_t)g, wr, wi);
        rlx_fft_vmul(re, im, wr, wi);
        return;
    }
    re = rlx_fft_v{};
    im = re;
    for (uint l = 0u; l < lanes && (!chirp || g + l < limit); ++l) {
        rlx_cf v = real ? rlx_cf_make(at[l], 0.0f) : rlx_cf_make(at[2u * l], at[2u * l + 1u]);
        if (chirp) v = rlx_cf_mul(v, rlx_cf_make(pre[2u * (g + l)], pre[2u * (g + l) + 1u]));
        re[l] = v.re;
        im[l] = v.im;
    }
}
// Whether the chunk's rows are adjacent columns (row stride 2 floats) of one
// block: a whole group of lanes, or a block's short last group (FftParams.group_block).
RLX_INLINE bool rlx_fft_columns(uint row, uint rpb, uint row0, uint nrows) {
    return row == 2u && rpb != 0u && nrows <= RLX_FFT_LANES && row0 % rpb + nrows <= rpb;
}

// Lane l's element i (i < len, l < nrows) of rows of their own, read
// through a pointer a lane: complex values (MODE 0), real samples (1) or a
// half spectrum's Hermitian extension (2, as rlx_fft_load), times pre[i]
// with `chirp` (Bluestein's); the rest zeros. The mode is a template
// argument so the inner loop over lanes carries no branch on it.
template <uint MODE>
static inline void rlx_fft_load_own_rows(const float *const *rows, const float *pre, bool chirp, const FftParams *p,
                                         uint nrows, uint bits, float *fre, float *fim) {
    const uint n = p->n, len = p->src_len < n ? p->src_len : n, hn = p->herm_n, avail = p->src_avail;
    const uint64_t step = p->src_step;
    for (uint i = 0u; i < n; ++i) {
        const uint at = (bits ? rlx_fft_bitrev(i, bits) : i) * RLX_FFT_LANES;
        if (i >= len) {
            for (uint l = 0u; l < RLX_FFT_LANES; ++l) fre[at + l] = 0.0f, fim[at + l] = 0.0f;
            continue;
        }
        // MODE 2: Y[i] = X[i] for i <= hn / 2, conj(X[hn - i]) above; bins 0
        // and hn / 2 real (numpy's irfft drops their imaginary parts).
        const bool mirrored = MODE == 2u && i > hn / 2u;
        const uint k = mirrored ? hn - i : i;
        const bool present = MODE != 2u || k < avail, real_bin = MODE == 2u && (k == 0u || 2u * k == hn);
        const uint64_t o = (uint64_t)k * step;
        const float wr = chirp ? pre[2u * i] : 1.0f, wi = chirp ? pre[2u * i + 1u] : 0.0f;
        for (uint l = 0u; l < RLX_FFT_LANES; ++l) {
            float vr = 0.0f, vi = 0.0f;
            if (l < nrows && present) {
                vr = rows[l][o];
                if (MODE == 0u) vi = rows[l][o + 1u];
                if (MODE == 2u && !real_bin) vi = mirrored ? -rows[l][o + 1u] : rows[l][o + 1u];
            }
            fre[at + l] = vr * wr - vi * wi;
            fim[at + l] = vr * wi + vi * wr;
        }
    }
}

// Rows row0 .. row0 + nrows - 1 into lane vectors re[i], im[i] (lanes past
// nrows zero or a copy), element i at slot i, or at its bit reversal with
// `reversed`. load_mode 3 (the CPU's fused irfft_pre) is handled by the caller.
static inline uint rlx_fft_load_lanes(const float *src, const float *tw, const float *pre, const FftParams *p,
                                      uint row0, uint nrows, bool reversed, rlx_fft_v *re, rlx_fft_v *im) {
    const uint n = p->n, bits = reversed ? p->span : 0u;
    const float *rowp[RLX_FFT_LANES];
    // The four-step's columns: complex values (row stride 2 floats) or real
    // samples (1), with Bluestein's chirp and zero padding (pre_mul 3).
    const bool real = p->load_mode == 1u;
    if ((p->load_mode == 0u || real) && (p->pre_mul == 0u || p->pre_mul == 3u) && p->src_len == n
        && p->src_valid == 0u && rlx_fft_columns(p->src_row * (real ? 2u : 1u), p->src_rpb, row0, nrows)) {
        const float *at = src + rlx_fft_src_at(p, row0);
        for (uint i = 0u; i < n; ++i) {
            const uint s = reversed ? rlx_fft_bitrev(i, bits) : i;
            rlx_fft_load_column(at + (uint64_t)i * p->src_step, real, pre, p->pre_mul == 3u, p->limit,
                                i * p->src_rpb + row0 % p->src_rpb, nrows, re[s], im[s]);
        }
        return 0u;
    }
    if (rlx_fft_row_ptrs(src, p, row0, nrows, rowp)) {
        // The stages rlx_fft_pow2_lanes would do first: its radix-2 or
        // radix-4 pass, or its first radix-8 pass.
        const uint first = bits % 3u == 0u ? 3u : bits % 3u;
        if (p->pre_mul == 2u) {   // the window (rfft's packed pairs), then every stage in the caller
            rlx_fft_load_rows(rowp, n, bits, re, im);
            for (uint i = 0u; i < n; ++i) {
                const uint s = bits ? rlx_fft_bitrev(i, bits) : i;
                re[s] *= pre[2u * i];
                im[s] *= pre[2u * i + 1u];
            }
            return 0u;
        }
        if (reversed && (n >> first) >= 8u) {
            if (first == 1u) rlx_fft_load_first<2u>(rowp, tw, n, bits, p->inverse, re, im);
            if (first == 2u) rlx_fft_load_first<4u>(rowp, tw, n, bits, p->inverse, re, im);
            if (first == 3u) rlx_fft_load_first<8u>(rowp, tw, n, bits, p->inverse, re, im);
            return first;
        }
        rlx_fft_load_rows(rowp, n, bits, re, im);
        return 0u;
    }
    // Rows of their own in any other mode, step or length, with no
    // pre-multiply but Bluestein's chirp: rfft and irfft of odd N,
    // Bluestein's first dispatch.
    if (p->src_valid == 0u && p->pre_mul <= 1u && p->load_mode <= 2u) {
        rlx_fft_src_rows(src, p, row0, nrows, rowp);
        float *fre = (float *)re, *fim = (float *)im;
        const bool chirp = p->pre_mul == 1u;
        if (p->load_mode == 0u && p->src_step == 2u) {   // complex pairs: the transposes, then the chirp
            const uint len = p->src_len < n ? p->src_len : n;
            rlx_fft_load_rows(rowp, len, bits, re, im);
            for (uint i = 0u; i < n; ++i) {
                const uint at = bits ? rlx_fft_bitrev(i, bits) : i;
                if (i >= len) {
                    re[at] = rlx_fft_v{};
                    im[at] = rlx_fft_v{};
                } else if (chirp) {
                    rlx_fft_vmul(re[at], im[at], rlx_cf_make(pre[2u * i], pre[2u * i + 1u]));
                }
            }
            return 0u;
        }
        if (p->load_mode == 0u) rlx_fft_load_own_rows<0u>(rowp, pre, chirp, p, nrows, bits, fre, fim);
        if (p->load_mode == 1u) rlx_fft_load_own_rows<1u>(rowp, pre, chirp, p, nrows, bits, fre, fim);
        if (p->load_mode == 2u) rlx_fft_load_own_rows<2u>(rowp, pre, chirp, p, nrows, bits, fre, fim);
        return 0u;
    }
    // Any other layout: element by element through the shared load helper,
    // into a lane-major float image of the vectors (whole vectors are read
    // only after all lanes are written: no store-forwarding stalls).
    // Each lane's row through a copy of the params that reads it at row 0
    // of a pointer to its first float (the four-step's blocks included).
    // A padded signal reads through the params themselves (its rows' bounds).
    float *fre = (float *)re, *fim = (float *)im;
    FftParams q = *p;
    q.src_offset = 0u;
    q.src_row = 0u;
    q.src_rpb = 0u;
    // So do pre_mul 3's columns of one sequence (their index in it).
    const bool whole = p->src_valid != 0u || p->pre_mul == 3u;
    for (uint l = 0u; l < RLX_FFT_LANES; ++l) {
        const float *row = whole ? src : src + (l < nrows ? rlx_fft_src_at(p, row0 + l) : 0u);
        for (uint i = 0u; i < n; ++i) {
            const uint at = (reversed ? rlx_fft_bitrev(i, bits) : i) * RLX_FFT_LANES + l;
            const rlx_cf v = l >= nrows ? rlx_cf_make(0.0f, 0.0f)
                           : whole ? rlx_fft_load(src, pre, p, row0 + l, i) : rlx_fft_load(row, pre, &q, 0u, i);
            fre[at] = v.re;
            fim[at] = v.im;
        }
    }
    return 0u;
}

// The fused irfft_pre (load_mode 3): bin k < src_avail of row l (bins 0 and
// n of the length-2n spectrum real, as numpy's irfft takes them).
RLX_INLINE rlx_cf rlx_fft_half_bin(const float *src, const FftParams *p, uint row, uint k) {
    if (k >= p->src_avail) return rlx_cf_make(0.0f, 0.0f);
    const uint64_t at = rlx_fft_src_at(p, row) + (uint64_t)k * p->src_step;
    return rlx_cf_make(src[at], (k == 0u || k == p->n) ? 0.0f : src[at + 1u]);
}

// Z[k] = E[k] + i O[k] of irfft_pre (fft.h) for every lane, from the bins
// X[0..n] (length-2n spectrum): x holds X (n + 1 slots), z gets Z (n slots,
// at the bit reversal of k with `reversed`). tw: the length-2n table.
static inline void rlx_fft_load_irfft(const float *src, const float *tw, const FftParams *p, uint row0,
                                      uint nrows, bool reversed, rlx_fft_v *xr, rlx_fft_v *xi,
                                      rlx_fft_v *zr, rlx_fft_v *zi) {
    const uint n = p->n, bits = reversed ? p->span : 0u;
    float *fre = (float *)xr, *fim = (float *)xi;
    if (p->src_step == 2u && p->src_avail > n) {   // every bin present, complex pairs
        const float *rowp[RLX_FFT_LANES];
        rlx_fft_src_rows(src, p, row0, nrows, rowp);
        rlx_fft_load_rows(rowp, n + 1u, 0u, xr, xi);
        xi[0] = rlx_fft_v{};   // bins 0 and n are real
        xi[n] = xi[0];
    } else {
        for (uint l = 0u; l < RLX_FFT_LANES; ++l) {
            for (uint k = 0u; k <= n; ++k) {
                const rlx_cf v = rlx_fft_half_bin(src, p, row0 + (l < nrows ? l : 0u), k);
                fre[k * RLX_FFT_LANES + l] = v.re;
                fim[k * RLX_FFT_LANES + l] = v.im;
            }
        }
    }
    for (uint k = 0u; k < n; ++k) {
        const rlx_fft_v ar = xr[k], ai = xi[k], br = xr[n - k], bi = -xi[n - k];   // X[k], conj X[n - k]
        rlx_fft_v er = 0.5f * (ar + br), ei = 0.5f * (ai + bi), orr = 0.5f * (ar - br), oi = 0.5f * (ai - bi);
        rlx_fft_vmul(orr, oi, rlx_fft_twiddle(tw, k, 1u));
        const uint at = reversed ? rlx_fft_bitrev(k, bits) : k;
        zr[at] = er - oi;   // E + i O
        zi[at] = ei + orr;
    }
}

// Lanes out through the store helper's layout: complex pairs of unit step
// (store mode 0, no post-multiply) through the transpose, store mode 2 as
// the fused rfft_post, anything else element by element.
static inline void rlx_fft_store_lanes(float *dst, const float *tw, const float *post, const FftParams *p,
                                       uint row0, uint nrows, rlx_fft_v *re, rlx_fft_v *im) {
    const uint n = p->n;
    float *rowp[RLX_FFT_LANES];
    rlx_fft_dst_rows(dst, p, row0, nrows, rowp);
    if (p->store_mode == 0u && p->post_mul != 1u && p->dst_count == n
        && rlx_fft_columns(p->dst_row, p->dst_rpb, row0, nrows)) {
        // The four-step's columns, with its twiddles (post_mul 2) for the
        // first of its two dispatches, or with Bluestein's spectrum or
        // chirp for the second (post_mul 3), keeping only the sequence's
        // first `limit` elements (the rest lie past the destination's row).
        // Lanes past a block's short last group, or (post_mul 3) past the
        // limit, are neither read from post nor written.
        float *at = rowp[0];
        const float s = p->scale, sg = p->inverse && p->post_mul == 2u ? -1.0f : 1.0f;
        for (uint k = 0u; k < n; ++k) {
            rlx_fft_v vr = re[k], vi = im[k];
            const uint g = k * p->dst_rpb + row0 % p->dst_rpb;
            if (p->post_mul == 3u && g >= p->limit) continue;
            const uint lanes = p->post_mul == 3u && p->limit - g < nrows ? p->limit - g : nrows;
            if (p->post_mul != 0u) {
                rlx_fft_v wr = rlx_fft_v{}, wi = wr;
                if (lanes == RLX_FFT_LANES) {
                    rlx_fft_split(post + 2u * (uint64_t)g, wr, wi);
                } else {
                    for (uint l = 0u; l < lanes; ++l) {
                        wr[l] = post[2u * (g + l)];
                        wi[l] = post[2u * (g + l) + 1u];
                    }
                }
                rlx_fft_vmul(vr, vi, wr, wi * sg);
            }
            float *out = at + (uint64_t)k * p->dst_step;
            if (lanes == RLX_FFT_LANES) {
                rlx_fft_merge(out, vr * s, vi * s);
                continue;
            }
            for (uint l = 0u; l < lanes; ++l) out[2u * l] = vr[l] * s, out[2u * l + 1u] = vi[l] * s;
        }
        return;
    }
    if (p->store_mode == RLX_FFT_STORE_RFFT || p->store_mode == RLX_FFT_STORE_RFFT_POWER) {
        // X[k] = E[k] + W_2n^k O[k] for k = 0..n from Z = re, im (fft.h's
        // rfft_post), in place: bins k and n - k both come from Z[k] and
        // Z[n - k], so each pair is done at once; bin n goes to slot n.
        for (uint k = 0u; 2u * k <= n; ++k) {
            const uint a = k, b = k == 0u ? 0u : n - k;
            const rlx_fft_v ar = re[a], ai = im[a], br = re[b], bi = im[b];
            for (uint side = 0u; side < 2u; ++side) {
                // side 0: bin a from (Z[a], Z[b]); side 1: bin n - a from (Z[b], Z[a]).
                const rlx_fft_v zr = side ? br : ar, zi = side ? bi : ai, yr = side ? ar : br, yi = side ? -ai : -bi;
                const rlx_fft_v er = 0.5f * (zr + yr), ei = 0.5f * (zi + yi);
                rlx_fft_v orr = 0.5f * (zi - yi), oi = -0.5f * (zr - yr);   // -i (Z - conj Y) / 2
                const uint bin = side ? n - a : a;
                rlx_fft_vmul(orr, oi, rlx_fft_twiddle(tw, bin, 0u));
                re[bin] = er + orr;
                im[bin] = ei + oi;
            }
        }
        if (p->store_mode == RLX_FFT_STORE_RFFT) {
            rlx_fft_store_rows(rowp, nrows, n + 1u, re, im, p->scale);
            return;
        }
        // The power: one float a bin, scaled first (|X scale|^2); rows of
        // n + 1 floats are not 4 KB apart, so a lane's stores go straight
        // to its row.
        const float s = p->scale;   // read once: the stores may alias the params
        const uint64_t step = p->dst_step;
        for (uint k = 0u; k <= n; ++k) {
            const rlx_fft_v vr = re[k] * s, vi = im[k] * s, pw = vr * vr + vi * vi;
            for (uint l = 0u; l < nrows; ++l) rowp[l][(uint64_t)k * step] = pw[l];
        }
        return;
    }
    // Complex values or the real part at any step, the first dst_count of
    // them, times post[k] first (Bluestein's chirp and spectrum). Complex
    // pairs of unit step go through the transposes: rows of 512 pairs are
    // 4 KB apart, so storing each lane's value on its own hits one L1 set
    // sixteen times (Bluestein's N = 255 took 4x its time). The rest go
    // through each lane's row pointer.
    if (p->post_mul <= 1u && p->store_mode <= 1u) {
        const uint count = p->dst_count < n ? p->dst_count : n;
        if (p->post_mul == 1u) {
            for (uint k = 0u; k < count; ++k) rlx_fft_vmul(re[k], im[k], rlx_cf_make(post[2u * k], post[2u * k + 1u]));
        }
        if (p->store_mode == 0u && p->dst_step == 2u) {
            rlx_fft_store_rows(rowp, nrows, count, re, im, p->scale);
            return;
        }
        const uint64_t step = p->dst_step;
        const float s = p->scale;   // read once: the stores may alias the params for all the compiler knows
        for (uint k = 0u; k < count; ++k) {
            const rlx_fft_v vr = re[k] * s, vi = im[k] * s;
            const uint64_t o = (uint64_t)k * step;
            for (uint l = 0u; l < nrows; ++l) {
                rowp[l][o] = vr[l];
                if (p->store_mode == 0u) rowp[l][o + 1u] = vi[l];
            }
        }
        return;
    }
    // Anything else element by element, each lane's row at row 0 of a copy
    // of the params and a pointer to its first float (post_mul 2 and 3,
    // whose outputs' places in the sequence need the row, through the
    // params themselves).
    FftParams q = *p;
    q.dst_offset = 0u;
    q.dst_row = 0u;
    q.dst_rpb = 0u;
    const bool whole = p->post_mul >= 2u;
    for (uint l = 0u; l < nrows; ++l) {
        float *row = dst + rlx_fft_dst_at(p, row0 + l);
        for (uint k = 0u; k < n; ++k) {
            const rlx_cf v = rlx_cf_make(re[k][l], im[k][l]);
            if (whole) rlx_fft_store(dst, post, p, row0 + l, k, v);
            else rlx_fft_store(row, post, &q, 0u, k, v);
        }
    }
}

// Per-thread buffers: RLX_FFT_LANES rows of the largest length are 256 KB
// an array at 16 lanes, too much for a stack. The irfft load needs n + 1
// slots for its bins, so one more than the transform's maximum.
struct rlx_fft_cpu_bufs {
    rlx_fft_v re[RLX_FFT_SHARED_MAX + 1u], im[RLX_FFT_SHARED_MAX + 1u];
    rlx_fft_v re2[RLX_FFT_SHARED_MAX + 1u], im2[RLX_FFT_SHARED_MAX + 1u];
};

// One Stockham pass of radix R (fft_stage's, on lane vectors) from f to t.
template <uint R>
static inline void rlx_fft_mixed_pass(const rlx_fft_v *fr, const rlx_fft_v *fi, rlx_fft_v *tr, rlx_fft_v *ti,
                                      const float *tw, uint n, uint span, uint inv) {
    const uint m = n / R, tstride = n / (span * R);
    for (uint j = 0u; j < m; ++j) {
        const uint k = j % span;
        rlx_fft_v xr[R > 5u ? R : 5u] = {}, xi[R > 5u ? R : 5u] = {};
        RLX_FFT_UNROLL for (uint r = 0u; r < R; ++r) {
            xr[r] = fr[j + r * m];
            xi[r] = fi[j + r * m];
            if (r > 0u && k > 0u) rlx_fft_vmul(xr[r], xi[r], rlx_fft_twiddle(tw, r * k * tstride, inv));
        }
        if (R == 9u) rlx_fft_dft9_v(xr, xi, inv);
        else rlx_fft_dft_v(xr, xi, R, inv);
        const uint out0 = (j - k) * R + k;
        RLX_FFT_UNROLL for (uint r = 0u; r < R; ++r) {
            tr[out0 + r * span] = xr[r];
            ti[out0 + r * span] = xi[r];
        }
    }
}

// The mixed-radix form (radix == 1) on lane vectors: fft_stage's Stockham
// passes, ping-pong between two buffers; returns the one holding the result.
static inline void rlx_fft_mixed_lanes(const FftParams *p, const float *tw, rlx_fft_v *re, rlx_fft_v *im,
                                       rlx_fft_v *re2, rlx_fft_v *im2, rlx_fft_v **out_re, rlx_fft_v **out_im) {
    const uint n = p->n, inv = p->inverse;
    rlx_fft_v *fr = re, *fi = im, *tr = re2, *ti = im2;
    uint span = 1u;
    for (uint q = 0u; q < p->passes; ++q) {
        const uint radix = (p->span >> (4u * q)) & 15u;   // 2, 3, 4, 5 or 9 (the CPU's factors: no 8)
        switch (radix) {   // a template per radix: its values stay in registers
            case 9u: rlx_fft_mixed_pass<9u>(fr, fi, tr, ti, tw, n, span, inv); break;
            case 2u: rlx_fft_mixed_pass<2u>(fr, fi, tr, ti, tw, n, span, inv); break;
            case 3u: rlx_fft_mixed_pass<3u>(fr, fi, tr, ti, tw, n, span, inv); break;
            case 4u: rlx_fft_mixed_pass<4u>(fr, fi, tr, ti, tw, n, span, inv); break;
            default: rlx_fft_mixed_pass<5u>(fr, fi, tr, ti, tw, n, span, inv); break;
        }
        rlx_fft_v *t = fr; fr = tr; tr = t;
        t = fi; fi = ti; ti = t;
        span *= radix;
    }
    *out_re = fr;
    *out_im = fi;
}

// A bit-reversed power-of-two row (n = 2^bits) to natural order in place:
// radix-8 passes (three stages a sweep over the row of lanes, which lives
// in L2 from 1024 points: a third fewer sweeps than radix 4; radix 16
// measured no faster, its 32 vectors spilling), the leftover stages first
// as one radix-2 or radix-4 pass (or in the load: rlx_fft_load_first).
static inline void rlx_fft_pow2_lanes(rlx_fft_v *re, rlx_fft_v *im, const float *tw, uint n, uint bits, uint inv,
                                      uint done) {
    const uint rem = bits % 3u;   // done: the leading stages the load did (0: none)
    if (rem == 1u && done == 0u) rlx_fft_pow2_pass<2u>(re, im, tw, n, 0u, inv);
    if (rem == 2u && done == 0u) rlx_fft_pow2_pass<4u>(re, im, tw, n, 0u, inv);
    for (uint s = done > rem ? done : rem; s < bits; s += 3u) rlx_fft_pow2_pass<8u>(re, im, tw, n, s, inv);
}

// fft_shared on the CPU for the group's rows row0 .. row0 + nrows - 1,
// RLX_FFT_LANES at a time, in the thread's buffers b. Opaque to its caller,
// which looks b up: with the thread-local's address in reach (inlined, or
// propagated as a constant argument), GCC rematerialized it (a
// __tls_get_addr call) inside the loops rather than keep it, 11% of an
// odd-length rfft's time.
#if defined(__clang__)
#define RLX_FFT_OPAQUE __attribute__((noinline))
#else
#define RLX_FFT_OPAQUE __attribute__((noinline, noipa))
#endif
// Two real rows a transform: rfft of a and b from one complex transform of
// z = a + i s b, A[k] = (Z[k] + conj Z[n - k]) / 2 and B[k] = (Z[k] -
// conj Z[n - k]) / (2 i s); irfft of A and B as the real and imaginary
// parts of the inverse of A + i s B (each half spectrum's Hermitian
// extension). Half the transforms of rows one at a time, whose imaginary
// lanes held zeros (rfft and irfft of odd n, where no half-length form
// applies). s, a power of two a pair, brings b to a's magnitude, so that
// each row's rounding stays relative to its own values; a chunk where a
// pair has an infinity or a NaN (which the separation would spread to its
// partner), or rows more than 2^120 apart in magnitude, runs its rows one
// at a time instead. The last pair of an odd row count has no b (zeros).
// s from the rows' sums of magnitudes (sa, sb), within 2^+-120 so that s
// and 1 / s are normal floats (rows further apart run alone).
RLX_INLINE float rlx_fft_pair_scale(float sa, float sb) {
    if (!(sa > 0.0f) || !(sb > 0.0f)) return 1.0f;   // a zero row: nothing to balance
    const float e = rintf(log2f(sa / sb));
    return exp2f(e < -120.0f ? -120.0f : e > 120.0f ? 120.0f : e);
}
typedef int rlx_fft_vi __attribute__((vector_size(sizeof(rlx_fft_v))));
// |v| a lane (the sign bit cleared).
RLX_INLINE rlx_fft_v rlx_fft_vabs(rlx_fft_v v) { return (rlx_fft_v)((rlx_fft_vi)v & 0x7fffffff); }

static inline void rlx_fft_pairs(const float *src, float *dst, const float *tw, const FftParams *p, uint row0,
                                 uint npairs, rlx_fft_cpu_bufs *b);

RLX_FFT_OPAQUE static void rlx_fft_shared_rows_in(const float *src, float *dst, const float *tw,
                                                             const float *pre, const float *post,
                                                             const FftParams *p, uint row0, uint nrows,
                                                             rlx_fft_cpu_bufs *b) {
    const bool pow2 = p->radix == 0u;
    if (p->load_mode == RLX_FFT_LOAD_REAL_PAIRS || p->load_mode == RLX_FFT_LOAD_HALF_PAIRS) {
        rlx_fft_pairs(src, dst, tw, p, row0, nrows, b);
        return;
    }
    for (uint c = 0u; c < nrows; c += RLX_FFT_LANES) {
        const uint rows = nrows - c < RLX_FFT_LANES ? nrows - c : RLX_FFT_LANES;
        rlx_fft_v *re = b->re, *im = b->im;
        uint done = 0u;   // leading stages the load did
        if (p->load_mode == RLX_FFT_LOAD_IRFFT) {
            rlx_fft_load_irfft(src, pre, p, row0 + c, rows, pow2, b->re2, b->im2, re, im);
        } else {
            done = rlx_fft_load_lanes(src, tw, pre, p, row0 + c, rows, pow2, re, im);
        }
        if (pow2) {
            rlx_fft_pow2_lanes(re, im, tw, p->n, p->span, p->inverse, done);
        } else {
            rlx_fft_mixed_lanes(p, tw, b->re, b->im, b->re2, b->im2, &re, &im);
        }
        rlx_fft_store_lanes(dst, post, post, p, row0 + c, rows, re, im);
    }
}

// One chunk of real rows one a lane (rows r0 .. r0 + rows - 1 of q, the
// even or the odd rows of the pairs' params): load, transform, store.
static inline void rlx_fft_pair_rows_alone(const float *src, float *dst, const float *tw, const FftParams *q,
                                           uint r0, uint rows, rlx_fft_cpu_bufs *b) {
    if (rows == 0u) return;
    rlx_fft_v *re = b->re, *im = b->im;
    rlx_fft_load_lanes(src, tw, nullptr, q, r0, rows, false, re, im);
    rlx_fft_mixed_lanes(q, tw, b->re, b->im, b->re2, b->im2, &re, &im);
    rlx_fft_store_lanes(dst, tw, nullptr, q, r0, rows, re, im);
}

static inline void rlx_fft_pairs(const float *src, float *dst, const float *tw, const FftParams *p, uint row0,
                                 uint npairs, rlx_fft_cpu_bufs *b) {
    const uint n = p->n, reals = p->limit;
    const bool forward = p->load_mode == RLX_FFT_LOAD_REAL_PAIRS;
    // The even rows (a) and the odd rows (b) as rows of their own.
    FftParams qa = *p;
    qa.load_mode = forward ? 1u : 2u;
    qa.store_mode = forward ? 0u : 1u;
    qa.src_row = 2u * p->src_row;
    qa.dst_row = 2u * p->dst_row;
    qa.limit = 0u;
    FftParams qb = qa;
    qb.src_offset += p->src_row;
    qb.dst_offset += p->dst_row;
    // Real samples of unit step, every one present: through the transposes.
    const bool plain = forward && p->src_step == 1u && p->src_len == n && p->pre_mul == 0u && p->src_rpb == 0u
                       && p->src_valid == 0u;
    // irfft's half spectra as complex pairs of unit step (n odd: no Nyquist bin).
    const bool half = !forward && p->src_step == 2u && p->herm_n == n && p->src_len == n && p->pre_mul == 0u
                      && p->src_rpb == 0u && p->src_valid == 0u;
    const bool plain_out = !forward && p->dst_step == 1u && p->dst_count == n && p->post_mul == 0u && p->dst_rpb == 0u;
    for (uint c = 0u; c < npairs; c += RLX_FFT_LANES) {
        const uint rows = npairs - c < RLX_FFT_LANES ? npairs - c : RLX_FFT_LANES, r0 = row0 + c;
        const uint with_b = 2u * (r0 + rows) <= reals ? rows : rows - 1u;   // lanes whose b exists
        if (plain) {
            const float *ap[RLX_FFT_LANES], *bp[RLX_FFT_LANES];
            rlx_fft_src_rows(src, &qa, r0, rows, ap);
            rlx_fft_src_rows(src, &qb, r0, with_b, bp);
            rlx_fft_load_real_rows(ap, n, b->re);
            if (with_b > 0u) rlx_fft_load_real_rows(bp, n, b->re2);
            for (uint i = 0u; i < n; ++i) b->im[i] = b->im2[i] = rlx_fft_v{};
            if (with_b < RLX_FFT_LANES) {   // lanes without a b: zeros, not a repeated row
                for (uint i = 0u; i < n; ++i)
                    for (uint l = with_b; l < RLX_FFT_LANES; ++l) b->re2[i][l] = 0.0f;
            }
        } else if (half) {
            const float *ap[RLX_FFT_LANES], *bp[RLX_FFT_LANES];
            rlx_fft_src_rows(src, &qa, r0, rows, ap);
            rlx_fft_src_rows(src, &qb, r0, with_b, bp);
            rlx_fft_load_half_rows(ap, n, p->src_avail, b->re, b->im);
            if (with_b > 0u) rlx_fft_load_half_rows(bp, n, p->src_avail, b->re2, b->im2);
            for (uint i = 0u; i < n; ++i) {   // lanes without a b: zeros
                if (with_b == 0u) b->re2[i] = b->im2[i] = rlx_fft_v{};
                for (uint l = with_b; with_b > 0u && l < RLX_FFT_LANES; ++l) b->re2[i][l] = b->im2[i][l] = 0.0f;
            }
        } else {
            rlx_fft_load_lanes(src, tw, nullptr, &qa, r0, rows, false, b->re, b->im);
            rlx_fft_load_lanes(src, tw, nullptr, &qb, r0, with_b, false, b->re2, b->im2);
        }
        // Each lane's sums of magnitudes (an infinity or a NaN stays one).
        rlx_fft_v sa = rlx_fft_v{}, sb = sa;
        for (uint i = 0u; i < n; ++i) {
            sa += rlx_fft_vabs(b->re[i]) + rlx_fft_vabs(b->im[i]);
            sb += rlx_fft_vabs(b->re2[i]) + rlx_fft_vabs(b->im2[i]);
        }
        // ka, inv_s: zero for an all-zero a or b, whose outputs are then
        // exact zeros (not its partner's rounding).
        rlx_fft_v s = rlx_fft_v{}, inv_s = s, ka = s;
        bool paired = true;
        for (uint l = 0u; l < RLX_FFT_LANES; ++l) {
            paired = paired && (l >= rows || (isfinite(sa[l]) && isfinite(sb[l])));
            if (sa[l] > 0.0f && sb[l] > 0.0f) paired = paired && fabsf(log2f(sa[l] / sb[l])) <= 120.0f;
            s[l] = l < with_b ? rlx_fft_pair_scale(sa[l], sb[l]) : 0.0f;
            inv_s[l] = l < with_b && sb[l] > 0.0f ? 1.0f / s[l] : 0.0f;
            ka[l] = sa[l] > 0.0f ? 1.0f : 0.0f;
        }
        if (!paired) {
            rlx_fft_pair_rows_alone(src, dst, tw, &qa, r0, rows, b);
            rlx_fft_pair_rows_alone(src, dst, tw, &qb, r0, with_b, b);
            continue;
        }
        for (uint i = 0u; i < n; ++i) {   // z = a + i s b
            const rlx_fft_v br = b->re2[i] * s, bi = b->im2[i] * s;
            b->re[i] -= bi;
            b->im[i] += br;
        }
        rlx_fft_v *zr = b->re, *zi = b->im;
        rlx_fft_mixed_lanes(p, tw, b->re, b->im, b->re2, b->im2, &zr, &zi);
        if (!forward) {   // a and s b: the real and imaginary parts
            for (uint i = 0u; i < n; ++i) zr[i] *= ka, zi[i] *= inv_s;
            if (plain_out) {
                float *ap[RLX_FFT_LANES], *bp[RLX_FFT_LANES];
                rlx_fft_dst_rows(dst, &qa, r0, rows, ap);
                rlx_fft_dst_rows(dst, &qb, r0, with_b, bp);
                rlx_fft_store_real_rows(ap, rows, n, zr, p->scale);
                rlx_fft_store_real_rows(bp, with_b, n, zi, p->scale);
                continue;
            }
            rlx_fft_store_lanes(dst, tw, nullptr, &qa, r0, rows, zr, zr);
            rlx_fft_store_lanes(dst, tw, nullptr, &qb, r0, with_b, zi, zi);
            continue;
        }
        // A's bins in the other buffers, B's in place of Z: bin k <= n / 2
        // reads Z[k] and Z[n - k], and n - k is past every bin written
        // before it. A full spectrum (fft of real rows: dst_count n) takes
        // its upper bins as the conjugates of the lower.
        rlx_fft_v *ar = zr == b->re ? b->re2 : b->re, *ai = zr == b->re ? b->im2 : b->im;
        const uint count = p->dst_count < n ? p->dst_count : n, h = count < n / 2u + 1u ? count : n / 2u + 1u;
        for (uint k = 0u; k < h; ++k) {
            const uint m = k == 0u ? 0u : n - k;
            const rlx_fft_v xr = zr[k], xi = zi[k], yr = zr[m], yi = zi[m];   // Z[k], Z[n - k]
            ar[k] = (0.5f * (xr + yr)) * ka;
            ai[k] = (0.5f * (xi - yi)) * ka;
            zr[k] = (0.5f * (xi + yi)) * inv_s;
            zi[k] = (0.5f * (yr - xr)) * inv_s;
        }
        for (uint k = h; k < count; ++k) {
            ar[k] = ar[n - k], ai[k] = -ai[n - k];
            zr[k] = zr[n - k], zi[k] = -zi[n - k];
        }
        rlx_fft_store_lanes(dst, tw, nullptr, &qa, r0, rows, ar, ai);
        rlx_fft_store_lanes(dst, tw, nullptr, &qb, r0, with_b, zr, zi);
    }
}

static inline void rlx_fft_shared_rows(const float *src, float *dst, const float *tw, const float *pre,
                                       const float *post, const FftParams *p, uint row0, uint nrows) {
    alignas(64) static thread_local rlx_fft_cpu_bufs bufs_tls;
    rlx_fft_shared_rows_in(src, dst, tw, pre, post, p, row0, nrows, &bufs_tls);
}
