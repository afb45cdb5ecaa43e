/* Command buffers (recording) and gemm: MPSMatrixMultiplication, cached per shape.
 * A part of the Metal shim: csrc/metal_shim.m includes it (one translation unit, every
 * function static); it is not compiled on its own. */

/* ---- command buffers: recording ---------------------------------------------------------- */
#define CB_CHECK(cb, fn)                                                              \
    do {                                                                              \
        ARG_CHECK(cb, fn ": command buffer is NULL");                                 \
        ARG_CHECK((cb)->state == CB_RECORDING, fn ": command buffer was already committed"); \
    } while (0)

static rlx_status cmd_begin(rlx_device *d, rlx_cmdbuf **out) {
    ARG_CHECK(d && out, "cmd_begin: NULL argument");
    *out = NULL;
    rlx_cmdbuf *cb = calloc(1, sizeof *cb);
    if (!cb) return fail(RLX_ERR_OOM, "cmd_begin: out of memory");
    @autoreleasepool {
        /* commandBuffer (not ...WithUnretainedReferences): the command buffer keeps the
         * buffers bound directly alive until it completes. */
        id<MTLCommandBuffer> mcb = [OBJ(id<MTLCommandQueue>, d->queue) commandBuffer];
        if (!mcb) {
            free(cb);
            return fail(RLX_ERR_DEVICE, "cmd_begin: the command queue returned no command buffer");
        }
        cb->cb = KEEP(mcb);
    }
    cb->dev = d;
    *out = cb;
    return RLX_OK;
}

/* The open compute encoder, or a new concurrent one: dispatches in it may overlap unless a
 * memory barrier separates them (cmd_barrier, set only where lowering found a hazard). */
static id<MTLComputeCommandEncoder> open_encoder(rlx_cmdbuf *cb) {
    if (!cb->enc) {
        id<MTLComputeCommandEncoder> enc =
            [OBJ(id<MTLCommandBuffer>, cb->cb) computeCommandEncoderWithDispatchType:MTLDispatchTypeConcurrent];
        if (!enc) {
            fail(RLX_ERR_DEVICE, "cannot open a compute encoder");
            return nil;
        }
        cb->enc = KEEP(enc);
        cb->pipe_dirty = 1;  /* a new encoder starts with nothing bound */
        cb->dirty = cb->bound;
        cb->enc_icb = cb->barrier_pending = 0;
    }
    return OBJ(id<MTLComputeCommandEncoder>, cb->enc);
}

/* Ends the open encoder. Commands in later encoders of the same command buffer see its
 * writes: Metal tracks hazards between encoders for (default, tracked) buffers. */
static void close_encoder(rlx_cmdbuf *cb) {
    if (cb->enc) {
        [OBJ(id<MTLComputeCommandEncoder>, cb->enc) endEncoding];
        drop(&cb->enc);
    }
}

static rlx_status cmd_set_pipeline(rlx_cmdbuf *cb, rlx_pipeline *p) {
    CB_CHECK(cb, "cmd_set_pipeline");
    ARG_CHECK(p, "cmd_set_pipeline: pipeline is NULL");
    ARG_CHECK(p->dev == cb->dev, "cmd_set_pipeline: pipeline belongs to another device");
    cb->pipe = p;
    cb->pipe_dirty = 1;
    return RLX_OK;
}

RLX_DEFINE_CHECK_BINDING(static)

static rlx_status cmd_set_buffer(rlx_cmdbuf *cb, uint32_t index, rlx_buffer *b, uint64_t offset) {
    CB_CHECK(cb, "cmd_set_buffer");
    rlx_status s = check_binding(cb->dev, "cmd_set_buffer", index, b, offset);
    if (s) return s;
    cb->buf[index] = b;
    cb->off[index] = offset;
    cb->nbytes[index] = 0;
    cb->bound |= 1u << index;
    cb->dirty |= 1u << index;
    return RLX_OK;
}

