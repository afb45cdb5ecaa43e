"""Where a Gemma 3 decode step's time goes on the CPU at a long position:
prefill PROMPT tokens into a CONTEXT-token cache, take STEPS decode steps
(wall time, median), then every thunk of the decode executable alone
(Program.run_one, median of REPEATS), summed per kernel.

GQA=0 turns the grouped-query split attention off (the fused kernel, one
group per query head, as before it), for a before/after in one checkout.

Run: RLX_NUM_THREADS=2 PYTHONPATH=$PWD python benchmarks/llm_profile_cpu.py MODEL.gguf [OUT.json]"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

from rlx.lowering import attention as attention_lowering
from rlx.models.bench_bert import kernel_totals, profile_thunks
from rlx.models.bench_llm import decode_step_times
from rlx.models.llm import LLM

PROMPT = int(os.environ.get("PROMPT", "1792"))
CONTEXT = int(os.environ.get("CONTEXT", "2048"))
STEPS = int(os.environ.get("STEPS", "16"))
REPEATS = int(os.environ.get("REPEATS", "10"))
GQA = os.environ.get("GQA", "1") != "0"


def main(model: str, out: str | None = None) -> None:
    if not GQA:
        attention_lowering.gqa_split_keys = lambda lw, b, tq, hq, hkv, tk: 0
    llm = LLM(model, device="cpu", max_context=CONTEXT)
    llm.prefill([2 + i % 1000 for i in range(PROMPT)], output="token")
    times = decode_step_times(llm, STEPS)
    rows = profile_thunks(llm._executable("decode", 1, "token"), repeats=REPEATS)
    result = {"gqa_split_attention": GQA,
              "position": PROMPT + STEPS, "context": CONTEXT, "step_ms_median": 1e3 * statistics.median(times),
              "thunks": len(rows), "summed_device_ms": sum(r["device_ms"] for r in rows),
              "per_kernel": kernel_totals(rows),
              "attention_thunks": [{"label": r["label"], "device_ms": r["device_ms"]} for r in rows
                                   if r["kernel"].startswith("attention")]}
    print(json.dumps({k: v for k, v in result.items() if k not in ("per_kernel", "attention_thunks")}))
    for row in result["per_kernel"][:12]:
        print("   ", row)
    if out:
        Path(out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
