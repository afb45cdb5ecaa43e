"""Do executables run from two threads overlap on the GPU with a queue each
(RLX_CUDA_QUEUES=1) where they serialize on the device's one stream (0)?
Two 6-layer BERT executables (batch 1 x 16 and 1 x 128, f16), each on its
own thread for a fixed number of runs; wall time of the pair, results
checked against a single-threaded run. Each setting in its own process (the
setting is read when the device opens). Prints JSON lines.

On the H200:  PYTHONPATH=$PWD python3 benchmarks/gpu/queues_overlap.py [device [runs]]"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np

RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 300   # runs per executable and thread


def one_setting(device: str) -> dict:
    import rlx
    from rlx.blocks import bert_encoder, random_params

    exes, feeds, expect = [], [], []
    for tokens in (16, 128):
        g = bert_encoder(6, 1, tokens, 384, 12, 1536)
        params = random_params(g, seed=1)
        exe = rlx.compile(g, device=device, params=params, precision="f16" if device == "cuda" else "f32")
        rng = np.random.default_rng(tokens)
        feed = {"x": rng.standard_normal((1, tokens, 384)).astype(np.float32),
                "mask": np.zeros((1, 1, 1, tokens), np.float32)}
        exes.append(exe)
        feeds.append(feed)
        expect.append(exe.run(feed)["y"])
    own = [exe.program.own_queue for exe in exes]
    bad = []

    def worker(i: int) -> None:
        for _ in range(RUNS):
            out = exes[i].run(feeds[i])["y"]
        if not np.array_equal(out, expect[i]):
            bad.append(i)

    alone = []
    for i in range(2):
        t = time.perf_counter()
        worker(i)
        alone.append(time.perf_counter() - t)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    pair = time.perf_counter() - t
    return {"queues": os.environ.get("RLX_CUDA_QUEUES", "0"), "own_queue": own, "runs_each": RUNS,
            "alone_s": alone, "pair_s": pair, "pair_over_sum_of_alone": pair / sum(alone), "results_exact": not bad}


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
    if os.environ.get("QUEUES_OVERLAP_CHILD"):
        print(json.dumps(one_setting(device)), flush=True)
        return
    for setting in ("0", "1"):
        env = dict(os.environ, RLX_CUDA_QUEUES=setting, QUEUES_OVERLAP_CHILD="1")
        out = subprocess.run([sys.executable, __file__, device, str(RUNS)], env=env, capture_output=True, text=True,
                             timeout=600)
        print(out.stdout.strip() or out.stderr[-2000:], flush=True)


if __name__ == "__main__":
    main()
