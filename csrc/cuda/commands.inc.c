/* Command buffers (recording) and gemm: cuBLAS, and cuBLASLt plans timed once per shape.
 * A part of the CUDA shim: csrc/cuda/shim.c includes it (one translation unit, every
 * function static); it is not compiled on its own. */

/* ---- validation shared by cmd_* and icb_* ------------------------------------------------ */
RLX_DEFINE_CHECK_BINDING(static)

static rlx_status check_grid(rlx_device *d, const char *fn, const rlx_pipeline *p, const uint32_t g[3],
                             const uint32_t t[3]) {
    ARG_CHECK(g, "%s: groups is NULL", fn);
    ARG_CHECK(g[0] && g[1] && g[2], "%s: groups (%u, %u, %u) contain 0", fn, g[0], g[1], g[2]);
    ARG_CHECK(g[0] <= 0x7fffffffu && g[1] <= (uint32_t)d->max_grid_y && g[2] <= (uint32_t)d->max_grid_z,
              "%s: groups (%u, %u, %u) exceed the device's grid (2^31-1, %d, %d)", fn, g[0], g[1], g[2],
              d->max_grid_y, d->max_grid_z);
    if (t) {
        const uint64_t total = (uint64_t)t[0] * t[1] * t[2];
        ARG_CHECK(t[0] && t[1] && t[2] && total <= 1024 && t[2] <= 64,
                  "%s: threads per group (%u, %u, %u) must be 1..1024 in total (z <= 64)", fn, t[0], t[1], t[2]);
        ARG_CHECK(total <= p->max_threads, "%s: %llu threads per group > the pipeline's maximum %u", fn,
                  (unsigned long long)total, p->max_threads);
    }
    return RLX_OK;
}

/* ---- command buffers: recording ---------------------------------------------------------- */
#define CB_CHECK(cb, fn)                                                                     \
    do {                                                                                     \
        ARG_CHECK(cb, fn ": command buffer is NULL");                                        \
        ARG_CHECK(cb->state == CB_RECORDING, fn ": command buffer was already committed");   \
    } while (0)

static rlx_status cmd_begin(rlx_device *d, rlx_cmdbuf **out) {
    ARG_CHECK(d && out, "cmd_begin: NULL argument");
    PHASE_T0(t_begin);
    *out = NULL;
    pthread_mutex_lock(&d->spare_mu);
    rlx_cmdbuf *cb = d->spare;
    if (cb) d->spare = cb->next, --d->n_spare;
    pthread_mutex_unlock(&d->spare_mu);
    if (!cb) {
        rlx_status s = set_ctx(d);
        if (s) return s;
        if (!(cb = calloc(1, sizeof *cb))) return fail(RLX_ERR_OOM, "cmd_begin: out of memory");
        cb->dev = d;
        CUresult r = cu.cuEventCreate(&cb->ev0, CU_EVENT_DEFAULT);
        if (r == CUDA_SUCCESS) r = cu.cuEventCreate(&cb->ev1, CU_EVENT_DEFAULT);
        if (r != CUDA_SUCCESS) {
            if (cb->ev0) cu.cuEventDestroy(cb->ev0);
            free(cb);
            return cu_fail(r, "cmd_begin: cuEventCreate");
        }
    }
    *out = cb;
    PHASE_ADD(PH_BEGIN, t_begin);
    return RLX_OK;
}

static rlx_status push(rlx_cmdbuf *cb, const cmd_t *c) {
    if (cb->n == cb->cap) {
        const size_t cap = cb->cap ? 2 * cb->cap : 64;
        cmd_t *p = realloc(cb->cmds, cap * sizeof *p);
        if (!p) return fail(RLX_ERR_OOM, "command buffer: out of memory");
        cb->cmds = p, cb->cap = cap;
    }
    cb->cmds[cb->n++] = *c;
    return RLX_OK;
}

static rlx_status cmd_set_pipeline(rlx_cmdbuf *cb, rlx_pipeline *p) {
    CB_CHECK(cb, "cmd_set_pipeline");
    ARG_CHECK(p, "cmd_set_pipeline: pipeline is NULL");
    ARG_CHECK(p->lib->dev == cb->dev, "cmd_set_pipeline: pipeline belongs to another device");
    cb->pipe = p;
    return RLX_OK;
}

static rlx_status cmd_set_buffer(rlx_cmdbuf *cb, uint32_t index, rlx_buffer *b, uint64_t offset) {
    CB_CHECK(cb, "cmd_set_buffer");
    rlx_status s = check_binding(cb->dev, "cmd_set_buffer", index, b, offset);
    if (s) return s;
    cb->bind[index] = b->ptr + offset;
    cb->bind_end[index] = b->ptr + b->size;
    cb->bind_set |= 1u << index;
    cb->bind_bytes &= ~(1u << index);
    return RLX_OK;
}

/* A slot of size bytes in cb->bytes (ALIGN-aligned), at *at. */
static rlx_status bytes_reserve(rlx_cmdbuf *cb, size_t size, size_t *at) {
    *at = (cb->bytes_len + ALIGN - 1) / ALIGN * ALIGN;
    if (*at + size > cb->bytes_cap) {
        size_t cap = cb->bytes_cap ? 2 * cb->bytes_cap : 16384;
        while (cap < *at + size) cap *= 2;
        uint8_t *p = realloc(cb->bytes, cap);
        if (!p) return fail(RLX_ERR_OOM, "command buffer: out of memory (set_bytes data)");
        cb->bytes = p, cb->bytes_cap = cap;
    }
    cb->bytes_len = *at + size;
    return RLX_OK;
}