static rlx_status cmd_set_bytes(rlx_cmdbuf *cb, uint32_t index, const void *data, uint32_t size) {
    CB_CHECK(cb, "cmd_set_bytes");
    ARG_CHECK(index < RLX_MAX_BINDINGS, "cmd_set_bytes: binding index %u >= %u", index, RLX_MAX_BINDINGS);
    ARG_CHECK(data && size >= 1 && size <= kMaxBytes, "cmd_set_bytes: need 1..%u bytes of non-NULL data, got %u",
              (unsigned)kMaxBytes, size);
    /* Kept here, not only in the encoder, so a later encoder (after a gemm) gets them again. */
    if (!cb->bytes[index] && !(cb->bytes[index] = malloc(kMaxBytes)))
        return fail(RLX_ERR_OOM, "cmd_set_bytes: out of memory");
    memcpy(cb->bytes[index], data, size);
    cb->nbytes[index] = size;
    cb->bound |= 1u << index;
    cb->dirty |= 1u << index;
    return RLX_OK;
}

/* Applies the pipeline and the bindings the encoder has not seen yet. */
static void apply_state(rlx_cmdbuf *cb, id<MTLComputeCommandEncoder> enc) {
    if (cb->pipe_dirty) {
        [enc setComputePipelineState:OBJ(id<MTLComputePipelineState>, cb->pipe->state)];
        cb->pipe_dirty = 0;
    }
    for (uint32_t i = 0; cb->dirty; ++i) {
        if (!(cb->dirty & (1u << i))) continue;
        if (cb->nbytes[i])
            [enc setBytes:cb->bytes[i] length:cb->nbytes[i] atIndex:i];
        else
            [enc setBuffer:OBJ(id<MTLBuffer>, cb->buf[i]->mtl) offset:cb->off[i] atIndex:i];
        cb->dirty &= ~(1u << i);
    }
}

/* threads NULL means one thread per group (as the host runs every group). */
static rlx_status check_grid(const char *fn, const rlx_pipeline *p, const uint32_t groups[3],
                             const uint32_t threads[3]) {
    static const uint32_t one[3] = {1, 1, 1};
    ARG_CHECK(groups, "%s: groups is NULL", fn);
    ARG_CHECK(groups[0] && groups[1] && groups[2], "%s: groups (%u, %u, %u) contain 0", fn, groups[0], groups[1],
              groups[2]);
    ARG_CHECK((uint64_t)groups[0] * groups[1] * groups[2] <= UINT32_MAX, "%s: more than 2^32-1 groups", fn);
    const uint32_t *t = threads ? threads : one;
    ARG_CHECK(t[0] && t[1] && t[2] && (uint64_t)t[0] * t[1] * t[2] <= p->max_threads,
              "%s: threads per group (%u, %u, %u) must be 1..%u in total (the pipeline's maximum)", fn, t[0], t[1],
              t[2], p->max_threads);
    return RLX_OK;
}

static rlx_status cmd_dispatch(rlx_cmdbuf *cb, const uint32_t groups[3], const uint32_t threads[3]) {
    CB_CHECK(cb, "cmd_dispatch");
    ARG_CHECK(cb->pipe, "cmd_dispatch: no pipeline set");
    rlx_status s = check_grid("cmd_dispatch", cb->pipe, groups, threads);
    if (s) return s;
    if (cb->status) return RLX_OK;  /* an earlier command failed: nothing after it runs (as on the host) */
    const uint32_t *t = threads ? threads : (const uint32_t[3]){1, 1, 1};
    @autoreleasepool {
        id<MTLComputeCommandEncoder> enc = open_encoder(cb);
        if (!enc) return RLX_ERR_DEVICE;
        apply_state(cb, enc);
        [enc dispatchThreadgroups:MTLSizeMake(groups[0], groups[1], groups[2])
            threadsPerThreadgroup:MTLSizeMake(t[0], t[1], t[2])];
        cb->barrier_pending = 0;
    }
    return RLX_OK;
}

/* Apple documents memoryBarrierWithScope: for the encoder's dispatches; it does not say that
 * the barrier also orders commands run from an ICB. So next to ICB execution a barrier is an
 * encoder boundary instead (close_encoder), which Metal orders for tracked buffers and for
 * those declared with useResource. No encoder open: the next one starts after this anyway. */
