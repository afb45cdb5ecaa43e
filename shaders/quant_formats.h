// GGUF block formats, part of quant.h (included from there, after
// quant_tables.h): each format's traits struct (BLOCK, BYTES, elem, sub;
// quant.h's header comment says what they promise) and the generic element
// and chunk access the kernels use.
// Decoders inline into the kernels' loops on the CPU too (GCC keeps a
// function returning a 32-float struct out of line otherwise, and the
// decode-and-dot loops then do not fuse).
#ifdef RLX_TARGET_CPU
#define RLX_QINLINE static inline __attribute__((always_inline))
#else
#define RLX_QINLINE RLX_INLINE
#endif

// 32 decoded elements, returned by value (no thread-space pointers needed).
struct rlx_q32 {
    float v[32];
};

// ---- field readers ------------------------------------------------------------
RLX_QINLINE uint rlx_q_u16(RLX_DEVICE const uchar *p) { return (uint)p[0] | ((uint)p[1] << 8u); }
RLX_QINLINE uint rlx_q_u32(RLX_DEVICE const uchar *p) { return rlx_q_u16(p) | (rlx_q_u16(p + 2) << 16u); }
RLX_QINLINE float rlx_q_f16(RLX_DEVICE const uchar *p) { return rlx_half_bits_to_float(rlx_q_u16(p)); }
// A byte as a signed int8.
RLX_QINLINE int rlx_q_i8(uint v) { return (int)v - (int)((v & 128u) << 1u); }
// MXFP4's E8M0 scale, halved (the E2M1 table holds doubled values):
// 2^(e - 128), a subnormal for e < 2 (ggml_e8m0_to_fp32_half).
RLX_QINLINE float rlx_q_e8m0_half(uint e) { return rlx_bits_to_float(e < 2u ? 0x00200000u << e : (e - 1u) << 23u); }
// NVFP4's unsigned E4M3 scale (bias 7; bit 7 ignored), halved; 0x7F (NaN
// in E4M3) reads as 0, as gguf's ue4m3_to_fp32 does.
RLX_QINLINE float rlx_q_ue4m3_half(uint x) {
    const uint ex = (x >> 3u) & 15u, man = x & 7u;
    const float v = ex == 0u ? (float)man * 0.0009765625f : rlx_bits_to_float(((ex + 119u) << 23u) | (man << 20u));
    return (x == 0u || x == 0x7Fu) ? 0.0f : v;
}
// The 6-bit scale (low byte) and min (high byte) of sub-block i (0..7) of
// q4_k / q5_k, from the 12 packed bytes at q (gguf's Q4_K.get_scale_min).
RLX_QINLINE uint rlx_q_k_scale_min(RLX_DEVICE const uchar *q, uint i) {
    uint s, m;
    if (i < 4u) {
        s = q[i] & 63u;
        m = q[i + 4u] & 63u;
    } else {
        s = (q[i + 4u] & 15u) | ((q[i - 4u] >> 2u) & 0x30u);
        m = (q[i + 4u] >> 4u) | ((q[i] >> 2u) & 0x30u);
    }
    return s | (m << 8u);
}
// q3_k's signed scale i (0..15) from the 12 packed bytes at q.
RLX_QINLINE int rlx_q_q3k_scale(RLX_DEVICE const uchar *q, uint i) {
    const uint l = i < 8u ? q[i] & 15u : q[i - 8u] >> 4u;
    const uint h = (q[8u + (i & 3u)] >> (2u * (i >> 2u))) & 3u;
    return (int)(l | (h << 4u)) - 32;
}
// A 4-bit field of 32-element blocks: element e of 32 is the low nibble of
// byte e for e < 16, the high nibble of byte e - 16 after.
RLX_QINLINE uint rlx_q_nib32(RLX_DEVICE const uchar *qs, uint e) { return (qs[e & 15u] >> ((e >> 4u) * 4u)) & 15u; }

// sub() for formats decoded element by element.
#define RLX_Q_SUB_FROM_ELEM                                                          \
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {                      \
        rlx_q32 o;                                                                   \
        for (uint e = 0; e < 32u; ++e) o.v[e] = elem(b, 32u * s + e);                \
        return o;                                                                    \
    }

