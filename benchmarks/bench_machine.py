"""The machine a benchmark ran on, and its results file: lscpu's model, CPU
count and flags (machines differ between sessions: one had AVX-512, the
next only AVX2), and one writer that stamps every results JSON alike."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time


def lscpu() -> dict:
    """{"model", "cpus", "flags"} from lscpu, or {} where lscpu is missing."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    rows = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line)}
    return {"model": rows.get("Model name"), "cpus": rows.get("CPU(s)"), "flags": rows.get("Flags")}


def write_results(path: str, command: str, **fields) -> None:
    """``fields`` as JSON at ``path``, with the command that made them, the
    date, the machine (lscpu, Python, RLX_NUM_THREADS, the load average at
    the end: a busy machine skews timings)."""
    machine = {**lscpu(), "python": platform.python_version(), "rlx_num_threads": os.environ.get("RLX_NUM_THREADS")}
    if hasattr(os, "getloadavg"):
        machine["load_average_at_end"] = os.getloadavg()
    doc = {"command": command, "date": time.strftime("%Y-%m-%d"), "machine": machine, **fields}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
