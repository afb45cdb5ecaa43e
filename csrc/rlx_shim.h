/*
 * rlx shim ABI, version 2 (2: rlx_gemm_desc grew the FP8 scale fields, which
 * moves the later fields of rlx_schedule_cmd).
 *
 * One C table of function pointers, returned by rlx_shim_get_api(), that every
 * device shim (host, cuda, metal) implements. The Python runtime loads a shim
 * with ctypes, hands the table's address to the Cython core (rlx/_core.pyx),
 * and from then on every per-run call goes through these pointers without
 * the GIL.
 *
 * Rules every implementation follows:
 *  - No entry point aborts the process on a bad argument. Functions that can
 *    fail return an rlx_status; the message of the most recent failure on the
 *    calling thread is available from last_error().
 *  - Encoding calls (cmd_set_*, cmd_dispatch, ...) validate their arguments
 *    and return RLX_ERR_ARG without recording the command when they are bad.
 *  - Objects are opaque. A buffer, library, pipeline or ICB belongs to the
 *    device that created it and must not outlive it.
 *  - Thread safety: distinct command buffers may be encoded, committed and
 *    waited on from different threads at once. One command buffer is used by
 *    one thread at a time.
 *
 * Versioning: rlx_shim_get_api(v) returns NULL unless the shim implements
 * ABI version v. New entry points are only ever appended; struct_size tells
 * a caller how much of the table a shim fills (RLX_SHIM_HAS below). The
 * version changes only for a change that breaks an existing caller.
 */
#ifndef RLX_SHIM_H
#define RLX_SHIM_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_SHIM_ABI_VERSION 3u

/* Most buffers one dispatch binds (kernel arguments, params included). */
#define RLX_MAX_BINDINGS 12u

typedef enum rlx_status {
    RLX_OK = 0,
    RLX_ERR_ARG = 1,          /* bad argument: null, out of range, wrong object */
    RLX_ERR_OOM = 2,          /* allocation failed */
    RLX_ERR_COMPILE = 3,      /* kernel source failed to compile (message = compiler output) */
    RLX_ERR_NOT_FOUND = 4,    /* no such kernel function / device index */
    RLX_ERR_DEVICE = 5,       /* the device reported an error while executing */
    RLX_ERR_UNSUPPORTED = 6,  /* the shim cannot do this (dtype, feature) */
    RLX_ERR_UNAVAILABLE = 7   /* the backend cannot be used here (no driver, no device) */
} rlx_status;

typedef enum rlx_dtype {
    RLX_DTYPE_F32 = 0,
    RLX_DTYPE_F16 = 1,
    RLX_DTYPE_BF16 = 2,  /* gemm operand B on shims that support it (host) */
    /* FP8 gemm operands (A and B), only where rlx_device_info.gemm_fp8 says
     * so; one byte per element. e4m3 is the "fn" format (no infinities,
     * largest finite 448), e5m2 the IEEE-like one (largest finite 57344). */
    RLX_DTYPE_F8E4M3 = 3,
    RLX_DTYPE_F8E5M2 = 4
} rlx_dtype;

typedef struct rlx_device rlx_device;
typedef struct rlx_buffer rlx_buffer;
typedef struct rlx_library rlx_library;
typedef struct rlx_pipeline rlx_pipeline;
typedef struct rlx_cmdbuf rlx_cmdbuf;
typedef struct rlx_icb rlx_icb;
typedef struct rlx_queue rlx_queue;
typedef struct rlx_schedule rlx_schedule;

typedef struct rlx_device_info {
    char name[128];
    /* Stable identifier of the hardware, used to key calibration caches. */
    char hardware_id[128];
    uint64_t max_buffer_length;
    uint32_t max_threads_per_group;
    uint32_t simd_width;
    uint32_t unified_memory;   /* 1: buffer_host_ptr is non-NULL for every buffer */
    uint32_t supports_f16;
    uint32_t compute_units;    /* CPU: worker threads; GPU: SMs / cores */
    uint32_t gemm_bias;        /* 1: cmd_gemm takes rlx_gemm_desc.bias */
    /* 1: cmd_gemm takes FP8 A and B (see rlx_gemm_desc): cuda on compute
     * capability >= 8.9 with a cuBLASLt that has FP8 matmuls. Taken from the
     * reserved words, so the struct keeps its size. */
    uint32_t gemm_fp8;
    /* Bit (1u << c_dtype) set: cmd_gemm takes FP8 operands with
     * RLX_GEMM_SCALE_OUTER scales writing that C dtype (cuda, where cuBLASLt
     * has an algorithm for it; probed when the device opens). 0 elsewhere.
     * Taken from the reserved words. */
    uint32_t gemm_fp8_outer;
    uint32_t reserved[4];
} rlx_device_info;

