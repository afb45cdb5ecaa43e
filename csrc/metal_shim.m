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
 * tests/runtime/test_shim_layout.py): errors, objects, device, buffers, libraries and pipelines,
 * command buffers: recording, gemm, indirect command buffers, execution: commit, wait, release,
 * copies, queues, the ABI table. As in those two, this file is one translation unit: errors,
 * objects and the ABI table are here, the rest is in the section files it includes
 * (csrc/metal/device.inc.m, commands.inc.m, execute.inc.m).
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

#include "metal/device.inc.m"
#include "metal/commands.inc.m"
#include "metal/execute.inc.m"

/* ---- the ABI table ----------------------------------------------------------------------- */
RLX_DEFINE_SHIM_API("metal")
