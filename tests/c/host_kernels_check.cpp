// Runs the host shim's built-in kernels through the shim ABI and checks them
// against double-precision answers computed here. Built for ARM64 with a
// cross compiler and run under qemu-user by tests/runtime/test_arm64_host.py,
// so the CPU prelude's ARM64 form (NEON auto-vectorized loops, __fp16 halves)
// is checked on every change without an ARM64 machine. No Python, numpy or
// BLAS is needed on the emulated side: the shim falls back to its own gemm.
//
// Usage: host_kernels_check path/to/librlx_host.so [device options [quant cases]]
// prints the device's name and one line per check, and exits non-zero if any
// failed. The optional third argument is a file of GGUF block-format cases
// (the format is described at check_quant below), whose expected values the
// gguf package computed on the x86 side; with it the quant kernels of
// shaders/quant.h are checked too, one line per format and kernel.

#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "rlx_shim.h"

namespace {

#if defined(__aarch64__)
typedef __fp16 half_t;     // as the CPU prelude's half there
#else
typedef _Float16 half_t;
#endif

const rlx_shim_api *api;
rlx_device *dev;
rlx_library *lib;
int failures = 0;

void check(bool ok, const char *what) {
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) ++failures;
}

rlx_buffer *upload(const void *data, size_t bytes) {
    rlx_buffer *b = nullptr;
    if (api->buffer_alloc(dev, bytes ? bytes : 4, &b) != RLX_OK) return nullptr;
    if (bytes) api->buffer_write(b, 0, data, bytes);
    return b;
}

template <typename T>
std::vector<T> download(rlx_buffer *b, size_t n) {
    std::vector<T> out(n);
    api->buffer_read(b, 0, out.data(), n * sizeof(T));
    return out;
}

// One dispatch of kernel `name` over `groups` groups of one thread (the CPU
// target's groups), binding `bufs` in order; the params are the last binding.
bool run(const char *name, std::vector<rlx_buffer *> bufs, uint32_t groups) {
    rlx_pipeline *pipe = nullptr;
    rlx_pipeline_info info;
    if (api->pipeline_get(lib, name, 0, &pipe, &info) != RLX_OK) {
        std::printf("no kernel %s: %s\n", name, api->last_error());
        return false;
    }
    rlx_cmdbuf *cb = nullptr;
    if (api->cmd_begin(dev, &cb) != RLX_OK) return false;
    api->cmd_set_pipeline(cb, pipe);
    for (uint32_t i = 0; i < bufs.size(); ++i) api->cmd_set_buffer(cb, i, bufs[i], 0);
    const uint32_t g[3] = {groups, 1, 1}, t[3] = {1, 1, 1};
    rlx_status s = api->cmd_dispatch(cb, g, t);
    if (s == RLX_OK) s = api->cmd_commit(cb);
    if (s == RLX_OK) s = api->cmd_wait(cb, nullptr);
    if (s != RLX_OK) std::printf("%s: %s\n", name, api->last_error());
    api->cmd_release(cb);
    return s == RLX_OK;
}

double gelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }

void check_binary_maximum() {
    // maximum propagates NaN from either side (BinaryParams: 8 + 3 x 6 uint32).
    const uint32_t n = 37;
    std::vector<float> a(n), b(n);
    for (uint32_t i = 0; i < n; ++i) a[i] = (float)i - 18.0f, b[i] = 18.0f - (float)i;
    a[3] = NAN, b[30] = NAN;
    uint32_t p[26] = {n, 1, 4 /* maximum */, 1, 0, 0, 0, 0, n, 1, 1, 1, 1, 1};
    rlx_buffer *ba = upload(a.data(), 4 * n), *bb = upload(b.data(), 4 * n), *bo = upload(nullptr, 4 * n),
               *bp = upload(p, sizeof p);
    bool ok = run("binary_f32", {ba, bb, bo, bp}, 3);
    std::vector<float> o = download<float>(bo, n);
    for (uint32_t i = 0; i < n && ok; ++i) {
        const bool want_nan = i == 3 || i == 30;
        ok = want_nan ? std::isnan(o[i]) : o[i] == std::fmax(a[i], b[i]);
    }
    check(ok, "binary_f32 maximum (NaN from either side)");
}