// The traits' member functions would have external linkage, and the host
// build compiles this header once per instruction set (csrc/host_kernels_*.cpp):
// on the CPU they go into an anonymous namespace, so each build keeps its own.
#ifdef RLX_TARGET_CPU
namespace {
#endif

// ---- legacy formats (blocks of 32) ----------------------------------------------
struct QFmtQ4_0 {   // f16 d, 16 bytes of nibbles: d * (q - 8)
    enum { BLOCK = 32, BYTES = 18 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        return rlx_q_f16(b) * (float)((int)rlx_q_nib32(b + 2, j) - 8);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint) {
        const float d = rlx_q_f16(b);
        rlx_q32 o;
        for (uint e = 0; e < 16u; ++e) {
            o.v[e] = d * (float)((int)(b[2u + e] & 15u) - 8);
            o.v[e + 16u] = d * (float)((int)(b[2u + e] >> 4u) - 8);
        }
        return o;
    }
};

struct QFmtQ4_1 {   // f16 d, f16 m, nibbles: d * q + m
    enum { BLOCK = 32, BYTES = 20 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        return rlx_q_f16(b) * (float)rlx_q_nib32(b + 4, j) + rlx_q_f16(b + 2);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint) {
        const float d = rlx_q_f16(b), m = rlx_q_f16(b + 2);
        rlx_q32 o;
        for (uint e = 0; e < 16u; ++e) {
            o.v[e] = d * (float)(b[4u + e] & 15u) + m;
            o.v[e + 16u] = d * (float)(b[4u + e] >> 4u) + m;
        }
        return o;
    }
};

struct QFmtQ5_0 {   // f16 d, u32 of fifth bits, nibbles: d * (q - 16)
    enum { BLOCK = 32, BYTES = 22 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint q = rlx_q_nib32(b + 6, j) | (((rlx_q_u32(b + 2) >> j) & 1u) << 4u);
        return rlx_q_f16(b) * (float)((int)q - 16);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint) {
        const float d = rlx_q_f16(b);
        const uint qh = rlx_q_u32(b + 2);
        rlx_q32 o;
        for (uint e = 0; e < 16u; ++e) {
            o.v[e] = d * (float)((int)((b[6u + e] & 15u) | (((qh >> e) & 1u) << 4u)) - 16);
            o.v[e + 16u] = d * (float)((int)((b[6u + e] >> 4u) | (((qh >> (e + 16u)) & 1u) << 4u)) - 16);
        }
        return o;
    }
};

struct QFmtQ5_1 {   // f16 d, f16 m, u32 of fifth bits, nibbles: d * q + m
    enum { BLOCK = 32, BYTES = 24 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint q = rlx_q_nib32(b + 8, j) | (((rlx_q_u32(b + 4) >> j) & 1u) << 4u);
        return rlx_q_f16(b) * (float)q + rlx_q_f16(b + 2);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint) {
        const float d = rlx_q_f16(b), m = rlx_q_f16(b + 2);
        const uint qh = rlx_q_u32(b + 4);
        rlx_q32 o;
        for (uint e = 0; e < 16u; ++e) {
            o.v[e] = d * (float)((b[8u + e] & 15u) | (((qh >> e) & 1u) << 4u)) + m;
            o.v[e + 16u] = d * (float)((b[8u + e] >> 4u) | (((qh >> (e + 16u)) & 1u) << 4u)) + m;
        }
        return o;
    }
};

struct QFmtQ8_0 {   // f16 d, 32 int8: q * d
    enum { BLOCK = 32, BYTES = 34 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) { return (float)rlx_q_i8(b[2u + j]) * rlx_q_f16(b); }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint) {
        const float d = rlx_q_f16(b);
        rlx_q32 o;
        for (uint e = 0; e < 32u; ++e) o.v[e] = (float)rlx_q_i8(b[2u + e]) * d;
        return o;
    }
};

