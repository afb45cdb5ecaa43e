/* Device, buffers, libraries and pipelines.
 * A part of the Metal shim: csrc/metal_shim.m includes it (one translation unit, every
 * function static); it is not compiled on its own. */

/* ---- device ------------------------------------------------------------------------------ */
static const char *last_error(void) { return t_error; }

static const char *unavailable_reason(void) {
    @autoreleasepool {
        /* Apple: a command-line process must link CoreGraphics for a default device
         * (setup.py links it). */
        return MTLCreateSystemDefaultDevice() ? NULL : "no Metal device (MTLCreateSystemDefaultDevice returned nil)";
    }
}

static int device_count(void) {
    @autoreleasepool {
        return MTLCreateSystemDefaultDevice() ? 1 : 0;
    }
}

/* Every shim gets cache_dir and include_dir (rlx/runtime/shim.py). Metal compiles source in
 * memory and needs neither; anything else is a mistake worth reporting. */
static rlx_status parse_options(const char *options) {
    for (const char *p = options ? options : ""; *p;) {
        const char *end = strchr(p, ';');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len) {
            const char *eq = memchr(p, '=', len);
            ARG_CHECK(eq, "device_open: option '%.*s' is not key=value", (int)len, p);
            const size_t klen = (size_t)(eq - p);
            if (!(klen == 9 && !strncmp(p, "cache_dir", 9)) && !(klen == 11 && !strncmp(p, "include_dir", 11)))
                return fail(RLX_ERR_ARG, "device_open: unknown option '%.*s' (known: cache_dir, include_dir)",
                            (int)klen, p);
        }
        p += len + (end ? 1 : 0);
    }
    return RLX_OK;
}

static void device_close(rlx_device *d) {
    if (!d) return;
    @autoreleasepool {
        drop(&d->scale_pipes[0]);
        drop(&d->scale_pipes[1]);
        drop(&d->gemm_kernels);
        drop(&d->gemm_descs);
        drop(&d->gemm_mats);
        drop(&d->queue);
        drop(&d->mtl);
    }
    pthread_rwlock_destroy(&d->gemm_lock);
    pthread_mutex_destroy(&d->scale_mu);
    free(d);
}

static rlx_status device_open(int index, const char *options, rlx_device **out) {
    ARG_CHECK(out, "device_open: out is NULL");
    *out = NULL;
    rlx_status s = parse_options(options);
    if (s) return s;
    @autoreleasepool {
        id<MTLDevice> dev = MTLCreateSystemDefaultDevice();
        if (!dev) return fail(RLX_ERR_UNAVAILABLE, "device_open: no Metal device");
        if (index != 0) return fail(RLX_ERR_NOT_FOUND, "device_open: Metal has one device here (index 0), not %d", index);
        /* 1024 rather than the default 64: cmd_begin must not block while callers hold many
         * uncommitted command buffers (tinygrad does the same). */
        id<MTLCommandQueue> queue = [dev newCommandQueueWithMaxCommandBufferCount:1024];
        if (!queue) return fail(RLX_ERR_OOM, "device_open: newCommandQueueWithMaxCommandBufferCount failed");
        rlx_device *d = calloc(1, sizeof *d);
        if (!d) return fail(RLX_ERR_OOM, "device_open: out of memory");
        pthread_rwlock_init(&d->gemm_lock, NULL);
        pthread_mutex_init(&d->scale_mu, NULL);
        d->mtl = KEEP(dev);
        d->queue = KEEP(queue);
        d->gemm_kernels = KEEP([NSMutableDictionary new]);
        d->gemm_descs = KEEP([NSMutableDictionary new]);
        d->gemm_mats = KEEP([NSMutableDictionary new]);
        d->mps_ok = MPSSupportsMTLDevice(dev) ? 1 : 0;
        /* tinygrad (runtime/graph/metal.py): before M3 (Apple9), the pipelines an ICB uses must
         * be used once on the encoder itself or the GPU can fault. Unknown family: apply it. */
        d->icb_fix = 1;
#ifdef __MAC_14_0
        if (@available(macOS 14.0, *)) d->icb_fix = [dev supportsFamily:MTLGPUFamilyApple9] ? 0 : 1;
#endif
        rlx_device_info *in = &d->info;
        NSString *name = dev.name;
        snprintf(in->name, sizeof in->name, "%s", name ? name.UTF8String : "Metal device");
        /* Calibration caches are keyed by this: the model name plus the IORegistry id. */
        char model[96];
        snprintf(model, sizeof model, "%s", in->name);
        for (char *c = model; *c; ++c)
            if (!isalnum((unsigned char)*c) && *c != '.' && *c != '-') *c = '_';
        snprintf(in->hardware_id, sizeof in->hardware_id, "metal-%s-%016llx", model,
                 (unsigned long long)dev.registryID);
        in->max_buffer_length = (uint64_t)dev.maxBufferLength;
        in->max_threads_per_group = (uint32_t)dev.maxThreadsPerThreadgroup.width;
        in->simd_width = 32;          /* every Apple GPU; a pipeline reports its own execution_width */
        in->unified_memory = dev.hasUnifiedMemory ? 1 : 0;
        in->supports_f16 = 1;
        in->compute_units = 1;        /* Metal has no public GPU core count */
        *out = d;
    }
    return RLX_OK;
}

