/*
 * CUDA shim: ABI v1 of csrc/rlx_shim.h on an NVIDIA GPU, through the driver
 * API, NVRTC and cuBLAS, all loaded with dlopen. Nothing of the CUDA toolkit
 * is needed to build this file: the few types and entry points it uses are
 * declared in loader.inc.c, so it builds (and reports why it cannot run) everywhere.
 *
 * Layout: this file is the one translation unit; it includes the sections
 * from csrc/cuda/ in the order all three shims keep (csrc/host/shim.cpp,
 * csrc/metal_shim.m; tests/test_shim_layout.py checks it):
 *   errors, objects, device, buffers, libraries and pipelines, command buffers: recording, gemm,
 *   indirect command buffers, execution: commit, wait, release, copies, queues, the ABI table.
 * Every function stays static, so the library exports rlx_shim_get_api only.
 *   loader.inc.c    the CUDA declarations, phase times, errors, loading the
 *                   driver, NVRTC, cuBLAS and cuBLASLt
 *   this file       objects (the types every section shares, as in the host shim)
 *   device.inc.c    device, buffers, libraries and pipelines
 *   commands.inc.c  command buffers (recording), gemm and its cuBLASLt plans
 *   execute.inc.c   ICBs, schedules (one CUDA graph each) and commit / wait / release,
 *                   copies, queues
 *   this file       the ABI table
 *
 * What each part does:
 *  - device: the primary context (shared with cuBLAS and any CUDA runtime in
 *    the process), made current on every entry point that talks to the GPU
 *    (the caller may be on a new thread). One non-blocking compute stream and
 *    one copy stream per device.
 *  - buffers: cuMemAlloc, zeroed; write/read are synchronous copies on the
 *    copy stream (never behind in-flight command buffers of other threads).
 *  - libraries: the flattened kernel source (rlx/runtime/shader_source.py)
 *    compiled by NVRTC for the device's sm_XY. Every RLX_INSTANTIATE line
 *    gives a name expression; NVRTC's lowered (mangled) names are stored with
 *    the cubin in one cache file, <cache_dir>/cuda-kernels/<key>.bin, so a
 *    later process loads it without compiling.
 *  - command buffers: commands are recorded on the host and launched at
 *    commit, under the device lock, onto the stream of their queue (the
 *    device's own stream, or one per queue_create). That makes commit order
 *    the execution order within a queue (the ABI's queue semantics) and keeps
 *    cuBLAS's handle single-threaded. Events around the work give the time.
 *    Copies that travel with a command buffer are staged through pinned
 *    memory, large ones by several host threads (parallel_memcpy.h).
 *  - gemm: single and strided-batch gemms go through a cuBLASLt plan (bias
 *    epilogue or none) that times the heuristic's candidates and split-K
 *    variants once per shape as captured graphs (lt_fastest); two-level
 *    batches and shapes Lt has no algorithm for take cuBLAS.
 *  - ICBs: a range of entries becomes a CUDA graph (a chain of kernel nodes),
 *    built and instantiated once per (start, count) and relaunched. Kernel
 *    params are pointers into the arena's params region, so patching a
 *    dynamic param (buffer_write before the run) needs no re-instantiation.
 *  - schedules: the whole list (kernels, gemms, ICB ranges) captured into one
 *    CUDA graph when the schedule is created; executing it is one graph
 *    launch on the command buffer's stream. Other command lists are launched
 *    command by command (no run-time search for repeats).
 *
 * Nothing here aborts: every failure returns a status and sets the calling
 * thread's last_error. A CUDA error is RLX_ERR_DEVICE with the error's name.
 */
#define _GNU_SOURCE
#include "rlx_shim.h"
#include "rlx_gemm_check.h"
#include "rlx_shim_table.h"
#include "parallel_memcpy.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader.inc.c"

/* ---- objects ------------------------------------------------------------------------- */
struct rlx_device {
    int arch, cubin;            /* arch: 90 for sm_90; cubin 0: PTX for compute_<arch>, JIT by the driver */
    int pdl;                    /* launch kernels with programmatic dependent launch (see launch_kernel) */
    int queues;                 /* queue_create allowed (device option queues=1): a stream per queue */
    uint64_t staging_max;       /* cmd_upload/cmd_download copies above this many bytes skip pinned staging */
    CUdevice cudev;
    CUcontext ctx;
    CUstream stream, copy_stream;
    pthread_mutex_t mu;         /* launches (commit order = stream order), ICB entries, cuBLAS handle */
    int max_grid_y, max_grid_z;
    char *nvrtc_dirs, *cublas_dirs, *cache_dir, *include_dirs;
    cublasHandle_t blas;
    rlx_device_info info;
    pthread_mutex_t spare_mu;
    rlx_cmdbuf *spare;          /* released command buffers (events and scratch kept) */
    int n_spare;
    struct ptr_array *ptr_arrays;  /* two-level batched gemms' operand pointers (guarded by mu) */
    void *lt;                   /* cuBLASLt handle (gemms with a bias), made on first use */
    CUdeviceptr lt_workspace;
    struct lt_plan *lt_plans;   /* per gemm shape (guarded by mu) */
    pmc_pool copier;            /* host threads for large staged copies */
};

/* A cuBLASLt matmul for one gemm shape: descriptors and the chosen algorithm,
 * made once at encode time; the bias pointer is set at each launch. */
