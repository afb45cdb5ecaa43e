/* Device, buffers, libraries and pipelines.
 * A part of the CUDA shim: csrc/cuda/shim.c includes it (one translation unit, every
 * function static); it is not compiled on its own. */

/* ---- device -------------------------------------------------------------------------- */
static const char *last_error(void) { return t_err ? t_err : ""; }

static const char *unavailable_reason(void) {
    pthread_once(&g_once, init_driver);
    return g_reason[0] ? g_reason : NULL;
}

static int device_count(void) { return unavailable_reason() ? 0 : g_count; }

static rlx_status parse_options(rlx_device *d, const char *options) {
    const char *p = options ? options : "";
    while (*p) {
        const char *end = strchr(p, ';');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[2048];
        ARG_CHECK(len < sizeof item, "device_open: option too long");
        memcpy(item, p, len);
        item[len] = 0;
        p += len + (end ? 1 : 0);
        if (!len) continue;
        char *eq = strchr(item, '=');
        ARG_CHECK(eq, "device_open: option '%s' is not key=value", item);
        *eq = 0;
        const char *key = item, *value = eq + 1;
        char **slot = !strcmp(key, "nvrtc") ? &d->nvrtc_dirs : !strcmp(key, "cublas") ? &d->cublas_dirs
                    : !strcmp(key, "cache_dir") ? &d->cache_dir : !strcmp(key, "include_dir") ? &d->include_dirs
                    : NULL;
        if (slot) {
            free(*slot);
            if (!(*slot = strdup(value))) return fail(RLX_ERR_OOM, "device_open: out of memory");
        } else if (!strcmp(key, "staging_max")) {
            char *end = NULL;
            const unsigned long long v = strtoull(value, &end, 10);
            ARG_CHECK(*value && end && !*end, "device_open: staging_max=%s (expected a byte count)", value);
            d->staging_max = v;
        } else if (!strcmp(key, "queues")) {
            ARG_CHECK(!strcmp(value, "0") || !strcmp(value, "1"), "device_open: queues=%s (expected 0 or 1)", value);
            d->queues = value[0] == '1';
        } else if (!strcmp(key, "pdl")) {
            ARG_CHECK(!strcmp(value, "0") || !strcmp(value, "1"), "device_open: pdl=%s (expected 0 or 1)", value);
            d->pdl = value[0] == '1';
        } else if (strcmp(key, "threads") && strcmp(key, "blas") && strcmp(key, "cxx")) {  /* host keys */
            return fail(RLX_ERR_ARG, "device_open: unknown option '%s' (known: nvrtc, cublas, cache_dir, "
                        "include_dir, pdl, queues, staging_max; threads, blas, cxx are ignored)", key);
        }
    }
    return RLX_OK;
}

static void device_close(rlx_device *d) {
    if (!d) return;
    if (d->ctx) {
        cu.cuCtxSetCurrent(d->ctx);
        if (d->stream) cu.cuStreamSynchronize(d->stream);
        for (rlx_cmdbuf *cb = d->spare, *next; cb; cb = next) {
            next = cb->next;
            if (cb->ev0) cu.cuEventDestroy(cb->ev0);
            if (cb->ev1) cu.cuEventDestroy(cb->ev1);
            if (cb->scratch) cu.cuMemFree(cb->scratch);
            if (cb->staging) cu.cuMemFreeHost(cb->staging);
            free(cb->cmds), free(cb->bytes), free(cb->copies), free(cb);
        }
        for (ptr_array *p = d->ptr_arrays, *next; p; p = next) next = p->next, cu.cuMemFree(p->ptrs), free(p);
        for (lt_plan *p = d->lt_plans, *next; p; p = next) {
            next = p->next;
            if (p->op) lt_api.cublasLtMatmulDescDestroy(p->op);   /* NULL: a remembered "no algorithm" */
            if (p->la) lt_api.cublasLtMatrixLayoutDestroy(p->la);
            if (p->lb) lt_api.cublasLtMatrixLayoutDestroy(p->lb);
            if (p->lc) lt_api.cublasLtMatrixLayoutDestroy(p->lc);
            free(p);
        }
        if (d->lt_workspace) cu.cuMemFree(d->lt_workspace);
        if (d->lt) lt_api.cublasLtDestroy(d->lt);
        if (d->blas) cb_api.cublasDestroy(d->blas);
        if (d->stream) cu.cuStreamDestroy(d->stream);
        if (d->copy_stream) cu.cuStreamDestroy(d->copy_stream);
        cu.cuDevicePrimaryCtxRelease(d->cudev);
    }
    pthread_mutex_destroy(&d->mu);
    pthread_mutex_destroy(&d->spare_mu);
    pmc_destroy(&d->copier);
    free(d->nvrtc_dirs), free(d->cublas_dirs), free(d->cache_dir), free(d->include_dirs);
    free(d);
}

