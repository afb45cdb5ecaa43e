/*
 * Metal shim: ABI v1 of csrc/rlx_shim.h on Apple GPUs (Metal + MetalPerformanceShaders).
 *
 * Minimum macOS: 11.0 (setup.py passes -mmacosx-version-min=11.0). Why, per API:
 *   11.0   compute commands in indirect command buffers: MTLIndirectCommandTypeConcurrentDispatch,
 *          MTLIndirectComputeCommand (reset, setBarrier, concurrentDispatchThreadgroups:...),
 *          executeCommandsInBuffer:withRange: on a compute encoder
 *   10.15  MPSMatrix initWithBuffer:offset:descriptor:, GPUStartTime / GPUEndTime
 *   10.14  computeCommandEncoderWithDispatchType:, memoryBarrierWithScope:, maxBufferLength,
 *          supportIndirectCommandBuffers
 *   10.13  MPSMatrixDescriptor matrixDescriptorWithRows:columns:rowBytes:dataType:, registryID
 *   15.0   MTLCompileOptions.mathMode, used when present (else fastMathEnabled = NO)
 *   14.0   MTLGPUFamilyApple9, used when present (only to skip the M1/M2 ICB workaround)
 * Every class, selector, property, function and constant used here is listed, with a reference
 * project that makes the same call, in csrc/METAL_API.md (tests/runtime/test_metal_shim.py keeps the two
 * in step). The file cannot be compiled in CI (no Mac): keep it thin and mechanical.
 *
 * Shape (mirrors the host shim): thread-local last_error; every bad argument returns RLX_ERR_ARG
 * before anything is recorded; nothing aborts. One MTLCommandQueue per device. A command buffer
 * is one MTLCommandBuffer with one concurrent compute encoder at a time; gemm (MPS) and ICB
 * execution switch encoders, so the ABI's binding state lives in rlx_cmdbuf and is applied to
 * whichever encoder is open at the next dispatch.
 *
 * Memory: ARC (-fobjc-arc). The ABI objects are C structs (calloc/free) held by C and Cython
 * code, and ARC does not manage object pointers stored in malloc'd structs. So a struct keeps
 * each Objective-C object as `void *` owning exactly one reference: taken with KEEP
 * (CFBridgingRetain), given back with drop (CFBridgingRelease), borrowed for a call with OBJ
 * (a __bridge cast). Everything else (locals, temporaries, dictionary contents) is plain ARC,
 * so no retain/release is written by hand anywhere else. Entry points that create objects run
 * in @autoreleasepool: they are called from threads (Python's) that have no pool, and Metal
 * hands back autoreleased objects (command buffers, encoders, errors).
 *
 * Sections, in the order all three shims keep (csrc/cuda/shim.c, csrc/host/shim.cpp; checked by
 * tests/test_shim_layout.py): errors, objects, device, buffers, libraries and pipelines,
 * command buffers: recording, gemm, indirect command buffers, execution: commit, wait, release,
 * copies, queues, the ABI table.
 */
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>
#import <MetalPerformanceShaders/MetalPerformanceShaders.h>

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlx_shim.h"
#include "rlx_gemm_check.h"
#include "rlx_shim_table.h"

#if !__has_feature(objc_arc)
#error "metal_shim.m is written for ARC: compile it with -fobjc-arc"
#endif

#define KEEP(obj) ((void *)CFBridgingRetain(obj))
#define OBJ(type, ptr) ((__bridge type)(ptr))
static void drop(void **ptr) {
    if (*ptr) {
        (void)CFBridgingRelease(*ptr);
        *ptr = NULL;
    }
}

enum {
    kMaxBytes = 4096,   /* cmd_set_bytes limit (the ABI's; also Metal's setBytes guidance) */
    kCacheCap = 4096,   /* entries per gemm cache before it is cleared (bounds memory, never wrong) */
    kSeenCap = 64,      /* distinct buffers / pipelines tracked per cmd_execute_icb */
};

/* ---- errors ------------------------------------------------------------------------ */
static _Thread_local char t_error[8192];