// ---- K-quants (blocks of 256) ---------------------------------------------------
// Two-bit and one-bit planes: element j = 128 g + 32 t + e (t = 0..3) is
// bits 2t..2t+1 of byte 32 g + e.
struct QFmtQ2_K {   // 16 scale bytes (4-bit scale, 4-bit min), 64 bytes of crumbs, f16 d, f16 dmin
    enum { BLOCK = 256, BYTES = 84 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint q = (b[16u + 32u * (j >> 7u) + (j & 31u)] >> (2u * ((j >> 5u) & 3u))) & 3u;
        const uint sc = b[j >> 4u];
        return rlx_q_f16(b + 80) * (float)(sc & 15u) * (float)q - rlx_q_f16(b + 82) * (float)(sc >> 4u);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        const float d = rlx_q_f16(b + 80), dmin = rlx_q_f16(b + 82);
        const uint sc0 = b[2u * s], sc1 = b[2u * s + 1u];
        const float dl0 = d * (float)(sc0 & 15u), ml0 = dmin * (float)(sc0 >> 4u);
        const float dl1 = d * (float)(sc1 & 15u), ml1 = dmin * (float)(sc1 >> 4u);
        RLX_DEVICE const uchar *qs = b + 16u + 32u * (s >> 2u);
        const uint shift = 2u * (s & 3u);
        rlx_q32 o;
        for (uint e = 0; e < 16u; ++e) {
            o.v[e] = dl0 * (float)((qs[e] >> shift) & 3u) - ml0;
            o.v[e + 16u] = dl1 * (float)((qs[e + 16u] >> shift) & 3u) - ml1;
        }
        return o;
    }
};

struct QFmtQ3_K {   // 32 bytes of high bits, 64 bytes of crumbs, 12 bytes of 6-bit scales, f16 d
    enum { BLOCK = 256, BYTES = 110 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint e = j & 31u;
        const int ql = (int)((b[32u + 32u * (j >> 7u) + e] >> (2u * ((j >> 5u) & 3u))) & 3u);
        const int hb = (int)((b[e] >> (j >> 5u)) & 1u);
        const float dl = rlx_q_f16(b + 108) * (float)rlx_q_q3k_scale(b + 96, j >> 4u);
        return dl * (float)(ql - ((hb ^ 1) << 2));
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        const float d = rlx_q_f16(b + 108);
        const float dl0 = d * (float)rlx_q_q3k_scale(b + 96, 2u * s);
        const float dl1 = d * (float)rlx_q_q3k_scale(b + 96, 2u * s + 1u);
        RLX_DEVICE const uchar *qs = b + 32u + 32u * (s >> 2u);
        const uint shift = 2u * (s & 3u);
        rlx_q32 o;
        for (uint e = 0; e < 32u; ++e) {
            const int ql = (int)((qs[e] >> shift) & 3u);
            const int hb = (int)((b[e] >> s) & 1u);
            o.v[e] = (e < 16u ? dl0 : dl1) * (float)(ql - ((hb ^ 1) << 2));
        }
        return o;
    }
};

struct QFmtQ4_K {   // f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles
    enum { BLOCK = 256, BYTES = 144 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint i = j >> 5u, sm = rlx_q_k_scale_min(b + 4, i);
        const uint q = (b[16u + 32u * (i >> 1u) + (j & 31u)] >> (4u * (i & 1u))) & 15u;
        return rlx_q_f16(b) * (float)(sm & 255u) * (float)q - rlx_q_f16(b + 2) * (float)(sm >> 8u);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        const uint sm = rlx_q_k_scale_min(b + 4, s);
        const float dl = rlx_q_f16(b) * (float)(sm & 255u), ml = rlx_q_f16(b + 2) * (float)(sm >> 8u);
        RLX_DEVICE const uchar *qs = b + 16u + 32u * (s >> 1u);
        const uint shift = 4u * (s & 1u);
        rlx_q32 o;
        for (uint e = 0; e < 32u; ++e) o.v[e] = dl * (float)((qs[e] >> shift) & 15u) - ml;
        return o;
    }
};