template <typename T>
void check_gelu(const char *kernel) {
    // UnaryParams: n, op (0 = gelu erf), in_offset, out_offset, scale, shift, pad, pad.
    const uint32_t n = 301;
    std::vector<T> x(n);
    for (uint32_t i = 0; i < n; ++i) x[i] = (T)(-12.0f + 18.0f * (float)i / (float)(n - 1));
    uint32_t p[8] = {n, 0, 0, 0, 0, 0, 0, 0};
    const float one = 1.0f;
    std::memcpy(&p[4], &one, 4);
    rlx_buffer *bx = upload(x.data(), sizeof(T) * n), *by = upload(nullptr, sizeof(T) * n),
               *bp = upload(p, sizeof p);
    bool ok = run(kernel, {bx, by, bp}, 4);
    std::vector<T> y = download<T>(by, n);
    const double tol = sizeof(T) == 4 ? 2e-5 : 2e-3;
    for (uint32_t i = 0; i < n && ok; ++i) {
        const double want = gelu((double)(float)x[i]), got = (double)(float)y[i];
        ok = std::fabs(got - want) <= tol * std::fmax(std::fabs(want), sizeof(T) == 4 ? 1e-30 : 1e-4);
        if (!ok) std::printf("  gelu(%g): got %.9g, want %.9g\n", (double)(float)x[i], got, want);
    }
    check(ok, kernel);
}

void check_softmax() {
    // SoftmaxParams: rows, cols, in_offset, out_offset; row 1 is -inf everywhere (zeros), row 2 holds a NaN.
    const uint32_t rows = 3, cols = 33;
    std::vector<float> x(rows * cols);
    for (uint32_t i = 0; i < rows * cols; ++i) x[i] = std::sin(0.7f * (float)i) * 4.0f;
    for (uint32_t j = 0; j < cols; ++j) x[cols + j] = -INFINITY;
    x[2 * cols + 5] = NAN;
    uint32_t p[4] = {rows, cols, 0, 0};
    rlx_buffer *bx = upload(x.data(), 4 * x.size()), *by = upload(nullptr, 4 * x.size()), *bp = upload(p, sizeof p);
    bool ok = run("softmax_f32", {bx, by, bp}, rows);
    std::vector<float> y = download<float>(by, x.size());
    double mx = -INFINITY, sum = 0;
    for (uint32_t j = 0; j < cols; ++j) mx = std::fmax(mx, (double)x[j]);
    for (uint32_t j = 0; j < cols; ++j) sum += std::exp((double)x[j] - mx);
    for (uint32_t j = 0; j < cols && ok; ++j) {
        ok = std::fabs(y[j] - std::exp((double)x[j] - mx) / sum) <= 1e-6;
        ok = ok && y[cols + j] == 0.0f && std::isnan(y[2 * cols + j]);
    }
    check(ok, "softmax_f32 (a row, an all -inf row of zeros, a NaN row)");
}