static rlx_status cmd_barrier(rlx_cmdbuf *cb) {
    CB_CHECK(cb, "cmd_barrier");
    if (!cb->enc) return RLX_OK;
    if (cb->enc_icb) {
        @autoreleasepool {
            close_encoder(cb);
        }
        return RLX_OK;
    }
    [OBJ(id<MTLComputeCommandEncoder>, cb->enc) memoryBarrierWithScope:MTLBarrierScopeBuffers];
    cb->barrier_pending = 1;
    return RLX_OK;
}

/* ---- gemm ----------------------------------------------------------------------------------- */

RLX_DEFINE_CHECK_GEMM(static, "metal", NULL, 0)

/* Cache insert under the write lock; another thread's entry for the same key wins. */
static id cache_add(rlx_device *d, NSMutableDictionary *dict, id key, id value) {
    if (!value) return nil;  /* never throw (setObject:nil) while holding the lock */
    pthread_rwlock_wrlock(&d->gemm_lock);
    id have = [dict objectForKey:key];
    if (!have) {
        if (dict.count >= kCacheCap) [dict removeAllObjects];
        [dict setObject:value forKey:key];
        have = value;
    }
    pthread_rwlock_unlock(&d->gemm_lock);
    return have;
}

/* A shared MPSKernel must not encode on two threads at once (MPSKernel docs), so callers
 * encode it inside @synchronized; MPSMatrix and descriptors are immutable once made. The
 * lock only guards the dictionaries: a found object is held by ARC, so an invalidation
 * racing with an encode cannot free it. */
static MPSMatrixMultiplication *gemm_kernel(rlx_device *d, const rlx_gemm_desc *g) {
    NSMutableDictionary *kernels = OBJ(NSMutableDictionary *, d->gemm_kernels);
    uint32_t alpha_bits, beta_bits;
    memcpy(&alpha_bits, &g->alpha, 4);
    memcpy(&beta_bits, &g->beta, 4);
    NSString *key = [NSString stringWithFormat:@"%lld,%lld,%lld,%d,%d,%08x,%08x", (long long)g->m, (long long)g->n,
                                               (long long)g->k, g->trans_a != 0, g->trans_b != 0, alpha_bits, beta_bits];
    pthread_rwlock_rdlock(&d->gemm_lock);
    MPSMatrixMultiplication *kernel = [kernels objectForKey:key];
    pthread_rwlock_unlock(&d->gemm_lock);
    if (kernel) return kernel;
    kernel = [[MPSMatrixMultiplication alloc] initWithDevice:OBJ(id<MTLDevice>, d->mtl)
                                               transposeLeft:(g->trans_a ? YES : NO)
                                              transposeRight:(g->trans_b ? YES : NO)
                                                  resultRows:(NSUInteger)g->m
                                               resultColumns:(NSUInteger)g->n
                                             interiorColumns:(NSUInteger)g->k
                                                       alpha:(double)g->alpha
                                                        beta:(double)g->beta];
    return cache_add(d, kernels, key, kernel);
}

/* MPSMatrix over `rows` x `cols` elements at byte `offset` of `buf`, rows `row_bytes` apart. */
static MPSMatrix *gemm_matrix(rlx_device *d, const rlx_buffer *buf, uint64_t offset, NSUInteger rows, NSUInteger cols,
                              NSUInteger row_bytes, MPSDataType type) {
    NSMutableDictionary *all = OBJ(NSMutableDictionary *, d->gemm_mats);
    NSMutableDictionary *descs = OBJ(NSMutableDictionary *, d->gemm_descs);
    NSNumber *bkey = @((uintptr_t)buf);
    NSString *dkey = [NSString stringWithFormat:@"%lu,%lu,%lu,%u", (unsigned long)rows, (unsigned long)cols,
                                                (unsigned long)row_bytes, (unsigned)type];
    NSString *mkey = [NSString stringWithFormat:@"%llu:%@", (unsigned long long)offset, dkey];
    pthread_rwlock_rdlock(&d->gemm_lock);
    MPSMatrix *m = [[all objectForKey:bkey] objectForKey:mkey];
    MPSMatrixDescriptor *desc = m ? nil : [descs objectForKey:dkey];
    pthread_rwlock_unlock(&d->gemm_lock);
    if (m) return m;
    if (!desc)
        desc = cache_add(d, descs, dkey,
                         [MPSMatrixDescriptor matrixDescriptorWithRows:rows columns:cols rowBytes:row_bytes dataType:type]);
    m = desc ? [[MPSMatrix alloc] initWithBuffer:OBJ(id<MTLBuffer>, buf->mtl) offset:(NSUInteger)offset descriptor:desc]
             : nil;
    if (!m) return nil;
    pthread_rwlock_wrlock(&d->gemm_lock);
    NSMutableDictionary *per = [all objectForKey:bkey];
    if (!per) {
        per = [NSMutableDictionary new];
        [all setObject:per forKey:bkey];
    }
    MPSMatrix *have = [per objectForKey:mkey];
    if (have) m = have;
    else {
        if (per.count >= kCacheCap) [per removeAllObjects];
        [per setObject:m forKey:mkey];
    }
    pthread_rwlock_unlock(&d->gemm_lock);
    return m;
}