/* Bytes go to a host staging area now and to the device scratch at commit
 * (or, for a parameter the kernel takes by value, into the launch). */
static rlx_status cmd_set_bytes(rlx_cmdbuf *cb, uint32_t index, const void *data, uint32_t size) {
    CB_CHECK(cb, "cmd_set_bytes");
    ARG_CHECK(index < RLX_MAX_BINDINGS, "cmd_set_bytes: binding index %u >= %u", index, RLX_MAX_BINDINGS);
    ARG_CHECK(data && size >= 1 && size <= MAX_BYTES, "cmd_set_bytes: need 1..%u bytes of non-NULL data, got %u",
              MAX_BYTES, size);
    size_t at;
    rlx_status s = bytes_reserve(cb, size, &at);
    if (s) return s;
    memcpy(cb->bytes + at, data, size);
    cb->bind[index] = at;
    cb->bind_size[index] = size;
    cb->bind_set |= 1u << index;
    cb->bind_bytes |= 1u << index;
    return RLX_OK;
}

/* The size bytes a by-value parameter takes, from device memory at src (at
 * most avail bytes of it; the rest zero): the params struct a binding points
 * at, read when the dispatch is encoded. Params are written by the host
 * before a run and never by kernels, so what is read here is what the
 * kernel would have read through the pointer. */
static rlx_status read_value(rlx_device *d, const char *fn, CUdeviceptr src, CUdeviceptr avail, uint32_t size,
                             uint8_t *dst) {
    memset(dst, 0, size);
    const size_t n = avail < size ? (size_t)avail : size;
    rlx_status s = set_ctx(d);
    if (s || !n) return s;
    CUresult r = cu.cuMemcpyDtoHAsync(dst, src, n, d->copy_stream);  /* as buffer_read */
    if (r == CUDA_SUCCESS) r = cu.cuStreamSynchronize(d->copy_stream);
    return r == CUDA_SUCCESS ? RLX_OK : cu_fail(r, fn);
}

static rlx_status cmd_dispatch(rlx_cmdbuf *cb, const uint32_t groups[3], const uint32_t threads[3]) {
    CB_CHECK(cb, "cmd_dispatch");
    ARG_CHECK(cb->pipe, "cmd_dispatch: no pipeline set");
    rlx_status s = check_grid(cb->dev, "cmd_dispatch", cb->pipe, groups, threads);
    if (s) return s;
    const uint32_t need = (1u << cb->pipe->n_params) - 1u;
    ARG_CHECK((cb->bind_set & need) == need, "cmd_dispatch: the kernel takes %u buffers; bindings set: 0x%x",
              cb->pipe->n_params, cb->bind_set);
    const rlx_pipeline *p = cb->pipe;
    cmd_t c = {.kind = CMD_DISPATCH, .fn = p->fn, .bytes_mask = cb->bind_bytes & ~p->value_mask,
               .value_mask = p->value_mask};
    for (int i = 0; i < 3; ++i) c.groups[i] = groups[i], c.threads[i] = threads ? threads[i] : 1;
    memcpy(c.args, cb->bind, sizeof c.args);
    /* By-value params: the set_bytes data as it is, or the bytes the bound
     * buffer holds now (read from the device: the slow path, for callers
     * that bind the params region rather than its bytes). */
    for (uint32_t i = 0; i < p->n_params; ++i) {
        if (!(p->value_mask >> i & 1u)) continue;
        if ((cb->bind_bytes >> i & 1u) && cb->bind_size[i] >= p->value_size[i]) {
            c.args[i] = cb->bind[i];  /* the set_bytes slot as it is */
            continue;
        }
        size_t at;
        if ((s = bytes_reserve(cb, p->value_size[i], &at))) return s;
        if (cb->bind_bytes >> i & 1u) {  /* shorter than the kernel's struct (its tail padding): zeros after */
            const uint32_t n = cb->bind_size[i] < p->value_size[i] ? cb->bind_size[i] : p->value_size[i];
            memset(cb->bytes + at, 0, p->value_size[i]);
            memcpy(cb->bytes + at, cb->bytes + cb->bind[i], n);
        } else if ((s = read_value(cb->dev, "cmd_dispatch (params by value)", cb->bind[i],
                                   cb->bind_end[i] - cb->bind[i], p->value_size[i], cb->bytes + at))) {
            return s;
        }
        c.args[i] = at;
    }
    return push(cb, &c);
}

/* One in-order stream: every command already sees the effects of earlier ones. */
static rlx_status cmd_barrier(rlx_cmdbuf *cb) {
    CB_CHECK(cb, "cmd_barrier");
    return RLX_OK;
}

/* ---- gemm -------------------------------------------------------------------------------- */
/* Optional operand types: f16 inputs with an f32 result (attention scores). */
/* Optional operand types: f16 inputs with an f32 result (attention scores);
 * FP8 inputs (not both e5m2: cuBLASLt has no e5m2 x e5m2) with an f32, f16 or
 * bf16 result, where the device has FP8 gemms (fp8_gemm_check). */
static const int32_t kExtraGemmTypes[][3] = {
    {RLX_DTYPE_F16, RLX_DTYPE_F16, RLX_DTYPE_F32},
    {RLX_DTYPE_F8E4M3, RLX_DTYPE_F8E4M3, RLX_DTYPE_F32}, {RLX_DTYPE_F8E4M3, RLX_DTYPE_F8E4M3, RLX_DTYPE_F16},
    {RLX_DTYPE_F8E4M3, RLX_DTYPE_F8E4M3, RLX_DTYPE_BF16}, {RLX_DTYPE_F8E4M3, RLX_DTYPE_F8E5M2, RLX_DTYPE_F32},
    {RLX_DTYPE_F8E4M3, RLX_DTYPE_F8E5M2, RLX_DTYPE_F16}, {RLX_DTYPE_F8E4M3, RLX_DTYPE_F8E5M2, RLX_DTYPE_BF16},
    {RLX_DTYPE_F8E5M2, RLX_DTYPE_F8E4M3, RLX_DTYPE_F32}, {RLX_DTYPE_F8E5M2, RLX_DTYPE_F8E4M3, RLX_DTYPE_F16},
    {RLX_DTYPE_F8E5M2, RLX_DTYPE_F8E4M3, RLX_DTYPE_BF16}};