void check_layernorm() {
    // LayerNormParams: rows, cols, in_offset, out_offset, eps (float), pad x 3.
    const uint32_t rows = 5, cols = 65;
    std::vector<float> x(rows * cols), w(cols), b(cols);
    for (uint32_t i = 0; i < rows * cols; ++i) x[i] = std::cos(0.37f * (float)i) * 3.0f + 1.5f;
    for (uint32_t j = 0; j < cols; ++j) w[j] = 1.0f + 0.01f * (float)j, b[j] = 0.1f * (float)(j % 7);
    const float eps = 1e-5f;
    uint32_t p[8] = {rows, cols, 0, 0};
    std::memcpy(&p[4], &eps, 4);
    rlx_buffer *bx = upload(x.data(), 4 * x.size()), *bw = upload(w.data(), 4 * cols),
               *bb = upload(b.data(), 4 * cols), *by = upload(nullptr, 4 * x.size()), *bp = upload(p, sizeof p);
    bool ok = run("layernorm_f32", {bx, bw, bb, by, bp}, rows);
    std::vector<float> y = download<float>(by, x.size());
    for (uint32_t r = 0; r < rows && ok; ++r) {
        double mean = 0, var = 0;
        for (uint32_t j = 0; j < cols; ++j) mean += x[r * cols + j];
        mean /= cols;
        for (uint32_t j = 0; j < cols; ++j) var += (x[r * cols + j] - mean) * (x[r * cols + j] - mean);
        var /= cols;
        for (uint32_t j = 0; j < cols && ok; ++j) {
            const double want = (x[r * cols + j] - mean) / std::sqrt(var + eps) * w[j] + b[j];
            ok = std::fabs(y[r * cols + j] - want) <= 1e-5 * std::fmax(1.0, std::fabs(want));
        }
    }
    check(ok, "layernorm_f32");
}

void check_argmax_first_nan() {
    // ReduceParams: outer, len, inner, op, in_offset, pad x 3; argmax writes int32.
    const uint32_t len = 9;
    float x[len] = {1, 5, 2, NAN, 7, NAN, 0, 7, 3};
    uint32_t p[8] = {1, len, 1, 2, 0, 0, 0, 0};
    rlx_buffer *bx = upload(x, sizeof x), *bo = upload(nullptr, 4), *bm = upload(nullptr, 4), *bp = upload(p, sizeof p);
    bool ok = run("argmax_f32", {bx, bo, bp}, 1) && run("reduce_f32", {bx, bm, bp}, 1);
    ok = ok && download<int32_t>(bo, 1)[0] == 3 && std::isnan(download<float>(bm, 1)[0]);
    check(ok, "argmax_f32 / reduce_f32 max: the first NaN, and NaN");
}

void check_gemm() {
    // The shim's own gemm (no BLAS under emulation): C = A @ B, odd sizes.
    const int64_t m = 7, n = 13, k = 29;
    std::vector<float> a(m * k), b(k * n);
    for (int64_t i = 0; i < m * k; ++i) a[i] = std::sin(0.1 * (double)i);
    for (int64_t i = 0; i < k * n; ++i) b[i] = std::cos(0.2 * (double)i);
    rlx_buffer *ba = upload(a.data(), 4 * a.size()), *bb = upload(b.data(), 4 * b.size()),
               *bc = upload(nullptr, 4 * m * n);
    rlx_gemm_desc g;
    std::memset(&g, 0, sizeof g);
    g.a = ba, g.b = bb, g.c = bc, g.m = m, g.n = n, g.k = k, g.lda = k, g.ldb = n, g.ldc = n;
    g.alpha = 1.0f, g.dtype = RLX_DTYPE_F32, g.b_dtype = RLX_DTYPE_F32, g.c_dtype = RLX_DTYPE_F32;
    rlx_cmdbuf *cb = nullptr;
    bool ok = api->cmd_begin(dev, &cb) == RLX_OK && api->cmd_gemm(cb, &g) == RLX_OK &&
              api->cmd_commit(cb) == RLX_OK && api->cmd_wait(cb, nullptr) == RLX_OK;
    if (!ok) std::printf("gemm: %s\n", api->last_error());
    if (cb) api->cmd_release(cb);
    std::vector<float> c = download<float>(bc, m * n);
    for (int64_t i = 0; i < m && ok; ++i)
        for (int64_t j = 0; j < n && ok; ++j) {
            double want = 0;
            for (int64_t l = 0; l < k; ++l) want += (double)a[i * k + l] * b[l * n + j];
            ok = std::fabs(c[i * n + j] - want) <= 1e-4;
        }
    check(ok, "gemm f32 7 x 13 x 29 (the shim's own gemm)");
}

