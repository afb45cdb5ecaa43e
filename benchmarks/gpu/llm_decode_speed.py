"""H200 by hand (issue 18): Gemma 3 decode steps on cuda at two context
lengths, after the active-length attention (keys past the context are not
read) and the norm fusions. Median of STEPS steps (exe.run wall time, the
token copied back each step) at position ~128 and ~1900 of a 2048-token
cache (and the device time of each run, between the events around its
commands: the rest is the host's), for each KV cache dtype (KV_DTYPES) and split-K chunk of keys
(SPLIT_KEYS, rlx.lowering.attention.SPLIT_KEYS_GPU) and keys per split of
the grouped-query kernel (GQA_GPU_KEYS, GQA_SPLIT_GPU_KEYS; 0: not taken), threads of the
one-dispatch split-K kernel (SPLIT_MERGE_THREADS), a cap on the threads of
row kernels over few rows (ROW_THREADS, 0: the lowering's), defines in
front of the kernel source (KERNEL_DEFINES, kernel_defines.py), and
fusions left out (WITHOUT: ";"-separated sets of target capabilities,
e.g. WITHOUT=" ;glu_linear" for an A/B of that fusion in one run), and the
decode step's thunk count, and decode blocks (DECODE_BLOCK: greedy steps a
launch, LLM.step_block; times are a token's share of a block's). The
weights' values change no kernel's time, so the zero-weight stand-in file
(the real header, zero tensor bytes) serves.

Run: PYTHONPATH=$PWD python3 benchmarks/gpu/llm_decode_speed.py MODEL.gguf OUT.json [DEVICE]"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
import time

from kernel_defines import apply_kernel_defines  # benchmarks/gpu/kernel_defines.py (the script's own folder)

from rlx.lowering import attention as attention_lowering
from rlx.models.llm import LLM
from rlx.runtime import devices
from rlx.runtime.target import Target

STEPS = 120   # a block of 4 explores its launch forms over its first 18 runs: 30 runs leave 12 after them
_ROW_GRID = Target.row_grid


def _capped_row_grid(cap: int):
    """Target.row_grid with at most ``cap`` threads a group while rows are
    few (0: as the lowering picks): a group of one SIMD group reduces by
    shuffles alone, without the cross-warp barriers."""
    def row_grid(self, rows, cols, stacked=False):
        grid, threads = _ROW_GRID(self, rows, cols, stacked)
        if cap and not self.one_thread_groups and rows < 4 * self.compute_units and threads[0] > cap:
            threads = (cap, threads[1], threads[2])
        return grid, threads
    return row_grid


def main(model: str, out: str, device: str = "cuda") -> None:
    defines = apply_kernel_defines()
    rows = []
    combos = [(kv, int(keys), int(gqa), tuple(without.split()), int(threads), int(row_cap), int(block))
              for block in os.environ.get("DECODE_BLOCK", "1").split()
              for row_cap in os.environ.get("ROW_THREADS", "0").split()
              for threads in os.environ.get("SPLIT_MERGE_THREADS", str(attention_lowering.SPLIT_MERGE_THREADS)).split()
              for kv in os.environ.get("KV_DTYPES", "f16 f32").split()
              for keys in os.environ.get("SPLIT_KEYS", str(attention_lowering.SPLIT_KEYS_GPU)).split()
              for gqa in os.environ.get("GQA_GPU_KEYS", str(attention_lowering.GQA_SPLIT_GPU_KEYS)).split()
              for without in os.environ.get("WITHOUT", "").split(";")]
    real_open = devices.open_device
    for kv, keys, gqa, without, threads, row_cap, block in combos:
        attention_lowering.SPLIT_KEYS_GPU = keys
        attention_lowering.SPLIT_MERGE_THREADS = threads
        Target.row_grid = _capped_row_grid(row_cap)
        attention_lowering.GQA_SPLIT_GPU_KEYS = gqa   # > 0: the grouped-query split kernel on the GPU

        def open_without(name, without=without):
            dev, target = real_open(name)
            return dev, dataclasses.replace(target, capabilities=target.capabilities - set(without))

        devices.open_device = open_without
        llm = LLM(model, device=device, max_context=2048, kv_dtype=kv, decode_block=block)
        for prompt in (128, 1900):
            llm.prefill(list(range(2, 2 + prompt)), output="token")
            kind = ("block", block) if block > 1 else ("decode", 1)
            program = llm._executable(*kind, "token").program
            times, device_s = [], []
            token = 2
            runs, skip = STEPS // block, 10 // block   # a block's steps count against the context too
            for _ in range(runs):   # decode_step_times' loop, with each run's device time (its two events)
                t0 = time.perf_counter()
                token = llm.step_block(token)[-1] if block > 1 else int(llm.step(token, output="token"))
                times.append((time.perf_counter() - t0) / block)   # a token's share of the launch
                device_s.append(program.last_device_seconds / block)
            ms = 1e3 * statistics.median(times[skip:])
            row = {"decode_block": block, "kv_dtype": kv, "split_keys": keys, "gqa_gpu_keys": gqa,
                   "without": list(without),
                   "split_merge_threads": threads, "row_threads_cap": row_cap, "kernel_defines": defines,
                   "position": prompt,
                   "step_ms_median": ms, "tok_per_s": 1e3 / ms,
                   "device_ms_median": 1e3 * statistics.median(device_s[skip:]),
                   "launch_mode": program.launch_mode, "launch_times": program.launch_times,
                   "step_ms_min": 1e3 * min(times), "thunks": len(llm._executable(*kind, "token").thunks)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    json.dump({"what": __doc__.splitlines()[0], "command": "PYTHONPATH=$PWD python3 benchmarks/gpu/llm_decode_speed.py "
               "MODEL.gguf OUT.json", "model": model, "device": device, "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
