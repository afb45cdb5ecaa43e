/*
 * CUDA shim: ABI v1 of csrc/rlx_shim.h on an NVIDIA GPU, through the driver
 * API, NVRTC and cuBLAS, all loaded with dlopen. Nothing of the CUDA toolkit
 * is needed to build this file: the few types and entry points it uses are
 * declared below, so it builds (and reports why it cannot run) everywhere.
 *
 * Layout, in the order of csrc/host_shim.cpp:
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

/* ---- the CUDA declarations this file needs (cuda.h, nvrtc.h, cublas_api.h) ---- */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct { char bytes[16]; } CUuuid;
typedef struct {  /* CUDA_KERNEL_NODE_PARAMS_v1, for the unversioned cuGraphAddKernelNode */
    CUfunction func;
    unsigned int gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void **kernelParams, **extra;
} CUDA_KERNEL_NODE_PARAMS_v1;
enum {
    CUDA_SUCCESS = 0, CUDA_ERROR_OUT_OF_MEMORY = 2, CUDA_ERROR_NO_DEVICE = 100,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
    CU_STREAM_NON_BLOCKING = 1, CU_EVENT_DEFAULT = 0,
};
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
typedef void *cublasHandle_t;
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUDA_R_32F = 0, CUDA_R_16F = 2, CUBLAS_COMPUTE_32F = 68,
       CUBLAS_GEMM_DEFAULT = -1 };

/* Driver entry points: field, exported symbol (the versioned one cuda.h maps
 * the name to), parameters. All exist in every driver since CUDA 11.4. */
#define CU_API(X)                                                                                         \
    X(cuInit, "cuInit", (unsigned))                                                                       \
    X(cuDriverGetVersion, "cuDriverGetVersion", (int *))                                                  \
    X(cuDeviceGetCount, "cuDeviceGetCount", (int *))                                                      \
    X(cuDeviceGet, "cuDeviceGet", (CUdevice *, int))                                                      \
    X(cuDeviceGetName, "cuDeviceGetName", (char *, int, CUdevice))                                        \
    X(cuDeviceGetUuid, "cuDeviceGetUuid", (CUuuid *, CUdevice))                                           \
    X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", (size_t *, CUdevice))                                      \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int *, int, CUdevice))                               \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *, CUdevice))                      \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice))                              \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext))                                                    \
    X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr *, size_t))                                               \
    X(cuMemFree, "cuMemFree_v2", (CUdeviceptr))                                                           \
    X(cuMemsetD8Async, "cuMemsetD8Async", (CUdeviceptr, unsigned char, size_t, CUstream))                 \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", (CUdeviceptr, const void *, size_t, CUstream))           \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", (CUdeviceptr, const void *, size_t))                                \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void *, CUdeviceptr, size_t, CUstream))                 \
    X(cuMemAllocHost, "cuMemAllocHost_v2", (void **, size_t))                                             \
    X(cuMemFreeHost, "cuMemFreeHost", (void *))                                                           \
    X(cuModuleLoadData, "cuModuleLoadData", (CUmodule *, const void *))                                   \
    X(cuModuleUnload, "cuModuleUnload", (CUmodule))                                                       \
    X(cuModuleGetFunction, "cuModuleGetFunction", (CUfunction *, CUmodule, const char *))                 \
    X(cuFuncGetAttribute, "cuFuncGetAttribute", (int *, int, CUfunction))                                 \
    X(cuLaunchKernel, "cuLaunchKernel",                                                                   \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, \
       void **))                                                                                          \
    X(cuStreamCreate, "cuStreamCreate", (CUstream *, unsigned))                                           \
    X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream))                                                  \
    X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream))                                             \
    X(cuEventCreate, "cuEventCreate", (CUevent *, unsigned))                                              \
    X(cuEventDestroy, "cuEventDestroy_v2", (CUevent))                                                     \
    X(cuEventRecord, "cuEventRecord", (CUevent, CUstream))                                                \
    X(cuEventSynchronize, "cuEventSynchronize", (CUevent))                                                \
    X(cuEventElapsedTime, "cuEventElapsedTime", (float *, CUevent, CUevent))                              \
    X(cuGraphCreate, "cuGraphCreate", (CUgraph *, unsigned))                                              \
    X(cuGraphAddKernelNode, "cuGraphAddKernelNode",                                                       \
      (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_KERNEL_NODE_PARAMS_v1 *))          \
    X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", (CUgraphExec *, CUgraph, unsigned long long)) \
    X(cuGraphLaunch, "cuGraphLaunch", (CUgraphExec, CUstream))                                            \
    X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", (CUstream, int))                                    \
    X(cuStreamEndCapture, "cuStreamEndCapture", (CUstream, CUgraph *))                                     \
    X(cuGraphDestroy, "cuGraphDestroy", (CUgraph))                                                        \
    X(cuGraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec))                                            \
    X(cuGetErrorName, "cuGetErrorName", (CUresult, const char **))

