/*
 * Validation shared by every shim (C and C++), so the three shims reject
 * exactly the same arguments with the same messages: an rlx_gemm_desc, and
 * a buffer binding (RLX_DEFINE_CHECK_BINDING), a host copy's range
 * (RLX_DEFINE_CHECK_COPY).
 * The caller checks that the buffers exist and belong to its device, then
 * passes their sizes in bytes.
 */
#ifndef RLX_GEMM_CHECK_H
#define RLX_GEMM_CHECK_H

#include <stdint.h>
#include <stdio.h>

#include "rlx_shim.h"

static inline uint64_t rlx_dtype_size(int32_t dtype) {
    return dtype == RLX_DTYPE_F32 ? 4 : dtype >= RLX_DTYPE_F8E4M3 ? 1 : 2;
}
static inline int rlx_dtype_is_fp8(int32_t dtype) { return dtype == RLX_DTYPE_F8E4M3 || dtype == RLX_DTYPE_F8E5M2; }
/* 1 when A or B is FP8 (the cuda shim's cuBLASLt FP8 path; other shims refuse it). */
static inline int rlx_gemm_is_fp8(const rlx_gemm_desc *g) {
    return rlx_dtype_is_fp8(g->dtype) || rlx_dtype_is_fp8(g->b_dtype);
}
static inline const char *rlx_dtype_name(int32_t dtype) {
    static const char *const names[] = {"f32", "f16", "bf16", "f8e4m3", "f8e5m2"};
    return dtype >= 0 && dtype <= RLX_DTYPE_F8E5M2 ? names[dtype] : "?";
}
static inline int64_t rlx_gemm_batch(const rlx_gemm_desc *g) { return g->batch > 1 ? g->batch : 1; }
static inline int64_t rlx_gemm_outer(const rlx_gemm_desc *g) { return g->outer > 1 ? g->outer : 1; }

/* Elements a row-major rows x cols matrix with leading dimension ld touches. */
static inline uint64_t rlx_gemm_span(int64_t rows, int64_t cols, int64_t ld) {
    return rows == 0 || cols == 0 ? 0 : (uint64_t)(rows - 1) * (uint64_t)ld + (uint64_t)cols;
}

static inline int rlx_gemm_range_ok(const char *what, uint64_t offset, uint64_t elems, uint64_t esz,
                                    uint64_t size, char *err, size_t err_size) {
    if (offset % esz != 0) {
        snprintf(err, err_size, "gemm: %s_offset %llu is not a multiple of the element size %llu", what,
                 (unsigned long long)offset, (unsigned long long)esz);
        return 0;
    }
    const unsigned __int128 end = (unsigned __int128)elems * esz + offset;
    if (end > size) {
        snprintf(err, err_size, "gemm: %s spans bytes [%llu, %llu) of a %llu-byte buffer", what,
                 (unsigned long long)offset, (unsigned long long)end, (unsigned long long)size);
        return 0;
    }
    return 1;
}

/* RLX_OK, or RLX_ERR_ARG with the reason in err. Dimensions must fit the
 * 32-bit ints of CBLAS, cuBLAS and MPS. */
