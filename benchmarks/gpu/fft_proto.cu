// Standalone prototype (issue 19): batched complex FFT of contiguous rows as
// Stockham passes of radix up to 16 in registers, each thread holding
// P = N / T points, one group-memory exchange between passes. Built with
// nvcc by benchmarks/gpu/fft_proto.py, which checks each variant against
// torch.fft and times it beside cuFFT in the same process. Not part of the
// library: the form that wins moves into shaders/fft.h.
#include <cuda_runtime.h>

struct cf { float x, y; };
__device__ __forceinline__ cf mk(float a, float b) { cf c; c.x = a; c.y = b; return c; }
__device__ __forceinline__ cf add(cf a, cf b) { return mk(a.x + b.x, a.y + b.y); }
__device__ __forceinline__ cf sub(cf a, cf b) { return mk(a.x - b.x, a.y - b.y); }
__device__ __forceinline__ cf mul(cf a, cf b) { return mk(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
__device__ __forceinline__ cf negi(cf a) { return mk(a.y, -a.x); }   // -i a

// Forward DFT of R points in place (exp(-2 pi i jk / R)), R = 2, 4, 8, 16.
template <int R> struct Dft;
template <> struct Dft<1> {
    __device__ __forceinline__ static void run(cf *) {}
};
template <> struct Dft<2> {
    __device__ __forceinline__ static void run(cf *v) { cf a = v[0], b = v[1]; v[0] = add(a, b); v[1] = sub(a, b); }
};
template <> struct Dft<4> {
    __device__ __forceinline__ static void run(cf *v) {
        cf t0 = add(v[0], v[2]), t1 = sub(v[0], v[2]), t2 = add(v[1], v[3]), t3 = negi(sub(v[1], v[3]));
        v[0] = add(t0, t2); v[2] = sub(t0, t2); v[1] = add(t1, t3); v[3] = sub(t1, t3);
    }
};
template <> struct Dft<8> {
    __device__ __forceinline__ static void run(cf *v) {
        cf e[4] = {v[0], v[2], v[4], v[6]}, o[4] = {v[1], v[3], v[5], v[7]};
        Dft<4>::run(e); Dft<4>::run(o);
        const float s = 0.70710678118654752f;
        cf w1 = mul(o[1], mk(s, -s)), w2 = negi(o[2]), w3 = mul(o[3], mk(-s, -s));
        v[0] = add(e[0], o[0]); v[4] = sub(e[0], o[0]);
        v[1] = add(e[1], w1); v[5] = sub(e[1], w1);
        v[2] = add(e[2], w2); v[6] = sub(e[2], w2);
        v[3] = add(e[3], w3); v[7] = sub(e[3], w3);
    }
};
template <> struct Dft<16> {
    __device__ __forceinline__ static void run(cf *v) {
        cf e[8], o[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) { e[i] = v[2 * i]; o[i] = v[2 * i + 1]; }
        Dft<8>::run(e); Dft<8>::run(o);
        const float c1 = 0.92387953251128674f, s1 = 0.38268343236508977f, s = 0.70710678118654752f;
        const cf w[8] = {mk(1, 0), mk(c1, -s1), mk(s, -s), mk(s1, -c1), mk(0, -1), mk(-s1, -c1), mk(-s, -s), mk(-c1, -s1)};
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            cf t = k == 0 ? o[0] : (k == 4 ? negi(o[4]) : mul(o[k], w[k]));
            v[k] = add(e[k], t); v[k + 8] = sub(e[k], t);
        }
    }
};

__device__ __forceinline__ int pad(int i) { return i + (i >> 4); }

// One Stockham pass: radix R over span Ns; the thread holds butterflies
// b = t + i T (i < P / R), values v[i R + r] read from a[b + r N / R].
template <int N, int T, int P, int R, int Ns>
__device__ __forceinline__ void butterflies(cf *v, int t, const float2 *__restrict__ tw) {
#pragma unroll
    for (int i = 0; i < P / R; ++i) {
        const int b = t + i * T, k = b % Ns;
        cf *u = v + i * R;
        if (Ns > 1) {
#pragma unroll
            for (int r = 1; r < R; ++r) {
                const float2 w = __ldg(tw + k * r * (N / (Ns * R)));
                u[r] = mul(u[r], mk(w.x, w.y));
            }
        }
        Dft<R>::run(u);
    }
}

template <int N, int T, int P, int R, int Ns>
__device__ __forceinline__ void write_out(const cf *v, int t, float2 *s) {
#pragma unroll
    for (int i = 0; i < P / R; ++i) {
        const int b = t + i * T, k = b % Ns, o = (b / Ns) * Ns * R + k;
#pragma unroll
        for (int r = 0; r < R; ++r) s[pad(o + r * Ns)] = make_float2(v[i * R + r].x, v[i * R + r].y);
    }
}

template <int N, int T, int P, int R>
__device__ __forceinline__ void read_in(cf *v, int t, const float2 *s) {
#pragma unroll
    for (int i = 0; i < P / R; ++i) {
        const int b = t + i * T;
#pragma unroll
        for (int r = 0; r < R; ++r) { float2 q = s[pad(b + r * (N / R))]; v[i * R + r] = mk(q.x, q.y); }
    }
}

template <int T> __device__ __forceinline__ void sync_row() {
    if (T <= 32) __syncwarp(); else __syncthreads();
}

// Passes R0, R1, R2, R3 (0 = none); N = product.
template <int N, int T, int BLOCK, int MINB, int R0, int R1, int R2, int R3>
__global__ void __launch_bounds__(BLOCK, MINB) fft_rows(const float2 *__restrict__ src, float2 *__restrict__ dst,
                                                        const float2 *__restrict__ tw, int rows) {
    constexpr int P = N / T, RPB = BLOCK / T, SN = N + N / 16;
    __shared__ float2 smem[RPB * SN];
    const int lr = threadIdx.x / T, t = threadIdx.x % T;
    const int row = blockIdx.x * RPB + lr;
    const bool live = row < rows;
    float2 *s = smem + lr * SN;
    cf v[P];
    // pass 0 reads the source: a[b + r N / R0]
    {
        const float2 *x = src + (size_t)row * N;
#pragma unroll
        for (int i = 0; i < P / R0; ++i) {
#pragma unroll
            for (int r = 0; r < R0; ++r) {
                float2 q = live ? __ldg(x + t + i * T + r * (N / R0)) : make_float2(0.f, 0.f);
                v[i * R0 + r] = mk(q.x, q.y);
            }
        }
    }
    butterflies<N, T, P, R0, 1>(v, t, tw);
    constexpr int N1 = R0;
    if (R1) {
        write_out<N, T, P, R0, 1>(v, t, s);
        sync_row<T>();
        read_in<N, T, P, (R1 ? R1 : 1)>(v, t, s);
        butterflies<N, T, P, (R1 ? R1 : 1), N1>(v, t, tw);
    }
    constexpr int N2 = N1 * (R1 ? R1 : 1);
    if (R2) {
        sync_row<T>();
        write_out<N, T, P, (R1 ? R1 : 1), N1>(v, t, s);
        sync_row<T>();
        read_in<N, T, P, (R2 ? R2 : 1)>(v, t, s);
        butterflies<N, T, P, (R2 ? R2 : 1), N2>(v, t, tw);
    }
    constexpr int N3 = N2 * (R2 ? R2 : 1);
    if (R3) {
        sync_row<T>();
        write_out<N, T, P, (R2 ? R2 : 1), N2>(v, t, s);
        sync_row<T>();
        read_in<N, T, P, (R3 ? R3 : 1)>(v, t, s);
        butterflies<N, T, P, (R3 ? R3 : 1), N3>(v, t, tw);
    }
    // the last pass (radix RL over span N / RL) writes b + r N / RL: coalesced
    constexpr int RL = R3 ? R3 : (R2 ? R2 : (R1 ? R1 : R0));
    if (!live) return;
    float2 *y = dst + (size_t)row * N;
#pragma unroll
    for (int i = 0; i < P / RL; ++i) {
#pragma unroll
        for (int r = 0; r < RL; ++r) y[t + i * T + r * (N / RL)] = make_float2(v[i * RL + r].x, v[i * RL + r].y);
    }
}

// The library's shape (shaders/fft.h's digit passes: in-place DIT, the
// radix that is not 16 first, pass 0 from global memory, the last pass to
// it) with what the library lacks: N at compile time and a slot layout
// linear in r within a pass (a pair of padding after every 16, and with
// PAD2 after every 256 too, for pass 0's stride-256 writes at N = 4096),
// so that the offsets fold into immediates as the Stockham kernel's do.
// Written for the next A/B (session 32's SASS: the library's swizzle costs
// ~5 instructions a group-memory access); not yet run on a GPU.
template <int PAD2> __device__ __forceinline__ int dit_slot(int a) { return a + (a >> 4) + (PAD2 ? (a >> 8) : 0); }

__host__ __device__ constexpr int ilog2(int n) { return n <= 1 ? 0 : 1 + ilog2(n / 2); }

template <int N, int T, int R, int HBITS, bool LAST, int PAD2>
__device__ __forceinline__ void dit_pass(float2 *s, float2 *y, const float2 *__restrict__ tw, int t, bool live) {
    constexpr int H = 1 << HBITS, BITS = ilog2(N), RB = ilog2(R);
#pragma unroll
    for (int i = 0; i < N / (R * T); ++i) {
        const int u = t + i * T, k = u & (H - 1), base = ((u >> HBITS) << (HBITS + RB)) + k;
        cf x[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const float2 q = s[dit_slot<PAD2>(base + r * H)];
            x[r] = mk(q.x, q.y);
            if (r > 0) {
                const float2 w = __ldg(tw + ((k * r) << (BITS - HBITS - RB)));
                x[r] = mul(x[r], mk(w.x, w.y));
            }
        }
        Dft<R>::run(x);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if (LAST) {
                if (live) y[k + r * H] = make_float2(x[r].x, x[r].y);
            } else {
                s[dit_slot<PAD2>(base + r * H)] = make_float2(x[r].x, x[r].y);
            }
        }
    }
}

