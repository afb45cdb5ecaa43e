// One-thread timing of the host gemm's packed small-M form
// (csrc/host_small_m_packed_body.h) with its weights hot (one B, reused)
// and cold (24 different B in turn, 24 x n x k floats: more than L2, as a
// model's linears are in a run), and the same tile over weights packed
// ahead of time (what packing at plan time would give). AVX-512 only.
//
// Build and run: g++ -O3 -std=c++17 -Icsrc benchmarks/packed_gemm_cold.cpp -o /tmp/packed_gemm_cold
//                /tmp/packed_gemm_cold
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "host_small_m.h"

namespace sm = rlx_small_m::avx512;

// C = A . B^T from B packed ahead of time: panel j0 / kPackCols holds
// [k][kPackCols] (n a multiple of kPackCols).
static void from_prepacked(int64_t m, int64_t n, int64_t k, const float *A, const float *packed, float *C) {
    for (int64_t j0 = 0; j0 < n; j0 += sm::kPackCols)
        for (int64_t p0 = 0; p0 < k; p0 += sm::kPackK) {
            const int64_t kl = k - p0 < sm::kPackK ? k - p0 : sm::kPackK;
            const float *slice = packed + j0 * k + p0 * sm::kPackCols;
            for (int64_t i0 = 0; i0 < m; i0 += sm::kPackRows)
                sm::packed_tile<sm::kPackRows>(kl, 1.0f, A + i0 * k + p0, k, slice, p0 == 0 ? 0.0f : 1.0f,
                                               C + i0 * n + j0, n, sm::kPackCols);
        }
}

int main() {
    if (!__builtin_cpu_supports("avx512f")) {
        std::puts("no AVX-512 on this CPU");
        return 0;
    }
    const int shapes[][3] = {{128, 384, 1536}, {128, 1536, 384}, {128, 384, 384}};
    const int kWeights = 24;
    for (const auto &s : shapes) {
        const int64_t m = s[0], n = s[1], k = s[2];
        std::vector<float> A(m * k, 0.01f), C(m * n);
        std::vector<std::vector<float>> B(kWeights, std::vector<float>(n * k)), P(kWeights, std::vector<float>(n * k));
        for (int w = 0; w < kWeights; ++w)
            for (int64_t j = 0; j < n; ++j)
                for (int64_t p = 0; p < k; ++p) {
                    B[w][j * k + p] = (float)std::rand() / RAND_MAX;
                    P[w][(j / sm::kPackCols) * sm::kPackCols * k + p * sm::kPackCols + j % sm::kPackCols] = B[w][j * k + p];
                }
        for (int form = 0; form < 2; ++form)
            for (int cold = 0; cold < 2; ++cold) {
                double seconds = 0.0;
                int runs = 0;
                for (int round = 0; round < 5; ++round)
                    for (int w = 0; w < kWeights; ++w) {
                        const int which = cold ? w : 0;
                        const auto t0 = std::chrono::steady_clock::now();
                        if (form == 0)
                            sm::packed_columns(m, 0, n, k, 1.0f, A.data(), k, B[which].data(), k, 0.0f, C.data(), n);
                        else
                            from_prepacked(m, n, k, A.data(), P[which].data(), C.data());
                        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                        if (round > 0) seconds += dt, ++runs;   // round 0 warms up
                    }
                std::printf("%4lld x %5lld x %5lld  %-22s %-5s %6.1f GFLOP/s\n", (long long)m, (long long)n,
                            (long long)k, form ? "packed ahead of time" : "packed per call", cold ? "cold" : "hot",
                            2.0 * m * n * k / (seconds / runs) / 1e9);
            }
    }
}
