"""One-line-a-row summaries of the H200 scripts' JSON for the call's summary
file (the run_session*.sh scripts pipe them through tee):

    python3 benchmarks/gpu/summaries.py fft-breakdown OUT.json   # fft_breakdown.py's rows
    python3 benchmarks/gpu/summaries.py gemv-trace OUT.json      # quant_gemv_cuda.py with KERNEL_TRACE=1
    python3 benchmarks/gpu/summaries.py fp8-gemm OUT.json        # fp8_gemm_cuda.py's products
    ... | python3 benchmarks/gpu/summaries.py fft-cuda           # fft_cuda.py's JSON lines on stdin
    ... | python3 benchmarks/gpu/summaries.py fft-shared         # fft_shared_bench.py's lines on stdin"""

from __future__ import annotations

import json
import sys


def fft_breakdown(path: str) -> None:
    for r in json.load(open(path))["rows"]:
        print(r["case"], {k: round(v, 4) for k, v in r.items() if isinstance(v, float)})
        for side in ("rlx_kernels", "torch_graph_kernels", "cufft_graph_kernels"):
            if side in r:
                t = r[side]
                print("  ", side, t["kernel_us_per_run"], "us", t["kernels_per_run"], "kernels:",
                      [(n[:24], us) for n, us, _ in t["by_kernel"][:8]])
        for p in r.get("per_thunk", []):
            print("   thunk", p["kernel"], p["run_one_us"], p["thunk"][:60])


def fft_cuda() -> None:
    for line in sys.stdin:
        if line.startswith("{"):
            r = json.loads(line)
            print(r.get("op"), r.get("n", r.get("batch")), r.get("correct"), r.get("rlx_kernels"),
                  {k: round(v, 4) for k, v in r.items() if k.endswith("_ms") or "_over_" in k})


def fft_shared() -> None:
    """fft_shared_bench.py's JSON lines a line each; its other output as is."""
    for line in sys.stdin:
        try:
            r = json.loads(line)
        except ValueError:
            print(line.rstrip()[:200])
            continue
        print(r["defines"] or "default", "inv" if r.get("inverse") else "fwd", r["kernel"], r["n"], r["us"], "cufft",
              r["cufft_us"], "ratio", r["ratio"], f"{r['rel_err']:.1e}", f"t{r.get('threads')}",
              f"gr{r.get('group_rows')}", r["usage"][:60])


def gemv_trace(path: str) -> None:
    for r in json.load(open(path))["rows"]:
        if "kernel_trace_error" in r:
            print(r["format"], r["shape"], "trace error:", r["kernel_trace_error"][-600:])
            continue
        print(r["format"], r["shape"], r["correct"], "events: rlx", round(r["rlx_gemv_us"], 1), "copy",
              round(r["copy_us"], 1), "torch", round(r["torch_bf16_graph_us"], 1), "| kernels: rlx",
              round(r.get("kernel_rlx_gemv_us", 0), 2), "copy", round(r.get("kernel_copy_us", 0), 2), "torch",
              round(r.get("kernel_torch_us", 0), 2), "frac", round(r.get("kernel_fraction_of_copy", 0), 3),
              "ratio", round(r.get("kernel_rlx_over_torch", 0), 3))


def splat_kernels(path: str) -> None:
    """splat_kernels.py's rows: the device frame, then each kernel's us a frame and launches."""
    for r in json.load(open(path))["rows"]:
        k = r["kernels"]
        print(r["gaussians"], "pairs", r["pairs"], "device frame ms", round(r["device_frame_ms"], 3), "kernels us",
              k["kernel_us_per_run"], "launches", k["kernels_per_run"])
        for name, us, n in k["by_kernel"]:
            print("  ", round(us, 1), n, name[:60])


def fp8_gemm(path: str) -> None:
    """fp8_gemm_cuda.py's rows: rlx (thunks summed, the product replayed, its
    kernels) beside torch._scaled_mm (graph replay, kernels), and the ratios."""
    d = json.load(open(path))
    print("gpu", d["gpu"], "torch", d["torch"])

    def r2(v):
        return round(v, 2) if isinstance(v, float) else v

    for r in d["rows"]:
        print(r["shape"], r.get("path"), "ok", r.get("correct"), "| thunks", r2(r.get("rlx_us")),
              "replay", r2(r.get("rlx_replay_us")), "kernels", r2(r.get("kernel_rlx_us")),
              "| torch tw graph", r2(r.get("torch_scaled_mm_tensorwise_us")),
              "kernels", r2(r.get("kernel_torch_scaled_mm_tensorwise_us")),
              "| rw graph", r2(r.get("torch_scaled_mm_rowwise_us")),
              "kernels", r2(r.get("kernel_torch_scaled_mm_rowwise_us")),
              "| replay/tw", r2(r.get("replay_rlx_over_torch_tensorwise")),
              "kernel/tw", r2(r.get("kernel_rlx_over_torch_tensorwise")),
              "kernel/rw", r2(r.get("kernel_rlx_over_torch_rowwise")), r.get("rlx_error", "")[-200:])
        tw = r.get("tensorwise", {})
        print("   tensorwise rlx", tw.get("path"), "ok", tw.get("correct"), "replay", r2(tw.get("rlx_replay_us")),
              "kernels", r2(tw.get("kernel_rlx_us")), "| replay/tw", r2(r.get("replay_tw_rlx_over_torch")),
              "kernel/tw", r2(r.get("kernel_tw_rlx_over_torch")), tw.get("rlx_error", "")[-200:])


if __name__ == "__main__":
    what, *args = sys.argv[1:]
    summaries = {"fft-breakdown": fft_breakdown, "fft-cuda": fft_cuda, "fft-shared": fft_shared,
                 "gemv-trace": gemv_trace, "splat-kernels": splat_kernels, "fp8-gemm": fp8_gemm}
    summaries[what](*args)
