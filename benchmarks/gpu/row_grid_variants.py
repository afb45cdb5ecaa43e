"""How many threads should a GPU group give a row? Per-kind device time of
the BERT shapes under row_grid policies: threads = the row's length rounded
to the SIMD width (capped at 1024: the current policy) against a few columns
per thread. A development aid; prints JSON lines.

Run on the H200:  PYTHONPATH=$PWD python3 benchmarks/gpu/row_grid_variants.py"""

from __future__ import annotations

import json

import numpy as np

import rlx
from rlx.blocks import bert_encoder, random_params
from rlx.models.bench_bert import profile_thunks
from rlx.runtime import target as target_mod

ORIGINAL = target_mod.Target.row_grid


def policy(items: int, cap: int):
    def row_grid(self, rows, cols):
        if self.one_thread_groups:
            return ORIGINAL(self, rows, cols)
        width = max(self.simd_width, 1)
        want = -(-max(int(cols), 1) // items)
        threads = min(cap, self.max_threads_per_group, max(width, -(-want // width) * width))
        return (max(int(rows), 1), 1, 1), (threads, 1, 1)
    return row_grid


def main() -> None:
    for precision, batch, seq in (("f16", 32, 128), ("f32", 32, 128), ("f32", 1, 16)):
        g = bert_encoder(6, batch, seq, 384, 12, 1536)
        params = random_params(g, seed=1)
        x = np.random.default_rng(2).standard_normal((batch, seq, 384)).astype(np.float32)
        feed = {"x": x, "mask": np.zeros((batch, 1, 1, seq), np.float32)}
        ref = None
        for items, cap in ((1, 1024), (2, 256), (4, 256), (8, 256), (4, 128)):
            target_mod.Target.row_grid = policy(items, cap)
            exe = rlx.compile(g, device="cuda", params=params, precision=precision, replay=True)
            y = exe.run(feed)["y"]
            ref = y if ref is None else ref
            rows = profile_thunks(exe, repeats=10)
            agg: dict[str, float] = {}
            for r in rows:
                if r["kernel"] != "gemm":
                    agg[r["kernel"]] = round(agg.get(r["kernel"], 0.0) + r["device_ms"], 4)
            import statistics
            import time
            times = []
            for _ in range(30):
                t = time.perf_counter()
                exe.run(feed)
                times.append(time.perf_counter() - t)
            print(json.dumps({"precision": precision, "batch": batch, "tokens": seq, "items_per_thread": items,
                              "cap": cap, "run_ms": 1e3 * statistics.median(times),
                              "max_diff_vs_first_policy": float(np.max(np.abs(y - ref))), "kernels_ms": agg}),
                  flush=True)
        target_mod.Target.row_grid = ORIGINAL


if __name__ == "__main__":
    main()
