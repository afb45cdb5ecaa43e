"""fft_shared itself, built by nvcc from the library's flattened source
under compile-time variants (-D flags), each checked against torch.fft and
timed beside cuFFT in one process (issue 19). Seconds a variant, where
KERNEL_DEFINES through the shim rebuilds the whole kernel library through
NVRTC (~100 s): for choosing among forms; fft_variants.py then confirms the
chosen one through rlx itself.

    python3 benchmarks/gpu/fft_shared_bench.py OUT.json ["" "-DRLX_FFT_MIN_GROUPS=3" ...]

FFT_SIZES (default "256 1024 4096 64 2048") and FFT_SWIZZLE ("2 1": the
slot layouts, FftParams.swizzle; CUDA compiles the register form for 2
only, so 1 times the digit passes in the same process) pick the cases;
FFT_REGISTER_ONLY=1 also times the register form as a kernel of its own;
FFT_PARAMS_BY_VALUE=1 that kernel with its FftParams passed by value (a
__grid_constant__ parameter: constant-bank reads, not global ones);
FFT_REGISTER_FIXED=1 the register form of one length a kernel (no switch
over log2 N), its params by pointer and by value;
FFT_INVERSE=1 times the inverse transform (unscaled) instead. Lengths that
are not powers of two run the mixed-radix form (the lowering's passes and
grid for it; FFT_RADIX_ORDER=odd runs its odd radices first) in fft_mixed
(FFT_MIXED_THREADS: its threads a group instead of the lowering's, one
case each). A variant "old:PATH -D..." builds another fft.h (an earlier
commit's) beside the current one; one from before fft_mixed runs those
lengths in fft_shared.
Plain complex rows of 2^22 points a case, the lowering's grid
(rlx/lowering/fft.py shared_grid) for a 132-unit GPU; kernel time from CUDA
events around 200 back-to-back launches."""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import torch
from cuda_timing import back_to_back_ms  # benchmarks/gpu/cuda_timing.py (the script's own folder)

from rlx.lowering.fft import (
    MIXED_SHARED_MAX,
    SHARED_MAX,
    mixed_radices,
    mixed_span,
    shared_grid,
    transform_passes,
    twiddles,
)
from rlx.runtime.shader_source import kernel_source