// The small-M gemm (m <= 16 rows against row-major weights B[n, k], the
// decode shape): f32 weights, f16 (A, B and C f16) and bf16 (f32 A and C),
// on odd k (vector tails) and m, with alpha and beta, against double sums of
// the values the kernel sees. At isa=baseline it is the portable gemm.
uint16_t bf16_bits(float f) {   // truncation: the reference uses the same rounded value
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}
float bf16_value(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

void check_small_m(rlx_dtype b_dtype) {
    const bool f16 = b_dtype == RLX_DTYPE_F16, bf16 = b_dtype == RLX_DTYPE_BF16;
    const int64_t shapes[][3] = {{1, 37, 16}, {5, 33, 17}, {16, 9, 33}, {7, 6, 4 * 13 + 3}, {3, 70, 100}};
    bool ok = true;
    for (const auto &s : shapes) {
        const int64_t m = s[0], n = s[1], k = s[2];
        std::vector<double> a(m * k), b(n * k), c0(m * n);
        for (int64_t i = 0; i < m * k; ++i) a[i] = std::sin(0.37 * (double)i + 0.1);
        for (int64_t i = 0; i < n * k; ++i) b[i] = std::cos(0.21 * (double)i);
        for (int64_t i = 0; i < m * n; ++i) c0[i] = 0.5 * std::sin(0.05 * (double)i);
        // The operands in their storage types, and the values those hold.
        std::vector<float> af(m * k), bfl(n * k), cf(m * n);
        std::vector<half_t> ah(m * k), bh(n * k), ch(m * n);
        std::vector<uint16_t> bb(n * k);
        for (int64_t i = 0; i < m * k; ++i) ah[i] = (half_t)a[i], af[i] = (float)a[i], a[i] = f16 ? (double)ah[i] : af[i];
        for (int64_t i = 0; i < n * k; ++i) {
            bh[i] = (half_t)b[i], bfl[i] = (float)b[i], bb[i] = bf16_bits((float)b[i]);
            b[i] = f16 ? (double)bh[i] : bf16 ? (double)bf16_value(bb[i]) : (double)bfl[i];
        }
        for (int64_t i = 0; i < m * n; ++i) ch[i] = (half_t)c0[i], cf[i] = (float)c0[i], c0[i] = f16 ? (double)ch[i] : cf[i];
        const size_t es = f16 ? 2 : 4;
        rlx_buffer *ba = upload(f16 ? (const void *)ah.data() : af.data(), es * m * k);
        rlx_buffer *bbuf = upload(f16 ? (const void *)bh.data() : bf16 ? (const void *)bb.data() : bfl.data(),
                                  (f16 || bf16 ? 2 : 4) * n * k);
        rlx_buffer *bc = upload(f16 ? (const void *)ch.data() : cf.data(), es * m * n);
        rlx_gemm_desc g;
        std::memset(&g, 0, sizeof g);
        g.a = ba, g.b = bbuf, g.c = bc, g.m = m, g.n = n, g.k = k, g.lda = k, g.ldb = k, g.ldc = n, g.trans_b = 1;
        g.alpha = 0.5f, g.beta = 0.25f, g.batch = 1, g.outer = 1;
        g.dtype = g.c_dtype = f16 ? RLX_DTYPE_F16 : RLX_DTYPE_F32;
        g.b_dtype = b_dtype;
        rlx_cmdbuf *cb = nullptr;
        bool ran = api->cmd_begin(dev, &cb) == RLX_OK && api->cmd_gemm(cb, &g) == RLX_OK &&
                   api->cmd_commit_wait(cb, nullptr) == RLX_OK;
        if (!ran) std::printf("small-M gemm: %s\n", api->last_error());
        if (cb) api->cmd_release(cb);
        std::vector<float> got(m * n);
        if (f16) {
            std::vector<half_t> h = download<half_t>(bc, m * n);
            for (int64_t i = 0; i < m * n; ++i) got[i] = (float)h[i];
        } else {
            got = download<float>(bc, m * n);
        }
        double worst = 0;
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double want = 0.25 * c0[i * n + j], mag = std::fabs(want);
                for (int64_t l = 0; l < k; ++l)
                    want += 0.5 * a[i * k + l] * b[j * k + l], mag += 0.5 * std::fabs(a[i * k + l] * b[j * k + l]);
                // f32 sums; an f16 C rounds once more (2^-11 of the result).
                const double tol = 1e-5 * mag + (f16 ? std::ldexp(std::fabs(want), -10) + 1e-4 : 0.0);
                worst = std::fmax(worst, std::fabs(got[i * n + j] - want) - tol);
            }
        ok = ok && ran && worst <= 0;
        for (rlx_buffer *x : {ba, bbuf, bc}) api->buffer_free(x);
    }
    check(ok, f16 ? "small-M gemm, f16 A, B and C, odd m and k" : bf16 ? "small-M gemm, f32 A against bf16 weights"
                                                                      : "small-M gemm, f32");
}


