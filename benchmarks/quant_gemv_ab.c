// A/B of one host quantized GEMV kernel in two builds of librlx_host.so,
// called directly (no graph, no pool, one thread): each build's kernel
// runs the same weights and x in turn, 400 times, and the fastest run of
// each is kept, in TSC cycles a weight row, with the largest difference of
// their outputs. For kernel changes smaller than the shared VM's drift
// between two benchmark processes (benchmarks/README.md, "CPU, session 50").
// The blocks are random bytes with small f16 scales where the format keeps
// them: at offset 0 for the 32-element formats (q4_0, q5_0, q8_0:
// BLOCK_BYTES 18, 22, 34); d and dmin at 0 and 2 for q4_k / q5_k (144,
// 176), d at 208 for q6_k (210), d and dmin at 80 and 82 for q2_k (84), d
// at 108 for q3_k (110): those are blocks of 256 elements.
//
// Control first: OLD.so against a copy of itself (another path, so that it
// loads twice) must time equal. In session 51 the second library loaded ran
// 11-14% slower whichever it was, until the kernels' per-thread x scratch
// (csrc/host_heap_buffer.h) started on a 64-byte line: with malloc's
// alignment its vectors straddled cache lines wherever it happened to land.
//
// Build: gcc -O2 -mf16c benchmarks/quant_gemv_ab.c -o /tmp/quant_gemv_ab -ldl
// Run:   /tmp/quant_gemv_ab OLD.so NEW.so rlx_k_gemv1_q5_0_f32__avx512vnni N K BLOCK_BYTES [COPIES]
//        (COPIES distinct weight matrices a timed run: 8 of 1024 x 640 q5_0 are 3.6 MB, past L2)
#include <dlfcn.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

typedef struct { unsigned x, y, z; } uint3;
// shaders/prelude/cpu.h's rlx_cpu_ctx and shaders/quant.h's QuantGemvParams.
typedef struct { void *buffers[12]; uint3 group_id, num_groups; uint64_t dispatch; } ctx_t;
typedef struct {
    unsigned m, n, k, x_stride, y_stride, rows_per_group, has_bias, act;
    unsigned x_glu, gate_offset, up_offset, x_norm, o_offset, resid_offset;
    float eps, next_eps;
    unsigned add_one, next_add_one, pad0, pad1;
} params_t;
typedef void (*kernel_t)(const ctx_t *);

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: %s OLD.so NEW.so SYMBOL N K BLOCK_BYTES [COPIES]\n", argv[0]);
        return 2;
    }
    const char *symbol = argv[3];
    const unsigned n = (unsigned)atoi(argv[4]), k = (unsigned)atoi(argv[5]), block_bytes = (unsigned)atoi(argv[6]);
    const unsigned copies = argc > 7 ? (unsigned)atoi(argv[7]) : 1u;
    kernel_t kernel[2];
    for (int i = 0; i < 2; ++i) {
        void *lib = dlopen(argv[1 + i], RTLD_NOW | RTLD_LOCAL);
        if (!lib || !(kernel[i] = (kernel_t)dlsym(lib, symbol))) {
            fprintf(stderr, "%s: %s\n", argv[1 + i], lib ? "no such kernel" : dlerror());
            return 1;
        }
    }
    // f16 scale offsets of the K-quants' 256-element blocks (-1: none).
    int scale_at[2] = {0, -1};
    unsigned block_elems = 32u;
    switch (block_bytes) {
        case 144: case 176: scale_at[1] = 2; block_elems = 256u; break;
        case 210: scale_at[0] = 208; block_elems = 256u; break;
        case 84: scale_at[0] = 80, scale_at[1] = 82; block_elems = 256u; break;
        case 110: scale_at[0] = 108; block_elems = 256u; break;
        default: break;
    }
    const size_t row_bytes = (size_t)(k / block_elems) * block_bytes, matrix = row_bytes * n;
    uint8_t *w = aligned_alloc(64, (matrix * copies + 63) / 64 * 64 + 64);
    srand(1);
    for (size_t b = 0; b < matrix * copies / block_bytes; ++b) {
        uint8_t *blk = w + b * block_bytes;
        for (unsigned t = 0; t < block_bytes; ++t) blk[t] = (uint8_t)rand();
        for (int s = 0; s < 2; ++s) {
            if (scale_at[s] < 0) continue;
            const uint16_t d = _cvtss_sh(0.01f + (float)(rand() % 100) * 1e-4f, 0);
            memcpy(blk + scale_at[s], &d, sizeof d);
        }
    }
    float *x = malloc(k * sizeof(float)), *y[2] = {malloc(n * sizeof(float)), malloc(n * sizeof(float))};
    for (unsigned i = 0; i < k; ++i) x[i] = (float)((rand() % 2001) - 1000) * 1e-3f;
    params_t p = {0};
    p.m = 1, p.n = n, p.k = k, p.x_stride = k, p.y_stride = n, p.rows_per_group = n;
    uint64_t best[2] = {UINT64_MAX, UINT64_MAX}, dispatch = 1;
    for (int rep = 0; rep < 400; ++rep)
        for (int v = 0; v < 2; ++v) {
            ctx_t c = {0};
            c.buffers[0] = x, c.buffers[2] = y[v], c.buffers[4] = &p;
            c.num_groups.x = c.num_groups.y = c.num_groups.z = 1;
            const uint64_t t0 = __rdtsc();
            for (unsigned i = 0; i < copies; ++i) {
                c.buffers[1] = w + i * matrix;
                c.dispatch = dispatch++;   // a new dispatch: the kernel converts x again, as in a decode step
                kernel[v](&c);
            }
            const uint64_t t = __rdtsc() - t0;
            if (t < best[v]) best[v] = t;
        }
    float diff = 0.0f;
    for (unsigned j = 0; j < n; ++j) {
        const float e = y[0][j] > y[1][j] ? y[0][j] - y[1][j] : y[1][j] - y[0][j];
        if (e > diff) diff = e;
    }
    const double rows = (double)n * copies;
    printf("%s %u x %u, %u matrices: old %.1f, new %.1f TSC cycles a row (new / old %.3f), max |y_old - y_new| %.2e\n",
           symbol, n, k, copies, (double)best[0] / rows, (double)best[1] / rows, (double)best[1] / (double)best[0],
           (double)diff);
    return 0;
}