/* Pipeline flags. */
#define RLX_PIPELINE_INDIRECT 1u  /* usable inside an indirect command buffer */

typedef struct rlx_pipeline_info {
    uint32_t max_threads_per_group;
    uint32_t execution_width;
    /* Bit i: the kernel takes binding i's bytes by value (cuda: a params
     * struct, the prelude's rlx_params_value), so an ICB entry or schedule
     * keeps the bytes the binding held when it was encoded. 0 on shims
     * whose kernels read every binding through memory. */
    uint32_t value_bindings;
    uint32_t reserved[5];
} rlx_pipeline_info;

/*
 * C[m,n] = alpha * op(A)[m,k] @ op(B)[k,n] + beta * C, row-major, with
 * op(X) = X or X^T, leading dimensions in elements. dtype is A's element
 * type, b_dtype and c_dtype those of B and C (callers always set all three);
 * accumulation is f32. Every shim takes (f32, f32, f32) and (f16, f16, f16);
 * other combinations are optional and a shim that lacks one returns
 * RLX_ERR_UNSUPPORTED (cuda: f16 A/B with f32 C; host: that, and f32 A with
 * bf16 B and f32 C).
 * Strided batch: for i in [0, batch) the same product on A + i*stride_a,
 * B + i*stride_b, C + i*stride_c (strides in elements; batch 0 means 1), so
 * per-head attention or a batched matmul is one call (cuBLAS strided
 * batched, one MPS call per matrix, or the host's thread pool over i).
 * Outer batch: for j in [0, outer) (0 means 1) all of that again at
 * A + j*outer_stride_a, ... — the (batch, head) grid of attention over a
 * [batch, seq, heads, dim] tensor, whose two strides no single stride covers.
 */
typedef struct rlx_gemm_desc {
    const rlx_buffer *a, *b;
    rlx_buffer *c;
    uint64_t a_offset, b_offset, c_offset;  /* bytes */
    int64_t m, n, k;
    int64_t lda, ldb, ldc;
    int32_t trans_a, trans_b;
    int32_t dtype;                          /* rlx_dtype */
    float alpha, beta;
    int64_t batch;                          /* 0 or 1: a single product */
    int64_t stride_a, stride_b, stride_c;   /* elements between batch entries */
    int64_t outer;                          /* 0 or 1: one level of batch */
    int64_t outer_stride_a, outer_stride_b, outer_stride_c;
    int32_t b_dtype, c_dtype;               /* rlx_dtype of B and of C */
    /* Optional bias (NULL: none): n elements of C's dtype at bias_offset
     * bytes, added to every row of C after alpha*AB + beta*C (every batch
     * entry alike). Only where rlx_device_info.gemm_bias says so (host: any
     * gemm; cuda: single products, through cuBLASLt's bias epilogue; Metal:
     * none); elsewhere RLX_ERR_UNSUPPORTED. */
    const rlx_buffer *bias;
    uint64_t bias_offset;
    /* FP8 (appended; zero-initialized descriptors keep their meaning).
     * dtype / b_dtype may be RLX_DTYPE_F8E4M3 or F8E5M2 only where
     * rlx_device_info.gemm_fp8 says so (elsewhere RLX_ERR_UNSUPPORTED); C
     * (the output) is then f32, f16 or bf16. What the cuda shim takes: not
     * both e5m2, A not transposed and B transposed (both operands K-major:
     * cuBLASLt's "TN" form), k, lda and ldb multiples of 16, ldc * sizeof(C)
     * a multiple of 16, 16-byte aligned operands, a single product (batch and
     * outer 0 or 1), no bias, beta 0; anything else is RLX_ERR_UNSUPPORTED.
     * a_scale / b_scale (NULL: 1): one f32 on the device at *_scale_offset
     * bytes, multiplying A's / B's values (dequantized = code * scale), so
     * C = alpha * (a_scale * op(A)) @ (b_scale * op(B)). Only with an FP8
     * operand of that side (RLX_ERR_ARG otherwise). */
    const rlx_buffer *a_scale, *b_scale;
    uint64_t a_scale_offset, b_scale_offset;
    /* How a_scale / b_scale are read (appended; 0 keeps the meaning above).
     * RLX_GEMM_SCALE_OUTER: a_scale holds m f32 (one per row of C) and
     * b_scale n f32 (one per column of C), both present, so
     * C[i, j] = alpha * a_scale[i] * b_scale[j] * sum_k A[i, k] B[k, j]
     * (cuBLASLt's outer-vector scales, torch._scaled_mm's rowwise call).
     * Only for FP8 operands whose C dtype has its bit in
     * rlx_device_info.gemm_fp8_outer (RLX_ERR_UNSUPPORTED elsewhere). */
    int32_t scale_mode;
} rlx_gemm_desc;