LAUNCHER = r"""
// The last params made, for the launch that passes them by value.
static FftParams rlx_bench_host_params;
extern "C" int rlx_bench_params(void **dp, int n, int rows, int inverse, int group_rows, int swizzle, int radix,
                                int span, int passes) {
    FftParams h = {};
    h.n = n; h.rows = rows; h.radix = radix; h.span = span; h.passes = passes; h.inverse = inverse;
    h.src_row = 2 * n; h.src_step = 2; h.src_len = n;
    h.dst_row = 2 * n; h.dst_step = 2; h.dst_count = n;
    h.scale = 1.0f; h.group_rows = group_rows; h.swizzle = swizzle;
    rlx_bench_host_params = h;
    if (!*dp && cudaMalloc(dp, sizeof h) != cudaSuccess) return 1;
    return (int)cudaMemcpy(*dp, &h, sizeof h, cudaMemcpyHostToDevice);
}
extern "C" int rlx_bench_launch(const float *src, float *dst, const float *tw, const void *dp, int groups, int threads,
                                void *stream) {
    fft_shared<float><<<groups, threads, 0, (cudaStream_t)stream>>>(src, dst, tw, nullptr, nullptr,
                                                                    (const FftParams *)dp);
    return (int)cudaGetLastError();
}
// The register form alone (FFT_REGISTER_ONLY=1): its own kernel, its own
// register budget, none of fft_shared's other forms beside it.
extern "C" __global__ void __launch_bounds__(256, 3) fft_register_only(const float *src, float *dst, const float *tw,
                                                                       const FftParams *p) {
    __shared__ rlx_float2 sp[RLX_FFT_SHARED_PAIRS];
    const uint gr = p->group_rows, row0 = blockIdx.x * gr;
    const uint rows_here = p->rows - row0 < gr ? p->rows - row0 : gr;
    rlx_fft_register_form<2u>(p->span, src, dst, tw, tw, tw, p, sp, row0, rows_here, threadIdx.x, blockDim.x);
}
#ifdef RLX_FFT_MIXED_MAX   // fft.h from before fft_mixed (a variant "old:PATH") has none
extern "C" int rlx_bench_launch_mixed(const float *src, float *dst, const float *tw, const void *dp, int groups,
                                      int threads, void *stream) {
    fft_mixed<float><<<groups, threads, 0, (cudaStream_t)stream>>>(src, dst, tw, nullptr, nullptr,
                                                                   (const FftParams *)dp);
    return (int)cudaGetLastError();
}
#endif
extern "C" int rlx_bench_launch_register(const float *src, float *dst, const float *tw, const void *dp, int groups,
                                         int threads, void *stream) {
    fft_register_only<<<groups, threads, 0, (cudaStream_t)stream>>>(src, dst, tw, (const FftParams *)dp);
    return (int)cudaGetLastError();
}
// The register form alone with its params by value (FFT_PARAMS_BY_VALUE=1):
// a __grid_constant__ kernel parameter lives in the constant bank, so the
// params' reads are constant-cache hits where the library's pointer reads
// them from global memory, ahead of the row's first load and its stores.
extern "C" __global__ void __launch_bounds__(256, 3) fft_register_value(const float *src, float *dst, const float *tw,
                                                                        const __grid_constant__ FftParams pv) {
    __shared__ rlx_float2 sp[RLX_FFT_SHARED_PAIRS];
    const FftParams *p = &pv;
    const uint gr = p->group_rows, row0 = blockIdx.x * gr;
    const uint rows_here = p->rows - row0 < gr ? p->rows - row0 : gr;
    rlx_fft_register_form<2u>(p->span, src, dst, tw, tw, tw, p, sp, row0, rows_here, threadIdx.x, blockDim.x);
}
// The register form of one length a kernel (FFT_REGISTER_FIXED=1): no
// switch over log2 N and no other length's code, so the kernel's entry
// runs straight into its passes (session 38's stall samples: instruction
// fetch stalls at the entry, the switch and the jump into the passes).
template <uint BITS, bool BY_VALUE>
__global__ void __launch_bounds__(256, 3) fft_register_fixed(const float *src, float *dst, const float *tw,
                                                             const FftParams *pp,
                                                             const __grid_constant__ FftParams pv) {
    __shared__ rlx_float2 sp[RLX_FFT_SHARED_PAIRS];
    const FftParams *p = BY_VALUE ? &pv : pp;
    const uint gr = p->group_rows, row0 = blockIdx.x * gr;
    const uint rows_here = p->rows - row0 < gr ? p->rows - row0 : gr;
    rlx_fft_register_rows<BITS, 2u>(src, dst, tw, tw, tw, p, sp, row0, rows_here, threadIdx.x, blockDim.x);
}
template <bool BY_VALUE>
static int rlx_bench_fixed(const float *src, float *dst, const float *tw, const void *dp, int groups, int threads,
                           void *stream) {
    const FftParams h = rlx_bench_host_params;
    const FftParams *pp = (const FftParams *)dp;
    cudaStream_t st = (cudaStream_t)stream;
    switch (h.span) {
    case 6: fft_register_fixed<6u, BY_VALUE><<<groups, threads, 0, st>>>(src, dst, tw, pp, h); break;
    case 8: fft_register_fixed<8u, BY_VALUE><<<groups, threads, 0, st>>>(src, dst, tw, pp, h); break;
    case 9: fft_register_fixed<9u, BY_VALUE><<<groups, threads, 0, st>>>(src, dst, tw, pp, h); break;
    case 10: fft_register_fixed<10u, BY_VALUE><<<groups, threads, 0, st>>>(src, dst, tw, pp, h); break;
    case 11: fft_register_fixed<11u, BY_VALUE><<<groups, threads, 0, st>>>(src, dst, tw, pp, h); break;
    case 12: fft_register_fixed<12u, BY_VALUE><<<groups, threads, 0, st>>>(src, dst, tw, pp, h); break;
    default: return -1;
    }
    return (int)cudaGetLastError();
}
extern "C" int rlx_bench_launch_fixed(const float *src, float *dst, const float *tw, const void *dp, int groups,
                                      int threads, void *stream) {
    return rlx_bench_fixed<false>(src, dst, tw, dp, groups, threads, stream);
}
extern "C" int rlx_bench_launch_fixed_value(const float *src, float *dst, const float *tw, const void *dp,
                                            int groups, int threads, void *stream) {
    return rlx_bench_fixed<true>(src, dst, tw, dp, groups, threads, stream);
}
extern "C" int rlx_bench_launch_value(const float *src, float *dst, const float *tw, const void *, int groups,
                                      int threads, void *stream) {
    fft_register_value<<<groups, threads, 0, (cudaStream_t)stream>>>(src, dst, tw, rlx_bench_host_params);
    return (int)cudaGetLastError();
}
"""


