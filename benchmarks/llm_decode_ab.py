"""The decode step of a GGUF model on the CPU with and without target
capabilities (fusions), alternating in one process: each form's median
step time over STEPS steps after a 128-token prompt, ROUNDS times in turn
(the machine's drift hits both forms alike). WITHOUT: ";"-separated sets
of capabilities to drop, the first form's first (" ;rope_cache": the
default against the step without the rope_cache fold).

Run: python benchmarks/llm_decode_ab.py MODEL.gguf OUT.json"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
import time

from bench_machine import write_results  # benchmarks/bench_machine.py (the script's own folder)

from rlx.models.llm import LLM
from rlx.runtime import devices

STEPS = 80
ROUNDS = 2


def main(model: str, out: str) -> None:
    forms = [tuple(w.split()) for w in os.environ.get("WITHOUT", " ;rope_cache").split(";")]
    real_open = devices.open_device
    rows = []
    for round_ in range(ROUNDS):
        for without in forms:
            def open_without(name, without=without):
                dev, target = real_open(name)
                return dev, dataclasses.replace(target, capabilities=target.capabilities - set(without))

            devices.open_device = open_without
            llm = LLM(model, device="cpu", max_context=2048)
            llm.prefill(list(range(2, 130)), output="token")
            token, times = 2, []
            for _ in range(STEPS):
                t0 = time.perf_counter()
                token = int(llm.step(token, output="token"))
                times.append(time.perf_counter() - t0)
            ms = 1e3 * statistics.median(times[10:])
            row = {"round": round_, "without": list(without), "step_ms_median": ms, "tok_per_s": 1e3 / ms,
                   "thunks": len(llm._executable("decode", 1, "token").thunks)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    devices.open_device = real_open
    write_results(out, f"WITHOUT='{os.environ.get('WITHOUT', ' ;rope_cache')}' python benchmarks/llm_decode_ab.py "
                  f"{model} {out}", model=model, steps=STEPS, rows=rows)


if __name__ == "__main__":
    main(*sys.argv[1:])