/* k == 0: C = beta * C, which MPS is not asked to do (interiorColumns 0). A two-line kernel
 * compiled on first use; beta == 0 writes zeros without reading C (BLAS semantics). */
static const char *kScaleSource =
    "#include <metal_stdlib>\n"
    "using namespace metal;\n"
    "struct RlxScaleParams { uint m, n, ldc; float beta; };\n"
    "template <typename T>\n"
    "[[kernel]] void rlx_scale_c(device T *c [[buffer(0)]], constant RlxScaleParams *p [[buffer(1)]],\n"
    "                            uint2 gid [[thread_position_in_grid]]) {\n"
    "    if (gid.x >= p->n || gid.y >= p->m) return;\n"
    "    device T *x = c + (ulong)gid.y * p->ldc + gid.x;\n"
    "    *x = p->beta == 0.0f ? T(0.0f) : T(float(*x) * p->beta);\n"
    "}\n"
    "template [[host_name(\"rlx_scale_c_f32\")]] [[kernel]] decltype(rlx_scale_c<float>) rlx_scale_c<float>;\n"
    "template [[host_name(\"rlx_scale_c_f16\")]] [[kernel]] decltype(rlx_scale_c<half>) rlx_scale_c<half>;\n";

static id<MTLComputePipelineState> scale_pipeline(rlx_device *d, int dtype, rlx_status *status) {
    pthread_mutex_lock(&d->scale_mu);
    if (!d->scale_pipes[0]) {
        id<MTLLibrary> lib = new_library(d, kScaleSource, NULL, status);
        id<MTLComputePipelineState> f32 = lib ? new_pipeline(d, lib, "rlx_scale_c_f32", 0, status) : nil;
        id<MTLComputePipelineState> f16 = f32 ? new_pipeline(d, lib, "rlx_scale_c_f16", 0, status) : nil;
        if (f16) {
            d->scale_pipes[0] = KEEP(f32);
            d->scale_pipes[1] = KEEP(f16);
        }
    }
    id<MTLComputePipelineState> p = d->scale_pipes[0] ? OBJ(id<MTLComputePipelineState>, d->scale_pipes[dtype]) : nil;
    pthread_mutex_unlock(&d->scale_mu);
    return p;
}

static rlx_status encode_scale_c(rlx_cmdbuf *cb, const rlx_gemm_desc *g) {
    if (g->beta == 1.0f) return RLX_OK;
    rlx_status s = RLX_OK;
    id<MTLComputePipelineState> pipe = scale_pipeline(cb->dev, g->dtype, &s);
    if (!pipe) return s;
    struct { uint32_t m, n, ldc; float beta; } params = {(uint32_t)g->m, (uint32_t)g->n, (uint32_t)g->ldc, g->beta};
    id<MTLComputeCommandEncoder> enc = open_encoder(cb);  /* its own encoder, ordered like MPS's */
    if (!enc) return RLX_ERR_DEVICE;
    [enc setComputePipelineState:pipe];
    [enc setBuffer:OBJ(id<MTLBuffer>, g->c->mtl) offset:(NSUInteger)g->c_offset atIndex:0];
    [enc setBytes:&params length:sizeof params atIndex:1];
    [enc dispatchThreadgroups:MTLSizeMake(((NSUInteger)g->n + 7) / 8, ((NSUInteger)g->m + 7) / 8, 1)
        threadsPerThreadgroup:MTLSizeMake(8, 8, 1)];
    close_encoder(cb);
    return RLX_OK;
}