template <int N, int T, int BLOCK, int MINB, int PAD2>
__global__ void __launch_bounds__(BLOCK, MINB) fft_dit_rows(const float2 *__restrict__ src, float2 *__restrict__ dst,
                                                            const float2 *__restrict__ tw, int rows) {
    constexpr int BITS = ilog2(N), PASSES = BITS <= 4 ? 1 : (BITS + 3) / 4;
    constexpr int FB = BITS <= 4 ? BITS : BITS - 4 * (PASSES - 1), R0 = 1 << FB, TB = BITS - FB;
    constexpr int RPB = BLOCK / T, SN = N + N / 16 + (PAD2 ? N / 256 : 0);
    static_assert(PASSES >= 2 && PASSES <= 3, "256 <= N <= 4096 here");
    __shared__ float2 smem[RPB * SN];
    const int lr = threadIdx.x / T, t = threadIdx.x % T;
    const int row = blockIdx.x * RPB + lr;
    const bool live = row < rows;
    float2 *s = smem + lr * SN;
    const float2 *x = src + (size_t)row * N;
#pragma unroll
    for (int i = 0; i < N / (R0 * T); ++i) {
        const int b = t + i * T;
        cf v[R0];
#pragma unroll
        for (int r = 0; r < R0; ++r) {
            const float2 q = live ? __ldg(x + b + r * (N / R0)) : make_float2(0.f, 0.f);
            v[r] = mk(q.x, q.y);
        }
        Dft<R0>::run(v);
        int c = 0;   // b's radix-16 digits in reverse order
#pragma unroll
        for (int d = 0; d < TB; d += 4) c |= ((b >> d) & 15) << (TB - 4 - d);
#pragma unroll
        for (int r = 0; r < R0; ++r) s[dit_slot<PAD2>(c * R0 + r)] = make_float2(v[r].x, v[r].y);
    }
    sync_row<T>();
    float2 *y = dst + (size_t)row * N;
    if constexpr (PASSES == 2) {
        dit_pass<N, T, 16, FB, true, PAD2>(s, y, tw, t, live);
    } else {
        dit_pass<N, T, 16, FB, false, PAD2>(s, y, tw, t, live);
        sync_row<T>();
        dit_pass<N, T, 16, FB + 4, true, PAD2>(s, y, tw, t, live);
    }
}