// ---- GGUF block formats (shaders/quant.h) ------------------------------------
// The case file, written by tests/runtime/test_arm64_host.py (_write_quant_cases)
// where the gguf package is at hand; every field little-endian, no padding:
//   char magic[8] = "RLXQCAS1"; u32 formats; then per format:
//     u32 name_len; char name[name_len]          e.g. "q8_0" (no terminator)
//     u32 rows, k, nbytes; u8 blocks[nbytes]     W[rows, k] as GGUF tensor data
//     f32 deq[rows * k]                          gguf's dequantized W, row-major
//     u32 cases; per case:
//       u32 m; f32 x[m * k]                      m rows of x, row-major
//       f64 want[m * rows]; f64 mag[m * rows]    x @ W^T in float64, sum |x||W|
// Checked for each format: dequantize_<fmt>_f32 bit for bit against deq (the
// decoders are exact in f32: every product is exact and each element takes
// at most one rounding); dequantize_<fmt>_f16 bit for bit against deq rounded
// to f16 here (half_t); gather_<fmt>_f32 (rows in a shuffled order, two
// clamped indices; the element decoders, which dequantize does not use on the
// CPU) bit for bit; gemv_<fmt>_f32 and _f16 for each case (check_gemv). A zero of either sign
// matches a zero (the kernels build with -fno-signed-zeros).
struct CaseReader {
    const std::vector<uint8_t> &data;
    size_t at = 0;
    bool ok = true;
    void bytes(void *dst, size_t n) {
        if (!ok || data.size() - at < n) {
            ok = false;
            std::memset(dst, 0, n);
            return;
        }
        std::memcpy(dst, data.data() + at, n);
        at += n;
    }
    uint32_t u32() {
        uint32_t v;
        bytes(&v, 4);
        return v;
    }
    template <typename T>
    std::vector<T> array(size_t n) {
        std::vector<T> v(ok && n <= data.size() ? n : 0);
        bytes(v.data(), sizeof(T) * v.size());
        if (v.size() != n) ok = false;
        return v;
    }
};

template <typename U>
bool same_value(U got, U want) {   // bits of an f32 (U = uint32_t) or f16 (uint16_t)
    const U mag = (U)~(U)((U)1 << (8 * sizeof(U) - 1));
    return got == want || ((got & mag) == 0 && (want & mag) == 0);
}

// out (n values of T, filled with NaN first) from `kernel` over bindings
// {in..., out, params}; false when it did not run.
template <typename T>
bool run_into(const char *kernel, std::vector<rlx_buffer *> in, const void *params, size_t params_bytes, size_t n,
              uint32_t groups, std::vector<T> &out) {
    const std::vector<uint8_t> nan(sizeof(T) * n, 0xFF);
    rlx_buffer *bo = upload(nan.data(), nan.size()), *bp = upload(params, params_bytes);
    in.push_back(bo);
    in.push_back(bp);
    const bool ok = run(kernel, in, groups);
    out = download<T>(bo, n);
    api->buffer_free(bo);
    api->buffer_free(bp);
    return ok;
}