struct QFmtQ5_K {   // f16 d, f16 dmin, 12 scale bytes, 32 bytes of fifth bits, 128 bytes of nibbles
    enum { BLOCK = 256, BYTES = 176 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint i = j >> 5u, e = j & 31u, sm = rlx_q_k_scale_min(b + 4, i);
        const uint q = ((b[48u + 32u * (i >> 1u) + e] >> (4u * (i & 1u))) & 15u) | (((b[16u + e] >> i) & 1u) << 4u);
        return rlx_q_f16(b) * (float)(sm & 255u) * (float)q - rlx_q_f16(b + 2) * (float)(sm >> 8u);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        const uint sm = rlx_q_k_scale_min(b + 4, s);
        const float dl = rlx_q_f16(b) * (float)(sm & 255u), ml = rlx_q_f16(b + 2) * (float)(sm >> 8u);
        RLX_DEVICE const uchar *qs = b + 48u + 32u * (s >> 1u);
        const uint shift = 4u * (s & 1u);
        rlx_q32 o;
        for (uint e = 0; e < 32u; ++e) {
            const uint q = ((qs[e] >> shift) & 15u) | (((b[16u + e] >> s) & 1u) << 4u);
            o.v[e] = dl * (float)q - ml;
        }
        return o;
    }
};

struct QFmtQ6_K {   // 128 bytes of low nibbles, 64 bytes of high crumbs, 16 int8 scales, f16 d
    enum { BLOCK = 256, BYTES = 210 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint g = j >> 7u, t = (j >> 5u) & 3u, e = j & 31u;
        const uint lo = (b[64u * g + (j & 63u)] >> (4u * (t >> 1u))) & 15u;
        const uint hi = (b[128u + 32u * g + e] >> (2u * t)) & 3u;
        const float dl = rlx_q_f16(b + 208) * (float)rlx_q_i8(b[192u + (j >> 4u)]);
        return dl * (float)((int)(lo | (hi << 4u)) - 32);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        const uint g = s >> 2u, t = s & 3u;
        const float d = rlx_q_f16(b + 208);
        const float dl0 = d * (float)rlx_q_i8(b[192u + 2u * s]), dl1 = d * (float)rlx_q_i8(b[193u + 2u * s]);
        RLX_DEVICE const uchar *ql = b + 64u * g + 32u * (t & 1u);
        RLX_DEVICE const uchar *qh = b + 128u + 32u * g;
        const uint lshift = 4u * (t >> 1u), hshift = 2u * t;
        rlx_q32 o;
        for (uint e = 0; e < 32u; ++e) {
            const uint q = ((ql[e] >> lshift) & 15u) | (((qh[e] >> hshift) & 3u) << 4u);
            o.v[e] = (e < 16u ? dl0 : dl1) * (float)((int)q - 32);
        }
        return o;
    }
};

// ---- ternary formats (blocks of 256) -------------------------------------------
struct QFmtTQ1_0 {   // 48 + 4 bytes of base-3 digits (five or four a byte), f16 d: d * (q - 1)
    enum { BLOCK = 256, BYTES = 54 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        uint byte, p;
        if (j < 160u) {
            p = j >> 5u;
            byte = b[j & 31u];
        } else if (j < 240u) {
            p = (j - 160u) >> 4u;
            byte = b[32u + ((j - 160u) & 15u)];
        } else {
            p = (j - 240u) >> 2u;
            byte = b[48u + ((j - 240u) & 3u)];
        }
        const uint pw = p == 0u ? 1u : (p == 1u ? 3u : (p == 2u ? 9u : (p == 3u ? 27u : 81u)));
        const uint v = (byte * pw) & 255u;
        return rlx_q_f16(b + 52) * (float)((int)((v * 3u) >> 8u) - 1);
    }
    RLX_Q_SUB_FROM_ELEM
};

struct QFmtTQ2_0 {   // 64 bytes of crumbs, f16 d: d * (q - 1)
    enum { BLOCK = 256, BYTES = 66 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint q = (b[32u * (j >> 7u) + (j & 31u)] >> (2u * ((j >> 5u) & 3u))) & 3u;
        return rlx_q_f16(b + 64) * (float)((int)q - 1);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        const float d = rlx_q_f16(b + 64);
        RLX_DEVICE const uchar *qs = b + 32u * (s >> 2u);
        const uint shift = 2u * (s & 3u);
        rlx_q32 o;
        for (uint e = 0; e < 32u; ++e) o.v[e] = d * (float)((int)((qs[e] >> shift) & 3u) - 1);
        return o;
    }
};