/* One product (batch entry) of a validated gemm. */
static rlx_status encode_gemm_one(rlx_cmdbuf *cb, rlx_device *d, const rlx_gemm_desc *g) {
    @autoreleasepool {
        @try {
            close_encoder(cb);  /* MPS encodes into the command buffer with encoders of its own */
            if (g->k == 0) return encode_scale_c(cb, g);
            const NSUInteger esz = g->dtype == RLX_DTYPE_F32 ? 4 : 2;
            const MPSDataType type = g->dtype == RLX_DTYPE_F32 ? MPSDataTypeFloat32 : MPSDataTypeFloat16;
            /* Row-major as stored: A is (k x m) when transposed, B is (n x k) when transposed. */
            MPSMatrix *a = gemm_matrix(d, g->a, g->a_offset, (NSUInteger)(g->trans_a ? g->k : g->m),
                                       (NSUInteger)(g->trans_a ? g->m : g->k), (NSUInteger)g->lda * esz, type);
            MPSMatrix *b = gemm_matrix(d, g->b, g->b_offset, (NSUInteger)(g->trans_b ? g->n : g->k),
                                       (NSUInteger)(g->trans_b ? g->k : g->n), (NSUInteger)g->ldb * esz, type);
            MPSMatrix *c = gemm_matrix(d, g->c, g->c_offset, (NSUInteger)g->m, (NSUInteger)g->n,
                                       (NSUInteger)g->ldc * esz, type);
            MPSMatrixMultiplication *kernel = gemm_kernel(d, g);
            if (!a || !b || !c || !kernel) return fail(RLX_ERR_DEVICE, "cmd_gemm: MPS could not describe this gemm");
            @synchronized(kernel) {
                [kernel encodeToCommandBuffer:OBJ(id<MTLCommandBuffer>, cb->cb) leftMatrix:a rightMatrix:b resultMatrix:c];
            }
        }
        CATCH_OBJC("cmd_gemm")
    }
    return RLX_OK;
}

static rlx_status cmd_gemm(rlx_cmdbuf *cb, const rlx_gemm_desc *g) {
    CB_CHECK(cb, "cmd_gemm");
    rlx_device *d = cb->dev;
    rlx_status s = check_gemm(d, g);
    if (s) return s;
    if (!d->mps_ok) return fail(RLX_ERR_UNSUPPORTED, "cmd_gemm: MetalPerformanceShaders does not support this device");
    if (g->bias) return fail(RLX_ERR_UNSUPPORTED, "cmd_gemm: the metal shim has no bias epilogue (MPS lacks one)");
    if (g->m == 0 || g->n == 0 || cb->status) return RLX_OK;
    /* A strided batch is one MPS call per entry: MPS's own batched matrices need equal
     * matrixBytes strides for A, B and C, which attention's per-head views do not have. */
    const uint64_t esz = rlx_dtype_size(g->dtype);  /* one dtype: check_gemm allows no mixed types here */
    rlx_gemm_desc one = *g;
    one.batch = one.outer = 1;
    for (int64_t j = 0; j < rlx_gemm_outer(g); ++j)
        for (int64_t i = 0; i < rlx_gemm_batch(g); ++i) {
            one.a_offset = g->a_offset + (uint64_t)(i * g->stride_a + j * g->outer_stride_a) * esz;
            one.b_offset = g->b_offset + (uint64_t)(i * g->stride_b + j * g->outer_stride_b) * esz;
            one.c_offset = g->c_offset + (uint64_t)(i * g->stride_c + j * g->outer_stride_c) * esz;
            if ((s = encode_gemm_one(cb, d, &one))) return s;
        }
    return RLX_OK;
}