RLX_DEFINE_CHECK_GEMM(static, "cuda", kExtraGemmTypes, (int)(sizeof kExtraGemmTypes / sizeof kExtraGemmTypes[0]))

/* What cuBLASLt's FP8 matmul takes (rlx_shim.h, rlx_gemm_desc), checked
 * before any plan so a caller gets the reason (and rlx's lowering, which
 * applies the same rule in rlx/lowering/fp8_gemm.py, never sends these):
 * both operands K-major (Lt's "TN": our A [m, k] and B [n, k] row-major),
 * 16-element multiples, 16-byte aligned, one product, no bias, beta 0. */
static rlx_status fp8_gemm_check(const rlx_device *d, const rlx_gemm_desc *g) {
    if (!d->info.gemm_fp8)
        return fail(RLX_ERR_UNSUPPORTED, "gemm: FP8 operands need compute capability >= 8.9 and a cuBLASLt "
                    "with FP8 matmuls (rlx_device_info.gemm_fp8 is 0 on %s)", d->info.name);
    const uint64_t csz = rlx_dtype_size(g->c_dtype);
    const char *why = g->trans_a || !g->trans_b ? "A must not be transposed and B must be (both K-major)"
                      : rlx_gemm_batch(g) > 1 || rlx_gemm_outer(g) > 1 ? "batched FP8 gemms are not taken"
                      : g->bias ? "no bias with FP8 operands (add it in an epilogue)"
                      : g->beta != 0.0f ? "beta must be 0"
                      : g->scale_mode == RLX_GEMM_SCALE_OUTER && !(d->info.gemm_fp8_outer >> g->c_dtype & 1u)
                          ? "cuBLASLt here has no outer-vector scales for this C dtype (rlx_device_info.gemm_fp8_outer)"
                      : g->k % 16 || g->lda % 16 || g->ldb % 16 ? "k, lda and ldb must be multiples of 16"
                      : ((uint64_t)g->ldc * csz) % 16 ? "ldc * sizeof(C) must be a multiple of 16 bytes"
                      : (g->a->ptr + g->a_offset) % 16 || (g->b->ptr + g->b_offset) % 16 ||
                                (g->c->ptr + g->c_offset) % 16 ? "A, B and C must start 16-byte aligned"
                      : NULL;
    if (why)
        return fail(RLX_ERR_UNSUPPORTED, "gemm: %s x %s FP8 gemm (m=%lld n=%lld k=%lld): %s",
                    rlx_dtype_name(g->dtype), rlx_dtype_name(g->b_dtype), (long long)g->m, (long long)g->n,
                    (long long)g->k, why);
    return RLX_OK;
}

static int gemm_same(const rlx_gemm_desc *x, const rlx_gemm_desc *y) {
    return x->a == y->a && x->b == y->b && x->c == y->c && x->a_offset == y->a_offset &&
           x->b_offset == y->b_offset && x->c_offset == y->c_offset && x->m == y->m && x->n == y->n &&
           x->k == y->k && x->lda == y->lda && x->ldb == y->ldb && x->ldc == y->ldc &&
           x->trans_a == y->trans_a && x->trans_b == y->trans_b && x->dtype == y->dtype &&
           x->b_dtype == y->b_dtype && x->c_dtype == y->c_dtype && x->alpha == y->alpha &&
           x->beta == y->beta && x->batch == y->batch && x->stride_a == y->stride_a &&
           x->stride_b == y->stride_b && x->stride_c == y->stride_c && x->outer == y->outer &&
           x->outer_stride_a == y->outer_stride_a && x->outer_stride_b == y->outer_stride_b &&
           x->outer_stride_c == y->outer_stride_c && x->bias == y->bias && x->bias_offset == y->bias_offset;
}

/* The device pointer arrays of a two-level batched gemm (see ptr_array);
 * entry j * batch + i is inner entry i of outer repeat j. Device lock held. */
static rlx_status gemm_ptr_array(rlx_device *d, const rlx_gemm_desc *g, CUdeviceptr *out) {
    for (ptr_array *p = d->ptr_arrays; p; p = p->next)
        if (gemm_same(&p->key, g)) return *out = p->ptrs, RLX_OK;
    const int64_t inner = rlx_gemm_batch(g), n = inner * rlx_gemm_outer(g);
    CUdeviceptr *host = malloc(3 * (size_t)n * sizeof *host);
    ptr_array *e = calloc(1, sizeof *e);
    if (!host || !e) return free(host), free(e), fail(RLX_ERR_OOM, "cmd_gemm: out of host memory");
    const uint64_t sa = rlx_dtype_size(g->dtype), sb = rlx_dtype_size(g->b_dtype), sc = rlx_dtype_size(g->c_dtype);
    for (int64_t idx = 0; idx < n; ++idx) {
        const int64_t i = idx % inner, j = idx / inner;
        host[idx] = g->a->ptr + g->a_offset + (uint64_t)(i * g->stride_a + j * g->outer_stride_a) * sa;
        host[n + idx] = g->b->ptr + g->b_offset + (uint64_t)(i * g->stride_b + j * g->outer_stride_b) * sb;
        host[2 * n + idx] = g->c->ptr + g->c_offset + (uint64_t)(i * g->stride_c + j * g->outer_stride_c) * sc;
    }
    CUresult r = cu.cuMemAlloc(&e->ptrs, 3 * (size_t)n * sizeof *host);
    if (r == CUDA_SUCCESS) r = cu.cuMemcpyHtoD(e->ptrs, host, 3 * (size_t)n * sizeof *host);
    free(host);
    if (r != CUDA_SUCCESS) {
        if (e->ptrs) cu.cuMemFree(e->ptrs);
        free(e);
        return cu_fail(r, "cmd_gemm (pointer arrays)");
    }
    e->key = *g;
    e->next = d->ptr_arrays;
    d->ptr_arrays = e;
    *out = e->ptrs;
    return RLX_OK;
}

