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

template <int MODE>  // 0: plain, 1: wait, 2: wait + early trigger
__global__ void add(float *x, const float *b, int n) {
    if (MODE >= 1) asm volatile("griddepcontrol.wait;" ::: "memory");
    if (MODE == 2) asm volatile("griddepcontrol.launch_dependents;");
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += b[i];
}

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
        cudaLaunchKernelEx(&cfg, add<MODE>, x, (const float *)b, 16);
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
    for (int r = 0; r < 300; r++) {
        auto t0 = std::chrono::steady_clock::now();
        cudaGraphLaunch(e, s);
        cudaStreamSynchronize(s);
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
    for (int nodes : {1, 65}) {
        printf("{\"nodes\": %d, \"plain_us\": %.2f, \"pdl_wait_us\": %.2f, \"pdl_wait_trigger_us\": %.2f,"
               " \"plain_kernel_wait_no_pdl_us\": %.2f}\n",
               nodes, replay_us<0>(x, b, false, nodes), replay_us<1>(x, b, true, nodes),
               replay_us<2>(x, b, true, nodes), replay_us<1>(x, b, false, nodes));
    }
    printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