/* Picks sm_<cc> when this NVRTC targets the device, else PTX for the newest
 * virtual arch it has below the device (the driver JITs it). */
static rlx_status pick_arch(rlx_device *d, int cc) {
    d->arch = cc, d->cubin = 1;
    if (nv.n_archs == 0) return RLX_OK;  /* old NVRTC: no list, try sm_<cc> */
    int best = 0;
    for (int i = 0; i < nv.n_archs; ++i) {
        if (nv.archs[i] == cc) return RLX_OK;
        if (nv.archs[i] < cc && nv.archs[i] > best) best = nv.archs[i];
    }
    if (!best)
        return fail(RLX_ERR_UNAVAILABLE, "NVRTC %d.%d (%s) cannot target sm_%d", nv.major, nv.minor, nv.path, cc);
    d->arch = best, d->cubin = 0;
    return RLX_OK;
}

static uint32_t lt_outer_types(rlx_device *d);

static rlx_status device_open(int index, const char *options, rlx_device **out) {
    ARG_CHECK(out, "device_open: out is NULL");
    *out = NULL;
    const char *why = unavailable_reason();
    if (why) return fail(RLX_ERR_UNAVAILABLE, "%s", why);
    if (index < 0 || index >= g_count)
        return fail(RLX_ERR_NOT_FOUND, "device_open: no CUDA device %d (%d present)", index, g_count);
    rlx_device *d = calloc(1, sizeof *d);
    if (!d) return fail(RLX_ERR_OOM, "device_open: out of memory");
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->spare_mu, NULL);
    pmc_init(&d->copier, -1);
    d->pdl = 1;
    d->staging_max = RLX_CUDA_STAGING_MAX_DEFAULT;
    rlx_status s = parse_options(d, options);
    if (s == RLX_OK) s = load_nvrtc(d->nvrtc_dirs);
    if (s != RLX_OK) { device_close(d); return s; }
    if (!d->cache_dir) {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "/tmp/rlx-cache-%u", (unsigned)getuid());
        d->cache_dir = strdup(tmp);
    }
    CUresult r;
    int major = 0, minor = 0, sms = 0;
    size_t total = 0;
    CUuuid uuid;
    rlx_device_info *in = &d->info;
