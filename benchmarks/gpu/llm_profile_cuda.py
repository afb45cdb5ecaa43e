"""H200 by hand (issue 18): where a Gemma 3 decode step's time goes on cuda.
For the split-K decode attention on (the default) and off (the fused
kernel), the decode step's wall time (exe.run, 128 tokens into the context,
median of 50) and every thunk's device time alone (Program.run_one),
summed per kernel. The weights' values do not change any kernel's time, so
the zero-weight stand-in file (the real header, zero tensor bytes) serves.

Run: PYTHONPATH=$PWD python3 benchmarks/gpu/llm_profile_cuda.py MODEL.gguf OUT.json [DEVICE]"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from rlx.lowering import attention as attention_lowering
from rlx.models.bench_bert import kernel_totals, profile_thunks
from rlx.models.bench_llm import decode_step_times
from rlx.models.llm import LLM

PROMPT, STEPS = 128, int(__import__("os").environ.get("STEPS", "50"))


def _profile(model: str, split: bool, device: str) -> dict:
    saved = attention_lowering.split_keys
    if not split:
        attention_lowering.split_keys = lambda lw, rows, tk: 0
    try:
        llm = LLM(model, device=device, max_context=512)
        llm.prefill(list(range(2, 2 + PROMPT)), output="token")
        times = decode_step_times(llm, STEPS)
        exe = llm._executable("decode", 1, "token")
    finally:
        attention_lowering.split_keys = saved
    rows = profile_thunks(exe, repeats=10)
    return {"split_k": split, "step_ms_median": 1e3 * statistics.median(times[5:]),
            "step_ms_min": 1e3 * min(times), "thunks": len(rows),
            "summed_device_ms": sum(r["device_ms"] for r in rows),
            "per_kernel": kernel_totals(rows)}


def main(model: str, out: str, device: str = "cuda") -> None:
    result = {"what": __doc__.splitlines()[0],
              "command": "PYTHONPATH=$PWD python3 benchmarks/gpu/llm_profile_cuda.py MODEL.gguf OUT.json",
              "model": model, "device": device, "prompt_tokens": PROMPT, "runs": []}
    for split in (True, False):
        r = _profile(model, split, device)
        result["runs"].append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "per_kernel"}), flush=True)
        for row in r["per_kernel"][:12]:
            print("   ", row, flush=True)
    Path(out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