#define NVRTC_API(X)                                                                                      \
    X(nvrtcVersion, "nvrtcVersion", (int *, int *))                                                       \
    X(nvrtcCreateProgram, "nvrtcCreateProgram",                                                           \
      (nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *))        \
    X(nvrtcDestroyProgram, "nvrtcDestroyProgram", (nvrtcProgram *))                                       \
    X(nvrtcAddNameExpression, "nvrtcAddNameExpression", (nvrtcProgram, const char *))                     \
    X(nvrtcCompileProgram, "nvrtcCompileProgram", (nvrtcProgram, int, const char *const *))               \
    X(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", (nvrtcProgram, size_t *))                         \
    X(nvrtcGetProgramLog, "nvrtcGetProgramLog", (nvrtcProgram, char *))                                   \
    X(nvrtcGetCUBINSize, "nvrtcGetCUBINSize", (nvrtcProgram, size_t *))                                   \
    X(nvrtcGetCUBIN, "nvrtcGetCUBIN", (nvrtcProgram, char *))                                             \
    X(nvrtcGetPTXSize, "nvrtcGetPTXSize", (nvrtcProgram, size_t *))                                       \
    X(nvrtcGetPTX, "nvrtcGetPTX", (nvrtcProgram, char *))                                                 \
    X(nvrtcGetLoweredName, "nvrtcGetLoweredName", (nvrtcProgram, const char *, const char **))

#define CUBLAS_API(X)                                                                                     \
    X(cublasCreate, "cublasCreate_v2", (cublasHandle_t *))                                                \
    X(cublasDestroy, "cublasDestroy_v2", (cublasHandle_t))                                                \
    X(cublasSetStream, "cublasSetStream_v2", (cublasHandle_t, CUstream))                                  \
    X(cublasSgemm, "cublasSgemm_v2",                                                                      \
      (cublasHandle_t, int, int, int, int, int, const float *, const float *, int, const float *, int,    \
       const float *, float *, int))                                                                      \
    X(cublasGemmEx, "cublasGemmEx",                                                                       \
      (cublasHandle_t, int, int, int, int, int, const void *, const void *, int, int, const void *, int,  \
       int, const void *, void *, int, int, int, int))                                                    \
    X(cublasGemmStridedBatchedEx, "cublasGemmStridedBatchedEx",                                           \
      (cublasHandle_t, int, int, int, int, int, const void *, const void *, int, int, long long,          \
       const void *, int, int, long long, const void *, void *, int, int, long long, int, int, int))     \
    X(cublasGemmBatchedEx, "cublasGemmBatchedEx",                                                         \
      (cublasHandle_t, int, int, int, int, int, const void *, const void *const *, int, int,             \
       const void *const *, int, int, const void *, void *const *, int, int, int, int, int))

/* cuBLASLt, for gemms with a bias epilogue (cublasLt.h values). */
enum {
    LT_DESC_TRANSA = 3, LT_DESC_TRANSB = 4, LT_DESC_EPILOGUE = 7, LT_DESC_BIAS_POINTER = 8,
    LT_DESC_BIAS_DATA_TYPE = 26, LT_EPILOGUE_BIAS = 4, LT_PREF_MAX_WORKSPACE_BYTES = 1,
    LT_PREF_MIN_ALIGNMENT_A = 5, LT_PREF_MIN_ALIGNMENT_B = 6, LT_PREF_MIN_ALIGNMENT_C = 7, LT_PREF_MIN_ALIGNMENT_D = 8,
    LT_CONFIG_SPLITK_NUM = 2, LT_CONFIG_REDUCTION_SCHEME = 3, LT_REDUCTION_COMPUTE_TYPE = 2,
    LT_LAYOUT_BATCH_COUNT = 5, LT_LAYOUT_STRIDED_BATCH_OFFSET = 6
};
typedef struct { uint64_t data[8]; } lt_algo;
typedef struct { lt_algo algo; size_t workspace_size; int state; float waves; int reserved[4]; } lt_heuristic;
#define CUBLASLT_API(X)                                                                                   \
    X(cublasLtCreate, "cublasLtCreate", (void **))                                                        \
    X(cublasLtDestroy, "cublasLtDestroy", (void *))                                                       \
    X(cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate", (void **, int, int))                          \
    X(cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy", (void *))                                   \
    X(cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute", (void *, int, const void *, size_t)) \
    X(cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate", (void **, int, uint64_t, uint64_t, int64_t)) \
    X(cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy", (void *))                               \
    X(cublasLtMatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute", (void *, int, const void *, size_t)) \
    X(cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate", (void **))                        \
    X(cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy", (void *))                       \
    X(cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute",                       \
      (void *, int, const void *, size_t))                                                                \
    X(cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic",                                   \
      (void *, void *, void *, void *, void *, void *, void *, int, lt_heuristic *, int *))               \
    X(cublasLtMatmul, "cublasLtMatmul",                                                                   \
      (void *, void *, const void *, const void *, void *, const void *, void *, const void *,            \
       const void *, void *, void *, void *, const lt_algo *, void *, size_t, CUstream))                  \
    X(cublasLtMatmulAlgoConfigSetAttribute, "cublasLtMatmulAlgoConfigSetAttribute",                       \
      (lt_algo *, int, const void *, size_t))                                                             \
    X(cublasLtMatmulAlgoCheck, "cublasLtMatmulAlgoCheck",                                                 \
      (void *, void *, void *, void *, void *, void *, const lt_algo *, lt_heuristic *))

#define FIELD(name, sym, args) int (*name) args;
#include "cuda_launch.h"   /* cuLaunchKernelEx's config */

static struct {
    CU_API(FIELD)
    CUresult (*cuFuncGetParamInfo)(CUfunction, size_t, size_t *, size_t *);
    CUresult (*cuLaunchKernelEx)(const cu_launch_config *, CUfunction, void **, void **);
} cu;
static struct { NVRTC_API(FIELD) int loaded, major, minor, archs[64], n_archs; char path[512]; } nv;
static struct { CUBLAS_API(FIELD) int loaded; char path[512]; } cb_api;
static struct { CUBLASLT_API(FIELD) int loaded; char path[512]; } lt_api;
#undef FIELD

/* Loads every symbol of a table; returns the first missing name or NULL. */
#define LOAD(name, sym, args) if (!(*(void **)&tbl->name = dlsym(h, sym)) && !missing) missing = sym;

#define ALIGN 256u             /* set_bytes slots and small allocations */
#define MAX_BYTES 4096u        /* cmd_set_bytes limit (the ABI's) */
#define MAX_GRAPHS 64          /* cached (start, count) graphs per ICB */
/* cmd_upload / cmd_download bytes staged through pinned memory (large ones copied by several threads,
 * parallel_memcpy.h); larger copies go direct, so pinned memory stays bounded (device option staging_max) */
#define RLX_CUDA_STAGING_MAX_DEFAULT (256ull << 20)

/* ---- phase times (a development aid) ---------------------------------------------------
 * Built with -DRLX_CUDA_PHASE_TIMES, the shim sums the host time of each step
 * of a run and prints per-call means at exit: where the replay floor goes.
 * benchmarks/gpu/floor_phases.sh builds and runs it; normal builds compile
 * none of it. */
#ifdef RLX_CUDA_PHASE_TIMES
#include <time.h>
enum { PH_BEGIN, PH_EXECUTE_ICB, PH_GRAPH_LOOKUP, PH_LAUNCH, PH_COMMIT, PH_SYNC, PH_ELAPSED, PH_RELEASE, PH_N };
static const char *const g_phase_names[PH_N] = {"cmd_begin", "cmd_execute_icb", "graph lookup", "event+launch+event",
                                                "cmd_commit (all)", "event sync", "elapsed time", "cmd_release"};
static double g_phase_us[PH_N];
static unsigned long g_phase_calls[PH_N];
static double phase_now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e6 * (double)t.tv_sec + 1e-3 * (double)t.tv_nsec;
}
static void phase_report(void) {
    for (int i = 0; i < PH_N; ++i)
        if (g_phase_calls[i])
            fprintf(stderr, "rlx cuda phase %-20s %8.2f us/call over %lu calls\n", g_phase_names[i],
                    g_phase_us[i] / (double)g_phase_calls[i], g_phase_calls[i]);
}
static void phase_add(int i, double t0) {
    static int registered;
    if (!registered) registered = 1, atexit(phase_report);
    g_phase_us[i] += phase_now_us() - t0, ++g_phase_calls[i];
}
#define PHASE_T0(var) const double var = phase_now_us()
#define PHASE_ADD(i, var) phase_add(i, var)
#else
#define PHASE_T0(var)
#define PHASE_ADD(i, var)
#endif

/* ---- errors ------------------------------------------------------------------------ */
static __thread char *t_err;   /* grows to fit compiler logs; one per thread, kept */
static __thread size_t t_err_cap;

static void set_error(const char *msg) {
    const size_t n = strlen(msg) + 1;
    if (n > t_err_cap) {
        char *p = realloc(t_err, n);
        if (!p) return;  /* keep the older message rather than abort */
        t_err = p, t_err_cap = n;
    }
    memcpy(t_err, msg, n);
}

__attribute__((format(printf, 2, 3))) static rlx_status fail(rlx_status s, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    set_error(msg);
    return s;
}
#define ARG_CHECK(cond, ...) do { if (!(cond)) return fail(RLX_ERR_ARG, __VA_ARGS__); } while (0)

static const char *cu_name(CUresult r) {
    const char *s = NULL;
    if (!cu.cuGetErrorName || cu.cuGetErrorName(r, &s) != CUDA_SUCCESS || !s) return "CUDA_ERROR_UNKNOWN";
    return s;
}

static rlx_status cu_fail(CUresult r, const char *what) {
    return fail(r == CUDA_ERROR_OUT_OF_MEMORY ? RLX_ERR_OOM : RLX_ERR_DEVICE, "%s: %s (%d)", what, cu_name(r), r);
}
#define CU_CHECK(call, what) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) return cu_fail(r_, what); } while (0)

/* ---- small helpers ------------------------------------------------------------------- */
typedef struct { char *p; size_t n, cap; int oom; } sbuf;

static void sb_add(sbuf *b, const void *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *s = data;
    for (size_t i = 0; i < n; ++i) h = (h ^ s[i]) * 1099511628211ull;
    return (h ^ 0xff) * 1099511628211ull;  /* separator: ("ab","c") != ("a","bc") */
}
static uint64_t fnv_str(uint64_t h, const char *s) { return fnv1a(h, s ? s : "", s ? strlen(s) : 0); }

static char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    sbuf b = {0};
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) sb_add(&b, tmp, n);
    fclose(f);
    if (b.oom) { free(b.p); return NULL; }
    if (!b.p) b.p = calloc(1, 1);
    if (size) *size = b.n;
    return b.p;
}

static int make_dirs(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; ++p)
        if (*p == '/' || *p == 0) {
            const char c = *p;
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) return 0;
            if (!c) return 1;
            *p = c;
        }
}

/* dlopen the first of `names` found in the ':'-separated `dirs` (each a folder
 * or a library file), then CUDA_HOME, CUDA_PATH, /usr/local/cuda, then the
 * loader's own search path. `tried` collects what was attempted. */
