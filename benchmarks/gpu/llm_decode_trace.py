"""H200 by hand (issue 18): where a replayed Gemma 3 decode step's time goes
on the device, kernel by kernel, as the CUDA graph runs it (not one launch
at a time as Program.run_one measures). PyTorch's profiler (CUPTI) records
every kernel of the process, rlx's graph replays included; steps are told
apart by the host round trip between them (a gap over GAP_US). Per step:
the span from the first kernel's start to the last one's end, the kernels'
summed busy time, and the idle time between kernels; per kernel name: calls
a step, mean microseconds, and its increments: how far each of its calls
moved the step's last kernel end (with programmatic dependent launch a
kernel starts while its predecessor runs and waits inside, so durations
overlap and the increments are what each kernel adds to the step). Run it
with RLX_CUDA_PDL=0 for durations without that overlap. GQA_GPU_KEYS sets
rlx.lowering.attention.GQA_SPLIT_GPU_KEYS (the grouped-query split kernel's
keys per split on the GPU; 0: not taken) for the run; KERNEL_DEFINES
(kernel_defines.py) puts defines in front of the kernel source.

Run: PYTHONPATH=$PWD python3 benchmarks/gpu/llm_decode_trace.py MODEL.gguf OUT.json"""

from __future__ import annotations

import json
import os
import statistics
import sys

import torch
from kernel_defines import apply_kernel_defines  # benchmarks/gpu/kernel_defines.py (the script's own folder)
from torch.profiler import ProfilerActivity, profile

from rlx.lowering import attention as attention_lowering
from rlx.models.llm import LLM

STEPS = 30
GAP_US = 25.0


def _kernels(prof) -> list[tuple[float, float, str]]:
    """(start us, end us, name) of every device kernel the profiler saw, by start."""
    out = []
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and ev.time_range.elapsed_us() > 0:
            out.append((ev.time_range.start, ev.time_range.end, ev.name))
    return sorted(out)


def _split_steps(kernels: list[tuple[float, float, str]]) -> list[list[tuple[float, float, str]]]:
    steps: list[list[tuple[float, float, str]]] = []
    for k in kernels:
        if not steps or k[0] - steps[-1][-1][1] > GAP_US:
            steps.append([])
        steps[-1].append(k)
    return steps


def _summary(steps: list[list[tuple[float, float, str]]]) -> dict:
    kept = [s for s in steps if len(s) >= 0.9 * statistics.median(len(x) for x in steps)]
    spans = [s[-1][1] - s[0][0] for s in kept]
    busy = [sum(e - b for b, e, _ in s) for s in kept]
    per_name: dict[str, list[float]] = {}
    increments: dict[str, list[float]] = {}
    for s in kept:
        last_end = s[0][0]
        for b, e, name in s:
            per_name.setdefault(name, []).append(e - b)
            increments.setdefault(name, []).append(max(0.0, e - last_end))
            last_end = max(last_end, e)
    top = sorted(per_name.items(), key=lambda kv: -sum(increments[kv[0]]))
    return {"steps": len(kept), "kernels_per_step": statistics.median(len(s) for s in kept),
            "span_us_median": statistics.median(spans), "busy_us_median": statistics.median(busy),
            "idle_us_median": statistics.median(sp - bu for sp, bu in zip(spans, busy)),
            "by_kernel": [{"name": name[:90], "calls_per_step": len(v) / len(kept), "mean_us": statistics.mean(v),
                           "us_per_step": sum(v) / len(kept),
                           "increment_us_per_step": sum(increments[name]) / len(kept)} for name, v in top[:40]]}


def main(model: str, out: str) -> None:
    result = {"what": __doc__.splitlines()[0], "command": "PYTHONPATH=$PWD python3 benchmarks/gpu/llm_decode_trace.py "
              "MODEL.gguf OUT.json", "model": model, "pdl": os.environ.get("RLX_CUDA_PDL", "default"), "rows": []}
    result["kernel_defines"] = apply_kernel_defines()
    gqa = os.environ.get("GQA_GPU_KEYS")
    if gqa is not None:
        attention_lowering.GQA_SPLIT_GPU_KEYS = int(gqa)
    result["gqa_split_gpu_keys"] = attention_lowering.GQA_SPLIT_GPU_KEYS
    llm = LLM(model, device="cuda", max_context=2048)
    for position in (128, 1900):
        llm.prefill(list(range(2, 2 + position)), output="token")
        token = 2
        for _ in range(5):
            token = int(llm.step(token, output="token"))
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(STEPS):
                token = int(llm.step(token, output="token"))
        row = {"position": position, **_summary(_split_steps(_kernels(prof)))}
        result["rows"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "by_kernel"}), flush=True)
        for k in row["by_kernel"][:25]:
            print(f"  {k['increment_us_per_step']:7.1f} us/step added, {k['calls_per_step']:5.1f} x "
                  f"{k['mean_us']:6.2f} us long  {k['name'][:60]}")
    json.dump(result, open(out, "w"), indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
