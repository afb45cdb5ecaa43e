// Does programmatic dependent launch (PDL) shorten a CUDA graph of tiny
// dependent kernels? 65 adds of 16 floats, replayed and synchronized, as a
// plain graph and as a graph captured with programmatic stream serialization
// (each kernel waits on griddepcontrol before touching memory).
// Build + run on the H200:  nvcc -O2 -arch=sm_90 pdl_probe.cu -o /tmp/pdl && /tmp/pdl
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

// 0: plain, 1: wait, 2: wait + early trigger, 3: as 2 with n read from device memory,
// 4: trigger, then wait (the prelude's order now), 5: as 4 with n read from device memory
template <int MODE>
__global__ void add(float *x, const float *b, int n, const int *n_dev) {
    if (MODE == 3 || MODE == 5) n = *n_dev;     // rlx kernels read their params struct like this
    if (MODE >= 4) asm volatile("griddepcontrol.launch_dependents;");
    if (MODE >= 1) asm volatile("griddepcontrol.wait;" ::: "memory");
    if (MODE == 2 || MODE == 3) asm volatile("griddepcontrol.launch_dependents;");
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += b[i];
}

static int *g_n_dev;
static float *g_pinned;
enum { EXTRA_NONE = 0, EXTRA_EVENTS = 1, EXTRA_EVENTS_COPIES = 2 };
static int g_extra = EXTRA_NONE;

template <int MODE>
double replay_us(float *x, float *b, bool pdl, int nodes) {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaGraph_t g;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
    for (int i = 0; i < nodes; i++) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(1);
        cfg.blockDim = dim3(32);
        cfg.stream = s;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = pdl ? 1 : 0;
        cudaLaunchKernelEx(&cfg, add<MODE>, x, (const float *)b, 16, (const int *)g_n_dev);
    }
    cudaStreamEndCapture(s, &g);
    cudaGraphExec_t e;
    if (cudaGraphInstantiate(&e, g, 0) != cudaSuccess) { printf("instantiate failed\n"); return -1; }
    cudaMemset(x, 0, 64);
    cudaGraphLaunch(e, s);
    cudaStreamSynchronize(s);
    float h[16];
    cudaMemcpy(h, x, 64, cudaMemcpyDeviceToHost);
    if (h[0] != (float)nodes) printf("WRONG: %f\n", h[0]);
    std::vector<double> t;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int r = 0; r < 300; r++) {
        auto t0 = std::chrono::steady_clock::now();
        if (g_extra == EXTRA_NONE) {
            cudaGraphLaunch(e, s);
            cudaStreamSynchronize(s);
        } else {   // what an rlx run adds: timing events, and a 64-byte copy in and out (pinned)
            cudaEventRecord(e0, s);
            if (g_extra == EXTRA_EVENTS_COPIES) cudaMemcpyAsync(x, g_pinned, 64, cudaMemcpyHostToDevice, s);
            cudaGraphLaunch(e, s);
            if (g_extra == EXTRA_EVENTS_COPIES) cudaMemcpyAsync(g_pinned + 16, x, 64, cudaMemcpyDeviceToHost, s);
            cudaEventRecord(e1, s);
            cudaEventSynchronize(e1);
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
        }
        t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main() {
    float *x, *b;
    cudaMalloc(&x, 64);
    cudaMalloc(&b, 64);
    float ones[16];
    for (float &v : ones) v = 1.0f;
    cudaMemcpy(b, ones, 64, cudaMemcpyHostToDevice);
    cudaMalloc(&g_n_dev, sizeof(int));
    int sixteen = 16;
    cudaMemcpy(g_n_dev, &sixteen, sizeof(int), cudaMemcpyHostToDevice);
    cudaMallocHost(&g_pinned, 128);
    for (int extra : {EXTRA_EVENTS, EXTRA_EVENTS_COPIES}) {
        g_extra = extra;
        printf("{\"nodes\": 65, \"extra\": \"%s\", \"pdl_wait_trigger_us\": %.2f, \"params_from_memory_us\": %.2f,"
               " \"trigger_then_wait_us\": %.2f, \"trigger_then_wait_params_from_memory_us\": %.2f}\n",
               extra == EXTRA_EVENTS ? "events" : "events+copies", replay_us<2>(x, b, true, 65),
               replay_us<3>(x, b, true, 65), replay_us<4>(x, b, true, 65), replay_us<5>(x, b, true, 65));
    }
    g_extra = EXTRA_NONE;
    printf("{\"nodes\": 65, \"extra\": \"none\", \"params_from_memory_us\": %.2f}\n", replay_us<3>(x, b, true, 65));
    for (int nodes : {1, 65}) {
        printf("{\"nodes\": %d, \"plain_us\": %.2f, \"pdl_wait_us\": %.2f, \"pdl_wait_trigger_us\": %.2f,"
               " \"trigger_then_wait_us\": %.2f, \"plain_kernel_wait_no_pdl_us\": %.2f}\n",
               nodes, replay_us<0>(x, b, false, nodes), replay_us<1>(x, b, true, nodes),
               replay_us<2>(x, b, true, nodes), replay_us<4>(x, b, true, nodes), replay_us<1>(x, b, false, nodes));
    }
    printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
