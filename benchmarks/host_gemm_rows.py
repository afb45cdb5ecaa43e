"""GFLOP/s of one host-device gemm (f32, B transposed: a linear layer's
weights) at row counts around the small-M kernel's bounds, beside numpy's
own `a @ b.T` (OpenBLAS, its own threads) in the same run.

On x86-64, f32 products of 16-256 rows run the small-M kernel's
packed-panel form (csrc/host_small_m_packed_body.h), fewer rows its dot
form; more go to OpenBLAS split over the pool (csrc/host/commands.inc.cpp).

Run: RLX_NUM_THREADS=2 python benchmarks/host_gemm_rows.py [OUT.json]"""

from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np

from rlx.runtime.shim import CommandBuffer, Device

SHAPES = [(16, 1536, 384), (32, 1536, 384), (64, 1536, 384), (64, 4096, 640), (128, 4096, 640), (128, 1536, 384),
          (128, 384, 1536), (129, 4096, 640), (192, 4096, 640), (256, 4096, 640), (257, 4096, 640),
          (288, 1536, 384), (288, 384, 1536)]
REPEATS = 30


def median_seconds(run, repeats: int = REPEATS) -> float:
    for _ in range(3):
        run()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _host_gemm(dev: Device, bufs: list, m: int, n: int, k: int) -> None:
    with CommandBuffer(dev) as cb:
        cb.gemm(*bufs, m, n, k, lda=k, ldb=k, ldc=n, trans_b=True)
        cb.commit()
        cb.wait()


def main(out: str | None = None) -> None:
    dev = Device("host", 0)
    rng = np.random.default_rng(0)
    operands = [(rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32))
                for m, n, k in SHAPES]
    rows = []
    # Every rlx shape first, numpy after: OpenBLAS's threads keep spinning
    # after its calls and would take a core from the host device's pool.
    for (m, n, k), (a, b) in zip(SHAPES, operands):
        bufs = [dev.alloc(x.nbytes) for x in (a, b)] + [dev.alloc(m * n * 4)]
        bufs[0].write(0, a)
        bufs[1].write(0, b)
        rlx_s = median_seconds(lambda: _host_gemm(dev, bufs, m, n, k))   # noqa: B023 (called at once)
        got = np.frombuffer(bufs[2].read(0, m * n * 4), np.float32).reshape(m, n)
        err = float(np.abs(got - a.astype(np.float64) @ b.astype(np.float64).T).max())
        rows.append({"m": m, "n": n, "k": k, "rlx_us": rlx_s * 1e6, "max_abs_error": err})
        for buf in bufs:
            buf.free()
    device = dev.info.name
    dev.close()
    for row, (a, b) in zip(rows, operands):
        numpy_s = median_seconds(lambda: a @ b.T)   # noqa: B023 (called at once)
        flops = 2.0 * row["m"] * row["n"] * row["k"]
        rlx_s = row["rlx_us"] / 1e6
        row.update(numpy_us=numpy_s * 1e6, rlx_gflops=flops / rlx_s / 1e9, numpy_gflops=flops / numpy_s / 1e9,
                   rlx_over_numpy=rlx_s / numpy_s)
        print(f"{row['m']:4d} x {row['n']:5d} x {row['k']:5d}: rlx {row['rlx_gflops']:6.1f} GFLOP/s, numpy "
              f"{row['numpy_gflops']:6.1f} ({row['rlx_over_numpy']:.2f}x its time), max error "
              f"{row['max_abs_error']:.1e}")
    if out:
        with open(out, "w") as f:
            json.dump({"command": "RLX_NUM_THREADS=N python benchmarks/host_gemm_rows.py OUT.json",
                       "device": device, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:2])
