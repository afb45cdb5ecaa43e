/* Indirect command buffers, execution (commit, wait, release), schedules (ICB ranges
 * around MPS gemms), copies that travel with a command buffer, and queues.
 * A part of the Metal shim: csrc/metal_shim.m includes it (one translation unit, every
 * function static); it is not compiled on its own. */

/* ---- indirect command buffers ------------------------------------------------------------ */
static void icb_entry_clear(IcbEntry *e) {
    drop(&e->state);
    for (uint32_t i = 0; i < RLX_MAX_BINDINGS; ++i) drop(&e->bufs[i]);
    e->encoded = 0;
}

/* Adds p to seen[] unless present; returns 1 when it was new (or seen[] is full). */
static int first_sight(void **seen, uint32_t *n, void *p) {
    for (uint32_t i = 0; i < *n; ++i)
        if (seen[i] == p) return 0;
    if (*n < kSeenCap) seen[(*n)++] = p;
    return 1;
}

static rlx_status icb_create(rlx_device *d, uint32_t capacity, rlx_icb **out) {
    ARG_CHECK(d && out, "icb_create: NULL argument");
    *out = NULL;
    ARG_CHECK(capacity >= 1, "icb_create: capacity must be >= 1");
    rlx_icb *icb = calloc(1, sizeof *icb);
    IcbEntry *entries = calloc(capacity, sizeof *entries);
    if (!icb || !entries) {
        free(icb);
        free(entries);
        return fail(RLX_ERR_OOM, "icb_create: out of memory");
    }
    @autoreleasepool {
        MTLIndirectCommandBufferDescriptor *desc = [MTLIndirectCommandBufferDescriptor new];
        desc.commandTypes = MTLIndirectCommandTypeConcurrentDispatch;
        desc.inheritBuffers = NO;
        desc.inheritPipelineState = NO;
        desc.maxKernelBufferBindCount = RLX_MAX_BINDINGS;
        id<MTLIndirectCommandBuffer> m = [OBJ(id<MTLDevice>, d->mtl) newIndirectCommandBufferWithDescriptor:desc
                                                                                            maxCommandCount:capacity
                                                                                                    options:MTLResourceCPUCacheModeDefaultCache];
        if (!m) {
            free(icb);
            free(entries);
            return fail(RLX_ERR_OOM, "icb_create: newIndirectCommandBufferWithDescriptor failed (capacity %u)", capacity);
        }
        [m resetWithRange:NSMakeRange(0, capacity)];  /* every slot a defined no-op until encoded */
        icb->mtl = KEEP(m);
    }
    icb->dev = d;
    icb->capacity = capacity;
    icb->entries = entries;
    *out = icb;
    return RLX_OK;
}

static rlx_status icb_encode_dispatch(rlx_icb *icb, uint32_t index, rlx_pipeline *p, uint32_t n_bindings,
                                      rlx_buffer *const *buffers, const uint64_t *offsets, const uint32_t groups[3],
                                      const uint32_t threads[3], uint32_t barrier_before) {
    ARG_CHECK(icb, "icb_encode_dispatch: icb is NULL");
    ARG_CHECK(index < icb->capacity, "icb_encode_dispatch: index %u >= capacity %u", index, icb->capacity);
    ARG_CHECK(p, "icb_encode_dispatch: pipeline is NULL");
    ARG_CHECK(p->dev == icb->dev, "icb_encode_dispatch: pipeline belongs to another device");
    ARG_CHECK(p->flags & RLX_PIPELINE_INDIRECT, "icb_encode_dispatch: pipeline lacks RLX_PIPELINE_INDIRECT");
    ARG_CHECK(n_bindings <= RLX_MAX_BINDINGS, "icb_encode_dispatch: %u bindings > %u", n_bindings, RLX_MAX_BINDINGS);
    ARG_CHECK(n_bindings == 0 || (buffers && offsets), "icb_encode_dispatch: buffers or offsets is NULL");
    rlx_status s = check_grid("icb_encode_dispatch", p, groups, threads);
    if (s) return s;
    for (uint32_t i = 0; i < n_bindings; ++i) {
        if ((s = check_binding(icb->dev, "icb_encode_dispatch", i, buffers[i], offsets[i]))) return s;
        /* tinygrad (runtime/graph/metal.py): ICB replay keeps buffer offsets in 32 bits. */
        if (offsets[i] > UINT32_MAX)
            return fail(RLX_ERR_UNSUPPORTED, "icb_encode_dispatch: offset %llu of binding %u does not fit 32 bits",
                        (unsigned long long)offsets[i], i);
    }
    const uint32_t *t = threads ? threads : (const uint32_t[3]){1, 1, 1};
    @autoreleasepool {
        id<MTLIndirectComputeCommand> c = [OBJ(id<MTLIndirectCommandBuffer>, icb->mtl) indirectComputeCommandAtIndex:index];
        [c reset];  /* Apple: reset a command before encoding a new one (clears an old barrier too) */
        [c setComputePipelineState:OBJ(id<MTLComputePipelineState>, p->state)];
        for (uint32_t i = 0; i < n_bindings; ++i)
            [c setKernelBuffer:OBJ(id<MTLBuffer>, buffers[i]->mtl) offset:(NSUInteger)offsets[i] atIndex:i];
        if (barrier_before) [c setBarrier];  /* earlier commands finish before this one starts */
        [c concurrentDispatchThreadgroups:MTLSizeMake(groups[0], groups[1], groups[2])
                    threadsPerThreadgroup:MTLSizeMake(t[0], t[1], t[2])];
        IcbEntry *e = &icb->entries[index];
        icb_entry_clear(e);
        e->state = KEEP(OBJ(id, p->state));
        for (uint32_t i = 0; i < n_bindings; ++i) e->bufs[i] = KEEP(OBJ(id, buffers[i]->mtl));
        e->encoded = 1;
    }
    return RLX_OK;
}