def build(variant: str, tmp: str, i: int) -> tuple[str, str]:
    """A variant is -D flags, or "old:PATH -D..." for another fft.h (an
    earlier commit's, for an A/B in one process)."""
    header, defines = "fft.h", variant
    if variant.startswith("old:"):
        header, _, defines = variant[4:].partition(" ")
        header = os.path.abspath(header)
    src = os.path.join(tmp, f"v{i}.cu")
    with open(src, "w") as f:
        f.write(kernel_source("cuda", f'#include "{header}"\n') + LAUNCHER)
    out = os.path.join(tmp, f"v{i}.so")
    cmd = ["nvcc", "-O3", "-std=c++17", "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC", "-Xptxas", "-v",
           *defines.split(), src, "-o", out]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(res.stderr[-2000:])
    return out, kernel_usage(res.stderr)


def kernel_usage(ptxas_log: str) -> dict[str, str]:
    """ptxas -v's registers and stack per kernel of this file (by the
    kernel's name in its mangled entry name)."""
    usage: dict[str, list[str]] = {}
    entry = ""
    for line in ptxas_log.splitlines():
        if "entry function" in line:
            entry = next((k for k in ("fft_register_only", "fft_mixed", "fft_shared") if k in line), "")
        elif entry and ("Used" in line or "stack frame" in line):
            usage.setdefault(entry, []).append(line.strip())
    return {k: " | ".join(v) for k, v in usage.items()}


def grid(n: int, rows: int, units: int, capacity: int) -> tuple[int, int, int]:
    """The lowering's grid for a CUDA GPU of `units` SMs: (groups, threads, rows a group)."""
    target = SimpleNamespace(one_thread_groups=False, compute_units=units, simd_width=32, max_threads_per_group=1024)
    ((groups, _, _), (threads, _, _)), group_rows = shared_grid(target, rows, n, capacity)
    return groups, threads, group_rows


def mixed_capacity(defines: str) -> int:
    """fft_mixed's points a half under `defines` (-DRLX_FFT_MIXED_MAX=...)."""
    for d in defines.split():
        if d.startswith("-DRLX_FFT_MIXED_MAX="):
            return int(d.split("=", 1)[1].rstrip("u"))
    return MIXED_SHARED_MAX