template <typename U>
void check_exact(const std::string &what, bool ran, const U *got, const U *want, size_t n) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; ++i)
        if (!same_value(got[i], want[i]) && bad++ == 0) first = i;
    if (bad) {
        std::printf("  %s: %zu of %zu differ, the first at %zu: bits 0x%x, want 0x%x\n", what.c_str(), bad, n, first,
                    (unsigned)got[first], (unsigned)want[first]);
    }
    check(ran && bad == 0, what.c_str());
}

// gemv_<fmt>_<f32|f16> of case c (m rows of x, k wide) against want,
// within 1.2e-5 mag + 1e-6 (f16 y: plus its rounding, |want| 2^-11), 4 rows
// of W a group, padded strides (k + 3, rows + 2) whose padding must stay
// untouched; a NaN or an infinity in want must come out as it is. Run twice
// on one x buffer, first on -x, then on x written over it: a kernel that
// kept its converted x from the previous dispatch fails the second. The
// line ends with the worst error in units of the bound and a hash of y's
// bits (tests/runtime/test_arm64_host.py compares the levels' hashes).
template <typename T>
void check_gemv(const std::string &fmt, uint32_t c, rlx_buffer *bw, uint32_t rows, uint32_t k, uint32_t m,
                const std::vector<float> &x, const std::vector<double> &want, const std::vector<double> &mag) {
    const bool f16 = sizeof(T) == 2;
    const uint32_t xs = k + 3, ys = rows + 2, rpg = 4;
    std::vector<T> xp((size_t)m * xs, (T)NAN);
    const float zeros[4] = {0, 0, 0, 0};
    rlx_buffer *bx = upload(xp.data(), sizeof(T) * xp.size()), *bb = upload(zeros, sizeof zeros);
    const uint32_t p[8] = {m, rows, k, xs, ys, rpg, 0 /* no bias */, 0 /* no activation */};
    rlx_buffer *bp = upload(p, sizeof p);
    const std::string name = "gemv_" + fmt + (f16 ? "_f16" : "_f32");
    double worst = -1;
    size_t at = 0;
    bool ran = true, pad_ok = true;
    uint64_t hash = 14695981039346656037ull;
    std::vector<T> y;
    for (int sign : {-1, 1}) {
        for (uint32_t r = 0; r < m; ++r)
            for (uint32_t e = 0; e < k; ++e) xp[(size_t)r * xs + e] = (T)((float)sign * x[(size_t)r * k + e]);
        api->buffer_write(bx, 0, xp.data(), sizeof(T) * xp.size());
        // The bindings are x, w, y, bias, params: y is bound third.
        const std::vector<uint8_t> nan(sizeof(T) * (size_t)m * ys, 0xFF);
        rlx_buffer *by = upload(nan.data(), nan.size());
        ran = run(name.c_str(), {bx, bw, by, bb, bp}, (rows + rpg - 1) / rpg) && ran;
        y = download<T>(by, (size_t)m * ys);
        api->buffer_free(by);
        for (uint32_t r = 0; r < m; ++r) {
            for (uint32_t j = 0; j < rows; ++j) {
                const size_t i = (size_t)r * rows + j;
                const double got = (double)(float)y[(size_t)r * ys + j], w = sign * want[i];
                double ratio;
                if (std::isnan(w)) ratio = std::isnan(got) ? 0.0 : INFINITY;
                else if (std::isinf(w)) ratio = got == w ? 0.0 : INFINITY;
                else ratio = std::fabs(got - w) / (1.2e-5 * mag[i] + 1e-6 + (f16 ? std::fabs(w) / 2048.0 : 0.0));
                if (!(ratio <= worst)) worst = ratio, at = i;   // a NaN is the worst
                uint32_t bits = 0;
                std::memcpy(&bits, &y[(size_t)r * ys + j], sizeof(T));
                hash = (hash ^ bits) * 1099511628211ull;
            }
            for (uint32_t j = rows; j < ys; ++j) pad_ok = pad_ok && std::isnan((float)y[(size_t)r * ys + j]);
        }
    }
    if (!(worst <= 1.0) || !pad_ok)
        std::printf("  %s m=%u case %u: row %zu, W row %zu: got %.9g, want %.9g (%.3g x the bound)%s\n", name.c_str(),
                    m, c, at / rows, at % rows, (double)(float)y[(at / rows) * ys + at % rows], want[at], worst,
                    pad_ok ? "" : "; wrote into y's padding");
    char what[192];
    std::snprintf(what, sizeof what,
                  "%s m=%u (case %u, 4 rows a group, within 1.2e-5 sum|x||w| + 1e-6) worst %.3g hash %016llx",
                  name.c_str(), m, c, worst, (unsigned long long)hash);
    check(ran && worst <= 1.0 && pad_ok, what);
    for (rlx_buffer *b : {bx, bb, bp}) api->buffer_free(b);
}