/* rlx_gemm_desc.scale_mode values. */
enum {
    RLX_GEMM_SCALE_TENSOR = 0,  /* a_scale / b_scale: one f32 each (or NULL: 1) */
    RLX_GEMM_SCALE_OUTER = 1    /* a_scale: m f32 along C's rows, b_scale: n f32 along its columns */
};

/*
 * A schedule: a whole command list described once, turned by the shim into
 * its replayable form at creation (cuda: one CUDA graph; Metal: ICB ranges
 * around MPS gemms; host: a recorded command list) and executed per run
 * inside a command buffer (cmd_execute_schedule), so copies that travel with
 * that command buffer run before and after it.
 *
 * What a schedule captures at creation: the commands, their order and
 * barriers, pipelines, grids, every buffer and byte offset it binds, every
 * gemm descriptor, and the entries of the ICB ranges it names (re-encoding
 * those entries later is not seen by the schedule). What it reads at each
 * execution: the contents of those buffers, params regions included, so
 * params bytes patched before a run (dynamic values) take effect without a
 * new schedule, except for a kernel that takes its params struct by value
 * (cuda: the prelude's rlx_params_value): its dispatches, in a schedule or
 * an ICB, carry the struct's bytes as the binding held them when encoded
 * (the Cython core encodes a thunk with patched params directly, passing
 * its bytes with cmd_set_bytes). The buffers, pipelines and ICBs a schedule names must outlive
 * it. Executions of one schedule write the same memory: they must not overlap
 * on different queues (in one queue they run in commit order).
 *
 * Commands (the fields of the other kinds are ignored):
 *  - RLX_SCHEDULE_DISPATCH: pipeline (made with RLX_PIPELINE_INDIRECT),
 *    n_bindings buffers at offsets, groups and threads (as cmd_dispatch);
 *  - RLX_SCHEDULE_GEMM: gemm (as cmd_gemm);
 *  - RLX_SCHEDULE_ICB: entries [start, start+count) of icb (as cmd_execute_icb).
 * barrier_before: the command sees the memory effects of every earlier one
 * (as cmd_barrier before it). The leading fields are laid out as rlx_thunk's
 * (csrc/rlx_thunk.h). schedule_create validates everything and returns
 * RLX_ERR_ARG (or the error cmd_gemm would give) without a schedule when a
 * command is bad.
 */
#define RLX_SCHEDULE_DISPATCH 0u
#define RLX_SCHEDULE_GEMM 1u
#define RLX_SCHEDULE_ICB 2u

typedef struct rlx_schedule_cmd {
    uint32_t op;              /* RLX_SCHEDULE_* */
    uint32_t barrier_before;
    rlx_pipeline *pipeline;
    uint32_t n_bindings;
    uint32_t groups[3];
    uint32_t threads[3];
    rlx_buffer *buffers[RLX_MAX_BINDINGS];
    uint64_t offsets[RLX_MAX_BINDINGS];
    rlx_gemm_desc gemm;
    rlx_icb *icb;
    uint32_t start, count;
} rlx_schedule_cmd;

/* flags: RLX_SCHEDULE_SERIAL launches each kernel only after the one before
 * it has finished, where the shim would otherwise overlap a launch with its
 * predecessor (cuda: programmatic dependent launch); the same results, for
 * a caller that times both forms and keeps the faster. Shims without such
 * overlap (host, Metal) accept it and change nothing. */