static void icb_free(rlx_icb *icb) {
    if (!icb) return;
    @autoreleasepool {
        for (uint32_t i = 0; i < icb->capacity; ++i) icb_entry_clear(&icb->entries[i]);
        drop(&icb->mtl);
    }
    free(icb->entries);
    free(icb);
}

static rlx_status cmd_execute_icb(rlx_cmdbuf *cb, rlx_icb *icb, uint32_t start, uint32_t count) {
    CB_CHECK(cb, "cmd_execute_icb");
    RLX_CHECK_EXECUTE_ICB(cb, icb, start, count, icb->capacity);
    if (count == 0 || cb->status) return RLX_OK;
    /* A reset entry is a GPU no-op, but running a schedule with a hole is a caller bug: report
     * it from cmd_wait, as the host shim does, and run nothing from here on. */
    for (uint32_t i = start; i < start + count; ++i)
        if (!icb->entries[i].encoded) {
            cb->status = RLX_ERR_DEVICE;
            snprintf(cb->error, sizeof cb->error, "icb entry %u was never encoded", i);
            return RLX_OK;
        }
    @autoreleasepool {
        if (cb->barrier_pending) close_encoder(cb);  /* see cmd_barrier */
        id<MTLComputeCommandEncoder> enc = open_encoder(cb);
        if (!enc) return RLX_ERR_DEVICE;
        /* Buffers bound inside an ICB are not the encoder's bindings: declare each one
         * (residency and hazard tracking). */
        void *seen[kSeenCap];
        uint32_t n_seen = 0;
        for (uint32_t i = start; i < start + count; ++i)
            for (uint32_t j = 0; j < RLX_MAX_BINDINGS; ++j) {
                void *b = icb->entries[i].bufs[j];
                if (b && first_sight(seen, &n_seen, b))
                    [enc useResource:OBJ(id<MTLBuffer>, b) usage:(MTLResourceUsageRead | MTLResourceUsageWrite)];
            }
        if (cb->dev->icb_fix) {  /* see device_open: one empty dispatch per distinct pipeline */
            n_seen = 0;
            for (uint32_t i = start; i < start + count; ++i)
                if (first_sight(seen, &n_seen, icb->entries[i].state)) {
                    [enc setComputePipelineState:OBJ(id<MTLComputePipelineState>, icb->entries[i].state)];
                    [enc dispatchThreadgroups:MTLSizeMake(0, 0, 0) threadsPerThreadgroup:MTLSizeMake(0, 0, 0)];
                }
        }
        [enc executeCommandsInBuffer:OBJ(id<MTLIndirectCommandBuffer>, icb->mtl) withRange:NSMakeRange(start, count)];
        cb->pipe_dirty = 1;  /* the encoder's own state is not ours after this: bind again */
        cb->dirty = cb->bound;
        cb->enc_icb = 1;
    }
    return RLX_OK;
}

/* ---- execution: commit, wait, release ---------------------------------------------------- */
static rlx_status cmd_commit(rlx_cmdbuf *cb) {
    CB_CHECK(cb, "cmd_commit");
    @autoreleasepool {
        close_encoder(cb);
        [OBJ(id<MTLCommandBuffer>, cb->cb) commit];
    }
    cb->state = CB_COMMITTED;
    return RLX_OK;
}