static rlx_status device_info(rlx_device *d, rlx_device_info *out) {
    RLX_CHECK_DEVICE_INFO(d, out);
    *out = d->info;
    return RLX_OK;
}

/* ---- buffers ------------------------------------------------------------------------------ */
static rlx_status buffer_alloc(rlx_device *d, uint64_t size, rlx_buffer **out) {
    RLX_CHECK_BUFFER_ALLOC(d, size, out);
    @autoreleasepool {
        /* Shared storage: one allocation the CPU and GPU both address; Metal zero-fills it.
         * Metal has no zero-length buffers, so an empty rlx buffer gets one byte behind it. */
        id<MTLBuffer> b = [OBJ(id<MTLDevice>, d->mtl) newBufferWithLength:(NSUInteger)(size ? size : 1)
                                                                   options:MTLResourceStorageModeShared];
        if (!b) return fail(RLX_ERR_OOM, "buffer_alloc: cannot allocate %llu bytes", (unsigned long long)size);
        rlx_buffer *rb = calloc(1, sizeof *rb);
        if (!rb) return fail(RLX_ERR_OOM, "buffer_alloc: out of memory");
        rb->dev = d;
        rb->mtl = KEEP(b);
        rb->ptr = (uint8_t *)b.contents;
        rb->size = size;
        *out = rb;
    }
    return RLX_OK;
}

static void buffer_free(rlx_buffer *b) {
    if (!b) return;
    rlx_device *d = b->dev;
    @autoreleasepool {
        pthread_rwlock_wrlock(&d->gemm_lock);  /* its MPSMatrix objects go with it */
        [OBJ(NSMutableDictionary *, d->gemm_mats) removeObjectForKey:@((uintptr_t)b)];
        pthread_rwlock_unlock(&d->gemm_lock);
        drop(&b->mtl);
    }
    free(b);
}

static void *buffer_host_ptr(rlx_buffer *b) { return b ? b->ptr : NULL; }
static uint64_t buffer_size(const rlx_buffer *b) { return b ? b->size : 0; }

RLX_DEFINE_CHECK_COPY(static)

/* Shared storage is coherent at command buffer boundaries: callers copy before commit or
 * after wait (the ABI's run loop does), so a plain memcpy is the whole transfer. */
static rlx_status buffer_write(rlx_buffer *b, uint64_t offset, const void *src, uint64_t size) {
    rlx_status s = check_copy("buffer_write", b, offset, src, size);
    if (s) return s;
    if (size) memcpy(b->ptr + offset, src, size);
    return RLX_OK;
}

static rlx_status buffer_read(const rlx_buffer *b, uint64_t offset, void *dst, uint64_t size) {
    rlx_status s = check_copy("buffer_read", b, offset, dst, size);
    if (s) return s;
    if (size) memcpy(dst, b->ptr + offset, size);
    return RLX_OK;
}

/* ---- libraries and pipelines ------------------------------------------------------------- */
/* options: whitespace-separated -DNAME or -DNAME=VALUE, the part of a compiler command line
 * that means the same on every target. Fast math is off: kernels are checked against numpy at
 * f32 tolerances and the CPU and CUDA targets are IEEE too. */