#define RLX_SCHEDULE_SERIAL 1u

typedef struct rlx_schedule_desc {
    uint32_t n_commands;
    uint32_t flags;           /* 0 or RLX_SCHEDULE_SERIAL */
    const rlx_schedule_cmd *commands;
} rlx_schedule_desc;

typedef struct rlx_shim_api {
    uint32_t abi_version;
    uint32_t struct_size;
    const char *backend;   /* "host", "cuda", "metal" */

    /* Message of the last failure on this thread ("" if none). */
    const char *(*last_error)(void);
    /* Why the backend is unusable here, or NULL when it is usable. */
    const char *(*unavailable_reason)(void);

    /* --- device --- */
    int (*device_count)(void);
    /* options: "key=value;key=value" string understood by the shim, or NULL. */
    rlx_status (*device_open)(int index, const char *options, rlx_device **out);
    rlx_status (*device_info)(rlx_device *dev, rlx_device_info *out);
    void (*device_close)(rlx_device *dev);

    /* --- buffer --- */
    rlx_status (*buffer_alloc)(rlx_device *dev, uint64_t size, rlx_buffer **out);
    void (*buffer_free)(rlx_buffer *buf);
    /* Host pointer to the contents, or NULL when not host-visible. */
    void *(*buffer_host_ptr)(rlx_buffer *buf);
    uint64_t (*buffer_size)(const rlx_buffer *buf);
    rlx_status (*buffer_write)(rlx_buffer *buf, uint64_t offset, const void *src, uint64_t size);
    rlx_status (*buffer_read)(const rlx_buffer *buf, uint64_t offset, void *dst, uint64_t size);

    /* --- library / pipeline --- */
    /* source NULL: the shim's built-in kernels (shaders/ for this target).
     * Otherwise: portable kernel source (shaders/ style) compiled with the
     * target's prelude; options: extra compiler flags or NULL. */
    rlx_status (*library_compile)(rlx_device *dev, const char *source, const char *options, rlx_library **out);
    void (*library_free)(rlx_library *lib);
    rlx_status (*pipeline_get)(rlx_library *lib, const char *function, uint32_t flags,
                               rlx_pipeline **out, rlx_pipeline_info *info);
    void (*pipeline_free)(rlx_pipeline *pipe);

    /* --- command buffer --- */
    rlx_status (*cmd_begin)(rlx_device *dev, rlx_cmdbuf **out);
    rlx_status (*cmd_set_pipeline)(rlx_cmdbuf *cb, rlx_pipeline *pipe);
    rlx_status (*cmd_set_buffer)(rlx_cmdbuf *cb, uint32_t index, rlx_buffer *buf, uint64_t offset);
    /* Copies size bytes (at most 4096) into the command; bound like a buffer
     * (a kernel that takes its params struct by value gets them as its
     * argument). A buffer bound where a kernel takes the params by value
     * is read when the dispatch is encoded: slow (cuda: a copy from the
     * device per dispatch), for callers that hold no copy of the bytes. */
    rlx_status (*cmd_set_bytes)(rlx_cmdbuf *cb, uint32_t index, const void *data, uint32_t size);
    rlx_status (*cmd_dispatch)(rlx_cmdbuf *cb, const uint32_t groups[3], const uint32_t threads[3]);
    /* Every later command sees the memory effects of every earlier one. */
    rlx_status (*cmd_barrier)(rlx_cmdbuf *cb);
    rlx_status (*cmd_gemm)(rlx_cmdbuf *cb, const rlx_gemm_desc *desc);
    rlx_status (*cmd_execute_icb)(rlx_cmdbuf *cb, rlx_icb *icb, uint32_t start, uint32_t count);
    /* Starts execution; returns at once. */
    rlx_status (*cmd_commit)(rlx_cmdbuf *cb);
    /* Blocks until done. device_seconds (may be NULL) receives the time the
     * device spent; the status is the device's error, if any. */
    rlx_status (*cmd_wait)(rlx_cmdbuf *cb, double *device_seconds);
    /* Frees the command buffer; waits first if it was committed. */
    void (*cmd_release)(rlx_cmdbuf *cb);

    /* --- indirect command buffer: dispatches recorded once, replayed --- */
    rlx_status (*icb_create)(rlx_device *dev, uint32_t capacity, rlx_icb **out);
    rlx_status (*icb_encode_dispatch)(rlx_icb *icb, uint32_t index, rlx_pipeline *pipe,
                                      uint32_t n_bindings, rlx_buffer *const *buffers,
                                      const uint64_t *offsets, const uint32_t groups[3],
                                      const uint32_t threads[3], uint32_t barrier_before);
    void (*icb_free)(rlx_icb *icb);

    /* --- copies that travel with a command buffer (appended: check struct_size) ---
     * They save a device without unified memory a synchronization per input
     * and output. A shim whose buffers are host-visible may return
     * RLX_ERR_UNSUPPORTED (callers then use buffer_write / buffer_read). */
    /* Copies size bytes from src, read during this call, into buf before any
     * command of cb runs. */
    rlx_status (*cmd_upload)(rlx_cmdbuf *cb, rlx_buffer *buf, uint64_t offset, const void *src, uint64_t size);
    /* Copies size bytes of buf into dst after every command of cb has run;
     * dst must stay valid until cmd_wait returns, and holds the bytes then
     * (when the run succeeded). */
    rlx_status (*cmd_download)(rlx_cmdbuf *cb, const rlx_buffer *buf, uint64_t offset, void *dst, uint64_t size);

    /* --- queues (appended: check struct_size) ---
     * Command buffers begun on one queue run in their commit order; those of
     * different queues may run at the same time, so memory one queue's work
     * writes must not be used by another queue's until a cmd_wait returned.
     * cmd_begin uses the device's own queue. A shim without queues (or with
     * them switched off) returns RLX_ERR_UNSUPPORTED from queue_create, and
     * callers use cmd_begin. A queue must be freed before its device. */
    rlx_status (*queue_create)(rlx_device *dev, rlx_queue **out);
    void (*queue_free)(rlx_queue *queue);
    rlx_status (*cmd_begin_on)(rlx_queue *queue, rlx_cmdbuf **out);

    /* --- schedules (appended: check struct_size; see rlx_schedule_desc) --- */
    rlx_status (*schedule_create)(rlx_device *dev, const rlx_schedule_desc *desc, rlx_schedule **out);
    /* Executes the whole schedule at this point of cb. */
    rlx_status (*cmd_execute_schedule)(rlx_cmdbuf *cb, rlx_schedule *sched);
    /* Waits for no command buffer: free a schedule only after every command
     * buffer that executes it was waited on or released. */
    void (*schedule_free)(rlx_schedule *sched);

    /* --- commit and wait in one call (appended: check struct_size) ---
     * The same as cmd_commit then cmd_wait. For a caller that would block at
     * once anyway: a shim may run the work on the calling thread (the host
     * shim does, so no executor thread has to wake up for it). */
    rlx_status (*cmd_commit_wait)(rlx_cmdbuf *cb, double *device_seconds);

    /* --- the caller's memory as a buffer (appended: check struct_size) ---
     * For shims whose buffers are plain host memory (host); the others
     * return RLX_ERR_UNSUPPORTED from both. buffer_wrap makes a buffer over [ptr, ptr + size), memory the
     * caller owns (buffer_free then frees only the handle); buffer_rebind
     * points it at other memory of the same size. Commands, ICB entries and
     * schedules read a wrapped buffer's address when they execute (direct
     * commands: when encoded), so one rebind before a command buffer is begun
     * retargets every use of it; never rebind while work that uses the buffer
     * is in flight. Lets a run read its inputs and write its outputs in the
     * caller's arrays instead of copying them through the arena. */
    rlx_status (*buffer_wrap)(rlx_device *dev, void *ptr, uint64_t size, rlx_buffer **out);
    rlx_status (*buffer_rebind)(rlx_buffer *buf, void *ptr);
} rlx_shim_api;

/* 1 when the table `api` fills entry `field` (entries appended after a
 * caller was built are simply absent from an older shim's table). */
#define RLX_SHIM_HAS(api, field) \
    ((api)->struct_size >= offsetof(rlx_shim_api, field) + sizeof((api)->field) && (api)->field != NULL)

/* The one exported symbol of every shim. */
typedef const rlx_shim_api *(*rlx_shim_get_api_fn)(uint32_t abi_version);
const rlx_shim_api *rlx_shim_get_api(uint32_t abi_version);

#ifdef __cplusplus
}
#endif
#endif /* RLX_SHIM_H */
