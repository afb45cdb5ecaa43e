"""Decode GEMV from GGUF blocks on an NVIDIA GPU (issue 17): for Q4_K,
Q5_0, Q6_K and Q8_0 on a 4096 x 4096 and a 262144 x 640 weight (and the
Gemma 3 decode step's 1024 x 640 and 640 x 2048 unless SMALL=0), rlx's
gemv1_<fmt>_f32 thunk alone (device time from the shim's CUDA events,
Program.run_one), against the device's copy bandwidth (torch copy_ of the
same bytes, CUDA events) and PyTorch's best at the same product: a bf16
GEMV on the dequantized weights, replayed from a CUDA graph. The rlx result
is checked against the float64 product first. Writes JSON (argv[1]).

Run on the H200:  PYTHONPATH=$PWD python3 benchmarks/gpu/quant_gemv_cuda.py OUT.json"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np
import torch
from cuda_timing import bare_replay, events_ms, kernel_table  # benchmarks/gpu/cuda_timing.py (the script's own folder)
from kernel_defines import apply_kernel_defines  # benchmarks/gpu/kernel_defines.py
from results import emit  # benchmarks/gpu/results.py

import rlx
from rlx.ir.dtype import quantized
from rlx.reference.blocks import dequantize_values

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "ops"))
from quant_helpers import large_weight, whole_blocks  # noqa: E402  (tests/ops/quant_helpers.py)

FORMATS = os.environ.get("FORMATS", "q4_k q5_0 q6_k q8_0").split()   # FORMATS=q4_k: one (a profile)
SHAPES = [(4096, 4096), (262144, 640), (1024, 640), (640, 2048)]   # the last two: decode-step sizes
SHAPES = SHAPES if os.environ.get("SMALL", "1") == "1" else SHAPES[:2]
REPS = 50


def _events_ms(fn, reps: int = REPS) -> float:
    return events_ms(fn, reps)


def _kernel_durations(exe, dst, src, graph) -> dict:
    """KERNEL_TRACE=1: the three kernels' own durations as CUPTI records
    them (torch.profiler): rlx's GEMV inside a replay of its executable with
    no copies, the copy, and PyTorch's GEMV inside its graph. Event-timed
    single launches (the columns above) carry each launch's round trip,
    which at 4096 x 4096 is most of the time."""
    bare = bare_replay(exe)
    rlx_table = kernel_table(lambda: bare.run([], []))
    copy_table = kernel_table(lambda: dst.copy_(src))
    torch_table = kernel_table(graph.replay)
    gemv = sum(us for name, us, _ in rlx_table["by_kernel"] if "gemv" in name)   # CUPTI: "void gemv1_q<...>"
    copy = copy_table["kernel_us_per_run"]
    torch_k = torch_table["kernel_us_per_run"]
    return {"kernel_rlx_gemv_us": gemv, "kernel_copy_us": copy, "kernel_torch_us": torch_k,
            "kernel_fraction_of_copy": copy / gemv, "kernel_rlx_over_torch": gemv / torch_k,
            "kernel_tables": {"rlx": rlx_table, "copy": copy_table, "torch": torch_table}}


def main(out_path: str | None) -> None:
    defines = apply_kernel_defines()   # KERNEL_DEFINES: a kernel variant (an A/B in one call)
    cap = int(os.environ.get("THREADS_CAP", "0"))   # cap threads per group (as tests' --rlx-group-size)
    if cap:
        import dataclasses

        from rlx.runtime import devices

        real = devices.open_device
        devices.open_device = lambda name: (lambda d, t: (d, dataclasses.replace(t, max_threads_per_group=cap)))(
            *real(name))
    rows_per_simd = int(os.environ.get("ROWS_PER_SIMD", "0"))   # override the lowering's cap (a sweep)
    if rows_per_simd:
        from rlx.lowering import quant as quant_lowering

        quant_lowering.GEMV_MAX_ROWS_PER_SIMD = rows_per_simd
    min_groups = int(os.environ.get("MIN_GROUPS", "0"))   # the lowering's groups before rows grow (a sweep)
    if min_groups:
        from rlx.lowering import quant as quant_lowering

        quant_lowering.GEMV_MIN_GROUPS = min_groups
    gemv1i_rows = int(os.environ.get("GEMV1I_MIN_ROWS", "0"))   # rows a group that take gemv1i (a sweep)
    if gemv1i_rows:
        from rlx.lowering import quant as quant_lowering

        quant_lowering.GEMV1I_MIN_ROWS = gemv1i_rows
    if os.environ.get("F32_FORM") == "1":   # gemv1_<fmt>'s f32 form where the lowering would take gemv1i
        from rlx.lowering import quant as quant_lowering

        quant_lowering.GEMV1I_MIN_ROWS = 1 << 30
    only = int(os.environ.get("ONLY_ROWS", "0"))   # one shape (its row count) of a sweep
    rows = []
    for n, k0 in SHAPES:
        if only and n != only:
            continue
        for fmt in FORMATS:
            k = whole_blocks(fmt, k0)
            raw = large_weight(fmt, n, k)
            nbytes = raw.nbytes
            g = rlx.Graph()
            x = g.input("x", (1, k))
            g.set_outputs(y=g.linear(x, g.param("w", (n, k), fmt)))
            exe = rlx.compile(g, device="cuda", params={"w": raw})
            xv = np.random.default_rng(1).standard_normal((1, k)).astype(np.float32)
            got = exe.run(x=xv)["y"].astype(np.float64)
            w = dequantize_values(quantized(fmt), raw, (n, k)).astype(np.float64)
            want = xv.astype(np.float64) @ w.T
            bound = 1e-5 * (np.abs(xv.astype(np.float64)) @ np.abs(w).T) + 1e-6
            ok = bool((np.abs(got - want) <= bound).all())
            index = next(i for i, t in enumerate(exe.thunks) if (t.kernel or "").startswith("gemv"))
            for _ in range(5):
                exe.program.run_one(index)
            rlx_us = statistics.median(exe.program.run_one(index) for _ in range(REPS)) * 1e6
            src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
            dst = torch.empty_like(src)
            copy_us = _events_ms(lambda d=dst, s=src: d.copy_(s)) * 1e3
            tw = torch.from_numpy(w.astype(np.float32)).to("cuda", torch.bfloat16)
            tx = torch.from_numpy(xv).to("cuda", torch.bfloat16)
            torch.nn.functional.linear(tx, tw)   # warm-up (cuBLAS handles) before capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                captured = torch.nn.functional.linear(tx, tw)   # kept: the graph writes it
            torch_us = _events_ms(graph.replay) * 1e3
            traced = {}
            if os.environ.get("KERNEL_TRACE") == "1":
                try:
                    traced = _kernel_durations(exe, dst, src, graph)
                except Exception:   # a tracing failure keeps the row's event timings
                    import traceback
                    traced = {"kernel_trace_error": traceback.format_exc()[-1500:]}
            row = {"format": fmt, "shape": [n, k], "weight_bytes": nbytes, "correct": ok, "threads_cap": cap,
                   "kernel": exe.thunks[index].kernel,
                   "rows_per_group": int(np.frombuffer(exe.thunks[index].params, np.uint32)[5]),
                   "threads": list(exe.thunks[index].threads),
                   "rlx_gemv_us": rlx_us, "copy_us": copy_us, "torch_bf16_graph_us": torch_us,
                   "rlx_GBps": nbytes / rlx_us / 1e3, "copy_GBps": nbytes / copy_us / 1e3,
                   "fraction_of_copy_bandwidth": copy_us / rlx_us, "rlx_over_torch": rlx_us / torch_us, **traced}
            rows.append(row)
            print(json.dumps(row), flush=True)
            del tw, src, dst, graph, captured
            torch.cuda.empty_cache()
    result = {"what": __doc__.splitlines()[0], "command": "PYTHONPATH=$PWD python3 benchmarks/gpu/quant_gemv_cuda.py",
              "gpu": torch.cuda.get_device_name(), "kernel_defines": defines, "rows": rows}
    emit(result, out_path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
