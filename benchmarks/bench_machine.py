"""The machine a benchmark ran on, for its results JSON: lscpu's model, CPU
count and flags (machines differ between sessions: one had AVX-512, the
next only AVX2)."""

from __future__ import annotations

import subprocess


def lscpu() -> dict:
    """{"model", "cpus", "flags"} from lscpu, or {} where lscpu is missing."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    rows = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line)}
    return {"model": rows.get("Model name"), "cpus": rows.get("CPU(s)"), "flags": rows.get("Flags")}
