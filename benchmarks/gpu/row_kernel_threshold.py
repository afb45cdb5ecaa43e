"""Which small-M path is faster on this GPU: gemm + epilogue or the row
kernel? Times the replayed 6-layer BERT shape at batch 1 with the row-kernel
threshold at 0 (always gemm) and 16 tokens (row kernel). Prints JSON.

Run on the H200:  PYTHONPATH=$PWD python3 benchmarks/gpu/row_kernel_threshold.py"""

from __future__ import annotations

import json
import statistics
import time

import numpy as np

import rlx
from rlx.blocks import bert_encoder, random_params
from rlx.lowering import linear as lowering_linear

rows = []
for precision in ("f32", "f16"):
    for tokens in (9, 16):
        g = bert_encoder(6, 1, tokens)
        params = random_params(g, seed=1)
        feed = {"x": np.random.default_rng(2).standard_normal((1, tokens, 384)).astype(np.float32),
                "mask": np.zeros((1, 1, 1, tokens), np.float32)}
        row = {"precision": precision, "tokens": tokens}
        outs = {}
        for label, max_m in (("gemm", 0), ("row_kernel", 16)):
            lowering_linear.use_row_kernel = lambda lw, m, *a, max_m=max_m, **k: m <= max_m
            exe = rlx.compile(g, device="cuda", params=params, precision=precision)
            for _ in range(20):
                exe.run(feed)
            times = []
            for _ in range(100):
                t = time.perf_counter()
                exe.run(feed)
                times.append(time.perf_counter() - t)
            row[label + "_ms"] = 1e3 * statistics.median(times)
            row[label + "_thunks"] = exe.stats.thunks
            outs[label] = exe.run(feed)["y"]
        row["max_abs_diff"] = float(np.max(np.abs(outs["gemm"] - outs["row_kernel"])))
        rows.append(row)
        print(json.dumps(row), flush=True)