static inline rlx_status rlx_gemm_check(const rlx_gemm_desc *g, uint64_t a_size, uint64_t b_size,
                                        uint64_t c_size, char *err, size_t err_size) {
    const int64_t lim = 0x7fffffff;
    const int32_t dtypes[3] = {g->dtype, g->b_dtype, g->c_dtype};
    for (int i = 0; i < 3; i++)
        if (dtypes[i] < RLX_DTYPE_F32 || dtypes[i] > (i < 2 ? RLX_DTYPE_F8E5M2 : RLX_DTYPE_BF16)) {
            snprintf(err, err_size, "gemm: unknown dtype %d for %c", (int)dtypes[i], "abc"[i]);
            return RLX_ERR_ARG;
        }
    /* A scale multiplies FP8 codes; on a float operand it would be ignored. */
    if ((g->a_scale && !rlx_dtype_is_fp8(g->dtype)) || (g->b_scale && !rlx_dtype_is_fp8(g->b_dtype))) {
        snprintf(err, err_size, "gemm: a_scale / b_scale are for FP8 operands only (a is %s, b is %s)",
                 rlx_dtype_name(g->dtype), rlx_dtype_name(g->b_dtype));
        return RLX_ERR_ARG;
    }
    if (g->scale_mode != RLX_GEMM_SCALE_TENSOR && g->scale_mode != RLX_GEMM_SCALE_OUTER) {
        snprintf(err, err_size, "gemm: unknown scale_mode %d", (int)g->scale_mode);
        return RLX_ERR_ARG;
    }
    if (g->scale_mode == RLX_GEMM_SCALE_OUTER && (!g->a_scale || !g->b_scale)) {
        snprintf(err, err_size, "gemm: outer-vector scales need both a_scale and b_scale");
        return RLX_ERR_ARG;
    }
    if (g->m < 0 || g->n < 0 || g->k < 0 || g->m > lim || g->n > lim || g->k > lim) {
        snprintf(err, err_size, "gemm: m=%lld n=%lld k=%lld must be in [0, 2^31)", (long long)g->m,
                 (long long)g->n, (long long)g->k);
        return RLX_ERR_ARG;
    }
    const int64_t acols = g->trans_a ? g->m : g->k, bcols = g->trans_b ? g->k : g->n;
    if (g->lda < (acols > 1 ? acols : 1) || g->lda > lim) {
        snprintf(err, err_size, "gemm: lda=%lld < %lld columns of A", (long long)g->lda, (long long)acols);
        return RLX_ERR_ARG;
    }
    if (g->ldb < (bcols > 1 ? bcols : 1) || g->ldb > lim) {
        snprintf(err, err_size, "gemm: ldb=%lld < %lld columns of B", (long long)g->ldb, (long long)bcols);
        return RLX_ERR_ARG;
    }
    if (g->ldc < (g->n > 1 ? g->n : 1) || g->ldc > lim) {
        snprintf(err, err_size, "gemm: ldc=%lld < n=%lld", (long long)g->ldc, (long long)g->n);
        return RLX_ERR_ARG;
    }
    if (g->batch < 0 || g->batch > lim || g->stride_a < 0 || g->stride_b < 0 || g->stride_c < 0) {
        snprintf(err, err_size, "gemm: batch=%lld and the strides must be >= 0", (long long)g->batch);
        return RLX_ERR_ARG;
    }
    if (g->outer < 0 || g->outer > lim || g->outer_stride_a < 0 || g->outer_stride_b < 0 || g->outer_stride_c < 0 ||
        rlx_gemm_batch(g) * rlx_gemm_outer(g) > lim) {
        snprintf(err, err_size, "gemm: outer=%lld and its strides must be >= 0, batch*outer < 2^31",
                 (long long)g->outer);
        return RLX_ERR_ARG;
    }
    /* The furthest entry of both batch levels. */
    const uint64_t last = (uint64_t)(rlx_gemm_batch(g) - 1), last_outer = (uint64_t)(rlx_gemm_outer(g) - 1);
    if (!rlx_gemm_range_ok("a", g->a_offset,
                           rlx_gemm_span(g->trans_a ? g->k : g->m, acols, g->lda) + last * (uint64_t)g->stride_a +
                               last_outer * (uint64_t)g->outer_stride_a,
                           rlx_dtype_size(g->dtype), a_size, err, err_size) ||
        !rlx_gemm_range_ok("b", g->b_offset,
                           rlx_gemm_span(g->trans_b ? g->n : g->k, bcols, g->ldb) + last * (uint64_t)g->stride_b +
                               last_outer * (uint64_t)g->outer_stride_b,
                           rlx_dtype_size(g->b_dtype), b_size, err, err_size) ||
        !rlx_gemm_range_ok("c", g->c_offset,
                           rlx_gemm_span(g->m, g->n, g->ldc) + last * (uint64_t)g->stride_c +
                               last_outer * (uint64_t)g->outer_stride_c,
                           rlx_dtype_size(g->c_dtype), c_size, err, err_size))
        return RLX_ERR_ARG;
    return RLX_OK;
}