// An exported launcher of one kernel instance (the template arguments ride
// in __VA_ARGS__, commas and all): a group per RPB rows.
#define LAUNCHER(name, RPB, BLOCK, ...)                                                                         \
    extern "C" int name(const void *src, void *dst, const void *tw, int rows, void *stream) {                \
        __VA_ARGS__<<<(rows + (RPB) - 1) / (RPB), BLOCK, 0, (cudaStream_t)stream>>>(                          \
            (const float2 *)src, (float2 *)dst, (const float2 *)tw, rows);                                    \
        return (int)cudaGetLastError();                                                                       \
    }
#define VARIANT(name, N, T, BLOCK, MINB, R0, R1, R2, R3) \
    LAUNCHER(name, BLOCK / T, BLOCK, fft_rows<N, T, BLOCK, MINB, R0, R1, R2, R3>)
#define VARIANT_DIT(name, N, T, BLOCK, MINB, PAD2) \
    LAUNCHER(name, BLOCK / T, BLOCK, fft_dit_rows<N, T, BLOCK, MINB, PAD2>)

VARIANT(n256_t16_b256_16_16, 256, 16, 256, 1, 16, 16, 0, 0)
VARIANT(n256_t16_b128_16_16, 256, 16, 128, 1, 16, 16, 0, 0)
VARIANT(n256_t32_b256_8_8_4, 256, 32, 256, 1, 8, 8, 4, 0)
VARIANT(n256_t64_b256_4x4, 256, 64, 256, 1, 4, 4, 4, 4)
VARIANT(n1024_t64_b256_16_16_4, 1024, 64, 256, 1, 16, 16, 4, 0)
VARIANT(n1024_t128_b256_8_8_16x, 1024, 128, 256, 1, 8, 8, 8, 2)
VARIANT(n1024_t64_b128_16_16_4, 1024, 64, 128, 1, 16, 16, 4, 0)
VARIANT(n4096_t256_b256_16x3, 4096, 256, 256, 1, 16, 16, 16, 0)
VARIANT(n4096_t512_b512_8x4, 4096, 512, 512, 1, 8, 8, 8, 8)
VARIANT(n4096_t256_b256_16x3_m2, 4096, 256, 256, 2, 16, 16, 16, 0)
VARIANT(n256_t16_b256_16_16_m4, 256, 16, 256, 4, 16, 16, 0, 0)
VARIANT(n256_t16_b64_16_16, 256, 16, 64, 1, 16, 16, 0, 0)
VARIANT(n1024_t64_b256_16_16_4_m3, 1024, 64, 256, 3, 16, 16, 4, 0)
VARIANT(n4096_t256_b256_16x3_m3, 4096, 256, 256, 3, 16, 16, 16, 0)
VARIANT(n4096_t256_b256_16x3_m4, 4096, 256, 256, 4, 16, 16, 16, 0)
VARIANT(n1024_t64_b256_16_16_4_m4, 1024, 64, 256, 4, 16, 16, 4, 0)
VARIANT(n512_t32_b256_16_16_2, 512, 32, 256, 1, 16, 16, 2, 0)
VARIANT(n512_t64_b256_8_8_8, 512, 64, 256, 1, 8, 8, 8, 0)
VARIANT(n2048_t128_b256_16_16_8, 2048, 128, 256, 1, 16, 16, 8, 0)
VARIANT(n2048_t256_b256_8_8_8_4, 2048, 256, 256, 1, 8, 8, 8, 4)
VARIANT(n64_t8_b256_8_8, 64, 8, 256, 1, 8, 8, 0, 0)
VARIANT(n16_t1_b256_16, 16, 1, 256, 1, 16, 0, 0, 0)
VARIANT_DIT(n256_dit_t16_b256_pad1, 256, 16, 256, 4, 0)
VARIANT_DIT(n1024_dit_t64_b256_pad2, 1024, 64, 256, 4, 1)
VARIANT_DIT(n4096_dit_t256_b256_pad1, 4096, 256, 256, 4, 0)
VARIANT_DIT(n4096_dit_t256_b256_pad2, 4096, 256, 256, 4, 1)
VARIANT_DIT(n4096_dit_t256_b256_pad2_m3, 4096, 256, 256, 3, 1)