// ---- non-linear 4-bit formats ---------------------------------------------------
struct QFmtIQ4_NL {   // f16 d, nibbles into the IQ4 table: d * kvalues[q]
    enum { BLOCK = 32, BYTES = 18 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        return rlx_q_f16(b) * rlx_q_kvalues_iq4nl[rlx_q_nib32(b + 2, j)];
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint) {
        const float d = rlx_q_f16(b);
        rlx_q32 o;
        for (uint e = 0; e < 16u; ++e) {
            o.v[e] = d * rlx_q_kvalues_iq4nl[b[2u + e] & 15u];
            o.v[e + 16u] = d * rlx_q_kvalues_iq4nl[b[2u + e] >> 4u];
        }
        return o;
    }
};

struct QFmtIQ4_XS {   // f16 d, u16 of scale high crumbs, 4 bytes of scale nibbles, 128 bytes of nibbles
    enum { BLOCK = 256, BYTES = 136 };
    RLX_QINLINE float scale(RLX_DEVICE const uchar *b, uint i) {
        const uint l = (b[4u + (i >> 1u)] >> (4u * (i & 1u))) & 15u;
        const uint h = (rlx_q_u16(b + 2) >> (2u * i)) & 3u;
        return rlx_q_f16(b) * (float)((int)(l | (h << 4u)) - 32);
    }
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        return scale(b, j >> 5u) * rlx_q_kvalues_iq4nl[rlx_q_nib32(b + 8u + 16u * (j >> 5u), j & 31u)];
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        const float dl = scale(b, s);
        RLX_DEVICE const uchar *qs = b + 8u + 16u * s;
        rlx_q32 o;
        for (uint e = 0; e < 16u; ++e) {
            o.v[e] = dl * rlx_q_kvalues_iq4nl[qs[e] & 15u];
            o.v[e + 16u] = dl * rlx_q_kvalues_iq4nl[qs[e] >> 4u];
        }
        return o;
    }
};

// ---- microscaling FP4 -----------------------------------------------------------
struct QFmtMXFP4 {   // E8M0 scale byte, nibbles of E2M1 (doubled): d/2 * kvalues[q]
    enum { BLOCK = 32, BYTES = 17 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        return rlx_q_e8m0_half(b[0]) * rlx_q_kvalues_fp4[rlx_q_nib32(b + 1, j)];
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint) {
        const float d = rlx_q_e8m0_half(b[0]);
        rlx_q32 o;
        for (uint e = 0; e < 16u; ++e) {
            o.v[e] = d * rlx_q_kvalues_fp4[b[1u + e] & 15u];
            o.v[e + 16u] = d * rlx_q_kvalues_fp4[b[1u + e] >> 4u];
        }
        return o;
    }
};

struct QFmtNVFP4 {   // 4 UE4M3 scales (one per 16 elements), 4 x 8 bytes of E2M1 nibbles
    enum { BLOCK = 64, BYTES = 36 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint s = j >> 4u, e = j & 15u;
        const uint q = (b[4u + 8u * s + (e & 7u)] >> (4u * (e >> 3u))) & 15u;
        return rlx_q_ue4m3_half(b[s]) * rlx_q_kvalues_fp4[q];
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        rlx_q32 o;
        for (uint h = 0; h < 2u; ++h) {
            const uint sb = 2u * s + h;
            const float d = rlx_q_ue4m3_half(b[sb]);
            RLX_DEVICE const uchar *qs = b + 4u + 8u * sb;
            for (uint e = 0; e < 8u; ++e) {
                o.v[16u * h + e] = d * rlx_q_kvalues_fp4[qs[e] & 15u];
                o.v[16u * h + e + 8u] = d * rlx_q_kvalues_fp4[qs[e] >> 4u];
            }
        }
        return o;
    }
};

// ---- bf16 (blocks of one element) -----------------------------------------------
struct QFmtBF16 {
    enum { BLOCK = 1, BYTES = 2 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint) { return rlx_bits_to_float(rlx_q_u16(b) << 16u); }
    // 32 consecutive values from b (sub is always 0: rlx_q_chunk below).
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint) {
        rlx_q32 o;
        for (uint e = 0; e < 32u; ++e) o.v[e] = rlx_bits_to_float(rlx_q_u16(b + 2u * e) << 16u);
        return o;
    }
};