static rlx_status fail(rlx_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static rlx_status fail(rlx_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_error, sizeof t_error, fmt, ap);
    va_end(ap);
    return s;
}
#define ARG_CHECK(cond, ...) \
    do { if (!(cond)) return fail(RLX_ERR_ARG, __VA_ARGS__); } while (0)

static const char *describe(NSError *err, const char *fallback) {
    NSString *text = err.localizedDescription;  /* valid until the enclosing pool drains */
    return text ? text.UTF8String : fallback;
}

/* An NSException (Foundation's, or MPS rejecting a shape) must not unwind into C. */
#define CATCH_OBJC(what)                                                                        \
    @catch (NSException *exc) {                                                                 \
        return fail(RLX_ERR_DEVICE, "%s: %s", what, exc.reason ? exc.reason.UTF8String : "exception"); \
    }

/* ---- objects --------------------------------------------------------------------------- */
struct rlx_device {
    void *mtl, *queue;               /* id<MTLDevice>, id<MTLCommandQueue> */
    rlx_device_info info;
    int mps_ok;                      /* MPSSupportsMTLDevice */
    int icb_fix;                     /* apply tinygrad's M1/M2 ICB workaround (cmd_execute_icb) */
    /* gemm caches (NSMutableDictionary): kernel by shape, descriptor by layout, matrix by
     * buffer (then offset + layout). Lookups take the read lock, inserts and buffer_free the
     * write lock, so a recycled rlx_buffer address never finds an old buffer's matrix. */
    pthread_rwlock_t gemm_lock;
    void *gemm_kernels, *gemm_descs, *gemm_mats;
    pthread_mutex_t scale_mu;        /* guards scale_pipes */
    void *scale_pipes[2];            /* C = beta * C for k == 0 (f32, f16), built on first use */
};

struct rlx_buffer { rlx_device *dev; void *mtl; uint8_t *ptr; uint64_t size; };
struct rlx_library { rlx_device *dev; void *mtl; void *pipes; pthread_mutex_t mu; };
struct rlx_pipeline { rlx_device *dev; void *state; uint32_t flags, max_threads, width; };

/* Each encoded ICB entry holds references on its pipeline and buffers, so freeing an
 * rlx_buffer cannot leave a recorded command pointing at released memory. */
typedef struct { int encoded; void *state; void *bufs[RLX_MAX_BINDINGS]; } IcbEntry;
struct rlx_icb { rlx_device *dev; void *mtl; uint32_t capacity; IcbEntry *entries; };

enum { CB_RECORDING, CB_COMMITTED };
struct rlx_cmdbuf {
    rlx_device *dev;
    void *cb, *enc;                   /* id<MTLCommandBuffer>; the open compute encoder or NULL */
    int state;
    rlx_status status;                /* failure found while encoding, returned by cmd_wait */
    char error[256];
    rlx_pipeline *pipe;               /* binding state as the ABI sees it ... */
    int pipe_dirty;
    int enc_icb, barrier_pending;     /* the open encoder ran an ICB / a barrier is waiting for it */
    uint32_t bound, dirty;            /* bit i: binding i set / not yet applied to the encoder */
    rlx_buffer *buf[RLX_MAX_BINDINGS];
    uint64_t off[RLX_MAX_BINDINGS];
    uint32_t nbytes[RLX_MAX_BINDINGS]; /* > 0: binding i is set_bytes data, kept in bytes[i] */
    uint8_t *bytes[RLX_MAX_BINDINGS];
};

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

static rlx_status check_copy(const char *fn, const rlx_buffer *b, uint64_t offset, const void *host, uint64_t size) {
    ARG_CHECK(b && (host || size == 0), "%s: NULL argument", fn);
    ARG_CHECK(offset <= b->size && size <= b->size - offset, "%s: bytes [%llu, +%llu) outside a %llu-byte buffer",
              fn, (unsigned long long)offset, (unsigned long long)size, (unsigned long long)b->size);
    return RLX_OK;
}

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

/* ---- the ABI table ----------------------------------------------------------------------- */
RLX_DEFINE_SHIM_API("metal")