bool check_quant_format(CaseReader &in) {
    const uint32_t name_len = in.u32();
    std::string fmt(name_len <= 64 ? name_len : 0, '\0');
    in.bytes(&fmt[0], fmt.size());
    const uint32_t rows = in.u32(), k = in.u32(), nbytes = in.u32();
    if (!in.ok || name_len > 64 || rows == 0 || rows > 4096 || k == 0 || k > (1u << 20)) return false;
    const std::vector<uint8_t> blocks = in.array<uint8_t>(nbytes);
    const std::vector<float> deq = in.array<float>((size_t)rows * k);
    if (!in.ok) return false;
    const size_t n = (size_t)rows * k;
    rlx_buffer *bw = upload(blocks.data(), blocks.size());

    // dequantize, f32 and f16.
    const uint32_t qp[4] = {(uint32_t)n, 0, 0, 0};
    std::vector<uint32_t> want32(n), got32;
    std::vector<uint16_t> want16(n), got16;
    for (size_t i = 0; i < n; ++i) {
        std::memcpy(&want32[i], &deq[i], 4);
        const half_t h = (half_t)deq[i];
        std::memcpy(&want16[i], &h, 2);
    }
    std::string name = "dequantize_" + fmt + "_f32";
    bool ran = run_into<uint32_t>(name.c_str(), {bw}, qp, sizeof qp, n, 3, got32);
    check_exact(name + " (bit for bit)", ran, got32.data(), want32.data(), n);
    name = "dequantize_" + fmt + "_f16";
    ran = run_into<uint16_t>(name.c_str(), {bw}, qp, sizeof qp, n, 3, got16);
    check_exact(name + " (gguf's values rounded to f16)", ran, got16.data(), want16.data(), n);

    // gather: rows in a shuffled order, then two indices that clamp.
    std::vector<int32_t> idx;
    for (uint32_t r = 0; r < rows; ++r) idx.push_back((int32_t)((r * 2u + 1u) % rows));
    idx.push_back((int32_t)rows + 3);
    idx.push_back(-2);
    std::vector<uint32_t> gwant;
    for (int32_t i : idx) {
        const int32_t r = i < 0 ? 0 : (i >= (int32_t)rows ? (int32_t)rows - 1 : i);
        gwant.insert(gwant.end(), want32.begin() + (size_t)r * k, want32.begin() + (size_t)(r + 1) * k);
    }
    const uint32_t gp[4] = {(uint32_t)idx.size(), k, rows, 0};
    rlx_buffer *bi = upload(idx.data(), 4 * idx.size());
    name = "gather_" + fmt + "_f32";
    ran = run_into<uint32_t>(name.c_str(), {bw, bi}, gp, sizeof gp, gwant.size(), 3, got32);
    check_exact(name + " (clamped indices, bit for bit)", ran, got32.data(), gwant.data(), gwant.size());
    api->buffer_free(bi);

    // gemv against the float64 products, f32 x (the file's answers) and f16
    // x (answers from deq and x rounded to f16, here).
    const uint32_t cases = in.u32();
    for (uint32_t c = 0; c < cases && in.ok; ++c) {
        const uint32_t m = in.u32();
        if (!in.ok || m == 0 || m > 8) return false;
        const std::vector<float> x = in.array<float>((size_t)m * k);
        const std::vector<double> want = in.array<double>((size_t)m * rows), mag = in.array<double>((size_t)m * rows);
        if (!in.ok) return false;
        check_gemv<float>(fmt, c, bw, rows, k, m, x, want, mag);
        // f16 x where it holds the case's values and products (no overflow to inf).
        bool f16_range = true;
        for (float v : x) f16_range = f16_range && std::fabs(v) <= 1e3f;
        for (double v : mag) f16_range = f16_range && v <= 3e4;
        if (!f16_range) continue;
        std::vector<float> xh(x.size());
        std::vector<double> want_h((size_t)m * rows, 0.0), mag_h((size_t)m * rows, 0.0);
        for (size_t i = 0; i < x.size(); ++i) xh[i] = (float)(half_t)x[i];
        for (uint32_t r = 0; r < m; ++r)
            for (uint32_t j = 0; j < rows; ++j)
                for (uint32_t e = 0; e < k; ++e) {
                    const double a = xh[(size_t)r * k + e], b = deq[(size_t)j * k + e];
                    want_h[(size_t)r * rows + j] += a * b, mag_h[(size_t)r * rows + j] += std::fabs(a * b);
                }
        check_gemv<half_t>(fmt, c, bw, rows, k, m, xh, want_h, mag_h);
    }
    api->buffer_free(bw);
    return in.ok;
}