#define STEP(call, what) if ((r = (call)) != CUDA_SUCCESS) { s = cu_fail(r, what); device_close(d); return s; }
    STEP(cu.cuDeviceGet(&d->cudev, index), "cuDeviceGet");
    STEP(cu.cuDevicePrimaryCtxRetain(&d->ctx, d->cudev), "cuDevicePrimaryCtxRetain");
    STEP(cu.cuCtxSetCurrent(d->ctx), "cuCtxSetCurrent");
    STEP(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->cudev), "cc major");
    STEP(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->cudev), "cc minor");
    STEP(cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->cudev), "SM count");
    STEP(cu.cuDeviceGetAttribute(&d->max_grid_y, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, d->cudev), "max grid y");
    STEP(cu.cuDeviceGetAttribute(&d->max_grid_z, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, d->cudev), "max grid z");
    STEP(cu.cuDeviceGetName(in->name, (int)sizeof in->name - 1, d->cudev), "cuDeviceGetName");
    STEP(cu.cuDeviceTotalMem(&total, d->cudev), "cuDeviceTotalMem");
    STEP(cu.cuStreamCreate(&d->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    STEP(cu.cuStreamCreate(&d->copy_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
#undef STEP
    if ((s = pick_arch(d, major * 10 + minor)) != RLX_OK) { device_close(d); return s; }
    /* The kernels wait for their predecessor (griddepcontrol, in the CUDA
     * prelude) only when compiled for sm_90 or newer. */
    d->pdl = d->pdl && d->arch >= 90 && cu.cuLaunchKernelEx;
    if (cu.cuDeviceGetUuid(&uuid, d->cudev) == CUDA_SUCCESS) {
        const unsigned char *u = (const unsigned char *)uuid.bytes;
        snprintf(in->hardware_id, sizeof in->hardware_id,
                 "cuda-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
                 u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    } else {
        snprintf(in->hardware_id, sizeof in->hardware_id, "cuda-%.100s-sm%d%d", in->name, major, minor);
    }
    in->max_buffer_length = total;
    in->max_threads_per_group = 1024;
    in->simd_width = 32;
    in->unified_memory = 0;
    in->supports_f16 = 1;
    in->compute_units = (uint32_t)sms;
    in->gemm_bias = load_cublaslt(d->cublas_dirs) == RLX_OK;
    /* FP8 tensor cores: Ada (8.9) and Hopper (9.0) on; cuBLASLt with FP8 matmuls. */
    in->gemm_fp8 = in->gemm_bias && major * 10 + minor >= 89 && cublaslt_has_fp8();
    in->gemm_fp8_outer = in->gemm_fp8 ? lt_outer_types(d) : 0u;
    *out = d;
    return RLX_OK;
}

/* The C dtypes (1u << rlx_dtype bits) for which cuBLASLt has an e4m3 x e4m3
 * algorithm with outer-vector scales (one f32 per row of A and per column
 * of B: torch._scaled_mm's rowwise call) in rlx's "TN" form, asked of its
 * heuristic at a 64^3 product. 0 where it has none (Ada, or a cuBLASLt
 * without scale modes, which refuses the attribute). */
static uint32_t lt_outer_types(rlx_device *d) {
    if (!d->lt && lt_api.cublasLtCreate(&d->lt) != 0) return d->lt = NULL, 0u;
    static const int32_t types[3][2] = {{RLX_DTYPE_F32, CUDA_R_32F}, {RLX_DTYPE_F16, CUDA_R_16F},
                                        {RLX_DTYPE_BF16, CUDA_R_16BF}};
    const int32_t op_t = CUBLAS_OP_T, mode = LT_SCALE_OUTER_VEC_32F;
    const uint64_t ws = LT_WORKSPACE;
    uint32_t bits = 0;
    /* The heuristic refuses vector modes while the scale pointers are NULL. */
    CUdeviceptr vec = 0;
    if (cu.cuMemAlloc(&vec, 64 * sizeof(float)) != CUDA_SUCCESS) return 0u;
    for (int i = 0; i < 3; ++i) {
        void *op = NULL, *la = NULL, *lb = NULL, *lc = NULL, *pref = NULL;
        lt_heuristic h;
        int found = 0;
        int st = lt_api.cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
        if (!st) st = lt_api.cublasLtMatmulDescSetAttribute(op, LT_DESC_TRANSA, &op_t, sizeof op_t);
        if (!st) st = lt_api.cublasLtMatmulDescSetAttribute(op, LT_DESC_A_SCALE_MODE, &mode, sizeof mode);
        if (!st) st = lt_api.cublasLtMatmulDescSetAttribute(op, LT_DESC_B_SCALE_MODE, &mode, sizeof mode);
        if (!st) st = lt_api.cublasLtMatmulDescSetAttribute(op, LT_DESC_A_SCALE_POINTER, &vec, sizeof vec);
        if (!st) st = lt_api.cublasLtMatmulDescSetAttribute(op, LT_DESC_B_SCALE_POINTER, &vec, sizeof vec);
        if (!st) st = lt_api.cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, 64, 64, 64);
        if (!st) st = lt_api.cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, 64, 64, 64);
        if (!st) st = lt_api.cublasLtMatrixLayoutCreate(&lc, types[i][1], 64, 64, 64);
        if (!st) st = lt_api.cublasLtMatmulPreferenceCreate(&pref);
        if (!st) st = lt_api.cublasLtMatmulPreferenceSetAttribute(pref, LT_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
        if (!st) st = lt_api.cublasLtMatmulAlgoGetHeuristic(d->lt, op, la, lb, lc, lc, pref, 1, &h, &found);
        if (!st && found >= 1 && h.state == 0) bits |= 1u << types[i][0];
        if (pref) lt_api.cublasLtMatmulPreferenceDestroy(pref);
        if (lc) lt_api.cublasLtMatrixLayoutDestroy(lc);
        if (lb) lt_api.cublasLtMatrixLayoutDestroy(lb);
        if (la) lt_api.cublasLtMatrixLayoutDestroy(la);
        if (op) lt_api.cublasLtMatmulDescDestroy(op);
    }
    cu.cuMemFree(vec);
    return bits;
}

static rlx_status device_info(rlx_device *d, rlx_device_info *out) {
    RLX_CHECK_DEVICE_INFO(d, out);
    *out = d->info;
    return RLX_OK;
}

/* ---- buffers ------------------------------------------------------------------------- */
static rlx_status buffer_alloc(rlx_device *d, uint64_t size, rlx_buffer **out) {
    RLX_CHECK_BUFFER_ALLOC(d, size, out);
    rlx_status s = set_ctx(d);
    if (s) return s;
    rlx_buffer *b = calloc(1, sizeof *b);
    if (!b) return fail(RLX_ERR_OOM, "buffer_alloc: out of memory");
    /* Whole 16-byte units: kernels copy a weight's 16-byte aligned cover with
     * cp.async (shaders/quant_gemv.h RlxQAsyncStage), whose last vector reads
     * only the bytes before the end but which compute-sanitizer counts as a
     * 16-byte read (session 23: one report at a q5_0 weight's last 8 bytes). */
    const size_t rounded = size < ALIGN ? ALIGN : ((size_t)size + 15u) & ~(size_t)15u;
    CUresult r = cu.cuMemAlloc(&b->ptr, rounded);
    if (r == CUDA_SUCCESS) r = cu.cuMemsetD8Async(b->ptr, 0, rounded, d->copy_stream);
    if (r == CUDA_SUCCESS) r = cu.cuStreamSynchronize(d->copy_stream);
    if (r != CUDA_SUCCESS) {
        if (b->ptr) cu.cuMemFree(b->ptr);
        free(b);
        return r == CUDA_ERROR_OUT_OF_MEMORY
                   ? fail(RLX_ERR_OOM, "buffer_alloc: cannot allocate %llu bytes on the GPU", (unsigned long long)size)
                   : cu_fail(r, "buffer_alloc");
    }
    b->dev = d, b->size = size;
    *out = b;
    return RLX_OK;
}

static void buffer_free(rlx_buffer *b) {
    if (!b) return;
    rlx_device *d = b->dev;
    if (set_ctx(d) == RLX_OK) {
        pthread_mutex_lock(&d->mu);
        for (ptr_array **p = &d->ptr_arrays; *p;) {
            ptr_array *e = *p;
            if (e->key.a == b || e->key.b == b || e->key.c == b) {
                *p = e->next;
                cu.cuMemFree(e->ptrs);
                free(e);
            } else {
                p = &e->next;
            }
        }
        pthread_mutex_unlock(&d->mu);
        cu.cuMemFree(b->ptr);
    }
    free(b);
}

static void *buffer_host_ptr(rlx_buffer *b) { (void)b; return NULL; }
static uint64_t buffer_size(const rlx_buffer *b) { return b ? b->size : 0; }

RLX_DEFINE_CHECK_COPY(static)

/* Synchronous copies on the copy stream: done when they return. */
static rlx_status buffer_write(rlx_buffer *b, uint64_t offset, const void *src, uint64_t size) {
    rlx_status s = check_copy("buffer_write", b, offset, src, size);
    if (s || !size || (s = set_ctx(b->dev))) return s;
    CU_CHECK(cu.cuMemcpyHtoDAsync(b->ptr + offset, src, size, b->dev->copy_stream), "buffer_write");
    CU_CHECK(cu.cuStreamSynchronize(b->dev->copy_stream), "buffer_write");
    return RLX_OK;
}

static rlx_status buffer_read(const rlx_buffer *b, uint64_t offset, void *dst, uint64_t size) {
    rlx_status s = check_copy("buffer_read", b, offset, dst, size);
    if (s || !size || (s = set_ctx(b->dev))) return s;
    CU_CHECK(cu.cuMemcpyDtoHAsync(dst, b->ptr + offset, size, b->dev->copy_stream), "buffer_read");
    CU_CHECK(cu.cuStreamSynchronize(b->dev->copy_stream), "buffer_read");
    return RLX_OK;
}

/* ---- libraries: NVRTC, name expressions, the disk cache -------------------------------- */
typedef struct { char host[64], expr[192], lowered[512]; } kname;  /* lowered: NVRTC's mangled name */
typedef struct { size_t n; kname *k; } names_t;

static void names_free(names_t *k) { free(k->k), k->k = NULL, k->n = 0; }
struct rlx_library { rlx_device *dev; CUmodule mod; names_t names; };

/* Every line `RLX_INSTANTIATE(kernel, type, host)` or `RLX_INSTANTIATE2(kernel,
 * t1, t2, host)` (leading blanks allowed; the prelude's #define lines start
 * with '#') gives host -> "kernel<type>" / "kernel<t1, t2>". Types must not
 * contain commas. */
static rlx_status parse_instantiations(const char *src, names_t *k) {
    for (const char *line = src; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *p = line + strspn(line, " \t");
        if (strncmp(p, "RLX_INSTANTIATE", 15) != 0) continue;
        const int two = p[15] == '2';
        p += 15 + two;
        const char *close = strchr(p, ')'), *eol = strchr(p, '\n');
        if (*p != '(' || !close || (eol && close > eol) || close - p > 400) continue;
        char args[512], *part[5], *save = NULL;
        int n = 0;
        memcpy(args, p + 1, (size_t)(close - p - 1));
        args[close - p - 1] = 0;
        for (char *t = strtok_r(args, ",", &save); t && n < 5; t = strtok_r(NULL, ",", &save)) {
            t += strspn(t, " \t");
            for (char *e = t + strlen(t); e > t && (e[-1] == ' ' || e[-1] == '\t');) *--e = 0;
            part[n++] = t;
        }
        if (n != (two ? 4 : 3)) continue;  /* not an instantiation (the macro's own #define, say) */
        kname *grown = realloc(k->k, (k->n + 1) * sizeof *grown);
        if (!grown) return fail(RLX_ERR_OOM, "library_compile: out of memory");
        kname *e = &(k->k = grown)[k->n++];
        memset(e, 0, sizeof *e);
        snprintf(e->host, sizeof e->host, "%s", part[n - 1]);
        if (snprintf(e->expr, sizeof e->expr, "%s<%s%s%s>", part[0], part[1], two ? ", " : "", two ? part[2] : "") >=
                (int)sizeof e->expr || strlen(part[n - 1]) >= sizeof e->host)
            return fail(RLX_ERR_COMPILE, "library_compile: RLX_INSTANTIATE names too long: %.200s", part[n - 1]);
    }
    return RLX_OK;
}

/* Compiles `src` with NVRTC: options = arch, -std=c++17, --split-compile=0
 * when `split`, -I per include dir, then the caller's (whitespace-separated).
 * On success *image is a cubin (or NUL-terminated PTX) and k's lowered names
 * are filled in. */
static rlx_status nvrtc_compile_with(const char *src, int arch, int cubin, const char *include_dirs,
                                     const char *user_opts, int split, names_t *k, char **image,
                                     size_t *image_size) {
    *image = NULL;
    char arch_opt[64], *incs = strdup(include_dirs ? include_dirs : ""), *extra = strdup(user_opts ? user_opts : "");
    char *opts[256], *save = NULL;
    int n = 0;
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s_%d", cubin ? "sm" : "compute", arch);
    opts[n++] = arch_opt;
    opts[n++] = "-std=c++17";
    if (split) opts[n++] = "--split-compile=0";
    sbuf incopts[64];
    int n_inc = 0;
    for (char *dir = incs ? strtok_r(incs, ":", &save) : NULL; dir && n_inc < 64; dir = strtok_r(NULL, ":", &save)) {
        memset(&incopts[n_inc], 0, sizeof(sbuf));
        sb_str(&incopts[n_inc], "-I"), sb_str(&incopts[n_inc], dir);
        if (incopts[n_inc].p) opts[n++] = incopts[n_inc].p;
        ++n_inc;
    }
    for (char *o = extra ? strtok_r(extra, " \t\n", &save) : NULL; o && n < 256; o = strtok_r(NULL, " \t\n", &save))
        opts[n++] = o;
    nvrtcProgram prog = NULL;
    rlx_status s = RLX_OK;
    int r = nv.nvrtcCreateProgram(&prog, src, "rlx_kernels.cu", 0, NULL, NULL);
    for (size_t i = 0; r == 0 && i < k->n; ++i) r = nv.nvrtcAddNameExpression(prog, k->k[i].expr);
    if (r != 0) {
        s = fail(RLX_ERR_COMPILE, "NVRTC: cannot create the program (error %d)", r);
    } else if (nv.nvrtcCompileProgram(prog, n, (const char *const *)opts) != 0) {
        size_t len = 0;
        nv.nvrtcGetProgramLogSize(prog, &len);
        char *log = calloc(1, len + 1);
        sbuf msg = {0};
        if (log) nv.nvrtcGetProgramLog(prog, log);
        if (log && strstr(log, "cuda_fp16.h"))
            sb_str(&msg, "cuda_fp16.h not found: pass the CUDA include folder in include_dir (CUDA_HOME or "
                         "the nvidia-cuda-runtime package)\n");
        sb_str(&msg, "NVRTC: "), sb_str(&msg, log ? log : "compilation failed (no log)");
        set_error(msg.p ? msg.p : "NVRTC: compilation failed");
        free(log), free(msg.p);
        s = RLX_ERR_COMPILE;
    } else {
        size_t size = 0;
        r = cubin ? nv.nvrtcGetCUBINSize(prog, &size) : nv.nvrtcGetPTXSize(prog, &size);
        if (r == 0 && !(*image = malloc(size ? size : 1))) r = -1;
        if (r == 0) r = cubin ? nv.nvrtcGetCUBIN(prog, *image) : nv.nvrtcGetPTX(prog, *image);
        *image_size = size;
        for (size_t i = 0; r == 0 && i < k->n; ++i) {
            const char *name = NULL;
            r = nv.nvrtcGetLoweredName(prog, k->k[i].expr, &name);
            if (r == 0 && snprintf(k->k[i].lowered, sizeof k->k[i].lowered, "%s", name) >= (int)sizeof k->k[i].lowered)
                r = -1;
        }
        if (r != 0) s = fail(RLX_ERR_COMPILE, "NVRTC: cannot read the compiled program (error %d)", r);
    }
    if (prog) nv.nvrtcDestroyProgram(&prog);
    for (int i = 0; i < n_inc; ++i) free(incopts[i].p);
    free(incs), free(extra);
    if (s != RLX_OK) free(*image), *image = NULL;
    return s;
}

/* The whole kernel library is one NVRTC program: compiled on one thread it
 * took 200-290 s on a fresh H200 machine. NVRTC 12.1 and later optimize its
 * kernels on every core (--split-compile=0, the same code); an NVRTC that
 * refuses the option compiles again without it. */
static rlx_status nvrtc_compile(const char *src, int arch, int cubin, const char *include_dirs,
                                const char *user_opts, names_t *k, char **image, size_t *image_size) {
    const int split = nv.major > 12 || (nv.major == 12 && nv.minor >= 1);
    rlx_status s = nvrtc_compile_with(src, arch, cubin, include_dirs, user_opts, split, k, image, image_size);
    if (s == RLX_ERR_COMPILE && split)
        s = nvrtc_compile_with(src, arch, cubin, include_dirs, user_opts, 0, k, image, image_size);
    return s;
}

/* Cache file: "RLXCUDA1 <cubin|ptx> <n>\n", n lines "<host>\t<lowered>\n",
 * then the image. One file, published by rename: names and image always agree. */
static int cache_load(const char *path, int cubin, names_t *k, char **image, size_t *image_size) {
    size_t size = 0, n = 0;
    char *data = read_file(path, &size), *p = data, kind[8] = {0};
    int used = 0, ok = data && sscanf(p, "RLXCUDA1 %7s %zu\n%n", kind, &n, &used) == 2 && used && n == k->n &&
                       !strcmp(kind, cubin ? "cubin" : "ptx");
    for (size_t i = 0; ok && i < n; ++i) {
        char *tab = strchr(p += used, '\t'), *nl = tab ? strchr(tab, '\n') : NULL;
        kname *e = &k->k[i];
        ok = nl && (size_t)(tab - p) == strlen(e->host) && !strncmp(p, e->host, (size_t)(tab - p)) &&
             (size_t)(nl - tab - 1) < sizeof e->lowered;
        if (ok) memcpy(e->lowered, tab + 1, (size_t)(nl - tab - 1)), e->lowered[nl - tab - 1] = 0;
        used = ok ? (int)(nl + 1 - p) : 0;
    }
    p += used;
    if (ok && (*image = malloc(size - (size_t)(p - data) + 1))) {
        *image_size = size - (size_t)(p - data);
        memcpy(*image, p, *image_size);
        (*image)[*image_size] = 0;
    }
    free(data);
    return ok && *image;
}

static void cache_store(const char *dir, const char *path, int cubin, const names_t *k, const char *image,
                        size_t image_size) {
    static unsigned counter;
    char tmp[1200];
    if (!make_dirs(dir)) return;  /* no cache is not an error */
    snprintf(tmp, sizeof tmp, "%s.tmp%d-%u", path, (int)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    int ok = fprintf(f, "RLXCUDA1 %s %zu\n", cubin ? "cubin" : "ptx", k->n) > 0;
    for (size_t i = 0; ok && i < k->n; ++i) ok = fprintf(f, "%s\t%s\n", k->k[i].host, k->k[i].lowered) > 0;
    ok = ok && fwrite(image, 1, image_size, f) == image_size;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

/* Source as compiled: user source without the prelude gets an #include of
 * prelude/cuda.h (found through include_dir) and the prelude's text joins the
 * cache key. The flattened source (Python) already carries it. */
static rlx_status library_source(rlx_device *d, const char *source, sbuf *src, sbuf *prelude) {
    if (!strstr(source, "RLX_PRELUDE_CUDA_H")) {
        sb_str(src, "#include \"prelude/cuda.h\"\n");
        char *dirs = strdup(d->include_dirs ? d->include_dirs : ""), *save = NULL;
        for (char *dir = dirs ? strtok_r(dirs, ":", &save) : NULL; dir; dir = strtok_r(NULL, ":", &save))
            for (int i = 0; i < 2; ++i) {
                char path[1024];
                snprintf(path, sizeof path, "%s/prelude/%s", dir, i ? "common.h" : "cuda.h");
                char *text = read_file(path, NULL);
                if (text) sb_str(prelude, path), sb_str(prelude, text);
                free(text);
            }
        free(dirs);
        if (!prelude->n)
            return fail(RLX_ERR_COMPILE, "library_compile: no prelude/cuda.h under include_dir='%s'",
                        d->include_dirs ? d->include_dirs : "");
    }
    sb_str(src, source);
    return src->oom || prelude->oom ? fail(RLX_ERR_OOM, "library_compile: out of memory") : RLX_OK;
}

static rlx_status library_compile(rlx_device *d, const char *source, const char *options, rlx_library **out) {
    ARG_CHECK(d && out, "library_compile: NULL argument");
    *out = NULL;
    ARG_CHECK(source, "library_compile: cuda needs kernel source (shader_source.kernel_source('cuda'))");
    sbuf src = {0}, prelude = {0};
    names_t k = {0};
    char *image = NULL, dir[1024], path[1100], ver[64];
    size_t image_size = 0;
    rlx_library *lib = NULL;
    CUmodule mod = NULL;
    /* Without cuFuncGetParamInfo the shim cannot tell a params struct taken
     * by value from a pointer: kernels then take params by pointer. */
    sbuf opts = {0};
    if (!cu.cuFuncGetParamInfo) sb_str(&opts, "-DRLX_PARAMS_BY_VALUE=0 ");
    sb_str(&opts, options ? options : "");
    options = opts.p ? opts.p : options;
    rlx_status s = opts.oom ? fail(RLX_ERR_OOM, "library_compile: out of memory") : RLX_OK;
    if (s == RLX_OK) s = library_source(d, source, &src, &prelude);
    if (s == RLX_OK) s = parse_instantiations(src.p, &k);
    if (s != RLX_OK) goto done;
    snprintf(ver, sizeof ver, "%s_%d nvrtc %d.%d driver %d", d->cubin ? "sm" : "compute", d->arch, nv.major,
             nv.minor, g_driver);
    uint64_t h = fnv_str(14695981039346656037ull, "rlx-cuda-cache-v1");
    h = fnv_str(fnv_str(fnv_str(fnv_str(fnv_str(h, src.p), prelude.p), options), ver), d->include_dirs);
    snprintf(dir, sizeof dir, "%s/cuda-kernels", d->cache_dir);
    snprintf(path, sizeof path, "%s/%016llx.bin", dir, (unsigned long long)h);
    if ((s = set_ctx(d))) goto done;
    if (cache_load(path, d->cubin, &k, &image, &image_size)) {
        if (cu.cuModuleLoadData(&mod, image) != CUDA_SUCCESS) {
            mod = NULL;
            unlink(path);  /* unloadable cache entry: rebuild it */
        }
    }
    if (!mod) {
        free(image), image = NULL;
        if ((s = nvrtc_compile(src.p, d->arch, d->cubin, d->include_dirs, options, &k, &image, &image_size)))
            goto done;
        CUresult r = cu.cuModuleLoadData(&mod, image);
        if (r != CUDA_SUCCESS) {
            mod = NULL;
            s = fail(RLX_ERR_COMPILE, "cuModuleLoadData: %s (%d): the driver (%d) cannot load NVRTC %d.%d's "
                     "output for %s_%d", cu_name(r), r, g_driver, nv.major, nv.minor, d->cubin ? "sm" : "compute",
                     d->arch);
            goto done;
        }
        cache_store(dir, path, d->cubin, &k, image, image_size);
    }
    if (!(lib = calloc(1, sizeof *lib))) {
        cu.cuModuleUnload(mod);
        s = fail(RLX_ERR_OOM, "library_compile: out of memory");
        goto done;
    }
    lib->dev = d, lib->mod = mod, lib->names = k;
    memset(&k, 0, sizeof k);
    *out = lib;
done:
    names_free(&k);
    free(image), free(src.p), free(prelude.p), free(opts.p);
    return s;
}

static void library_free(rlx_library *lib) {
    if (!lib) return;
    if (set_ctx(lib->dev) == RLX_OK) cu.cuModuleUnload(lib->mod);
    names_free(&lib->names);
    free(lib);
}

static rlx_status pipeline_get(rlx_library *lib, const char *function, uint32_t flags, rlx_pipeline **out,
                               rlx_pipeline_info *info) {
    ARG_CHECK(lib && function && out, "pipeline_get: NULL argument");
    *out = NULL;
    ARG_CHECK((flags & ~RLX_PIPELINE_INDIRECT) == 0, "pipeline_get: unknown flags 0x%x", flags);
    size_t i = 0;
    while (i < lib->names.n && strcmp(lib->names.k[i].host, function)) ++i;
    if (i == lib->names.n) return fail(RLX_ERR_NOT_FOUND, "pipeline_get: no kernel '%s' in this library", function);
    rlx_status s = set_ctx(lib->dev);
    if (s) return s;
    CUfunction fn;
    int max_threads = 0;
    CU_CHECK(cu.cuModuleGetFunction(&fn, lib->mod, lib->names.k[i].lowered), "cuModuleGetFunction");
    CU_CHECK(cu.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn), "cuFuncGetAttribute");
    /* Every rlx kernel parameter is a binding: a buffer's pointer, or a params
     * struct by value (the prelude's rlx_params_value, 16-byte aligned, so
     * never pointer-sized). Count them where the driver can tell (12.4+; the
     * library is compiled with params by pointer where it cannot, see
     * library_compile), so a missing binding is an argument error instead of
     * a kernel reading a garbage pointer. */
    uint32_t n_params = 0, value_mask = 0, value_size[RLX_MAX_BINDINGS] = {0};
    size_t off, size;
    while (cu.cuFuncGetParamInfo && n_params <= RLX_MAX_BINDINGS &&
           cu.cuFuncGetParamInfo(fn, n_params, &off, &size) == CUDA_SUCCESS) {
        if (size != sizeof(CUdeviceptr) && (size % 16u || size > MAX_BYTES))
            return fail(RLX_ERR_UNSUPPORTED, "pipeline_get: '%s' parameter %u is %zu bytes; rlx kernels take "
                        "pointers and params structs (a multiple of 16 bytes, at most %u)", function, n_params,
                        size, MAX_BYTES);
        if (size != sizeof(CUdeviceptr) && n_params < RLX_MAX_BINDINGS)
            value_mask |= 1u << n_params, value_size[n_params] = (uint32_t)size;
        ++n_params;
    }
    if (n_params > RLX_MAX_BINDINGS)
        return fail(RLX_ERR_UNSUPPORTED, "pipeline_get: '%s' takes more than %u parameters", function,
                    RLX_MAX_BINDINGS);
    rlx_pipeline *p = calloc(1, sizeof *p);
    if (!p) return fail(RLX_ERR_OOM, "pipeline_get: out of memory");
    p->lib = lib, p->fn = fn, p->flags = flags, p->max_threads = (uint32_t)max_threads, p->n_params = n_params;
    p->value_mask = value_mask;
    memcpy(p->value_size, value_size, sizeof value_size);
    *out = p;
    if (info) {
        memset(info, 0, sizeof *info);
        info->max_threads_per_group = (uint32_t)max_threads;
        info->execution_width = 32;
        info->value_bindings = value_mask;
    }
    return RLX_OK;
}

static void pipeline_free(rlx_pipeline *p) { free(p); }
