"""Why does the replay floor measure ~13 us longer after the BERT rows of
bert_cuda.py than first in a fresh process? The bare floor Program timed
fresh, then after each thing those rows leave behind: a large GPU
allocation, BERT executables run on the same device (and still alive), and
after they are freed. PyTorch's CUDA graph of the same chain alongside.

A development aid for issue 6; prints JSON lines. On the H200:
    python3 benchmarks/gpu/floor_after_load.py"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time

import numpy as np
import torch

import rlx
from rlx.blocks import bert_encoder, random_params

sys.path.insert(0, "benchmarks/gpu")
from bert_cuda import FFN, HEADS, HIDDEN, LAYERS, floor_programs, median_ms  # noqa: E402

RUNS = {"warmup": 200, "runs": 2000}


def main() -> None:
    exe, bare = floor_programs()
    tx, tb = torch.zeros(16, device="cuda"), torch.ones(16, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(65):
            tx.add_(tb)

    def report(stage: str) -> None:
        rlx_us = 1e3 * median_ms(lambda: bare.run([], []), **RUNS, sync=False)
        torch_us = 1e3 * median_ms(graph.replay, **RUNS)
        clocks = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw",
                                 "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
        print(json.dumps({"stage": stage, "rlx_bare_us": round(rlx_us, 2), "torch_graph_us": round(torch_us, 2),
                          "ratio": round(rlx_us / torch_us, 3), "sm_mem_temp_power": clocks}), flush=True)

    report("fresh")
    big = torch.empty(30 * 2**30, dtype=torch.uint8, device="cuda")
    report("after allocating 30 GiB with torch")
    del big
    torch.cuda.empty_cache()
    report("after freeing it")
    a = torch.randn(64, 64, device="cuda")
    (a @ a).sum().item()
    report("after one small torch matmul (cuBLAS loaded)")
    x = torch.randn(2**26, device="cuda")
    t = time.perf_counter()
    while time.perf_counter() - t < 3.0:
        x.mul_(1.0000001)
    torch.cuda.synchronize()
    report("after 3 s of elementwise work")
    kept = []
    for precision in ("f32", "f16"):
        for batch, seq in ((1, 128), (32, 128)):
            g = bert_encoder(LAYERS, batch, seq, HIDDEN, HEADS, FFN)
            params = random_params(g, seed=1)
            feed = {"x": np.random.default_rng(2).standard_normal((batch, seq, HIDDEN)).astype(np.float32),
                    "mask": np.zeros((batch, 1, 1, seq), np.float32)}
            bert = rlx.compile(g, device="cuda", params=params, precision=precision, replay=True)
            for _ in range(50):
                bert.run(feed)
            kept.append(bert)
    report("with four BERT executables alive, after running them")
    kept.clear()
    gc.collect()
    report("after freeing them")


if __name__ == "__main__":
    main()