/* The bias's bytes, when there is one (its buffer's size passed in). */
static inline rlx_status rlx_gemm_bias_check(const rlx_gemm_desc *g, uint64_t bias_size, char *err, size_t err_size) {
    if (!g->bias) return RLX_OK;
    return rlx_gemm_range_ok("bias", g->bias_offset, (uint64_t)g->n, rlx_dtype_size(g->c_dtype), bias_size, err,
                             err_size) ? RLX_OK : RLX_ERR_ARG;
}

/* The scales' bytes (one f32 each, or m and n f32 for outer-vector scales),
 * when there are any (their buffers' sizes passed in). */
static inline rlx_status rlx_gemm_scale_check(const rlx_gemm_desc *g, uint64_t a_scale_size, uint64_t b_scale_size,
                                              char *err, size_t err_size) {
    const int outer = g->scale_mode == RLX_GEMM_SCALE_OUTER;
    const uint64_t a_count = outer ? (uint64_t)g->m : 1, b_count = outer ? (uint64_t)g->n : 1;
    if (g->a_scale && !rlx_gemm_range_ok("a_scale", g->a_scale_offset, a_count, 4, a_scale_size, err, err_size))
        return RLX_ERR_ARG;
    if (g->b_scale && !rlx_gemm_range_ok("b_scale", g->b_scale_offset, b_count, 4, b_scale_size, err, err_size))
        return RLX_ERR_ARG;
    return RLX_OK;
}

/* 1 when A, B and C share one element type. */
static inline int rlx_gemm_uniform(const rlx_gemm_desc *g) {
    return g->dtype == g->b_dtype && g->dtype == g->c_dtype && g->dtype <= RLX_DTYPE_F16;
}

/* RLX_OK when the operand types are (f32, f32, f32), (f16, f16, f16) or one
 * of the shim's optional combinations (a, b, c triples in `extra`, n_extra of
 * them); RLX_ERR_UNSUPPORTED with the reason otherwise. */
static inline rlx_status rlx_gemm_types_ok(const rlx_gemm_desc *g, const int32_t (*extra)[3], int n_extra,
                                           const char *backend, char *err, size_t err_size) {
    if (rlx_gemm_uniform(g)) return RLX_OK;
    for (int i = 0; i < n_extra; i++)
        if (extra[i][0] == g->dtype && extra[i][1] == g->b_dtype && extra[i][2] == g->c_dtype) return RLX_OK;
    snprintf(err, err_size, "gemm: the %s shim has no %s x %s -> %s gemm%s", backend, rlx_dtype_name(g->dtype),
             rlx_dtype_name(g->b_dtype), rlx_dtype_name(g->c_dtype),
             rlx_gemm_is_fp8(g) ? " (FP8 operands need rlx_device_info.gemm_fp8: cuda, compute capability >= 8.9, "
                                  "cuBLASLt with FP8)" : "");
    return RLX_ERR_UNSUPPORTED;
}

/* Defines `check_gemm(d, g)` for a shim whose rlx_buffer has `dev` and
 * `size` fields and which provides `fail(status, fmt, ...)` (all three do),
 * so ownership, range and operand-type checks are written once; extra_types
 * lists the shim's optional (a, b, c) dtype combinations. */
/* check_binding(dev, fn, index, buffer, offset): a binding of a dispatch or
 * ICB entry. Every shim's rlx_buffer has `dev` and `size`; ARG_CHECK is the
 * shim's own (it records the message and returns RLX_ERR_ARG). */
#define RLX_DEFINE_CHECK_BINDING(storage)                                                                 \
    storage rlx_status check_binding(rlx_device *d, const char *fn, uint32_t index, const rlx_buffer *b,   \
                                     uint64_t offset) {                                                  \
        ARG_CHECK(index < RLX_MAX_BINDINGS, "%s: binding index %u >= %u", fn, index, RLX_MAX_BINDINGS);  \
        ARG_CHECK(b, "%s: buffer at binding %u is NULL", fn, index);                                     \
        ARG_CHECK(b->dev == d, "%s: buffer at binding %u belongs to another device", fn, index);         \
        ARG_CHECK(offset <= b->size, "%s: offset %llu past the end of a %llu-byte buffer (binding %u)", fn, \
                  (unsigned long long)offset, (unsigned long long)b->size, index);                       \
        return RLX_OK;                                                                                   \
    }