static void *open_first(const char *const *names, const char *dirs, char *found, size_t found_sz, sbuf *tried) {
    char roots[2048];
    const char *home = getenv("CUDA_HOME"), *cpath = getenv("CUDA_PATH");
    snprintf(roots, sizeof roots, "%s:%s%s:%s%s:/usr/local/cuda/lib64", dirs ? dirs : "", home ? home : "",
             home ? "/lib64" : "", cpath ? cpath : "", cpath ? "/lib64" : "");
    for (const char *const *name = names; *name; ++name) {
        char work[2048], *save = NULL;
        memcpy(work, roots, sizeof work);
        for (char *dir = strtok_r(work, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
            char path[1024];
            struct stat st;
            if (stat(dir, &st) != 0) continue;
            if (S_ISDIR(st.st_mode)) snprintf(path, sizeof path, "%s/%s", dir, *name);
            else if (strstr(dir, *name)) snprintf(path, sizeof path, "%s", dir);  /* a file of that name */
            else continue;
            if (stat(path, &st) != 0) continue;
            const char *cublas = strstr(path, "cublas.so");
            if (cublas) {  /* cuBLAS needs cuBLASLt of the same version, from the same folder */
                char lt[1100];
                snprintf(lt, sizeof lt, "%.*scublasLt%s", (int)(cublas - path), path, cublas + 6);
                dlopen(lt, RTLD_NOW | RTLD_GLOBAL);
            }
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h) { snprintf(found, found_sz, "%s", path); return h; }
            sb_str(tried, path), sb_str(tried, " ("), sb_str(tried, dlerror()), sb_str(tried, "); ");
        }
        void *h = dlopen(*name, RTLD_NOW | RTLD_LOCAL);  /* LD_LIBRARY_PATH, ldconfig */
        if (h) { snprintf(found, found_sz, "%s", *name); return h; }
        sb_str(tried, *name), sb_str(tried, "; ");
    }
    return NULL;
}

/* ---- driver: loaded once per process ------------------------------------------------- */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_lib_mu = PTHREAD_MUTEX_INITIALIZER;  /* NVRTC / cuBLAS loading */
static char g_reason[512];
static int g_count, g_driver;

static void init_driver(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(g_reason, sizeof g_reason, "libcuda.so.1 not found: no NVIDIA driver (%s)", dlerror());
        return;
    }
    const char *missing = NULL;
    __typeof__(cu) *tbl = &cu;
    CU_API(LOAD)
    *(void **)&cu.cuFuncGetParamInfo = dlsym(h, "cuFuncGetParamInfo");  /* CUDA 12.4+, optional */
    *(void **)&cu.cuLaunchKernelEx = dlsym(h, "cuLaunchKernelEx");        /* CUDA 12.0+, optional */
    if (missing) {
        snprintf(g_reason, sizeof g_reason, "libcuda.so.1 lacks %s: the NVIDIA driver is too old", missing);
        return;
    }
    CUresult r = cu.cuInit(0);
    if (r != CUDA_SUCCESS) {
        snprintf(g_reason, sizeof g_reason, "cuInit failed: %s (%d)%s", cu_name(r), r,
                 r == CUDA_ERROR_NO_DEVICE ? ": no CUDA device" : "");
        return;
    }
    cu.cuDriverGetVersion(&g_driver);
    if ((r = cu.cuDeviceGetCount(&g_count)) != CUDA_SUCCESS || g_count <= 0) {
        snprintf(g_reason, sizeof g_reason, "no CUDA device (cuDeviceGetCount: %s)", cu_name(r));
        g_count = 0;
    }
}

/* Opens NVRTC or cuBLAS (caller holds g_lib_mu): the driver's CUDA major
 * first (a newer major's output may not load on an older driver), then the
 * other, then the unversioned name. */
static void *open_lib(const char *what, const char *stem, const char *pkg, const char *dirs, char *path,
                      size_t path_size, rlx_status *s) {
    char buf[3][32];
    const int newer = g_driver == 0 || g_driver >= 13000;
    snprintf(buf[0], 32, "lib%s.so.%d", stem, newer ? 13 : 12);
    snprintf(buf[1], 32, "lib%s.so.%d", stem, newer ? 12 : 13);
    snprintf(buf[2], 32, "lib%s.so", stem);
    const char *names[4] = {buf[0], buf[1], buf[2], NULL};
    sbuf tried = {0};
    void *h = open_first(names, dirs, path, path_size, &tried);
    if (!h)
        *s = fail(RLX_ERR_UNAVAILABLE, "%s not found, tried: %.700s (install %s or set CUDA_HOME)", what,
                  tried.p ? tried.p : "", pkg);
    free(tried.p);
    return h;
}

static rlx_status load_nvrtc(const char *dirs) {
    pthread_mutex_lock(&g_lib_mu);
    rlx_status s = RLX_OK;
    void *h = nv.loaded ? NULL : open_lib("NVRTC", "nvrtc", "nvidia-cuda-nvrtc", dirs, nv.path, sizeof nv.path, &s);
    const char *missing = NULL;
    __typeof__(nv) *tbl = &nv;
    if (h) { NVRTC_API(LOAD) }
    if (h && missing) s = fail(RLX_ERR_UNAVAILABLE, "NVRTC %s lacks %s", nv.path, missing);
    if (h && !missing) {
        nv.nvrtcVersion(&nv.major, &nv.minor);
        /* NVRTC dlopens libnvrtc-builtins.so.M.m by name: outside the loader's
         * path (pip wheels) it is found only if already loaded from our folder. */
        char builtins[600];
        const char *slash = strrchr(nv.path, '/');
        if (slash && snprintf(builtins, sizeof builtins, "%.*s/libnvrtc-builtins.so.%d.%d", (int)(slash - nv.path),
                              nv.path, nv.major, nv.minor) > 0)
            dlopen(builtins, RTLD_NOW | RTLD_GLOBAL);
        int (*num)(int *) = (int (*)(int *))dlsym(h, "nvrtcGetNumSupportedArchs");
        int (*get)(int *) = (int (*)(int *))dlsym(h, "nvrtcGetSupportedArchs");
        if (num && get && num(&nv.n_archs) == 0 && nv.n_archs > 0 && nv.n_archs <= 64) get(nv.archs);
        else nv.n_archs = 0;
        nv.loaded = 1;
    }
    pthread_mutex_unlock(&g_lib_mu);
    return s;
}

/* A loader for one dlopened library's table (cuBLAS, cuBLASLt): opened once
 * per process, every symbol required. */
#define DEFINE_LIB_LOADER(fn, table, API, what, stem)                                              \
    static rlx_status fn(const char *dirs) {                                                        \
        pthread_mutex_lock(&g_lib_mu);                                                             \
        rlx_status s = RLX_OK;                                                                     \
        void *h = table.loaded ? NULL : open_lib(what, stem, "nvidia-cublas", dirs, table.path,     \
                                                 sizeof table.path, &s);                          \
        const char *missing = NULL;                                                                \
        __typeof__(table) *tbl = &table;                                                           \
        if (h) { API(LOAD) }                                                                       \
        if (h && missing) s = fail(RLX_ERR_UNAVAILABLE, what " %s lacks %s", table.path, missing); \
        table.loaded |= h && !missing;                                                             \
        pthread_mutex_unlock(&g_lib_mu);                                                           \
        return s;                                                                                  \
    }
DEFINE_LIB_LOADER(load_cublas, cb_api, CUBLAS_API, "cuBLAS", "cublas")
/* cuBLASLt is optional: without it the device reports gemm_bias = 0 and the
 * runtime adds biases with a kernel. */
DEFINE_LIB_LOADER(load_cublaslt, lt_api, CUBLASLT_API, "cuBLASLt", "cublasLt")

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
    struct sched_graph *sched;  /* whole-schedule graphs of replayed command lists (guarded by mu) */
    int n_sched, sched_next;
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
struct rlx_pipeline { rlx_library *lib; CUfunction fn; uint32_t flags, max_threads, n_params; };

typedef struct {
    CUfunction fn;              /* NULL: never encoded */
    uint32_t groups[3], threads[3];
    CUdeviceptr args[RLX_MAX_BINDINGS];
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

enum { CMD_DISPATCH, CMD_GEMM, CMD_ICB };
typedef struct {
    uint32_t kind, bytes_mask;  /* bytes_mask bit i: args[i] is an offset into the set_bytes scratch */
    CUfunction fn;
    uint32_t groups[3], threads[3];
    CUdeviceptr args[RLX_MAX_BINDINGS];
    rlx_icb *icb;
    uint32_t start, count;
    rlx_gemm_desc gemm;
    CUdeviceptr gemm_ptrs;      /* outer > 1: the ptr_array's device copy */
    struct lt_plan *plan;       /* a gemm with a bias: its cuBLASLt plan */
} cmd_t;
typedef struct sched_graph {
    rlx_queue *queue;           /* whose commands (a gemm node bakes in its queue's cuBLASLt workspace) */
    cmd_t *cmds;                /* the list, ICB versions in .gemm.m of CMD_ICB entries */
    size_t n;
    int seen;                   /* times committed */
    CUgraphExec exec;           /* NULL until captured */
} sched_graph;
#define MAX_SCHED_GRAPHS 16
enum { kMinDirectCapture = 8 };

static void sched_graph_clear(sched_graph *g) {
    if (g->exec) cu.cuGraphExecDestroy(g->exec);
    free(g->cmds);
    memset(g, 0, sizeof *g);
}

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
    CU_CHECK(cu.cuCtxSetCurrent(d->ctx), "cuCtxSetCurrent");
    return RLX_OK;
}

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
        for (int i = 0; i < d->n_sched; ++i) sched_graph_clear(&d->sched[i]);
        free(d->sched);
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
    *out = d;
    return RLX_OK;
}

