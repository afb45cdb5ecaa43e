"""Where a long prompt's prefill time goes on the CPU: PROMPT tokens in
chunks of 512 (LLM.prefill's default), each chunk's wall time from the
progress callback, two passes (the first compiles); then every thunk of the
executable of the last chunk's kind and size ("extend" at its position),
each run alone (Program.run_one, median of REPEATS), summed per kernel.

Run: RLX_NUM_THREADS=2 PYTHONPATH=$PWD python benchmarks/llm_prefill_cpu.py MODEL.gguf [OUT.json]"""

from __future__ import annotations

import json
import os
import sys
import time

from rlx.models.bench_bert import kernel_totals, profile_thunks
from rlx.models.llm import DEFAULT_PREFILL_CHUNK, LLM

PROMPT = int(os.environ.get("PROMPT", "1792"))
REPEATS = int(os.environ.get("REPEATS", "3"))


def chunk_times_ms(llm: LLM, ids: list[int]) -> list[tuple[int, float]]:
    """(tokens done, milliseconds of that chunk) for one prefill of ids from position 0."""
    marks = [(0, time.perf_counter())]
    llm.prefill(ids, output="token", progress=lambda done, total: marks.append((done, time.perf_counter())))
    return [(d, 1e3 * (t - marks[i][1])) for i, (d, t) in enumerate(marks[1:])]


def main(model: str, out: str | None = None) -> None:
    llm = LLM(model, device="cpu", max_context=max(2048, PROMPT))
    ids = [2 + i % 1000 for i in range(PROMPT)]
    passes = []
    for _ in range(2):
        llm.rewind(0)
        passes.append(chunk_times_ms(llm, ids))
    last = PROMPT - (PROMPT - 1) // DEFAULT_PREFILL_CHUNK * DEFAULT_PREFILL_CHUNK
    kind = "extend" if PROMPT > DEFAULT_PREFILL_CHUNK else "prefill"
    rows = profile_thunks(llm._executable(kind, last, "token"), repeats=REPEATS)
    result = {"prompt": PROMPT, "chunk": DEFAULT_PREFILL_CHUNK,
              "chunk_ms": [[{"done": d, "ms": round(ms, 1), "tok_per_s": round((d - prev) / ms * 1e3, 1)}
                            for (d, ms), prev in zip(p, [0] + [d for d, _ in p[:-1]])] for p in passes],
              "last_chunk": {"kind": kind, "tokens": last, "thunks_ms": round(sum(r["device_ms"] for r in rows), 1),
                             "by_kernel": kernel_totals(rows)[:12]}}
    print(json.dumps(result, indent=1))
    if out:
        with open(out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