/* check_copy(fn, buffer, offset, host, size): a copy between host memory and
 * bytes [offset, offset + size) of a buffer (buffer_read / buffer_write and
 * the copies that travel with a command buffer). */
#define RLX_DEFINE_CHECK_COPY(storage)                                                                    \
    storage rlx_status check_copy(const char *fn, const rlx_buffer *b, uint64_t offset, const void *host, \
                                  uint64_t size) {                                                       \
        ARG_CHECK(b && (host || size == 0), "%s: NULL argument", fn);                                    \
        ARG_CHECK(offset <= b->size && size <= b->size - offset,                                         \
                  "%s: bytes [%llu, +%llu) outside a %llu-byte buffer", fn, (unsigned long long)offset,  \
                  (unsigned long long)size, (unsigned long long)b->size);                                \
        return RLX_OK;                                                                                   \
    }

/* The argument checks that open device_info, buffer_alloc and
 * cmd_execute_icb in every shim (capacity: the ICB's entry count). */
#define RLX_CHECK_DEVICE_INFO(d, out) ARG_CHECK((d) && (out), "device_info: NULL argument")
#define RLX_CHECK_BUFFER_ALLOC(d, size, out)                                                               \
    do {                                                                                                  \
        ARG_CHECK((d) && (out), "buffer_alloc: NULL argument");                                          \
        *(out) = NULL;                                                                                    \
        ARG_CHECK((size) <= (d)->info.max_buffer_length,                                                 \
                  "buffer_alloc: %llu bytes exceeds max_buffer_length %llu", (unsigned long long)(size),  \
                  (unsigned long long)(d)->info.max_buffer_length);                                      \
    } while (0)
#define RLX_CHECK_EXECUTE_ICB(cb, icb, start, count, capacity)                                             \
    do {                                                                                                  \
        ARG_CHECK(icb, "cmd_execute_icb: icb is NULL");                                                  \
        ARG_CHECK((icb)->dev == (cb)->dev, "cmd_execute_icb: icb belongs to another device");            \
        ARG_CHECK((uint64_t)(start) + (count) <= (uint64_t)(capacity),                                   \
                  "cmd_execute_icb: range [%u, %u+%u) exceeds capacity %llu", (start), (start), (count),  \
                  (unsigned long long)(capacity));                                                       \
    } while (0)

#define RLX_DEFINE_CHECK_GEMM(storage, backend, extra_types, n_extra_types)                          \
    storage rlx_status check_gemm(rlx_device *d, const rlx_gemm_desc *g) {                          \
        if (!g) return fail(RLX_ERR_ARG, "gemm: desc is NULL");                                     \
        if (!g->a || !g->b || !g->c) return fail(RLX_ERR_ARG, "gemm: buffers a, b and c must be non-NULL"); \
        if (g->a->dev != d || g->b->dev != d || g->c->dev != d || (g->bias && g->bias->dev != d) || \
            (g->a_scale && g->a_scale->dev != d) || (g->b_scale && g->b_scale->dev != d))           \
            return fail(RLX_ERR_ARG, "gemm: a buffer belongs to another device");                   \
        char err[320];                                                                              \
        if (rlx_gemm_check(g, g->a->size, g->b->size, g->c->size, err, sizeof err) != RLX_OK ||     \
            rlx_gemm_bias_check(g, g->bias ? g->bias->size : 0, err, sizeof err) != RLX_OK ||       \
            rlx_gemm_scale_check(g, g->a_scale ? g->a_scale->size : 0, g->b_scale ? g->b_scale->size : 0, \
                                 err, sizeof err) != RLX_OK)                                        \
            return fail(RLX_ERR_ARG, "%s", err);                                                    \
        if (rlx_gemm_types_ok(g, extra_types, n_extra_types, backend, err, sizeof err) != RLX_OK)   \
            return fail(RLX_ERR_UNSUPPORTED, "%s", err);                                            \
        return RLX_OK;                                                                              \
    }

#endif