static rlx_status device_info(rlx_device *d, rlx_device_info *out) {
    ARG_CHECK(d && out, "device_info: NULL argument");
    *out = d->info;
    return RLX_OK;
}

/* ---- buffers ------------------------------------------------------------------------- */
static rlx_status buffer_alloc(rlx_device *d, uint64_t size, rlx_buffer **out) {
    ARG_CHECK(d && out, "buffer_alloc: NULL argument");
    *out = NULL;
    ARG_CHECK(size <= d->info.max_buffer_length, "buffer_alloc: %llu bytes exceeds max_buffer_length %llu",
              (unsigned long long)size, (unsigned long long)d->info.max_buffer_length);
    rlx_status s = set_ctx(d);
    if (s) return s;
    rlx_buffer *b = calloc(1, sizeof *b);
    if (!b) return fail(RLX_ERR_OOM, "buffer_alloc: out of memory");
    const size_t rounded = size < ALIGN ? ALIGN : (size_t)size;
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

static rlx_status check_copy(const char *fn, const rlx_buffer *b, uint64_t offset, const void *host, uint64_t size) {
    ARG_CHECK(b && (host || size == 0), "%s: NULL argument", fn);
    ARG_CHECK(offset <= b->size && size <= b->size - offset, "%s: bytes [%llu, +%llu) outside a %llu-byte buffer",
              fn, (unsigned long long)offset, (unsigned long long)size, (unsigned long long)b->size);
    return RLX_OK;
}

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

/* Compiles `src` with NVRTC: options = arch, -std=c++17, -I per include dir,
 * then the caller's (whitespace-separated). On success *image is a cubin (or
 * NUL-terminated PTX) and k's lowered names are filled in. */
static rlx_status nvrtc_compile(const char *src, int arch, int cubin, const char *include_dirs,
                                const char *user_opts, names_t *k, char **image, size_t *image_size) {
    *image = NULL;
    char arch_opt[64], *incs = strdup(include_dirs ? include_dirs : ""), *extra = strdup(user_opts ? user_opts : "");
    char *opts[256], *save = NULL;
    int n = 0;
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s_%d", cubin ? "sm" : "compute", arch);
    opts[n++] = arch_opt;
    opts[n++] = "-std=c++17";
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
    rlx_status s = library_source(d, source, &src, &prelude);
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
    free(image), free(src.p), free(prelude.p);
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
    /* Every rlx kernel parameter is a pointer (a binding); count them where the
     * driver can tell (12.4+), so a missing binding is an argument error
     * instead of a kernel reading a garbage pointer. */
    uint32_t n_params = 0;
    size_t off, size;
    while (cu.cuFuncGetParamInfo && n_params <= RLX_MAX_BINDINGS &&
           cu.cuFuncGetParamInfo(fn, n_params, &off, &size) == CUDA_SUCCESS) {
        if (size != sizeof(CUdeviceptr))
            return fail(RLX_ERR_UNSUPPORTED, "pipeline_get: '%s' parameter %u is %zu bytes; rlx kernels take "
                        "pointers only", function, n_params, size);
        ++n_params;
    }
    if (n_params > RLX_MAX_BINDINGS)
        return fail(RLX_ERR_UNSUPPORTED, "pipeline_get: '%s' takes more than %u parameters", function,
                    RLX_MAX_BINDINGS);
    rlx_pipeline *p = calloc(1, sizeof *p);
    if (!p) return fail(RLX_ERR_OOM, "pipeline_get: out of memory");
    p->lib = lib, p->fn = fn, p->flags = flags, p->max_threads = (uint32_t)max_threads, p->n_params = n_params;
    *out = p;
    if (info) {
        memset(info, 0, sizeof *info);
        info->max_threads_per_group = (uint32_t)max_threads;
        info->execution_width = 32;
    }
    return RLX_OK;
}

static void pipeline_free(rlx_pipeline *p) { free(p); }

/* ---- validation shared by cmd_* and icb_* ------------------------------------------------ */
static rlx_status check_binding(rlx_device *d, const char *fn, uint32_t index, const rlx_buffer *b, uint64_t offset) {
    ARG_CHECK(index < RLX_MAX_BINDINGS, "%s: binding index %u >= %u", fn, index, RLX_MAX_BINDINGS);
    ARG_CHECK(b, "%s: buffer at binding %u is NULL", fn, index);
    ARG_CHECK(b->dev == d, "%s: buffer at binding %u belongs to another device", fn, index);
    ARG_CHECK(offset <= b->size, "%s: offset %llu past the end of a %llu-byte buffer (binding %u)", fn,
              (unsigned long long)offset, (unsigned long long)b->size, index);
    return RLX_OK;
}

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


/* Optional operand types: f16 inputs with an f32 result (attention scores). */
static const int32_t kExtraGemmTypes[][3] = {{RLX_DTYPE_F16, RLX_DTYPE_F16, RLX_DTYPE_F32}};
RLX_DEFINE_CHECK_GEMM(static, "cuda", kExtraGemmTypes, 1)

/* ---- command buffers ------------------------------------------------------------------- */
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
    cb->bind_set |= 1u << index;
    cb->bind_bytes &= ~(1u << index);
    return RLX_OK;
}

/* Bytes go to a host staging area now and to the device scratch at commit. */
static rlx_status cmd_set_bytes(rlx_cmdbuf *cb, uint32_t index, const void *data, uint32_t size) {
    CB_CHECK(cb, "cmd_set_bytes");
    ARG_CHECK(index < RLX_MAX_BINDINGS, "cmd_set_bytes: binding index %u >= %u", index, RLX_MAX_BINDINGS);
    ARG_CHECK(data && size >= 1 && size <= MAX_BYTES, "cmd_set_bytes: need 1..%u bytes of non-NULL data, got %u",
              MAX_BYTES, size);
    const size_t at = (cb->bytes_len + ALIGN - 1) / ALIGN * ALIGN;
    if (at + size > cb->bytes_cap) {
        size_t cap = cb->bytes_cap ? 2 * cb->bytes_cap : 16384;
        while (cap < at + size) cap *= 2;
        uint8_t *p = realloc(cb->bytes, cap);
        if (!p) return fail(RLX_ERR_OOM, "cmd_set_bytes: out of memory");
        cb->bytes = p, cb->bytes_cap = cap;
    }
    memcpy(cb->bytes + at, data, size);
    cb->bytes_len = at + size;
    cb->bind[index] = at;
    cb->bind_set |= 1u << index;
    cb->bind_bytes |= 1u << index;
    return RLX_OK;
}

static rlx_status cmd_dispatch(rlx_cmdbuf *cb, const uint32_t groups[3], const uint32_t threads[3]) {
    CB_CHECK(cb, "cmd_dispatch");
    ARG_CHECK(cb->pipe, "cmd_dispatch: no pipeline set");
    rlx_status s = check_grid(cb->dev, "cmd_dispatch", cb->pipe, groups, threads);
    if (s) return s;
    const uint32_t need = (1u << cb->pipe->n_params) - 1u;
    ARG_CHECK((cb->bind_set & need) == need, "cmd_dispatch: the kernel takes %u buffers; bindings set: 0x%x",
              cb->pipe->n_params, cb->bind_set);
    cmd_t c = {.kind = CMD_DISPATCH, .fn = cb->pipe->fn, .bytes_mask = cb->bind_bytes};
    for (int i = 0; i < 3; ++i) c.groups[i] = groups[i], c.threads[i] = threads ? threads[i] : 1;
    memcpy(c.args, cb->bind, sizeof c.args);
    return push(cb, &c);
}