/* cuBLASLt's heuristic ranks candidates by a model; for the small-m gemms
 * of batch-1 inference its first pick can leave most SMs idle (a 128 x 384
 * product is a few output tiles). So the plan times up to LT_CANDIDATES of
 * them once, on scratch operands of the same shape on the copy stream (the
 * caller's buffers and the shared workspace stay untouched), and keeps the
 * fastest. Each candidate is timed as a captured graph of LT_TIMED_RUNS
 * launches, as a replayed run executes it: timed launch by launch, the
 * host's few microseconds per cublasLtMatmul call hide every kernel that is
 * shorter than that, and the pick among those is noise (on the H200 it
 * picked kernels twice as slow as the best: benchmarks/README.md). Returns the index of the
 * pick; 0 when timing is not possible. */
#define LT_CANDIDATES 8
#define LT_TIMED_RUNS 10
static float lt_time_graph(rlx_device *d, const lt_plan *p, const rlx_gemm_desc *g, const lt_algo *algo,
                           CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr ws, CUevent ev0, CUevent ev1) {
    CUstream st = d->copy_stream;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    float ms = -1;
    if (cu.cuStreamBeginCapture(st, 1 /* CU_STREAM_CAPTURE_MODE_THREAD_LOCAL */) != CUDA_SUCCESS) return -1;
    int bad = 0;
    for (int rep = 0; rep < LT_TIMED_RUNS && !bad; ++rep)
        bad = lt_api.cublasLtMatmul(d->lt, p->op, &g->alpha, (const void *)b, p->la, (const void *)a, p->lb,
                                    &g->beta, (const void *)c, p->lc, (void *)c, p->lc, algo, (void *)ws,
                                    LT_WORKSPACE, st) != 0;
    const CUresult end = cu.cuStreamEndCapture(st, &graph);
    if (!bad && end == CUDA_SUCCESS && graph && cu.cuGraphInstantiateWithFlags(&exec, graph, 0) == CUDA_SUCCESS) {
        float t = 0;
        if (cu.cuGraphLaunch(exec, st) == CUDA_SUCCESS &&  /* warm-up */
            cu.cuEventRecord(ev0, st) == CUDA_SUCCESS && cu.cuGraphLaunch(exec, st) == CUDA_SUCCESS &&
            cu.cuEventRecord(ev1, st) == CUDA_SUCCESS && cu.cuEventSynchronize(ev1) == CUDA_SUCCESS &&
            cu.cuEventElapsedTime(&t, ev0, ev1) == CUDA_SUCCESS)
            ms = t;
    }
    if (exec) cu.cuGraphExecDestroy(exec);
    if (graph) cu.cuGraphDestroy(graph);
    return ms;
}