bool check_quant(const char *path) {
    std::ifstream f(path, std::ios::binary);
    const std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CaseReader in{data};
    char magic[8];
    in.bytes(magic, 8);
    const uint32_t formats = in.u32();
    if (!in.ok || std::memcmp(magic, "RLXQCAS1", 8) != 0) return false;
    for (uint32_t i = 0; i < formats; ++i)
        if (!check_quant_format(in)) return false;
    std::printf("quant: %u formats\n", formats);
    return in.ok && in.at == data.size();
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4)
        return std::fprintf(stderr, "usage: %s librlx_host.so [device options [quant cases]]\n", argv[0]), 2;
    void *so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!so) return std::fprintf(stderr, "dlopen: %s\n", dlerror()), 2;
    auto get_api = (rlx_shim_get_api_fn)dlsym(so, "rlx_shim_get_api");
    api = get_api ? get_api(RLX_SHIM_ABI_VERSION) : nullptr;
    if (!api) return std::fprintf(stderr, "no rlx_shim_get_api(%u)\n", RLX_SHIM_ABI_VERSION), 2;
    // argv[2]: device options (e.g. isa=baseline); the kernels' level shows in the name.
    const std::string options = std::string("threads=2;") + (argc > 2 ? argv[2] : "");
    if (api->device_open(0, options.c_str(), &dev) != RLX_OK || api->library_compile(dev, nullptr, nullptr, &lib))
        return std::fprintf(stderr, "device: %s\n", api->last_error()), 2;
    rlx_device_info info;
    if (api->device_info(dev, &info) == RLX_OK) std::printf("device: %s\n", info.name);
    check_binary_maximum();
    check_gelu<float>("unary_f32");
    check_gelu<half_t>("unary_f16");
    check_softmax();
    check_layernorm();
    check_argmax_first_nan();
    check_gemm();
    check_small_m(RLX_DTYPE_F32);
    check_small_m(RLX_DTYPE_F16);
    check_small_m(RLX_DTYPE_BF16);
    if (argc > 3 && !check_quant(argv[3]))
        return std::fprintf(stderr, "%s: not a readable quant case file\n", argv[3]), 2;
    std::printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
