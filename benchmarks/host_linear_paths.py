"""The host's two linear paths on BERT-layer shapes, forced one way then the
other: matmul_rows (the row kernel) against the shim's gemm (the small-M
kernel up to 64 rows, OpenBLAS beyond), and the gemm's time per row of A
over M. What the cost model's row-kernel decision and the small-M range
(csrc/host_small_m.h kMaxRows) were checked against.

Run:  python benchmarks/host_linear_paths.py [--json OUT]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_machine import write_results

import rlx
from rlx.ir.graph import Graph
from rlx.tune import cost

SHAPES = ((1152, 384), (1536, 384), (384, 1536), (384, 384))   # MiniLM's QKV, FFN up, FFN down, output


def seconds(m: int, n: int, k: int, row_kernel: bool) -> float:
    """Best of 5 timed loops of one compiled linear [m, k] x [n, k]^T + bias."""
    original = cost.CostModel.prefer_row_kernel
    cost.CostModel.prefer_row_kernel = lambda self, *a, **kw: row_kernel
    try:
        g = Graph()
        x, w, b = g.input("x", (m, k)), g.param("w", (n, k)), g.param("b", (n,))
        g.set_outputs(y=g.linear(x, w, b, transpose_b=True))
        rng = np.random.default_rng(0)
        exe = rlx.compile(g, "cpu", params={"w": rng.standard_normal((n, k), dtype=np.float32),
                                            "b": np.zeros(n, np.float32)})
    finally:
        cost.CostModel.prefer_row_kernel = original
    xv = rng.standard_normal((m, k), dtype=np.float32)
    exe.run(x=xv)
    reps = max(3, int(2e8 / (m * n * k)))
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            exe.run(x=xv)
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    args = ap.parse_args()
    out: dict = {"rows_vs_gemm_us": {}, "gemm_us_per_row": {}}
    for n, k in SHAPES:
        for m in (1, 2, 4, 8, 16, 32, 128, 1024):
            r, g = seconds(m, n, k, True), seconds(m, n, k, False)
            out["rows_vs_gemm_us"][f"{m}x{n}x{k}"] = {"matmul_rows": round(r * 1e6, 1), "gemm": round(g * 1e6, 1)}
            print(f"{m:5d} x {n} x {k}: matmul_rows {r * 1e6:9.1f} us, gemm {g * 1e6:9.1f} us ({r / g:.2f}x)")
        per_row = {m: round(seconds(m, n, k, False) * 1e6 / m, 2) for m in (16, 24, 32, 48, 64, 65, 96, 128, 256)}
        out["gemm_us_per_row"][f"{n}x{k}"] = per_row
        print(f"{n} x {k} gemm, us per row:", per_row)
    if args.json:
        write_results(args.json, f"python benchmarks/host_linear_paths.py --json {args.json}", **out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
