"""Resident memory through an LLM's load and first prefill on the CPU:
VmRSS sampled every 2 ms, the peak per compile stage (the params' bind,
the states' bind, the siblings' merged params) and the process's maximum.

Run: python benchmarks/load_memory_probe.py MODEL.gguf [PROMPT_TOKENS]"""

from __future__ import annotations

import resource
import sys
import threading
import time

import rlx.runtime.compiler as compiler
from rlx.opt.siblings import SiblingReport


def rss_mb() -> int:
    with open("/proc/self/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) // 1024


def main(model: str, prompt: int = 128) -> None:
    stage, peak = ["start"], {}

    def sample() -> None:
        while True:
            now, where = rss_mb(), stage[0]
            peak[where] = max(peak.get(where, 0), now)
            time.sleep(0.002)

    def marked(fn, name):
        def wrapped(*args, **kwargs):
            stage[0] = name
            try:
                return fn(*args, **kwargs)
            finally:
                stage[0] = f"after {name}"
        return wrapped

    compiler._bind_resident = marked(compiler._bind_resident, "bind params")
    compiler._bind_states = marked(compiler._bind_states, "bind states")
    SiblingReport.param_values = marked(SiblingReport.param_values, "merged params")
    threading.Thread(target=sample, daemon=True).start()
    from rlx.models.llm import LLM

    stage[0] = "load (file, tokenizer)"
    llm = LLM(model, device="cpu", max_context=512)
    stage[0] = "prefill (compile and run)"
    llm.prefill(list(range(2, 2 + prompt)), output="token")
    stage[0] = "done"
    time.sleep(0.05)
    for where, mb in peak.items():
        print(f"{where:28s} peak {mb} MB")
    print(f"process maximum {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB")


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