// ---- IQ grid formats (blocks of 256) --------------------------------------------
// The grids (shaders/quant_tables.h) hold an entry's 8 (IQ2, IQ1) or 4 (IQ3)
// values, one byte each. The IQ2 / IQ3_XXS signs come 7 bits at a time
// through rlx_q_ksigns (the eighth bit is the parity); IQ2_S / IQ3_S store
// one sign bit per element.
RLX_QINLINE float rlx_q_sign(uint bit) { return bit ? -1.0f : 1.0f; }

struct QFmtIQ2_XXS {   // f16 d, then per 32 elements a u32 of 4 grid indices and a u32 of 4 x 7 sign bits + 4-bit scale
    enum { BLOCK = 256, BYTES = 66 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        RLX_DEVICE const uchar *q = b + 2u + 8u * (j >> 5u);
        const uint aux = rlx_q_u32(q + 4), l = (j >> 3u) & 3u, i = j & 7u;
        const float db = rlx_q_f16(b) * (0.5f + (float)(aux >> 28u)) * 0.25f;
        const uint sign = (rlx_q_ksigns[(aux >> (7u * l)) & 127u] >> i) & 1u;
        return db * (float)rlx_q_grid_iq2xxs[8u * q[l] + i] * rlx_q_sign(sign);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        RLX_DEVICE const uchar *q = b + 2u + 8u * s;
        const uint aux = rlx_q_u32(q + 4);
        const float db = rlx_q_f16(b) * (0.5f + (float)(aux >> 28u)) * 0.25f;
        rlx_q32 o;
        for (uint l = 0; l < 4u; ++l) {
            const uint signs = rlx_q_ksigns[(aux >> (7u * l)) & 127u], g = 8u * q[l];
            for (uint i = 0; i < 8u; ++i)
                o.v[8u * l + i] = db * (float)rlx_q_grid_iq2xxs[g + i] * rlx_q_sign((signs >> i) & 1u);
        }
        return o;
    }
};

struct QFmtIQ2_XS {   // f16 d, 32 u16 (9-bit grid index, 7 sign bits), 8 bytes of 4-bit scales (one per 16)
    enum { BLOCK = 256, BYTES = 74 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint qv = rlx_q_u16(b + 2u + 2u * (j >> 3u)), i = j & 7u;
        const uint sc = (b[66u + (j >> 5u)] >> (4u * ((j >> 4u) & 1u))) & 15u;
        const float db = rlx_q_f16(b) * (0.5f + (float)sc) * 0.25f;
        const uint sign = (rlx_q_ksigns[qv >> 9u] >> i) & 1u;
        return db * (float)rlx_q_grid_iq2xs[8u * (qv & 511u) + i] * rlx_q_sign(sign);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        const float d = rlx_q_f16(b);
        const uint scb = b[66u + s];
        const float db0 = d * (0.5f + (float)(scb & 15u)) * 0.25f, db1 = d * (0.5f + (float)(scb >> 4u)) * 0.25f;
        rlx_q32 o;
        for (uint l = 0; l < 4u; ++l) {
            const uint qv = rlx_q_u16(b + 2u + 8u * s + 2u * l);
            const uint signs = rlx_q_ksigns[qv >> 9u], g = 8u * (qv & 511u);
            const float db = l < 2u ? db0 : db1;
            for (uint i = 0; i < 8u; ++i)
                o.v[8u * l + i] = db * (float)rlx_q_grid_iq2xs[g + i] * rlx_q_sign((signs >> i) & 1u);
        }
        return o;
    }
};

struct QFmtIQ2_S {   // f16 d, 32 index bytes, 32 sign bytes, 8 bytes of index high crumbs, 8 bytes of 4-bit scales
    enum { BLOCK = 256, BYTES = 82 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint l = j >> 3u, i = j & 7u;
        const uint idx = b[2u + l] | (((b[66u + (l >> 2u)] >> (2u * (l & 3u))) & 3u) << 8u);
        const uint sc = (b[74u + (j >> 5u)] >> (4u * ((j >> 4u) & 1u))) & 15u;
        const float db = rlx_q_f16(b) * (0.5f + (float)sc) * 0.25f;
        return db * (float)rlx_q_grid_iq2s[8u * idx + i] * rlx_q_sign((b[34u + l] >> i) & 1u);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        const float d = rlx_q_f16(b);
        const uint scb = b[74u + s], qh = b[66u + s];
        const float db0 = d * (0.5f + (float)(scb & 15u)) * 0.25f, db1 = d * (0.5f + (float)(scb >> 4u)) * 0.25f;
        rlx_q32 o;
        for (uint l = 0; l < 4u; ++l) {
            const uint g = 8u * (b[2u + 4u * s + l] | (((qh >> (2u * l)) & 3u) << 8u));
            const uint signs = b[34u + 4u * s + l];
            const float db = l < 2u ? db0 : db1;
            for (uint i = 0; i < 8u; ++i)
                o.v[8u * l + i] = db * (float)rlx_q_grid_iq2s[g + i] * rlx_q_sign((signs >> i) & 1u);
        }
        return o;
    }
};

