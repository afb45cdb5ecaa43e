"""Where the time goes on an NVIDIA GPU: per-thunk device time (CUDA events
around each thunk run alone) for the BERT shapes of issue 6, summed by kind,
next to the whole replayed run. A development aid; prints JSON lines.

Run on the H200:  PYTHONPATH=$PWD python3 benchmarks/gpu/profile_cuda.py"""

from __future__ import annotations

import json
import sys

import numpy as np

import rlx
from rlx.blocks import bert_encoder, random_params
from rlx.models.bench_bert import profile_thunks, time_runner

CONFIGS = [("f32", 1, 128), ("f32", 32, 128), ("f16", 32, 128)]


def kind(row: dict) -> str:
    label = row["label"]
    op = label.split("=", 1)[1].split("(")[0].strip() if "=" in label else label.split(" ")[0]
    return f"{op}: {row['kernel']}"


def main() -> None:
    for precision, batch, seq in CONFIGS:
        g = bert_encoder(6, batch, seq, 384, 12, 1536)
        params = random_params(g, seed=1)
        x = np.random.default_rng(2).standard_normal((batch, seq, 384)).astype(np.float32)
        feed = {"x": x, "mask": np.zeros((batch, 1, 1, seq), np.float32)}
        exe = rlx.compile(g, device="cuda", params=params, precision=precision, replay=True)
        run_ms = time_runner(lambda exe=exe, feed=feed: exe.run(feed), budget_s=1.0, warmup=10)["median_ms"]
        rows = profile_thunks(exe, repeats=10)
        agg: dict[str, list[float]] = {}
        for r in rows:
            agg.setdefault(kind(r), []).append(r["device_ms"])
        summary = sorted(((k, len(v), round(sum(v), 4)) for k, v in agg.items()), key=lambda x: -x[2])
        out = {"precision": precision, "batch": batch, "tokens": seq, "run_ms": run_ms,
               "thunks": len(rows), "sum_device_ms": sum(r["device_ms"] for r in rows),
               "sum_wall_ms": sum(r["ms"] for r in rows), "by_kind": summary,
               "top_thunks": sorted(({"label": r["label"][:90], "kernel": r["kernel"], "device_ms": r["device_ms"]}
                                     for r in rows), key=lambda r: -r["device_ms"])[:8]}
        print(json.dumps(out), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
