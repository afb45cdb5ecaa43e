/* The CUDA declarations, phase times, errors, small helpers and the loading of the
 * driver, NVRTC, cuBLAS and cuBLASLt.
 * A part of the CUDA shim: csrc/cuda/shim.c includes it (one translation unit, every
 * function static); it is not compiled on its own. */

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
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14, CUDA_R_8F_E4M3 = 28,
       CUDA_R_8F_E5M2 = 29, CUBLAS_COMPUTE_32F = 68, CUBLAS_GEMM_DEFAULT = -1 };

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

/* cuBLASLt, for gemms with a bias epilogue and FP8 gemms (cublasLt.h values). */
enum {
    LT_DESC_TRANSA = 3, LT_DESC_TRANSB = 4, LT_DESC_EPILOGUE = 7, LT_DESC_BIAS_POINTER = 8,
    LT_DESC_A_SCALE_POINTER = 17, LT_DESC_B_SCALE_POINTER = 18,
    LT_DESC_BIAS_DATA_TYPE = 26, LT_DESC_A_SCALE_MODE = 31, LT_DESC_B_SCALE_MODE = 32,
    LT_SCALE_OUTER_VEC_32F = 3 /* cublasLtMatmulMatrixScale_t */, LT_EPILOGUE_BIAS = 4, LT_PREF_MAX_WORKSPACE_BYTES = 1,
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
enum { PH_BEGIN, PH_EXECUTE_ICB, PH_EXECUTE_SCHEDULE, PH_LAUNCH, PH_COMMIT, PH_SYNC, PH_ELAPSED, PH_RELEASE,
       PH_SCHEDULE_GRAPH, PH_SCHEDULE_UNCAPTURED, PH_N };
static const char *const g_phase_names[PH_N] = {"cmd_begin", "cmd_execute_icb", "cmd_execute_schedule", "event+launch+event",
                                                "cmd_commit (all)", "event sync", "elapsed time", "cmd_release",
                                                "schedule graph launch", "schedule, uncaptured"};
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

/* FP8 matmuls came with cuBLAS 11.11 (CUDA 11.8); cublasLtGetVersion gives
 * major * 10000 + minor * 100 + patch. Looked up on its own (not in the
 * table) so an unexpected library only loses FP8, not cuBLASLt. */
#define LT_FP8_MIN_VERSION 111100u
static int cublaslt_has_fp8(void) {
    if (!lt_api.loaded) return 0;
    void *h = dlopen(lt_api.path, RTLD_NOW | RTLD_NOLOAD);
    size_t (*version)(void) = h ? (size_t (*)(void))dlsym(h, "cublasLtGetVersion") : NULL;
    const int ok = version && version() >= LT_FP8_MIN_VERSION;
    if (h) dlclose(h);   /* drops the reference NOLOAD took; the loader's own stays */
    return ok;
}