struct QFmtIQ3_XXS {   // f16 d, 64 grid index bytes (4 values each), 8 u32 of 4 x 7 sign bits + 4-bit scale
    enum { BLOCK = 256, BYTES = 98 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint aux = rlx_q_u32(b + 66u + 4u * (j >> 5u)), l = (j >> 3u) & 3u, i = j & 7u;
        const float db = rlx_q_f16(b) * (0.5f + (float)(aux >> 28u)) * 0.5f;
        const uint sign = (rlx_q_ksigns[(aux >> (7u * l)) & 127u] >> i) & 1u;
        return db * (float)rlx_q_grid_iq3xxs[4u * b[2u + (j >> 2u)] + (j & 3u)] * rlx_q_sign(sign);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        const uint aux = rlx_q_u32(b + 66u + 4u * s);
        const float db = rlx_q_f16(b) * (0.5f + (float)(aux >> 28u)) * 0.5f;
        RLX_DEVICE const uchar *q = b + 2u + 8u * s;
        rlx_q32 o;
        for (uint l = 0; l < 4u; ++l) {
            const uint signs = rlx_q_ksigns[(aux >> (7u * l)) & 127u];
            for (uint h = 0; h < 2u; ++h) {
                const uint g = 4u * q[2u * l + h];
                for (uint t = 0; t < 4u; ++t) {
                    const uint i = 4u * h + t;
                    o.v[8u * l + i] = db * (float)rlx_q_grid_iq3xxs[g + t] * rlx_q_sign((signs >> i) & 1u);
                }
            }
        }
        return o;
    }
};

struct QFmtIQ3_S {   // f16 d, 64 index bytes, 8 bytes of index ninth bits, 32 sign bytes, 4 bytes of 4-bit scales
    enum { BLOCK = 256, BYTES = 110 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint l = j >> 2u, ib = j >> 5u;
        const uint idx = b[2u + l] | (((b[66u + (l >> 3u)] >> (l & 7u)) & 1u) << 8u);
        const uint sc = (b[106u + (ib >> 1u)] >> (4u * (ib & 1u))) & 15u;
        const float db = rlx_q_f16(b) * (float)(1u + 2u * sc);
        return db * (float)rlx_q_grid_iq3s[4u * idx + (j & 3u)] * rlx_q_sign((b[74u + (j >> 3u)] >> (j & 7u)) & 1u);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        const uint sc = (b[106u + (s >> 1u)] >> (4u * (s & 1u))) & 15u, qh = b[66u + s];
        const float db = rlx_q_f16(b) * (float)(1u + 2u * sc);
        rlx_q32 o;
        for (uint l = 0; l < 8u; ++l) {
            const uint g = 4u * (b[2u + 8u * s + l] | (((qh >> l) & 1u) << 8u));
            const uint signs = b[74u + 4u * s + (l >> 1u)] >> (4u * (l & 1u));
            for (uint t = 0; t < 4u; ++t)
                o.v[4u * l + t] = db * (float)rlx_q_grid_iq3s[g + t] * rlx_q_sign((signs >> t) & 1u);
        }
        return o;
    }
};