def main() -> None:
    out_path = sys.argv[1]
    variants = sys.argv[2:] or [""]
    inverse = int(os.environ.get("FFT_INVERSE", "0"))
    units = torch.cuda.get_device_properties(0).multi_processor_count
    stream = torch.cuda.current_stream().cuda_stream
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(8) as pool:
        built = list(pool.map(lambda a: build(a[1], tmp, a[0]), enumerate(variants)))
        rows_out, cufft = [], {}
        for defines, (so, usage) in zip(variants, built):
            lib = ctypes.CDLL(so)
            lib.rlx_bench_params.argtypes = [ctypes.POINTER(ctypes.c_void_p)] + [ctypes.c_int] * 8
            lib.rlx_bench_launch.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 2 + [ctypes.c_void_p]
            for n in [int(v) for v in os.environ.get("FFT_SIZES", "256 1024 4096 64 2048").split()]:
                rows = (1 << 22) // n   # about 2^22 points
                torch.manual_seed(n)
                x = torch.randn(rows, n, dtype=torch.complex64, device="cuda")
                y = torch.empty_like(x)
                tw = torch.from_numpy(twiddles(n)).cuda()   # the lowering's table (the register form's runs too)
                (form,) = transform_passes(n, bool(inverse))   # fft_shared's one dispatch
                if form.radix == 1 and os.environ.get("FFT_RADIX_ORDER") == "odd":   # 5s and 3s, then 4s and 2
                    radices = sorted(mixed_radices(n, True), key=lambda r: r % 2 == 0)
                    form = dataclasses.replace(form, span=mixed_span(radices))
                # (kernel, launch, grid): fft_shared's power-of-two forms (the
                # register form alone too where asked), fft_mixed for the
                # mixed-radix lengths, or fft_shared's mixed form in an fft.h
                # from before fft_mixed.
                if form.radix == 0:
                    kernels = [("fft_shared", lib.rlx_bench_launch, grid(n, rows, units, SHARED_MAX))]
                elif not hasattr(lib, "rlx_bench_launch_mixed"):
                    kernels = [("fft_shared", lib.rlx_bench_launch, grid(n, rows, units, MIXED_SHARED_MAX))]
                else:
                    groups, threads, group_rows = grid(n, rows, units, mixed_capacity(defines))
                    kernels = [("fft_mixed", lib.rlx_bench_launch_mixed, (groups, int(t), group_rows))
                               for t in os.environ.get("FFT_MIXED_THREADS", str(threads)).split()]
                for swizzle in [int(v) for v in os.environ.get("FFT_SWIZZLE", "2 1").split()]:
                    cases = list(kernels)
                    if swizzle == 2 and form.radix == 0 and os.environ.get("FFT_REGISTER_ONLY") == "1":
                        cases.append(("fft_register_only", lib.rlx_bench_launch_register, kernels[0][2]))
                    if swizzle == 2 and form.radix == 0 and os.environ.get("FFT_PARAMS_BY_VALUE") == "1":
                        cases.append(("fft_register_value", lib.rlx_bench_launch_value, kernels[0][2]))
                    if swizzle == 2 and form.radix == 0 and os.environ.get("FFT_REGISTER_FIXED") == "1":
                        cases.append(("fft_register_fixed", lib.rlx_bench_launch_fixed, kernels[0][2]))
                        cases.append(("fft_register_fixed_value", lib.rlx_bench_launch_fixed_value, kernels[0][2]))
                    for kernel, launch, (groups, threads, group_rows) in cases:
                        launch.argtypes = lib.rlx_bench_launch.argtypes
                        dp = ctypes.c_void_p()
                        assert lib.rlx_bench_params(ctypes.byref(dp), n, rows, inverse, group_rows, swizzle,
                                                    form.radix, form.span, form.count) == 0

                        def run(launch=launch, dp=dp, x=x, y=y, tw=tw, groups=groups, threads=threads):
                            assert launch(x.data_ptr(), y.data_ptr(), tw.data_ptr(), dp, groups, threads,
                                          stream) == 0

                        y.zero_()
                        run()
                        want = torch.fft.ifft(x, norm="forward") if inverse else torch.fft.fft(x)
                        err = float((y - want).abs().max() / want.abs().max())
                        ms = back_to_back_ms(run)
                        if n not in cufft:
                            cufft[n] = back_to_back_ms(lambda x=x: torch.fft.fft(x))
                        row = {"defines": defines, "kernel": kernel, "inverse": inverse,
                               "usage": usage.get(kernel, ""), "n": n, "swizzle": swizzle, "threads": threads,
                               "group_rows": group_rows, "rows": rows, "rel_err": err, "us": round(ms * 1e3, 2),
                               "cufft_us": round(cufft[n] * 1e3, 2), "ratio": round(ms / cufft[n], 3)}
                        print(json.dumps(row), flush=True)
                        rows_out.append(row)
    with open(out_path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows_out}, f,
                  indent=1)


if __name__ == "__main__":
    main()
