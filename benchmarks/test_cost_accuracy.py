"""Cost model accuracy: predicted vs measured time of BERT encoders (1 and 6
layers, batch 1 x 128 tokens) on the host device and, where one is present,
on the CUDA device (the H200 run: `python -m pytest benchmarks/test_cost_accuracy.py -s -k cuda`),
per kernel family and for the whole run.

- measured, per family: every thunk of the compiled executable timed on its
  own, in place in the executable's buffers, INSIDE A REPLAY as runs execute
  it (``calibrate.time_replayed``: the slope of an ICB replaying it 1 + N
  times over once; gemms after a one-entry ICB), summed per family; and
  one launch at a time (``calibrate.time_thunk``) for comparison.
- measured, whole graph: ``Executable.run``, minimum and median over runs.
- predicted: ``CostModel.thunk_seconds`` / ``graph_seconds`` from the
  device's calibration (cached, or measured on first use).

- row-kernel decision: for two BERT layers (weights [K, N]) and two
  feed-forward blocks with weights [N, K], at 1, 9 and 16 tokens (f32 and
  f16 on GPUs), the compile's gemm-or-matmul_rows choice (the cost model's)
  against both paths forced and timed as whole runs.

Target (issue 7): whole-graph prediction within 25% of the measured minimum.
Reported, never asserted (wall times depend on the machine and its load).
The table is printed and written to benchmarks/results/cost_accuracy-<backend>.json
(``RLX_BENCH_COMMAND``: the exact command line to record in it).

Run:  python -m pytest benchmarks/test_cost_accuracy.py -s
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import pytest

import rlx
from rlx.blocks import bert_encoder, random_params
from rlx.runtime import devices
from rlx.tune import calibrate, calibration, cost, decide, work

RESULTS = Path(__file__).resolve().parent / "results"
COMMAND = "python -m pytest benchmarks/test_cost_accuracy.py -s"
TARGET = 0.25


def _measure_runs(exe, feed, runs: int = 30) -> list[float]:
    for _ in range(3):
        exe.run(feed)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        exe.run(feed)
        times.append(time.perf_counter() - t0)
    return times


def _case(layers: int, device: str, model: cost.CostModel) -> dict:
    g = bert_encoder(layers=layers, batch=1, seq=128)
    exe = rlx.compile(g, device=device, params=random_params(g))
    feed = calibrate.random_feed(g)
    runs = _measure_runs(exe, feed)
    families: dict[str, dict] = {}
    gemms: dict[str, dict] = {}      # per gemm shape (the first layer's), for diagnosis
    for thunk in exe.thunks:
        fam = families.setdefault(work.family_of(thunk), {"thunks": 0, "predicted_s": 0.0, "measured_s": 0.0})
        fam["thunks"] += 1
        predicted_s = model.thunk_seconds(thunk)
        measured_s = calibrate.time_replayed(exe, thunk, samples=5)
        fam["predicted_s"] += predicted_s
        fam["measured_s"] += measured_s
        fam["measured_one_launch_s"] = fam.get("measured_one_launch_s", 0.0) + calibrate.time_thunk(
            exe, thunk, repeats=4, samples=5)
        if thunk.gemm is not None:
            gd = thunk.gemm
            key = f"{gd.get('batch', 1)}x({gd['m']},{gd['n']},{gd['k']}) trans_b={int(gd['trans_b'])}"
            entry = gemms.setdefault(key, {"count": 0, "predicted_s": predicted_s, "measured_s": []})
            entry["count"] += 1
            entry["measured_s"].append(measured_s)
    io = decide._io_bytes(exe.graph)
    predicted = model.graph_seconds(exe.thunks, io)
    measured = min(runs)
    thunk_sum = sum(f["measured_s"] for f in families.values())
    # What the run costs beyond its thunks timed hot (sync, copies in/out,
    # weights streamed from memory, replay ranges): predicted as sync floor +
    # transfers + cold weight reads + a cost per replay range.
    families["run overhead"] = {"thunks": 0, "predicted_s": model.run_overhead_seconds(exe.thunks, io),
                                "measured_s": max(measured - thunk_sum, 0.0), "measured_one_launch_s": 0.0,
                                "replay_ranges": model.replay_ranges(exe.thunks)}
    return {"layers": layers, "thunks": len(exe.thunks), "measured_min_s": measured,
            "measured_median_s": statistics.median(runs), "predicted_s": predicted,
            "error": predicted / measured - 1.0, "error_vs_median": predicted / statistics.median(runs) - 1.0,
            "families": families,
            "gemms": {k: {**v, "measured_s": statistics.median(v["measured_s"])} for k, v in gemms.items()}}


def _ffn_tb(tokens: int, layers: int = 2, hidden: int = 384, ffn: int = 1536) -> rlx.Graph:
    """Feed-forward blocks with weights stored [N, K] (as checkpoints store
    them; the row kernel's mat-vec path at M = 1)."""
    g = rlx.Graph()
    x = g.input("x", (tokens, hidden))
    for i in range(layers):
        h = g.linear(x, g.param(f"w{i}a", (ffn, hidden)), g.param(f"b{i}a", (ffn,)), activation="gelu",
                     transpose_b=True)
        x = g.linear(h, g.param(f"w{i}b", (hidden, ffn)), g.param(f"b{i}b", (hidden,)), transpose_b=True)
    g.set_outputs(y=x)
    return g


def _decisions(device: str, precisions: tuple[str, ...]) -> list[dict]:
    """The compile's (cost model's) gemm-or-row-kernel choice at small token
    counts, against both paths forced and timed as whole runs: BERT layers
    (weights [K, N]) and feed-forward blocks with weights [N, K]."""
    from rlx.lowering import linear as lowering_linear

    chosen_fn = lowering_linear.use_row_kernel
    out = []
    for graph_name, build in (("bert2 [K,N]", lambda t: bert_encoder(layers=2, batch=1, seq=t)),
                              ("ffn2 [N,K]", _ffn_tb)):
        for precision in precisions:
            for tokens in (1, 9, 16):
                g = build(tokens)
                params = random_params(g)
                feed = calibrate.random_feed(g)
                row = {"graph": graph_name, "precision": precision, "tokens": tokens}
                try:
                    for label, force in (("chosen", None), ("gemm", False), ("row_kernel", True)):
                        lowering_linear.use_row_kernel = chosen_fn if force is None else (lambda *a, f=force, **k: f)
                        exe = rlx.compile(g, device=device, params=params, precision=precision)
                        row[f"{label}_row_thunks"] = sum(work.family_of(t) == "matmul_rows" for t in exe.thunks)
                        row[f"{label}_ms"] = 1e3 * min(_measure_runs(exe, feed, runs=30))
                finally:
                    lowering_linear.use_row_kernel = chosen_fn
                row["chose"] = "row_kernel" if row["chosen_row_thunks"] else "gemm"
                if 0 < row["chosen_row_thunks"] < row["row_kernel_row_thunks"]:
                    row["chose"] = "mixed"
                row["faster"] = "row_kernel" if row["row_kernel_ms"] < row["gemm_ms"] else "gemm"
                out.append(row)
    return out


def _table(cases: list[dict]) -> list[str]:
    lines = [f"{'case':<16}{'family':<16}{'thunks':>7}{'predicted ms':>14}{'measured ms':>13}{'pred/meas':>11}"
             f"{'one-launch ms':>15}"]
    for c in cases:
        name = f"bert {c['layers']} layer" + ("s" if c["layers"] > 1 else "")
        for fam, f in sorted(c["families"].items(), key=lambda kv: -kv[1]["measured_s"]):
            ratio = f["predicted_s"] / f["measured_s"] if f["measured_s"] > 0 else float("nan")
            lines.append(f"{name:<16}{fam:<16}{f['thunks']:>7}{f['predicted_s'] * 1e3:>14.3f}"
                         f"{f['measured_s'] * 1e3:>13.3f}{ratio:>11.2f}{f['measured_one_launch_s'] * 1e3:>15.3f}")
        lines.append(f"{name:<16}{'WHOLE RUN':<16}{c['thunks']:>7}{c['predicted_s'] * 1e3:>14.3f}"
                     f"{c['measured_min_s'] * 1e3:>13.3f}{c['predicted_s'] / c['measured_min_s']:>11.2f}"
                     f"   error {c['error'] * 100:+.1f}% vs min, {c['error_vs_median'] * 100:+.1f}% vs median "
                     f"({c['measured_median_s'] * 1e3:.3f} ms)")
    return lines


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_cost_model_accuracy_bert(device):
    if not any(d.name == device and d.available for d in devices.devices()):
        pytest.skip(f"{device} is not available here")
    dev, _ = devices.open_device(device)
    calib = calibrate.get_calibration(dev)
    model = cost.CostModel(calib)
    cases = [_case(layers, device, model) for layers in (1, 6)]
    lines = _table(cases)
    within = all(abs(c["error"]) <= TARGET for c in cases)
    lines.append(f"target: whole run within {TARGET:.0%} of measured (min): {'met' if within else 'NOT met'}")
    decisions = _decisions(device, ("f32", "f16") if calib.backend != "host" else ("f32",))
    for d in decisions:
        lines.append(f"row-kernel decision {d['graph']} {d['precision']} {d['tokens']:>2} tokens: "
                     f"chose {d['chose']:<10} "
                     f"(gemm {d['gemm_ms']:.3f} ms, row kernel {d['row_kernel_ms']:.3f} ms, chosen "
                     f"{d['chosen_ms']:.3f} ms; faster: {d['faster']})")
    print("\ncost model accuracy (" + calib.backend + ", " + calib.source + " calibration)\n  " + "\n  ".join(lines),
          file=sys.stderr)
    RESULTS.mkdir(exist_ok=True)
    out = {"command": os.environ.get("RLX_BENCH_COMMAND", COMMAND), "argv": sys.argv,
           "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "rlx": rlx.__version__, "platform": platform.platform(), "device": dev.info.as_dict(),
           "calibration": {"path": str(calibration.calibration_path(dev)), "source": calib.source,
                           "summary": calib.summary()},
           "target": TARGET, "within_target": within, "cases": cases, "row_kernel_decisions": decisions,
           "table": lines}
    (RESULTS / f"cost_accuracy-{calib.backend}.json").write_text(json.dumps(out, indent=2))
    for c in cases:
        assert c["predicted_s"] > 0 and c["measured_min_s"] > 0