static rlx_status compile_options(const char *options, MTLCompileOptions **out) {
    MTLCompileOptions *opts = [MTLCompileOptions new];
#ifdef __MAC_15_0
    if (@available(macOS 15.0, *)) opts.mathMode = MTLMathModeSafe;
    else opts.fastMathEnabled = NO;
#else
    opts.fastMathEnabled = NO;
#endif
    if (options && *options) {
        NSMutableDictionary *macros = [NSMutableDictionary new];
        char *copy = strdup(options), *save = NULL;
        if (!copy) return fail(RLX_ERR_OOM, "library_compile: out of memory");
        for (char *tok = strtok_r(copy, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
            if (strncmp(tok, "-D", 2) != 0 || !tok[2] || tok[2] == '=') {
                rlx_status s = fail(RLX_ERR_ARG, "library_compile: Metal takes only -DNAME[=VALUE] options, not '%s'", tok);
                free(copy);
                return s;
            }
            char *eq = strchr(tok + 2, '=');
            if (eq) *eq = 0;
            NSString *key = [NSString stringWithUTF8String:tok + 2];
            NSString *value = [NSString stringWithUTF8String:(eq ? eq + 1 : "1")];
            if (key && value) [macros setObject:value forKey:key];
        }
        free(copy);
        opts.preprocessorMacros = macros;
    }
    *out = opts;
    return RLX_OK;
}

/* A compiled library, or nil with t_error set and the status in *status. */
static id<MTLLibrary> new_library(rlx_device *d, const char *source, const char *options, rlx_status *status) {
    MTLCompileOptions *opts = nil;
    if ((*status = compile_options(options, &opts))) return nil;
    NSString *src = [NSString stringWithUTF8String:source];
    if (!src) {
        *status = fail(RLX_ERR_ARG, "library_compile: source is not valid UTF-8");
        return nil;
    }
    NSError *err = nil;
    id<MTLLibrary> lib = [OBJ(id<MTLDevice>, d->mtl) newLibraryWithSource:src options:opts error:&err];
    if (!lib) *status = fail(RLX_ERR_COMPILE, "%s", describe(err, "newLibraryWithSource failed without a message"));
    return lib;
}

/* Pipeline state for `name`, or nil with t_error set (NOT_FOUND or COMPILE in *status). */
static id<MTLComputePipelineState> new_pipeline(rlx_device *d, id<MTLLibrary> lib, const char *name, int indirect,
                                                rlx_status *status) {
    NSString *fname = [NSString stringWithUTF8String:name];
    id<MTLFunction> fn = fname ? [lib newFunctionWithName:fname] : nil;
    if (!fn) {
        *status = fail(RLX_ERR_NOT_FOUND, "pipeline_get: no kernel '%s' in the library", name);
        return nil;
    }
    MTLComputePipelineDescriptor *desc = [MTLComputePipelineDescriptor new];
    desc.computeFunction = fn;
    desc.supportIndirectCommandBuffers = indirect ? YES : NO;  /* required to be encoded in an ICB */
    NSError *err = nil;
    id<MTLComputePipelineState> state = [OBJ(id<MTLDevice>, d->mtl) newComputePipelineStateWithDescriptor:desc
                                                                                                  options:MTLPipelineOptionNone
                                                                                               reflection:NULL
                                                                                                    error:&err];
    if (!state) *status = fail(RLX_ERR_COMPILE, "pipeline_get '%s': %s", name, describe(err, "pipeline creation failed"));
    return state;
}

static rlx_status library_compile(rlx_device *d, const char *source, const char *options, rlx_library **out) {
    ARG_CHECK(d && out, "library_compile: NULL argument");
    *out = NULL;
    /* The host shim links its built-in kernels; Metal compiles text, and the flattening of
     * shaders/ lives in Python (rlx.runtime.shader_source), so the caller passes it. */
    ARG_CHECK(source, "library_compile: the Metal shim needs source text: pass "
                      "rlx.runtime.shader_source.kernel_source('metal')");
    @autoreleasepool {
        @try {
            rlx_status s = RLX_OK;
            id<MTLLibrary> lib = new_library(d, source, options, &s);
            if (!lib) return s;
            rlx_library *l = calloc(1, sizeof *l);
            if (!l) return fail(RLX_ERR_OOM, "library_compile: out of memory");
            pthread_mutex_init(&l->mu, NULL);
            l->dev = d;
            l->mtl = KEEP(lib);
            l->pipes = KEEP([NSMutableDictionary new]);
            *out = l;
        }
        CATCH_OBJC("library_compile")
    }
    return RLX_OK;
}

static void library_free(rlx_library *l) {
    if (!l) return;
    @autoreleasepool {
        drop(&l->pipes);
        drop(&l->mtl);
    }
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static rlx_status pipeline_get(rlx_library *l, const char *function, uint32_t flags, rlx_pipeline **out,
                               rlx_pipeline_info *info) {
    ARG_CHECK(l && function && out, "pipeline_get: NULL argument");
    *out = NULL;
    ARG_CHECK((flags & ~RLX_PIPELINE_INDIRECT) == 0, "pipeline_get: unknown flags 0x%x", flags);
    @autoreleasepool {
        @try {
            /* Pipeline states are cached per (name, flags): an ICB pipeline is a different object. */
            NSString *key = [NSString stringWithFormat:@"%s|%u", function, flags];
            NSMutableDictionary *pipes = OBJ(NSMutableDictionary *, l->pipes);
            pthread_mutex_lock(&l->mu);
            id<MTLComputePipelineState> state = [pipes objectForKey:key];
            pthread_mutex_unlock(&l->mu);
            if (!state) {
                rlx_status s = RLX_OK;
                state = new_pipeline(l->dev, OBJ(id<MTLLibrary>, l->mtl), function, (flags & RLX_PIPELINE_INDIRECT) != 0, &s);
                if (!state) return s;
                pthread_mutex_lock(&l->mu);
                id<MTLComputePipelineState> have = [pipes objectForKey:key];
                if (have) state = have;
                else [pipes setObject:state forKey:key];
                pthread_mutex_unlock(&l->mu);
            }
            rlx_pipeline *p = calloc(1, sizeof *p);
            if (!p) return fail(RLX_ERR_OOM, "pipeline_get: out of memory");
            p->dev = l->dev;
            p->state = KEEP(state);
            p->flags = flags;
            p->max_threads = (uint32_t)state.maxTotalThreadsPerThreadgroup;
            p->width = (uint32_t)state.threadExecutionWidth;
            if (info) {
                memset(info, 0, sizeof *info);
                info->max_threads_per_group = p->max_threads;
                info->execution_width = p->width;
            }
            *out = p;
        }
        CATCH_OBJC("pipeline_get")
    }
    return RLX_OK;
}

static void pipeline_free(rlx_pipeline *p) {
    if (!p) return;
    @autoreleasepool {
        drop(&p->state);
    }
    free(p);
}