static rlx_status cmd_wait(rlx_cmdbuf *cb, double *device_seconds) {
    ARG_CHECK(cb, "cmd_wait: command buffer is NULL");
    ARG_CHECK(cb->state == CB_COMMITTED, "cmd_wait: command buffer was not committed");
    @autoreleasepool {
        id<MTLCommandBuffer> mcb = OBJ(id<MTLCommandBuffer>, cb->cb);
        [mcb waitUntilCompleted];
        if (device_seconds) {
            const double t = mcb.GPUEndTime - mcb.GPUStartTime;
            *device_seconds = t > 0 ? t : 0;
        }
        if (cb->status) return fail(cb->status, "cmd_wait: %s", cb->error);
        if (mcb.status == MTLCommandBufferStatusError) {
            NSError *err = mcb.error;
            return fail(RLX_ERR_DEVICE, "cmd_wait: %s", describe(err, "the command buffer failed"));
        }
    }
    return RLX_OK;
}

static void cmd_release(rlx_cmdbuf *cb) {
    if (!cb) return;
    @autoreleasepool {
        if (cb->state == CB_COMMITTED) [OBJ(id<MTLCommandBuffer>, cb->cb) waitUntilCompleted];
        close_encoder(cb);  /* Metal requires endEncoding before an encoder is released */
        drop(&cb->cb);
    }
    for (uint32_t i = 0; i < RLX_MAX_BINDINGS; ++i) free(cb->bytes[i]);
    free(cb);
}

/* ---- schedules: the plan (csrc/rlx_schedule_plan.h), ICB ranges around MPS gemms ------- */
#define RLX_SCHEDULE_PLAN_MAKE
#include "rlx_schedule_plan.h"
struct rlx_schedule { rlx_sched_plan plan; };

static rlx_status schedule_create(rlx_device *d, const rlx_schedule_desc *desc, rlx_schedule **out) {
    ARG_CHECK(out, "schedule_create: out is NULL");
    *out = NULL;
    rlx_schedule *sched = calloc(1, sizeof *sched);
    if (!sched) return fail(RLX_ERR_OOM, "schedule_create: out of memory");
    const rlx_status s = sched_plan_make(d, desc, &sched->plan);
    if (s != RLX_OK) return free(sched), s;
    *out = sched;
    return RLX_OK;
}

/* The plan's ICB ranges and MPS gemms encoded into cb, as the core's segment walk did. */
static rlx_status cmd_execute_schedule(rlx_cmdbuf *cb, rlx_schedule *sched) {
    CB_CHECK(cb, "cmd_execute_schedule");
    ARG_CHECK(sched && sched->plan.dev == cb->dev, "cmd_execute_schedule: no schedule of this device");
    return sched_plan_encode(cb, &sched->plan);
}

static void schedule_free(rlx_schedule *sched) {
    if (!sched) return;
    sched_plan_clear(&sched->plan);
    free(sched);
}

/* ---- copies with a command buffer ------------------------------------------------------- */
/* Buffers are shared (host-visible) storage, so the core copies inputs and
 * outputs itself; these ABI entries are for devices with separate memory. */
static rlx_status cmd_upload(rlx_cmdbuf *cb, rlx_buffer *b, uint64_t offset, const void *src, uint64_t size) {
    (void)cb, (void)b, (void)offset, (void)src, (void)size;
    return fail(RLX_ERR_UNSUPPORTED, "cmd_upload: Metal buffers are host-visible; use buffer_write");
}

static rlx_status cmd_download(rlx_cmdbuf *cb, const rlx_buffer *b, uint64_t offset, void *dst, uint64_t size) {
    (void)cb, (void)b, (void)offset, (void)dst, (void)size;
    return fail(RLX_ERR_UNSUPPORTED, "cmd_download: Metal buffers are host-visible; use buffer_read");
}

/* ---- queues ------------------------------------------------------------------------------ */
/* One MTLCommandQueue per device for now: queues are not built here, and
 * callers fall back to cmd_begin (see rlx_shim.h). */
static rlx_status queue_create(rlx_device *d, rlx_queue **out) {
    (void)d;
    if (out) *out = NULL;
    return fail(RLX_ERR_UNSUPPORTED, "queue_create: the Metal shim runs every command buffer on the device's queue");
}

static void queue_free(rlx_queue *q) { (void)q; }

static rlx_status cmd_begin_on(rlx_queue *q, rlx_cmdbuf **out) {
    (void)q;
    if (out) *out = NULL;
    return fail(RLX_ERR_UNSUPPORTED, "cmd_begin_on: the Metal shim has no queues");
}