typedef struct lt_plan {
    struct lt_plan *next;
    rlx_gemm_desc key;          /* shape and type fields compared by lt_same */
    uint32_t align[3];          /* byte alignment of A, B, C (addresses, rows, batch strides): see lt_aligns */
    void *op, *la, *lb, *lc;
    lt_algo algo;
} lt_plan;
#define LT_WORKSPACE (4u << 20)

/* Device-resident A, B, C pointer arrays of one two-level batched gemm
 * (cublasGemmBatchedEx reads them from device memory). Built once per
 * descriptor at encode time; a captured graph refers to them, so they live
 * until one of the gemm's buffers is freed. */
typedef struct ptr_array { struct ptr_array *next; rlx_gemm_desc key; CUdeviceptr ptrs; } ptr_array;

struct rlx_buffer { rlx_device *dev; CUdeviceptr ptr; uint64_t size; };
struct rlx_library;  /* below, with the kernel names */
/* value_mask bit i: parameter i is a params struct taken by value (the CUDA
 * prelude's rlx_params_value, value_size[i] bytes), launched with the bytes
 * of binding i rather than its address. */
struct rlx_pipeline {
    rlx_library *lib;
    CUfunction fn;
    uint32_t flags, max_threads, n_params, value_mask;
    uint32_t value_size[RLX_MAX_BINDINGS];
};

typedef struct {
    CUfunction fn;              /* NULL: never encoded */
    uint32_t groups[3], threads[3];
    CUdeviceptr args[RLX_MAX_BINDINGS];  /* value_mask bit i: args[i] is an offset into values */
    uint32_t value_mask;
    uint8_t *values;            /* the by-value params' bytes, read when encoded */
    uint64_t version;           /* icb->version when encoded */
} icb_entry;
typedef struct { uint32_t start, count; uint64_t built; CUgraphExec exec; } icb_graph;
static uint64_t g_icb_version;  /* process-wide: see icb_encode_dispatch */
struct rlx_icb {
    rlx_device *dev;
    uint32_t capacity;
    icb_entry *entries;
    uint64_t version;           /* bumped by every encode */
    icb_graph graphs[MAX_GRAPHS];
    int n_graphs, next_evict;
};

/* A queue: its own stream, and its own cuBLASLt workspace (gemms of two
 * queues may run at once). */
struct rlx_queue {
    rlx_device *dev;
    CUstream stream;
    CUdeviceptr lt_workspace;   /* 0 without cuBLASLt */
};

enum { CMD_DISPATCH, CMD_GEMM, CMD_ICB, CMD_SCHEDULE };
typedef struct {
    uint32_t kind, bytes_mask;  /* bytes_mask bit i: args[i] is an offset into the set_bytes scratch */
    uint32_t value_mask;        /* bit i: args[i] is an offset into cb->bytes, passed by value */
    CUfunction fn;
    uint32_t groups[3], threads[3];
    CUdeviceptr args[RLX_MAX_BINDINGS];
    rlx_icb *icb;
    uint32_t start, count;
    rlx_gemm_desc gemm;
    CUdeviceptr gemm_ptrs;      /* outer > 1: the ptr_array's device copy */
    struct lt_plan *plan;       /* a gemm with a bias: its cuBLASLt plan */
    rlx_schedule *sched;        /* CMD_SCHEDULE */
} cmd_t;

enum { CB_RECORDING, CB_COMMITTED };

struct rlx_cmdbuf {
    rlx_device *dev;
    cmd_t *cmds;
    size_t n, cap;
    uint8_t *bytes;             /* set_bytes data, ALIGN-aligned slots, uploaded at commit */
    size_t bytes_len, bytes_cap;
    CUdeviceptr scratch;
    size_t scratch_cap;
    rlx_pipeline *pipe;
    CUdeviceptr bind[RLX_MAX_BINDINGS];
    CUdeviceptr bind_end[RLX_MAX_BINDINGS];  /* a buffer binding: its buffer's end */
    uint32_t bind_size[RLX_MAX_BINDINGS];    /* a set_bytes binding: its size */
    uint32_t bind_set, bind_bytes;
    int state, waited, recorded;
    rlx_status status;
    char error[1024];
    double seconds;
    CUevent ev0, ev1;
    rlx_cmdbuf *next;
    /* cmd_upload / cmd_download: staged through pinned host memory so the
     * copies run asynchronously in stream order (one sync per run). */
    uint8_t *staging;
    size_t staging_len, staging_cap;
    struct stage_copy {
        const rlx_buffer *buf;
        uint64_t offset;        /* in buf */
        size_t at, size;        /* at: in staging */
        void *dst;              /* NULL: an upload */
        int direct;             /* not staged: an upload already issued, a download read in cmd_wait */
    } *copies;
    rlx_queue *queue;           /* cmd_begin_on's queue; NULL: the device's stream */
    size_t n_copies, copies_cap;
};

/* The stream and cuBLASLt workspace of a command buffer's queue. */
static CUstream cb_stream(const rlx_cmdbuf *cb) { return cb->queue ? cb->queue->stream : cb->dev->stream; }
static CUdeviceptr cb_lt_workspace(const rlx_cmdbuf *cb) {
    return cb->queue ? cb->queue->lt_workspace : cb->dev->lt_workspace;
}

static rlx_status set_ctx(rlx_device *d) {
    ARG_CHECK(d, "no device (NULL)");
    CU_CHECK(cu.cuCtxSetCurrent(d->ctx), "cuCtxSetCurrent");
    return RLX_OK;
}

#include "device.inc.c"
#include "commands.inc.c"
#include "execute.inc.c"

/* ---- the ABI table ----------------------------------------------------------------------- */
RLX_DEFINE_SHIM_API("cuda")