// IQ1: grid values -1, 0, 1 (stored plus one) shifted by +-1/8.
struct QFmtIQ1_S {   // f16 d, 32 index bytes, 8 u16 (4 x 3 index high bits, 3-bit scale, delta sign)
    enum { BLOCK = 256, BYTES = 50 };
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint h = rlx_q_u16(b + 34u + 2u * (j >> 5u)), l = j >> 3u;
        const float dl = rlx_q_f16(b) * (float)(2u * ((h >> 12u) & 7u) + 1u);
        const float delta = (h & 0x8000u) ? -0.125f : 0.125f;
        const uint idx = b[2u + l] | (((h >> (3u * (l & 3u))) & 7u) << 8u);
        return dl * ((float)((int)rlx_q_grid_iq1s[8u * idx + (j & 7u)] - 1) + delta);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        const uint h = rlx_q_u16(b + 34u + 2u * s);
        const float dl = rlx_q_f16(b) * (float)(2u * ((h >> 12u) & 7u) + 1u);
        const float delta = (h & 0x8000u) ? -0.125f : 0.125f;
        rlx_q32 o;
        for (uint l = 0; l < 4u; ++l) {
            const uint g = 8u * (b[2u + 4u * s + l] | (((h >> (3u * l)) & 7u) << 8u));
            for (uint i = 0; i < 8u; ++i) o.v[8u * l + i] = dl * ((float)((int)rlx_q_grid_iq1s[g + i] - 1) + delta);
        }
        return o;
    }
};

struct QFmtIQ1_M {   // 32 index bytes, 16 bytes of nibbles (3 index high bits, delta sign), 4 u16 of 3-bit scales + f16 d in the top nibbles
    enum { BLOCK = 256, BYTES = 56 };
    RLX_QINLINE float d(RLX_DEVICE const uchar *b) {
        const uint w0 = rlx_q_u16(b + 48), w1 = rlx_q_u16(b + 50), w2 = rlx_q_u16(b + 52), w3 = rlx_q_u16(b + 54);
        return rlx_half_bits_to_float((w0 >> 12u) | ((w1 & 0xF000u) >> 8u) | ((w2 & 0xF000u) >> 4u) | (w3 & 0xF000u));
    }
    // The scale of elements [16 i, 16 i + 16).
    RLX_QINLINE float dl(RLX_DEVICE const uchar *b, float dd, uint i) {
        const uint sc = (rlx_q_u16(b + 48u + 2u * (i >> 2u)) >> (3u * (i & 3u))) & 7u;
        return dd * (float)(2u * sc + 1u);
    }
    RLX_QINLINE float elem(RLX_DEVICE const uchar *b, uint j) {
        const uint l = j >> 3u, nib = b[32u + (l >> 1u)] >> (4u * (l & 1u));
        const uint idx = b[l] | ((nib & 7u) << 8u);
        const float delta = (nib & 8u) ? -0.125f : 0.125f;
        return dl(b, d(b), j >> 4u) * ((float)((int)rlx_q_grid_iq1s[8u * idx + (j & 7u)] - 1) + delta);
    }
    RLX_QINLINE rlx_q32 sub(RLX_DEVICE const uchar *b, uint s) {
        const float dd = d(b), dl0 = dl(b, dd, 2u * s), dl1 = dl(b, dd, 2u * s + 1u);
        rlx_q32 o;
        for (uint l = 0; l < 4u; ++l) {
            const uint nib = b[32u + 2u * s + (l >> 1u)] >> (4u * (l & 1u));
            const uint g = 8u * (b[4u * s + l] | ((nib & 7u) << 8u));
            const float delta = (nib & 8u) ? -0.125f : 0.125f, dls = l < 2u ? dl0 : dl1;
            for (uint i = 0; i < 8u; ++i) o.v[8u * l + i] = dls * ((float)((int)rlx_q_grid_iq1s[g + i] - 1) + delta);
        }
        return o;
    }
};

#ifdef RLX_TARGET_CPU
}  // namespace
#endif

// ---- generic access -------------------------------------------------------------
// Element i of the data at base (blocks from base on).
template <typename Q>
RLX_QINLINE float rlx_q_get(RLX_DEVICE const uchar *base, uint64_t i) {
    return Q::elem(base + (i / (uint)Q::BLOCK) * (uint)Q::BYTES, (uint)(i % (uint)Q::BLOCK));
}
// Elements [32 c, 32 c + 32) of the data at base.
template <typename Q>
RLX_QINLINE rlx_q32 rlx_q_chunk(RLX_DEVICE const uchar *base, uint64_t c) {
    const uint64_t e = c * 32u;
    return Q::sub(base + (e / (uint)Q::BLOCK) * (uint)Q::BYTES, (uint)((e % (uint)Q::BLOCK) / 32u));
}
