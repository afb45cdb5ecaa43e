"""The spread of small runs on the host device: min, median and p90 of a
one-op graph's `Executable.run` and of a replayed 1,000-thunk chain, beside
numpy doing the same work in the same process (issue 16 item 3: the median
must stay within 2x of the minimum).

    python benchmarks/run_path_spread.py [OUT.json] [--label NAME]

Run it from two checkouts in alternating processes for an A/B (the results
file names the commands). Prints one JSON object; OUT.json gets it too."""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time

import numpy as np
from test_overhead import N_OPS as CHAIN  # the suite's graphs (this script runs from benchmarks/)
from test_overhead import WIDTH, _chain_graph

import rlx


def _spread(fn, runs: int, warmup: int, per: int = 1) -> dict:
    for _ in range(warmup):
        fn()
    times = np.empty(runs)
    for i in range(runs):
        t0 = time.perf_counter_ns()
        fn()
        times[i] = time.perf_counter_ns() - t0
    times /= 1e3 * per
    return {"min_us": float(times.min()), "median_us": float(np.median(times)),
            "p90_us": float(np.percentile(times, 90)), "median_over_min": float(np.median(times) / times.min())}


def _one_op():
    g = rlx.Graph()
    x = g.input("x", (WIDTH,))
    g.set_outputs(y=g.add(x, x))
    return rlx.compile(g)


def _chain():

    return rlx.compile(_chain_graph(), params={"b": np.full(WIDTH, 0.5, np.float32)})


def machine() -> dict:
    info = {"machine": platform.machine()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        info.update(cpu=fields.get("Model name", "").strip(), cores=fields.get("CPU(s)", "").strip(),
                    flags=fields.get("Flags", "").strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--label", default="rlx")
    args = ap.parse_args()
    a = np.ones(WIDTH, np.float32)
    b = np.full(WIDTH, 0.5, np.float32)
    one, chain = _one_op(), _chain()

    def numpy_chain():
        y = a.copy()
        for _ in range(CHAIN):
            np.add(y, b, out=y)

    result = {
        "label": args.label,
        "device": one.device_name if hasattr(one, "device_name") else "host",
        "one_op_run": _spread(lambda: one.run(x=a), 18000, 2000),
        "one_op_numpy": _spread(lambda: np.add(a, a), 18000, 2000),
        "chain_replayed_per_thunk": _spread(lambda: chain.run(x=a), 2700, 300, per=CHAIN),
        "chain_numpy_per_op": _spread(numpy_chain, 300, 30, per=CHAIN),
        "machine": machine(),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
