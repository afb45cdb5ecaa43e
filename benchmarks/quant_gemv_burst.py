"""CPU: the decode step's quantized GEMVs timed in a burst (issue 18): 12
GEMVs of one shape (distinct weights, the same x) in one `exe.run`, so the
pool's workers stay awake between them as in a decode step
(`Program.run_one` times a thunk alone, after the workers went to sleep).
Prints us a GEMV and GB/s of weights for each shape.

Run: RLX_NUM_THREADS=2 PYTHONPATH=$PWD python benchmarks/quant_gemv_burst.py [FMT N K ...]"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

import rlx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ops"))
from quant_helpers import large_weight  # noqa: E402  (tests/ops/quant_helpers.py)

# Gemma 3 270M Q4_K_M's decode GEMVs: fused q/k/v and gate/up (Q5_0), down (Q4_K / Q6_K).
SHAPES = [("q5_0", 4096, 640), ("q5_0", 1536, 640), ("q4_k", 640, 2048), ("q6_k", 640, 2048)]
GEMVS = 12
RUNS = 30


def burst_us(fmt: str, n: int, k: int) -> tuple[float, int]:
    """Median microseconds a GEMV over a burst of GEMVS, and one weight's bytes."""
    g = rlx.Graph()
    x = g.input("x", (1, k))
    params = {f"w{i}": large_weight(fmt, n, k) for i in range(GEMVS)}
    g.set_outputs(**{f"y{i}": g.linear(x, g.param(f"w{i}", (n, k), fmt)) for i in range(GEMVS)})
    exe = rlx.compile(g, params=params)
    xv = np.random.default_rng(1).standard_normal((1, k)).astype(np.float32)
    for _ in range(5):
        exe.run(x=xv)
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        exe.run(x=xv)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / GEMVS * 1e6, params["w0"].nbytes


def main(argv: list[str]) -> None:
    shapes = [(argv[i], int(argv[i + 1]), int(argv[i + 2])) for i in range(0, len(argv), 3)] or SHAPES
    for fmt, n, k in shapes:
        us, nbytes = burst_us(fmt, n, k)
        print(f"{fmt} {n} x {k}: {us:.1f} us a GEMV, {nbytes / us / 1e3:.1f} GB/s")


if __name__ == "__main__":
    main(sys.argv[1:])
