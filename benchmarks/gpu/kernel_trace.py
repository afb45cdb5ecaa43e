"""Which kernels a replayed BERT run spends its GPU time in, rlx next to
PyTorch's CUDA graph, as CUPTI records them (torch.profiler traces every
kernel of the process, rlx's driver-API graph launches included). Unlike
benchmarks/gpu/profile_cuda.py, which times each thunk alone between two
events (and so counts the host's cuBLASLt call as gemm time), these are the
kernels' own durations inside the replayed graph.

A development aid for issue 6; prints JSON lines. On the H200:
    python3 benchmarks/gpu/kernel_trace.py"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch

import rlx
from rlx.blocks import bert_encoder, random_params

sys.path.insert(0, "benchmarks/gpu")
from bert_cuda import FFN, HEADS, HIDDEN, LAYERS, capture_torch_graph, torch_bert  # noqa: E402
from cuda_timing import kernel_table as timed_kernels  # noqa: E402  (benchmarks/gpu/cuda_timing.py)

CONFIGS = [("f32", 1, 128), ("f16", 1, 128), ("f32", 32, 128)]
RUNS = 20


def kernel_table(fn) -> dict:
    """Per-run time and count of each kernel name while fn runs RUNS times (copies left out)."""
    return timed_kernels(fn, RUNS, skip_memcpy=True, top=14)


def main() -> None:
    for precision, batch, seq in CONFIGS:
        g = bert_encoder(LAYERS, batch, seq, HIDDEN, HEADS, FFN)
        params = random_params(g, seed=1)
        x = np.random.default_rng(2).standard_normal((batch, seq, HIDDEN)).astype(np.float32)
        mask = np.zeros((batch, 1, 1, seq), np.float32)
        exe = rlx.compile(g, device="cuda", params=params, precision=precision, replay=True)
        feed = {"x": x, "mask": mask}
        rlx_table = kernel_table(lambda exe=exe, feed=feed: exe.run(feed))
        tdtype = torch.float16 if precision == "f16" else torch.float32
        fwd = torch_bert(params, tdtype, batch, seq)
        tx = torch.from_numpy(x).to("cuda", tdtype)
        tm = torch.from_numpy(mask).to("cuda", tdtype)
        with torch.no_grad():
            graph, _ = capture_torch_graph(fwd, tx, tm)
        torch_table = kernel_table(graph.replay)
        print(json.dumps({"precision": precision, "batch": batch, "tokens": seq, "rlx": rlx_table,
                          "torch_graph": torch_table}), flush=True)


if __name__ == "__main__":
    main()