/* One in-order stream: every command already sees the effects of earlier ones. */
static rlx_status cmd_barrier(rlx_cmdbuf *cb) {
    CB_CHECK(cb, "cmd_barrier");
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
 * shorter than that, and the pick among those is noise (on the H200 that
 * picked 14 us kernels where 6 us ones existed). Returns the index of the
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
    const size_t total = a_bytes + b_bytes + c_bytes + bias_bytes + LT_WORKSPACE + 4 * 256;
    CUdeviceptr mem = 0;
    CUevent ev0 = NULL, ev1 = NULL;
    int best = 0;
    float best_ms = -1;
    if (cu.cuMemAlloc(&mem, total) != CUDA_SUCCESS) return 0;
    const CUdeviceptr a = mem, b = (a + a_bytes + 255) & ~(CUdeviceptr)255, c = (b + b_bytes + 255) & ~(CUdeviceptr)255;
    const CUdeviceptr bias = (c + c_bytes + 255) & ~(CUdeviceptr)255, ws = (bias + bias_bytes + 255) & ~(CUdeviceptr)255;
    CUstream st = d->copy_stream;
    CUresult r = cu.cuMemsetD8Async(mem, 0, total, st);
    if (r == CUDA_SUCCESS) r = cu.cuEventCreate(&ev0, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = cu.cuEventCreate(&ev1, CU_EVENT_DEFAULT);
    const int ready = r == CUDA_SUCCESS &&
                      (!g->bias ||
                       lt_api.cublasLtMatmulDescSetAttribute(p->op, LT_DESC_BIAS_POINTER, &bias, sizeof bias) == 0);
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
           rlx_gemm_batch(x) == rlx_gemm_batch(y) &&
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
    const int at = g->dtype == RLX_DTYPE_F32 ? CUDA_R_32F : CUDA_R_16F;
    const int bt = g->b_dtype == RLX_DTYPE_F32 ? CUDA_R_32F : CUDA_R_16F;
    const int ct = g->c_dtype == RLX_DTYPE_F32 ? CUDA_R_32F : CUDA_R_16F;
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
    if (s == RLX_OK && desc->bias) s = lt_plan_for(d, desc, &plan);
    else if (s == RLX_OK && d->info.gemm_bias && rlx_gemm_outer(desc) == 1 && lt_plan_for(d, desc, &plan) != RLX_OK)
        plan = NULL;  /* a shape cuBLASLt has no algorithm for: plain cuBLAS below */
    pthread_mutex_unlock(&d->mu);
    if (s) return s;
    return push(cb, &(cmd_t){.kind = CMD_GEMM, .gemm = *desc, .gemm_ptrs = ptrs, .plan = plan});
}

static rlx_status cmd_execute_icb(rlx_cmdbuf *cb, rlx_icb *icb, uint32_t start, uint32_t count) {
    CB_CHECK(cb, "cmd_execute_icb");
    ARG_CHECK(icb, "cmd_execute_icb: icb is NULL");
    ARG_CHECK(icb->dev == cb->dev, "cmd_execute_icb: icb belongs to another device");
    ARG_CHECK((uint64_t)start + count <= icb->capacity, "cmd_execute_icb: range [%u, %u+%u) exceeds capacity %u",
              start, start, count, icb->capacity);
    if (!count) return RLX_OK;
    return push(cb, &(cmd_t){.kind = CMD_ICB, .icb = icb, .start = start, .count = count});  /* read at commit */
}

/* C = op(A) op(B) row-major is C^T = op(B)^T op(A)^T column-major: cuBLAS gets
 * B as its first operand, A as its second, and m, n swapped. */
static rlx_status run_gemm(rlx_device *d, CUstream stream, CUdeviceptr lt_workspace, const rlx_gemm_desc *g,
                           CUdeviceptr ptrs, const lt_plan *plan, char *err, size_t err_size) {
    if (g->m == 0 || g->n == 0) return RLX_OK;
    const int ta = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const CUdeviceptr a = g->a->ptr + g->a_offset, b = g->b->ptr + g->b_offset, c = g->c->ptr + g->c_offset;
    const int at = g->dtype == RLX_DTYPE_F32 ? CUDA_R_32F : CUDA_R_16F;
    const int bt = g->b_dtype == RLX_DTYPE_F32 ? CUDA_R_32F : CUDA_R_16F;
    const int ct = g->c_dtype == RLX_DTYPE_F32 ? CUDA_R_32F : CUDA_R_16F;
    const int n_entries = (int)(rlx_gemm_batch(g) * rlx_gemm_outer(g));
    int st = cb_api.cublasSetStream(d->blas, stream);
    if (st == 0 && plan) {  /* cuBLASLt, bias epilogue or none: D = C = our C */
        if (g->bias) {
            const CUdeviceptr bias = g->bias->ptr + g->bias_offset;
            st = lt_api.cublasLtMatmulDescSetAttribute(plan->op, LT_DESC_BIAS_POINTER, &bias, sizeof bias);
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
    static const char *names[] = {"f32", "f16", "bf16"};
    snprintf(err, err_size, "cuBLAS %s x %s -> %s gemm (m=%lld n=%lld k=%lld, %d entries) failed with status %d",
             names[g->dtype], names[g->b_dtype], names[g->c_dtype], (long long)g->m, (long long)g->n,
             (long long)g->k, n_entries, st);
    return RLX_ERR_DEVICE;
}

/* The CUDA graph of entries [start, start+count): a chain of kernel nodes,
 * built on first use and kept per (start, count); rebuilt only when an entry
 * in the range was re-encoded. (The whole schedule, gemms included, could
 * later become one graph by capturing the stream around a commit.)
 * Called with the device lock held. */
static rlx_status icb_graph_for(rlx_icb *icb, uint32_t start, uint32_t count, CUgraphExec *out, char *err,
                                size_t err_size) {
    icb_graph *g = NULL;
    for (int i = 0; i < icb->n_graphs && !g; ++i)
        if (icb->graphs[i].start == start && icb->graphs[i].count == count) g = &icb->graphs[i];
    if (g && g->built != icb->version) {
        for (uint32_t i = start; i < start + count && g; ++i)
            if (icb->entries[i].version > g->built) {
                cu.cuGraphExecDestroy(g->exec);  /* an in-flight launch finishes first */
                g->exec = NULL;
            }
        g->built = icb->version;
    }
    if (g && g->exec) { *out = g->exec; return RLX_OK; }
    for (uint32_t i = start; i < start + count; ++i)
        if (!icb->entries[i].fn) {
            snprintf(err, err_size, "icb entry %u was never encoded", i);
            return RLX_ERR_DEVICE;
        }
    CUgraph graph = NULL;
    CUgraphNode prev = NULL, node;
    CUgraphExec exec = NULL;
    CUresult r = cu.cuGraphCreate(&graph, 0);
    for (uint32_t i = start; r == CUDA_SUCCESS && i < start + count; ++i) {
        icb_entry *e = &icb->entries[i];
        void *params[RLX_MAX_BINDINGS];
        for (int j = 0; j < (int)RLX_MAX_BINDINGS; ++j) params[j] = &e->args[j];
        CUDA_KERNEL_NODE_PARAMS_v1 kp = {e->fn, e->groups[0], e->groups[1], e->groups[2], e->threads[0],
                                         e->threads[1], e->threads[2], 0, params, NULL};
        r = cu.cuGraphAddKernelNode(&node, graph, prev ? &prev : NULL, prev ? 1 : 0, &kp);
        prev = node;
    }
    if (r == CUDA_SUCCESS) r = cu.cuGraphInstantiateWithFlags(&exec, graph, 0);
    if (graph) cu.cuGraphDestroy(graph);  /* the executable graph is independent of it */
    if (r != CUDA_SUCCESS) {
        snprintf(err, err_size, "building the CUDA graph of icb entries [%u, %u): %s (%d)", start, start + count,
                 cu_name(r), r);
        return r == CUDA_ERROR_OUT_OF_MEMORY ? RLX_ERR_OOM : RLX_ERR_DEVICE;
    }
    if (!g) {
        if (icb->n_graphs < MAX_GRAPHS) {
            g = &icb->graphs[icb->n_graphs++];
        } else {  /* many distinct ranges: replace round-robin */
            g = &icb->graphs[icb->next_evict];
            icb->next_evict = (icb->next_evict + 1) % MAX_GRAPHS;
            if (g->exec) cu.cuGraphExecDestroy(g->exec);
        }
    }
    g->start = start, g->count = count, g->built = icb->version, g->exec = exec;
    *out = exec;
    return RLX_OK;
}

/* ---- whole-schedule graphs ------------------------------------------------------------
 * A replayed run commits the same list every time: ICB ranges with cuBLAS
 * gemms between them. Launched one by one that costs a host launch per range
 * and per gemm; captured once into one CUDA graph it is a single launch, as
 * PyTorch's CUDA graphs are. A list is captured the second time it is seen
 * (the first run initializes cuBLAS, whose first call allocates and cannot
 * be captured) and replayed from then on; directly encoded lists of at least
 * kMinDirectCapture commands are treated the same way. Lists with set_bytes
 * are never captured (their data changes per commit). Kernels read their params from
 * device memory, so patched dynamic params need no new graph. */
static int cmd_same(const cmd_t *a, const cmd_t *b) {
    if (a->kind != b->kind) return 0;
    if (a->kind == CMD_ICB) return a->icb == b->icb && a->start == b->start && a->count == b->count &&
                                   a->gemm.m == b->gemm.m;  /* .gemm.m holds the ICB version */
    /* The pointer arrays too: a freed gemm's array may be gone while a graph
     * captured from it is still cached under recycled buffer addresses. */
    if (a->kind == CMD_GEMM)
        return gemm_same(&a->gemm, &b->gemm) && a->gemm_ptrs == b->gemm_ptrs && a->plan == b->plan;
    if (a->fn != b->fn || a->bytes_mask != b->bytes_mask) return 0;
    for (int i = 0; i < 3; ++i)
        if (a->groups[i] != b->groups[i] || a->threads[i] != b->threads[i]) return 0;
    for (int i = 0; i < (int)RLX_MAX_BINDINGS; ++i)
        if (a->args[i] != b->args[i]) return 0;
    return 1;
}

/* The device's entry for this command list (made on first sight); NULL when
 * the list cannot be captured. Called with the device lock held. */
static sched_graph *sched_graph_for(rlx_cmdbuf *cb) {
    rlx_device *d = cb->dev;
    int has_icb = 0;
    if (cb->bytes_len) return NULL;
    for (size_t i = 0; i < cb->n; ++i) {
        if (cb->cmds[i].kind == CMD_ICB) {
            has_icb = 1;
            cb->cmds[i].gemm.m = (int64_t)cb->cmds[i].icb->version;
        }
    }
    /* A directly encoded list is worth a graph too when it repeats (an
     * executable run without replay re-encodes the same commands each time);
     * a handful of commands launch faster than a graph lookup pays back. */
    if (!has_icb && cb->n < kMinDirectCapture) return NULL;
    for (int i = 0; i < d->n_sched; ++i) {
        sched_graph *g = &d->sched[i];
        if (g->n != cb->n || g->queue != cb->queue) continue;
        size_t j = 0;
        while (j < cb->n && cmd_same(&g->cmds[j], &cb->cmds[j])) ++j;
        if (j == cb->n) return g;
    }
    if (!d->sched && !(d->sched = calloc(MAX_SCHED_GRAPHS, sizeof *d->sched))) return NULL;
    sched_graph *g;
    if (d->n_sched < MAX_SCHED_GRAPHS) {
        g = &d->sched[d->n_sched++];
    } else {  /* full: replace round-robin (a graph still running is freed when it completes) */
        g = &d->sched[d->sched_next];
        d->sched_next = (d->sched_next + 1) % MAX_SCHED_GRAPHS;
    }
    sched_graph_clear(g);
    if (!(g->cmds = malloc(cb->n * sizeof *g->cmds))) return NULL;
    memcpy(g->cmds, cb->cmds, cb->n * sizeof *g->cmds);
    g->n = cb->n;
    g->queue = cb->queue;
    return g;
}

/* One of our kernels onto a stream. With pdl set it may start while
 * the previous kernel in the stream finishes (programmatic dependent launch):
 * every rlx kernel waits for its predecessor's memory before it touches a
 * buffer (griddepcontrol.wait in the CUDA prelude), so only the launch
 * latency overlaps. cuBLAS kernels are launched normally and keep the full
 * dependency on both sides. */
static CUresult launch_kernel(rlx_device *d, CUstream stream, CUfunction fn, const uint32_t groups[3],
                              const uint32_t threads[3], void **params) {
    if (!d->pdl)
        return cu.cuLaunchKernel(fn, groups[0], groups[1], groups[2], threads[0], threads[1], threads[2], 0,
                                 stream, params, NULL);
    cu_launch_attribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = RLX_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmatic_stream_serialization_allowed = 1;
    const cu_launch_config cfg = {{groups[0], groups[1], groups[2]}, {threads[0], threads[1], threads[2]}, 0,
                                  stream, &attr, 1};
    return cu.cuLaunchKernelEx(&cfg, fn, params, NULL);
}

static void launch_cmds(rlx_cmdbuf *cb, int capturing, CUresult *r, const char **what);

/* Captures the list into g->exec (on the device stream, under the lock). On
 * any failure the list simply keeps running command by command. */
static void sched_graph_capture(rlx_cmdbuf *cb, sched_graph *g) {
    CUgraph graph = NULL;
    CUresult r = cu.cuStreamBeginCapture(cb_stream(cb), 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */);
    const char *what = "";
    if (r != CUDA_SUCCESS) return;
    launch_cmds(cb, 1, &r, &what);
    CUresult end = cu.cuStreamEndCapture(cb_stream(cb), &graph);
    if (r == CUDA_SUCCESS && end == CUDA_SUCCESS && cb->status == RLX_OK && graph)
        if (cu.cuGraphInstantiateWithFlags(&g->exec, graph, 0) != CUDA_SUCCESS) g->exec = NULL;
    if (graph) cu.cuGraphDestroy(graph);
    cb->status = RLX_OK;  /* nothing ran during capture; the real launch below reports errors */
    cb->error[0] = 0;
}

/* Launches everything onto the device stream; errors are kept for cmd_wait.
 * Called with the device lock held and the context current. */
static void launch_all(rlx_cmdbuf *cb) {
    const CUstream stream = cb_stream(cb);
    CUresult r = CUDA_SUCCESS;
    const char *what = "cuEventRecord";
    if (cb->bytes_len && cb->bytes_len > cb->scratch_cap) {
        if (cb->scratch) cu.cuMemFree(cb->scratch), cb->scratch = 0, cb->scratch_cap = 0;
        what = "cuMemAlloc (set_bytes scratch)";
        if ((r = cu.cuMemAlloc(&cb->scratch, cb->bytes_cap)) == CUDA_SUCCESS) cb->scratch_cap = cb->bytes_cap;
    }
    PHASE_T0(t_lookup);
    sched_graph *g = r == CUDA_SUCCESS ? sched_graph_for(cb) : NULL;
    PHASE_ADD(PH_GRAPH_LOOKUP, t_lookup);
    if (g && !g->exec && ++g->seen >= 2) sched_graph_capture(cb, g);
    PHASE_T0(t_launch);
    if (r == CUDA_SUCCESS) r = cu.cuEventRecord(cb->ev0, stream), what = "cuEventRecord";
    for (size_t i = 0; r == CUDA_SUCCESS && i < cb->n_copies; ++i)
        if (!cb->copies[i].dst && !cb->copies[i].direct)
            r = cu.cuMemcpyHtoDAsync(cb->copies[i].buf->ptr + cb->copies[i].offset, cb->staging + cb->copies[i].at,
                                     cb->copies[i].size,
                                     stream), what = "cmd_upload";
    if (r == CUDA_SUCCESS && cb->bytes_len)
        r = cu.cuMemcpyHtoDAsync(cb->scratch, cb->bytes, cb->bytes_len, stream), what = "set_bytes upload";
    if (r == CUDA_SUCCESS && g && g->exec) {
        r = cu.cuGraphLaunch(g->exec, stream), what = "cuGraphLaunch (schedule)";
    } else if (r == CUDA_SUCCESS) {
        launch_cmds(cb, 0, &r, &what);
    }
    for (size_t i = 0; r == CUDA_SUCCESS && cb->status == RLX_OK && i < cb->n_copies; ++i)
        if (cb->copies[i].dst && !cb->copies[i].direct)
            r = cu.cuMemcpyDtoHAsync(cb->staging + cb->copies[i].at, cb->copies[i].buf->ptr + cb->copies[i].offset,
                                     cb->copies[i].size,
                                     stream), what = "cmd_download";
    if (r != CUDA_SUCCESS && cb->status == RLX_OK) {
        cb->status = r == CUDA_ERROR_OUT_OF_MEMORY ? RLX_ERR_OOM : RLX_ERR_DEVICE;
        snprintf(cb->error, sizeof cb->error, "%s: %s (%d)", what, cu_name(r), r);
    }
    cb->recorded = cu.cuEventRecord(cb->ev1, stream) == CUDA_SUCCESS;
    PHASE_ADD(PH_LAUNCH, t_launch);
}

/* Each command onto the stream, in order. While capturing, ICB ranges are
 * launched kernel by kernel (the captured graph then holds them as nodes). */
static void launch_cmds(rlx_cmdbuf *cb, int capturing, CUresult *rr, const char **what) {
    rlx_device *d = cb->dev;
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; r == CUDA_SUCCESS && cb->status == RLX_OK && i < cb->n; ++i) {
        const cmd_t *c = &cb->cmds[i];
        if (c->kind == CMD_DISPATCH) {
            CUdeviceptr vals[RLX_MAX_BINDINGS];
            void *params[RLX_MAX_BINDINGS];
            for (int j = 0; j < (int)RLX_MAX_BINDINGS; ++j) {
                vals[j] = (c->bytes_mask >> j & 1u) ? cb->scratch + c->args[j] : c->args[j];
                params[j] = &vals[j];
            }
            *what = "cuLaunchKernel";
            r = launch_kernel(d, cb_stream(cb), c->fn, c->groups, c->threads, params);
        } else if (c->kind == CMD_GEMM) {
            cb->status = run_gemm(d, cb_stream(cb), cb_lt_workspace(cb), &c->gemm, c->gemm_ptrs, c->plan, cb->error,
                                  sizeof cb->error);
        } else if (capturing) {
            for (uint32_t e = c->start; r == CUDA_SUCCESS && cb->status == RLX_OK && e < c->start + c->count; ++e) {
                icb_entry *en = &c->icb->entries[e];
                if (!en->fn) {
                    cb->status = RLX_ERR_DEVICE;
                    snprintf(cb->error, sizeof cb->error, "icb entry %u was never encoded", e);
                    break;
                }
                void *params[RLX_MAX_BINDINGS];
                for (int j = 0; j < (int)RLX_MAX_BINDINGS; ++j) params[j] = &en->args[j];
                *what = "cuLaunchKernel (capture)";
                r = launch_kernel(d, cb_stream(cb), en->fn, en->groups, en->threads, params);
            }
        } else {
            CUgraphExec exec = NULL;
            cb->status = icb_graph_for(c->icb, c->start, c->count, &exec, cb->error, sizeof cb->error);
            if (cb->status == RLX_OK) r = cu.cuGraphLaunch(exec, cb_stream(cb)), *what = "cuGraphLaunch";
        }
    }
    *rr = r;
}

static rlx_status cmd_commit(rlx_cmdbuf *cb) {
    CB_CHECK(cb, "cmd_commit");
    rlx_device *d = cb->dev;
    PHASE_T0(t_commit);
    rlx_status s = set_ctx(d);
    if (s) return s;
    pthread_mutex_lock(&d->mu);
    launch_all(cb);
    pthread_mutex_unlock(&d->mu);
    cb->state = CB_COMMITTED;
    PHASE_ADD(PH_COMMIT, t_commit);
    return RLX_OK;
}

static rlx_status cmd_wait(rlx_cmdbuf *cb, double *device_seconds) {
    ARG_CHECK(cb, "cmd_wait: command buffer is NULL");
    ARG_CHECK(cb->state == CB_COMMITTED, "cmd_wait: command buffer was not committed");
    if (!cb->waited) {
        rlx_device *d = cb->dev;
        PHASE_T0(t_sync);
        CUresult r = cu.cuCtxSetCurrent(d->ctx);
        if (r == CUDA_SUCCESS) r = cb->recorded ? cu.cuEventSynchronize(cb->ev1) : cu.cuStreamSynchronize(cb_stream(cb));
        PHASE_ADD(PH_SYNC, t_sync);
        PHASE_T0(t_elapsed);
        float ms = 0;
        if (r == CUDA_SUCCESS && cb->recorded && cu.cuEventElapsedTime(&ms, cb->ev0, cb->ev1) == CUDA_SUCCESS)
            cb->seconds = ms * 1e-3;
        PHASE_ADD(PH_ELAPSED, t_elapsed);
        if (r != CUDA_SUCCESS && cb->status == RLX_OK) {  /* an error of the kernels themselves */
            cb->status = RLX_ERR_DEVICE;
            snprintf(cb->error, sizeof cb->error, "the GPU reported %s (%d) while executing", cu_name(r), r);
        }
        for (size_t i = 0; cb->status == RLX_OK && i < cb->n_copies; ++i) {
            struct stage_copy *c = &cb->copies[i];
            if (!c->dst) continue;
            if (!c->direct) {
                pmc_copy(&d->copier, c->dst, cb->staging + c->at, c->size);
                continue;
            }
            const rlx_status s = buffer_read(c->buf, c->offset, c->dst, c->size);  /* cb's work is done */
            if (s != RLX_OK) cb->status = s, snprintf(cb->error, sizeof cb->error, "cmd_download: %s", last_error());
        }
        cb->waited = 1;
    }
    if (device_seconds) *device_seconds = cb->seconds;
    if (cb->status != RLX_OK) fail(cb->status, "cmd_wait: %s", cb->error);
    return cb->status;
}

static void cmd_release(rlx_cmdbuf *cb) {
    if (!cb) return;
    PHASE_T0(t_release);
    if (cb->state == CB_COMMITTED) cmd_wait(cb, NULL);
    rlx_device *d = cb->dev;
    cb->n = 0, cb->bytes_len = 0, cb->pipe = NULL, cb->bind_set = cb->bind_bytes = 0;
    cb->n_copies = 0, cb->staging_len = 0, cb->queue = NULL;
    cb->state = CB_RECORDING, cb->waited = cb->recorded = 0, cb->status = RLX_OK, cb->error[0] = 0;
    cb->seconds = 0;
    pthread_mutex_lock(&d->spare_mu);
    const int keep = d->n_spare < 8;
    if (keep) cb->next = d->spare, d->spare = cb, ++d->n_spare;
    pthread_mutex_unlock(&d->spare_mu);
    PHASE_ADD(PH_RELEASE, t_release);
    if (keep) return;
    if (set_ctx(d) == RLX_OK) {
        cu.cuEventDestroy(cb->ev0), cu.cuEventDestroy(cb->ev1);
        if (cb->scratch) cu.cuMemFree(cb->scratch);
        if (cb->staging) cu.cuMemFreeHost(cb->staging);
    }
    free(cb->cmds), free(cb->bytes), free(cb->copies), free(cb);
}

/* ---- copies that travel with a command buffer ------------------------------------------ */
/* One more copy record. */
static rlx_status copy_reserve(rlx_cmdbuf *cb) {
    if (cb->n_copies == cb->copies_cap) {
        const size_t cap = cb->copies_cap ? 2 * cb->copies_cap : 8;
        struct stage_copy *p = realloc(cb->copies, cap * sizeof *p);
        if (!p) return fail(RLX_ERR_OOM, "command buffer: out of memory");
        cb->copies = p, cb->copies_cap = cap;
    }
    return RLX_OK;
}

/* Room for size more staging bytes (16-aligned). */
static rlx_status stage_reserve(rlx_cmdbuf *cb, size_t size, size_t *at) {
    *at = (cb->staging_len + 15) & ~(size_t)15;
    if (*at + size > cb->staging_cap) {
        size_t cap = cb->staging_cap ? cb->staging_cap : 4096;
        while (cap < *at + size) cap *= 2;
        rlx_status s = set_ctx(cb->dev);
        if (s) return s;
        void *p = NULL;
        CU_CHECK(cu.cuMemAllocHost(&p, cap), "cuMemAllocHost (staging)");
        if (cb->staging_len) memcpy(p, cb->staging, cb->staging_len);
        if (cb->staging) cu.cuMemFreeHost(cb->staging);
        cb->staging = p, cb->staging_cap = cap;
    }
    cb->staging_len = *at + size;
    return RLX_OK;
}

/* Copies go through pinned staging, so they cost no synchronization of their
 * own; from 1 MiB the host side is split over several threads (one thread
 * copied at a third of the link's speed: BERT 32 x 128's 6.3 MB input and
 * output cost 0.5-0.8 ms more that way, and the driver's own pageable copy
 * 0.3-0.9 ms more, on the H200). Copies above staging_max go direct. */
static rlx_status cmd_upload(rlx_cmdbuf *cb, rlx_buffer *b, uint64_t offset, const void *src, uint64_t size) {
    CB_CHECK(cb, "cmd_upload");
    rlx_status s = check_copy("cmd_upload", b, offset, src, size);
    if (s) return s;
    rlx_device *d = cb->dev;
    ARG_CHECK(b->dev == d, "cmd_upload: buffer belongs to another device");
    if (!size || (s = copy_reserve(cb))) return s;
    if (size > d->staging_max) {
        /* In stream order, ahead of cb's commands (launched at commit); with a
         * pageable src the call returns once src has been read. */
        if ((s = set_ctx(d))) return s;
        pthread_mutex_lock(&d->mu);  /* no schedule capture is under way on the stream */
        const CUresult r = cu.cuMemcpyHtoDAsync(b->ptr + offset, src, size, cb_stream(cb));
        pthread_mutex_unlock(&d->mu);
        CU_CHECK(r, "cmd_upload (direct)");
        cb->copies[cb->n_copies++] = (struct stage_copy){b, offset, 0, size, NULL, 1};
        return RLX_OK;
    }
    size_t at;
    if ((s = stage_reserve(cb, size, &at))) return s;
    pmc_copy(&d->copier, cb->staging + at, src, size);
    cb->copies[cb->n_copies++] = (struct stage_copy){b, offset, at, size, NULL, 0};
    return RLX_OK;
}

static rlx_status cmd_download(rlx_cmdbuf *cb, const rlx_buffer *b, uint64_t offset, void *dst, uint64_t size) {
    CB_CHECK(cb, "cmd_download");
    rlx_status s = check_copy("cmd_download", b, offset, dst, size);
    if (s) return s;
    ARG_CHECK(b->dev == cb->dev, "cmd_download: buffer belongs to another device");
    if (!size || (s = copy_reserve(cb))) return s;
    const int direct = size > cb->dev->staging_max;  /* then read in cmd_wait */
    size_t at = 0;
    if (!direct && (s = stage_reserve(cb, size, &at))) return s;
    cb->copies[cb->n_copies++] = (struct stage_copy){b, offset, at, size, dst, direct};
    return RLX_OK;
}

/* ---- indirect command buffers ------------------------------------------------------------ */
static rlx_status icb_create(rlx_device *d, uint32_t capacity, rlx_icb **out) {
    ARG_CHECK(d && out, "icb_create: NULL argument");
    *out = NULL;
    ARG_CHECK(capacity >= 1, "icb_create: capacity must be >= 1");
    rlx_icb *icb = calloc(1, sizeof *icb);
    if (icb) icb->entries = calloc(capacity, sizeof *icb->entries);
    if (!icb || !icb->entries) {
        free(icb);
        return fail(RLX_ERR_OOM, "icb_create: out of memory");
    }
    icb->dev = d, icb->capacity = capacity;
    *out = icb;
    return RLX_OK;
}

static rlx_status icb_encode_dispatch(rlx_icb *icb, uint32_t index, rlx_pipeline *p, uint32_t n_bindings,
                                      rlx_buffer *const *buffers, const uint64_t *offsets, const uint32_t groups[3],
                                      const uint32_t threads[3], uint32_t barrier_before) {
    (void)barrier_before;  /* graph nodes form a chain: each runs after the previous one */
    ARG_CHECK(icb, "icb_encode_dispatch: icb is NULL");
    ARG_CHECK(index < icb->capacity, "icb_encode_dispatch: index %u >= capacity %u", index, icb->capacity);
    ARG_CHECK(p, "icb_encode_dispatch: pipeline is NULL");
    ARG_CHECK(p->lib->dev == icb->dev, "icb_encode_dispatch: pipeline belongs to another device");
    ARG_CHECK(p->flags & RLX_PIPELINE_INDIRECT, "icb_encode_dispatch: pipeline lacks RLX_PIPELINE_INDIRECT");
    ARG_CHECK(n_bindings <= RLX_MAX_BINDINGS, "icb_encode_dispatch: %u bindings > %u", n_bindings, RLX_MAX_BINDINGS);
    ARG_CHECK(n_bindings >= p->n_params, "icb_encode_dispatch: the kernel takes %u buffers, %u given", p->n_params,
              n_bindings);
    ARG_CHECK(n_bindings == 0 || (buffers && offsets), "icb_encode_dispatch: buffers or offsets is NULL");
    rlx_status s = check_grid(icb->dev, "icb_encode_dispatch", p, groups, threads);
    if (s) return s;
    icb_entry e = {.fn = p->fn};
    for (uint32_t i = 0; i < n_bindings; ++i) {
        if ((s = check_binding(icb->dev, "icb_encode_dispatch", i, buffers[i], offsets[i]))) return s;
        e.args[i] = buffers[i]->ptr + offsets[i];
    }
    for (int i = 0; i < 3; ++i) e.groups[i] = groups[i], e.threads[i] = threads ? threads[i] : 1;
    pthread_mutex_lock(&icb->dev->mu);  /* a commit on another thread may be reading entries */
    /* Versions come from one process-wide counter, so a new ICB that reuses a
     * freed one's address never matches a schedule graph captured from it. */
    e.version = icb->version = __atomic_add_fetch(&g_icb_version, 1, __ATOMIC_RELAXED);
    icb->entries[index] = e;
    pthread_mutex_unlock(&icb->dev->mu);
    return RLX_OK;
}

static void icb_free(rlx_icb *icb) {
    if (!icb) return;
    rlx_device *d = icb->dev;
    if (set_ctx(d) == RLX_OK) {
        for (int i = 0; i < icb->n_graphs; ++i)
            if (icb->graphs[i].exec) cu.cuGraphExecDestroy(icb->graphs[i].exec);
        pthread_mutex_lock(&d->mu);  /* schedule graphs that replay this ICB go with it */
        for (int i = 0; i < d->n_sched; ++i)
            for (size_t j = 0; j < d->sched[i].n; ++j)
                if (d->sched[i].cmds[j].kind == CMD_ICB && d->sched[i].cmds[j].icb == icb) {
                    sched_graph_clear(&d->sched[i]);
                    break;
                }
        pthread_mutex_unlock(&d->mu);
    }
    free(icb->entries), free(icb);
}

/* ---- queues --------------------------------------------------------------------------- */
static rlx_status queue_create(rlx_device *d, rlx_queue **out) {
    ARG_CHECK(d && out, "queue_create: NULL argument");
    *out = NULL;
    if (!d->queues)
        return fail(RLX_ERR_UNSUPPORTED, "queue_create: queues are off on this device (device option queues=1, "
                    "RLX_CUDA_QUEUES=1)");
    rlx_status s = set_ctx(d);
    if (s) return s;
    rlx_queue *q = calloc(1, sizeof *q);
    if (!q) return fail(RLX_ERR_OOM, "queue_create: out of memory");
    q->dev = d;
    CUresult r = cu.cuStreamCreate(&q->stream, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS && d->info.gemm_bias) r = cu.cuMemAlloc(&q->lt_workspace, LT_WORKSPACE);
    if (r != CUDA_SUCCESS) {
        if (q->stream) cu.cuStreamDestroy(q->stream);
        free(q);
        return cu_fail(r, "queue_create");
    }
    *out = q;
    return RLX_OK;
}

static void queue_free(rlx_queue *q) {
    if (!q || set_ctx(q->dev) != RLX_OK) return;
    cu.cuStreamSynchronize(q->stream);
    /* Schedule graphs captured from this queue's commands go with it: a new
     * queue at the same address must not replay them. */
    pthread_mutex_lock(&q->dev->mu);
    for (int i = 0; i < q->dev->n_sched; ++i)
        if (q->dev->sched[i].queue == q) sched_graph_clear(&q->dev->sched[i]);
    pthread_mutex_unlock(&q->dev->mu);
    cu.cuStreamDestroy(q->stream);
    if (q->lt_workspace) cu.cuMemFree(q->lt_workspace);
    free(q);
}

static rlx_status cmd_begin_on(rlx_queue *q, rlx_cmdbuf **out) {
    ARG_CHECK(q && out, "cmd_begin_on: NULL argument");
    rlx_status s = cmd_begin(q->dev, out);
    if (s == RLX_OK) (*out)->queue = q;
    return s;
}

RLX_DEFINE_SHIM_API("cuda")