static int lt_fastest(rlx_device *d, const lt_plan *p, const rlx_gemm_desc *g, const lt_heuristic *h, int found) {
    if (found < 2) return 0;
    const uint64_t sa = rlx_dtype_size(g->dtype), sb = rlx_dtype_size(g->b_dtype), sc = rlx_dtype_size(g->c_dtype);
    const int64_t last = rlx_gemm_batch(g) - 1;  /* Lt plans are single or strided-batch products */
    const size_t a_bytes = (size_t)(last * g->stride_a + (g->trans_a ? g->k : g->m) * g->lda) * sa;
    const size_t b_bytes = (size_t)(last * g->stride_b + (g->trans_b ? g->n : g->k) * g->ldb) * sb;
    const size_t c_bytes = (size_t)(last * g->stride_c + g->m * g->ldc) * sc, bias_bytes = (size_t)g->n * sc;
    /* Outer-vector scales must point somewhere: n then m zero f32 (our B's, then our A's). */
    const size_t scale_bytes = g->scale_mode == RLX_GEMM_SCALE_OUTER ? (size_t)(g->n + g->m) * 4 + 256 : 0;
    const size_t total = a_bytes + b_bytes + c_bytes + bias_bytes + scale_bytes + LT_WORKSPACE + 5 * 256;
    CUdeviceptr mem = 0;
    CUevent ev0 = NULL, ev1 = NULL;
    int best = 0;
    float best_ms = -1;
    if (cu.cuMemAlloc(&mem, total) != CUDA_SUCCESS) return 0;
    const CUdeviceptr a = mem, b = (a + a_bytes + 255) & ~(CUdeviceptr)255, c = (b + b_bytes + 255) & ~(CUdeviceptr)255;
    const CUdeviceptr bias = (c + c_bytes + 255) & ~(CUdeviceptr)255, ws = (bias + bias_bytes + 255) & ~(CUdeviceptr)255;
    const CUdeviceptr scales = (ws + LT_WORKSPACE + 255) & ~(CUdeviceptr)255;
    const CUdeviceptr scale_b = scales, scale_a = (scales + (CUdeviceptr)g->n * 4 + 255) & ~(CUdeviceptr)255;
    CUstream st = d->copy_stream;
    CUresult r = cu.cuMemsetD8Async(mem, 0, total, st);
    if (r == CUDA_SUCCESS) r = cu.cuEventCreate(&ev0, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = cu.cuEventCreate(&ev1, CU_EVENT_DEFAULT);
    const int ready = r == CUDA_SUCCESS &&
                      (!g->bias ||
                       lt_api.cublasLtMatmulDescSetAttribute(p->op, LT_DESC_BIAS_POINTER, &bias, sizeof bias) == 0) &&
                      (g->scale_mode != RLX_GEMM_SCALE_OUTER ||  /* Lt's A is our B */
                       (lt_api.cublasLtMatmulDescSetAttribute(p->op, LT_DESC_A_SCALE_POINTER, &scale_b,
                                                              sizeof scale_b) == 0 &&
                        lt_api.cublasLtMatmulDescSetAttribute(p->op, LT_DESC_B_SCALE_POINTER, &scale_a,
                                                              sizeof scale_a) == 0));
    for (int i = 0; ready && i < found; ++i) {
        if (h[i].state != 0 || h[i].workspace_size > LT_WORKSPACE) continue;
        const float ms = lt_time_graph(d, p, g, &h[i].algo, a, b, c, ws, ev0, ev1);
        if (ms >= 0 && (best_ms < 0 || ms < best_ms)) best = i, best_ms = ms;
    }
    cu.cuStreamSynchronize(st);
    if (ev0) cu.cuEventDestroy(ev0);
    if (ev1) cu.cuEventDestroy(ev1);
    cu.cuMemFree(mem);
    return best;
}

/* Split-K variants of the heuristic's first picks, appended to h (which has
 * room for LT_SPLIT_VARIANTS more). A small-m product has a few output tiles
 * and a long K: cutting K in parts puts every SM to work, and the parts are
 * summed in a workspace in the compute type (deterministic, unlike an
 * in-place reduction, so a replay gives the same bits every run). The
 * heuristic seldom offers these for batch-1 shapes; lt_fastest times them
 * with the rest and keeps a variant only where it is faster. */
#define LT_SPLIT_BASES 4
#define LT_SPLIT_VARIANTS (LT_SPLIT_BASES * 4)
static int lt_add_splits(rlx_device *d, const lt_plan *p, const rlx_gemm_desc *g, lt_heuristic *h, int found) {
    static const uint32_t splits[4] = {2, 4, 8, 16};
    const uint32_t scheme = LT_REDUCTION_COMPUTE_TYPE;
    int n = found;
    for (int base = 0; base < found && base < LT_SPLIT_BASES; ++base)
        for (int i = 0; i < 4; ++i) {
            if (g->k / splits[i] < 64) break;
            lt_heuristic v = {.algo = h[base].algo};
            if (lt_api.cublasLtMatmulAlgoConfigSetAttribute(&v.algo, LT_CONFIG_SPLITK_NUM, &splits[i],
                                                             sizeof splits[i]) != 0 ||
                lt_api.cublasLtMatmulAlgoConfigSetAttribute(&v.algo, LT_CONFIG_REDUCTION_SCHEME, &scheme,
                                                             sizeof scheme) != 0 ||
                lt_api.cublasLtMatmulAlgoCheck(d->lt, p->op, p->la, p->lb, p->lc, p->lc, &v.algo, &v) != 0 ||
                v.workspace_size > LT_WORKSPACE)
                continue;
            v.state = 0;
            h[n++] = v;
        }
    return n;
}

/* The byte alignment (up to 256) every row of A, B and C keeps: cuBLASLt's
 * heuristic assumes 256 unless told, and its picks for aligned operands
 * fail on operands at an 8-byte offset (seen on the H200). */
static uint32_t lt_align(CUdeviceptr p, int64_t ld, int64_t stride, uint64_t elem) {
    const uint64_t v = (uint64_t)p | (uint64_t)ld * elem | (uint64_t)stride * elem | 256u;
    return (uint32_t)(v & (~v + 1));
}
static void lt_aligns(const rlx_gemm_desc *g, uint32_t out[3]) {
    const int batched = rlx_gemm_batch(g) > 1;
    out[0] = lt_align(g->a->ptr + g->a_offset, g->lda, batched ? g->stride_a : 0, rlx_dtype_size(g->dtype));
    out[1] = lt_align(g->b->ptr + g->b_offset, g->ldb, batched ? g->stride_b : 0, rlx_dtype_size(g->b_dtype));
    out[2] = lt_align(g->c->ptr + g->c_offset, g->ldc, batched ? g->stride_c : 0, rlx_dtype_size(g->c_dtype));
}

static int lt_same(const rlx_gemm_desc *x, const rlx_gemm_desc *y) {
    return x->m == y->m && x->n == y->n && x->k == y->k && x->lda == y->lda && x->ldb == y->ldb &&
           x->ldc == y->ldc && x->trans_a == y->trans_a && x->trans_b == y->trans_b && x->dtype == y->dtype &&
           x->b_dtype == y->b_dtype && x->c_dtype == y->c_dtype && !x->bias == !y->bias &&
           x->scale_mode == y->scale_mode && rlx_gemm_batch(x) == rlx_gemm_batch(y) &&
           (rlx_gemm_batch(x) == 1 ||
            (x->stride_a == y->stride_a && x->stride_b == y->stride_b && x->stride_c == y->stride_c));
}

/* The tuned pick of every shape, for the whole process: a device opened
 * again (or a second executable's plans) reuses it instead of timing again,
 * so one process computes a given gemm the same way, bit for bit, however
 * its devices come and go (split-K picks sum in a different order).
 * Entries are never freed; there is one per shape. */
typedef struct lt_pick {
    struct lt_pick *next;
    rlx_gemm_desc key;
    uint32_t align[3];
    CUdevice cudev;
    lt_algo algo;
} lt_pick;
static lt_pick *g_lt_picks;
static pthread_mutex_t g_lt_picks_mu = PTHREAD_MUTEX_INITIALIZER;

static int lt_pick_find(const rlx_device *d, const rlx_gemm_desc *g, const uint32_t align[3], lt_algo *out) {
    int found = 0;
    pthread_mutex_lock(&g_lt_picks_mu);
    for (lt_pick *e = g_lt_picks; e && !found; e = e->next)
        if (e->cudev == d->cudev && lt_same(&e->key, g) && !memcmp(e->align, align, sizeof e->align))
            *out = e->algo, found = 1;
    pthread_mutex_unlock(&g_lt_picks_mu);
    return found;
}

static void lt_pick_keep(const rlx_device *d, const rlx_gemm_desc *g, const uint32_t align[3], const lt_algo *algo) {
    lt_pick *e = calloc(1, sizeof *e);
    if (!e) return;  /* only a later device times the shape again */
    *e = (lt_pick){.key = *g, .cudev = d->cudev, .algo = *algo};
    memcpy(e->align, align, sizeof e->align);
    pthread_mutex_lock(&g_lt_picks_mu);
    e->next = g_lt_picks;
    g_lt_picks = e;
    pthread_mutex_unlock(&g_lt_picks_mu);
}

/* cudaDataType_t of an rlx_dtype. */
static int lt_type(int32_t dtype) {
    switch (dtype) {
    case RLX_DTYPE_F32: return CUDA_R_32F;
    case RLX_DTYPE_BF16: return CUDA_R_16BF;
    case RLX_DTYPE_F8E4M3: return CUDA_R_8F_E4M3;
    case RLX_DTYPE_F8E5M2: return CUDA_R_8F_E5M2;
    default: return CUDA_R_16F;
    }
}

/* The cuBLASLt plan of a single or strided-batch gemm, with or without a
 * bias (row-major C = A op(B) is column-major C^T = op(B)^T op(A)^T, as in
 * run_gemm; the bias then runs along D's rows, which is what the BIAS
 * epilogue adds). Unbiased gemms come here too for the tuned pick (the
 * attention products of batch-1 inference are a few tiles each, as above).
 * Device lock held. */
static rlx_status lt_plan_for(rlx_device *d, const rlx_gemm_desc *g, lt_plan **out) {
    if (!d->info.gemm_bias) return fail(RLX_ERR_UNSUPPORTED, "cmd_gemm: no cuBLASLt here, so no bias epilogue");
    if (rlx_gemm_outer(g) > 1 || (g->bias && rlx_gemm_batch(g) > 1))
        return fail(RLX_ERR_UNSUPPORTED, "cmd_gemm: the cuda shim takes a bias on single products only");
    uint32_t align[3];
    lt_aligns(g, align);
    for (lt_plan *p = d->lt_plans; p; p = p->next)
        if (lt_same(&p->key, g) && !memcmp(p->align, align, sizeof align)) {
            if (!p->op) return fail(RLX_ERR_UNSUPPORTED, "cmd_gemm: cuBLASLt has no algorithm for this gemm");
            return *out = p, RLX_OK;
        }
    int st = 0;
    if (!d->lt && (st = lt_api.cublasLtCreate(&d->lt)) != 0)
        return d->lt = NULL, fail(RLX_ERR_DEVICE, "cublasLtCreate failed with status %d", st);
    if (!d->lt_workspace) {
        CUresult r = cu.cuMemAlloc(&d->lt_workspace, LT_WORKSPACE);
        if (r != CUDA_SUCCESS) return d->lt_workspace = 0, cu_fail(r, "cmd_gemm (cuBLASLt workspace)");
    }
    lt_plan *p = calloc(1, sizeof *p);
    if (!p) return fail(RLX_ERR_OOM, "cmd_gemm: out of host memory");
    const int at = lt_type(g->dtype), bt = lt_type(g->b_dtype), ct = lt_type(g->c_dtype);
    const int32_t op_a = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const uint32_t epilogue = LT_EPILOGUE_BIAS;
    const int32_t bias_type = ct;
    const uint64_t ws = LT_WORKSPACE;
    void *pref = NULL;
    lt_heuristic h[LT_CANDIDATES + LT_SPLIT_VARIANTS];
    int found = 0;
    st = lt_api.cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (!st) st = lt_api.cublasLtMatmulDescSetAttribute(p->op, LT_DESC_TRANSA, &op_a, sizeof op_a);
    if (!st) st = lt_api.cublasLtMatmulDescSetAttribute(p->op, LT_DESC_TRANSB, &op_b, sizeof op_b);
    if (!st && g->bias) st = lt_api.cublasLtMatmulDescSetAttribute(p->op, LT_DESC_EPILOGUE, &epilogue, sizeof epilogue);
    if (!st && g->bias)
        st = lt_api.cublasLtMatmulDescSetAttribute(p->op, LT_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type);
    if (!st && g->scale_mode == RLX_GEMM_SCALE_OUTER) {  /* one f32 per row of op(A) and per column of B, Lt's terms */
        /* The heuristic refuses vector modes (INVALID_VALUE) while the scale
         * pointers are NULL (session 47, cuBLASLt 13.1): set this gemm's own;
         * run_gemm sets them again per launch. Lt's A is our B. */
        const int32_t mode = LT_SCALE_OUTER_VEC_32F;
        const CUdeviceptr sa = g->b_scale->ptr + g->b_scale_offset, sb = g->a_scale->ptr + g->a_scale_offset;
        st = lt_api.cublasLtMatmulDescSetAttribute(p->op, LT_DESC_A_SCALE_MODE, &mode, sizeof mode);
        if (!st) st = lt_api.cublasLtMatmulDescSetAttribute(p->op, LT_DESC_B_SCALE_MODE, &mode, sizeof mode);
        if (!st) st = lt_api.cublasLtMatmulDescSetAttribute(p->op, LT_DESC_A_SCALE_POINTER, &sa, sizeof sa);
        if (!st) st = lt_api.cublasLtMatmulDescSetAttribute(p->op, LT_DESC_B_SCALE_POINTER, &sb, sizeof sb);
    }
    /* Lt's A is our B, its B our A (swapped as in run_gemm). */
    if (!st) st = lt_api.cublasLtMatrixLayoutCreate(&p->la, bt, (uint64_t)(g->trans_b ? g->k : g->n),
                                                    (uint64_t)(g->trans_b ? g->n : g->k), g->ldb);
    if (!st) st = lt_api.cublasLtMatrixLayoutCreate(&p->lb, at, (uint64_t)(g->trans_a ? g->m : g->k),
                                                    (uint64_t)(g->trans_a ? g->k : g->m), g->lda);
    if (!st) st = lt_api.cublasLtMatrixLayoutCreate(&p->lc, ct, (uint64_t)g->n, (uint64_t)g->m, g->ldc);
    if (rlx_gemm_batch(g) > 1) {  /* one strided-batch call; Lt's A is our B */
        const int32_t count = (int32_t)rlx_gemm_batch(g);
        void *const layouts[3] = {p->la, p->lb, p->lc};
        const int64_t strides[3] = {g->stride_b, g->stride_a, g->stride_c};
        for (int i = 0; i < 3 && !st; ++i) {
            st = lt_api.cublasLtMatrixLayoutSetAttribute(layouts[i], LT_LAYOUT_BATCH_COUNT, &count, sizeof count);
            if (!st)
                st = lt_api.cublasLtMatrixLayoutSetAttribute(layouts[i], LT_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                                                              sizeof strides[i]);
        }
    }
    if (!st) st = lt_api.cublasLtMatmulPreferenceCreate(&pref);
    if (!st) st = lt_api.cublasLtMatmulPreferenceSetAttribute(pref, LT_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    /* Lt's A is our B, its B our A; C and D are our C. */
    const int pref_keys[4] = {LT_PREF_MIN_ALIGNMENT_A, LT_PREF_MIN_ALIGNMENT_B, LT_PREF_MIN_ALIGNMENT_C,
                              LT_PREF_MIN_ALIGNMENT_D};
    const uint32_t pref_aligns[4] = {align[1], align[0], align[2], align[2]};
    for (int i = 0; i < 4 && !st; ++i)
        st = lt_api.cublasLtMatmulPreferenceSetAttribute(pref, pref_keys[i], &pref_aligns[i], sizeof pref_aligns[i]);
    if (!st) st = lt_api.cublasLtMatmulAlgoGetHeuristic(d->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, LT_CANDIDATES, h, &found);
    if (pref) lt_api.cublasLtMatmulPreferenceDestroy(pref);
    if (st || found < 1) {
        if (p->op) lt_api.cublasLtMatmulDescDestroy(p->op);
        if (p->la) lt_api.cublasLtMatrixLayoutDestroy(p->la);
        if (p->lb) lt_api.cublasLtMatrixLayoutDestroy(p->lb);
        if (p->lc) lt_api.cublasLtMatrixLayoutDestroy(p->lc);
        *p = (lt_plan){.key = *g, .align = {align[0], align[1], align[2]}, .next = d->lt_plans};  /* remembered */
        d->lt_plans = p;
        return fail(RLX_ERR_UNSUPPORTED, "cmd_gemm: cuBLASLt has no algorithm for m=%lld n=%lld k=%lld%s "
                    "(status %d)", (long long)g->m, (long long)g->n, (long long)g->k, g->bias ? " with a bias" : "",
                    st);
    }
    if (!lt_pick_find(d, g, align, &p->algo)) {
        found = lt_add_splits(d, p, g, h, found);
        p->algo = h[lt_fastest(d, p, g, h, found)].algo;
        lt_pick_keep(d, g, align, &p->algo);
    }
    p->key = *g;
    memcpy(p->align, align, sizeof align);
    p->next = d->lt_plans;
    d->lt_plans = p;
    *out = p;
    return RLX_OK;
}

static rlx_status cmd_gemm(rlx_cmdbuf *cb, const rlx_gemm_desc *desc) {
    CB_CHECK(cb, "cmd_gemm");
    rlx_device *d = cb->dev;
    rlx_status s = check_gemm(d, desc);
    if (s == RLX_OK && rlx_gemm_is_fp8(desc)) s = fp8_gemm_check(d, desc);
    if (s || (s = load_cublas(d->cublas_dirs))) return s;
    pthread_mutex_lock(&d->mu);
    if (!d->blas && (s = set_ctx(d)) == RLX_OK) {
        int st = cb_api.cublasCreate(&d->blas);
        if (st != 0) {
            d->blas = NULL;
            s = fail(RLX_ERR_UNAVAILABLE, "cublasCreate (%s) failed with status %d (driver %d)", cb_api.path, st,
                     g_driver);
        }
    }
    CUdeviceptr ptrs = 0;
    lt_plan *plan = NULL;
    if (s == RLX_OK && rlx_gemm_outer(desc) > 1) s = gemm_ptr_array(d, desc, &ptrs);
    /* FP8 has no cuBLAS fallback: no plan is an error (UNSUPPORTED, with Lt's status). */
    if (s == RLX_OK && (desc->bias || rlx_gemm_is_fp8(desc))) s = lt_plan_for(d, desc, &plan);
    else if (s == RLX_OK && d->info.gemm_bias && rlx_gemm_outer(desc) == 1 && lt_plan_for(d, desc, &plan) != RLX_OK)
        plan = NULL;  /* a shape cuBLASLt has no algorithm for: plain cuBLAS below */
    pthread_mutex_unlock(&d->mu);
    if (s) return s;
    return push(cb, &(cmd_t){.kind = CMD_GEMM, .gemm = *desc, .gemm_ptrs = ptrs, .plan = plan});
}

/* C = op(A) op(B) row-major is C^T = op(B)^T op(A)^T column-major: cuBLAS gets
 * B as its first operand, A as its second, and m, n swapped. */
static rlx_status run_gemm(rlx_device *d, CUstream stream, CUdeviceptr lt_workspace, const rlx_gemm_desc *g,
                           CUdeviceptr ptrs, const lt_plan *plan, char *err, size_t err_size) {
    if (g->m == 0 || g->n == 0) return RLX_OK;
    const int ta = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const CUdeviceptr a = g->a->ptr + g->a_offset, b = g->b->ptr + g->b_offset, c = g->c->ptr + g->c_offset;
    const int at = lt_type(g->dtype), bt = lt_type(g->b_dtype), ct = lt_type(g->c_dtype);
    const int n_entries = (int)(rlx_gemm_batch(g) * rlx_gemm_outer(g));
    int st = cb_api.cublasSetStream(d->blas, stream);
    if (st == 0 && plan) {  /* cuBLASLt, bias epilogue or none: D = C = our C */
        if (g->bias) {
            const CUdeviceptr bias = g->bias->ptr + g->bias_offset;
            st = lt_api.cublasLtMatmulDescSetAttribute(plan->op, LT_DESC_BIAS_POINTER, &bias, sizeof bias);
        }
        if (st == 0 && rlx_gemm_is_fp8(g)) {  /* per launch, as the bias: the plan is shared by shape */
            /* Lt's A is our B: its A scale is our b_scale. 0 means a scale of 1. */
            const CUdeviceptr sa = g->b_scale ? g->b_scale->ptr + g->b_scale_offset : 0;
            const CUdeviceptr sb = g->a_scale ? g->a_scale->ptr + g->a_scale_offset : 0;
            st = lt_api.cublasLtMatmulDescSetAttribute(plan->op, LT_DESC_A_SCALE_POINTER, &sa, sizeof sa);
            if (st == 0) st = lt_api.cublasLtMatmulDescSetAttribute(plan->op, LT_DESC_B_SCALE_POINTER, &sb, sizeof sb);
        }
        if (st == 0)
            st = lt_api.cublasLtMatmul(d->lt, plan->op, &g->alpha, (const void *)b, plan->la, (const void *)a, plan->lb,
                                       &g->beta, (const void *)c, plan->lc, (void *)c, plan->lc, &plan->algo,
                                       (void *)lt_workspace, LT_WORKSPACE, stream);
    } else if (st == 0 && rlx_gemm_outer(g) > 1) {  /* pointer arrays [A..][B..][C..]; operands swapped as above */
        const CUdeviceptr *arr = (const CUdeviceptr *)(uintptr_t)ptrs;
        st = cb_api.cublasGemmBatchedEx(d->blas, ta, tb, (int)g->n, (int)g->m, (int)g->k, &g->alpha,
                                        (const void *const *)(arr + n_entries), bt, (int)g->ldb,
                                        (const void *const *)arr, at, (int)g->lda, &g->beta,
                                        (void *const *)(arr + 2 * n_entries), ct, (int)g->ldc, n_entries,
                                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    } else if (st == 0 && n_entries > 1) {  /* one strided-batched call */
        st = cb_api.cublasGemmStridedBatchedEx(d->blas, ta, tb, (int)g->n, (int)g->m, (int)g->k, &g->alpha,
                                               (const void *)b, bt, (int)g->ldb, (long long)g->stride_b,
                                               (const void *)a, at, (int)g->lda, (long long)g->stride_a, &g->beta,
                                               (void *)c, ct, (int)g->ldc, (long long)g->stride_c, n_entries,
                                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    } else if (st == 0 && rlx_gemm_uniform(g) && g->dtype == RLX_DTYPE_F32) {
        st = cb_api.cublasSgemm(d->blas, ta, tb, (int)g->n, (int)g->m, (int)g->k, &g->alpha, (const float *)b,
                                (int)g->ldb, (const float *)a, (int)g->lda, &g->beta, (float *)c, (int)g->ldc);
    } else if (st == 0) {
        st = cb_api.cublasGemmEx(d->blas, ta, tb, (int)g->n, (int)g->m, (int)g->k, &g->alpha, (const void *)b, bt,
                                 (int)g->ldb, (const void *)a, at, (int)g->lda, &g->beta, (void *)c, ct, (int)g->ldc,
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    if (st == 0) return RLX_OK;
    snprintf(err, err_size, "cuBLAS %s x %s -> %s gemm (m=%lld n=%lld k=%lld, %d entries) failed with status %d",
             rlx_dtype_name(g->dtype), rlx_dtype_name(g->b_dtype), rlx_dtype_name(g->c_dtype), (long long)g->m, (long long)g->n,
             (long long)g->k, n_entries, st);
    return RLX_ERR_DEVICE;
}
