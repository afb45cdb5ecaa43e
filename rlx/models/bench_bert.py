"""`rlx bench bert`: BERT encoder latency, rlx vs PyTorch CPU vs ONNX Runtime CPU.

Every peer runs the same weights and the same token ids (full sequences, no
padding) to the last hidden state, with the same thread count. Each peer
runs in its own subprocess, so its peak RSS (``ru_maxrss``, a process
high-water mark: runtime + weights + activations) is its own; cases run from
small to large, so the high-water after a case is that case's peak. The ONNX
model is exported from the PyTorch model with ``torch.onnx.export`` into a
temporary folder.

Also usable in-process (benchmarks/test_bert_bench.py): ``make_runner``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

CASES: tuple[tuple[int, int], ...] = ((1, 9), (1, 128), (32, 9), (32, 128))
PEERS = ("rlx", "torch", "ort")


def make_inputs(batch: int, tokens: int, vocab: int = 30522, seed: int = 0) -> dict[str, np.ndarray]:
    """[CLS] random word ids [SEP], attention mask all ones."""
    rng = np.random.default_rng(seed + 1000 * batch + tokens)
    ids = rng.integers(1000, vocab, size=(batch, tokens), dtype=np.int64)
    ids[:, 0], ids[:, -1] = 101, 102
    return {"input_ids": ids, "attention_mask": np.ones((batch, tokens), np.int64)}


def peer_available(peer: str) -> str | None:
    """None when usable, else why not."""
    import importlib.util

    need = {"rlx": [], "torch": ["torch", "transformers"], "ort": ["torch", "transformers", "onnxruntime", "onnx"]}
    missing = [m for m in need[peer] if importlib.util.find_spec(m) is None]
    return f"not installed: {', '.join(missing)}" if missing else None


def _rss_mib() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024.0 if sys.platform != "darwin" else kb / 2**20


# ---------------------------------------------------------------- runners


def make_runner(peer: str, folder: Path, batch: int, tokens: int, threads: int, precision: str = "f32",
                onnx_path: Path | None = None, device: str | None = "cpu") -> tuple[Callable[[], object], dict]:
    """A no-argument callable that runs one forward pass, and facts about it."""
    inputs = make_inputs(batch, tokens)
    facts: dict = {}
    if peer == "rlx":
        import rlx
        from rlx.models.bert import BertModel, compile_precision

        model = _model_cache.get(folder) or BertModel.load(folder)
        _model_cache[folder] = model
        t0 = time.perf_counter()
        exe = rlx.compile(model.build_graph(batch, tokens, precision, pooled=False), device=device,
                          params=model.params(precision), precision=compile_precision(precision))
        facts["compile_ms"] = 1e3 * (time.perf_counter() - t0)
        facts["executable"] = exe
        feed = {"input_ids": inputs["input_ids"].astype(np.int32),
                "attention_mask": inputs["attention_mask"].astype(np.float32)}
        return (lambda: exe.run(feed)), facts
    if peer == "torch":
        import torch

        torch.set_num_threads(threads)
        model = _torch_model(folder)
        feed = {k: torch.from_numpy(v) for k, v in inputs.items()}

        def run_torch():
            with torch.inference_mode():
                return model(**feed).last_hidden_state
        return run_torch, facts
    if peer == "ort":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = _ort_sessions.get((onnx_path, threads))
        if sess is None:
            sess = ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])
            _ort_sessions[(onnx_path, threads)] = sess
        return (lambda: sess.run(None, inputs)), facts
    raise ValueError(f"unknown peer {peer!r}")


_model_cache: dict = {}
_ort_sessions: dict = {}


def _torch_model(folder: Path, fresh: bool = False):
    if not fresh and ("torch", folder) in _model_cache:
        return _model_cache[("torch", folder)]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import BertModel as HFBert
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    model = HFBert.from_pretrained(str(folder), add_pooling_layer=False, attn_implementation="eager").eval()
    if not fresh:
        _model_cache[("torch", folder)] = model
    return model


def export_onnx(folder: Path, out: Path) -> Path:
    """Export the PyTorch BERT (same weights) to ONNX with dynamic batch and sequence axes."""
    import torch

    # A model of its own: exporting leaves the module changed (its outputs differ afterwards).
    model = _torch_model(folder, fresh=True)

    class LastHidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    ex = make_inputs(2, 16)
    args = (torch.from_numpy(ex["input_ids"]), torch.from_numpy(ex["attention_mask"]))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(LastHidden(model), args, str(out), input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                          dynamic_axes={"input_ids": {0: "b", 1: "t"}, "attention_mask": {0: "b", 1: "t"},
                                        "last_hidden_state": {0: "b", 1: "t"}})
    return out


def time_runner(fn: Callable[[], object], budget_s: float = 3.0, max_runs: int = 50, min_runs: int = 5,
                warmup: int = 3) -> dict:
    """Median latency (ms) after warm-up, with at most ~budget_s of timed runs."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    for _ in range(warmup - 1):
        fn()
    runs = int(max(min_runs, min(max_runs, budget_s / max(first, 1e-6))))
    times = []
    for _ in range(runs):
        s = time.perf_counter()
        fn()
        times.append(time.perf_counter() - s)
    return {"median_ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times), "runs": runs}


# ---------------------------------------------------------------- per-thunk profile


def profile_thunks(exe, repeats: int = 20) -> list[dict]:
    """Time each thunk of a compiled executable alone: ``Program.run_one``
    runs it over the executable's own buffers, encoded as a run encodes it,
    in a command buffer of its own. A development aid, not an API."""
    program = exe.program
    rows = []
    for i, t in enumerate(exe.thunks):
        program.run_one(i)
        times, device_times = [], []
        for _ in range(repeats):
            s = time.perf_counter()
            device_times.append(program.run_one(i))
            times.append(time.perf_counter() - s)
        rows.append({"index": i, "label": t.label, "kernel": t.kernel or "gemm",
                     "ms": 1e3 * statistics.median(times), "device_ms": 1e3 * statistics.median(device_times)})
    return rows


def kernel_totals(rows: list[dict]) -> list[dict]:
    """profile_thunks' rows summed per kernel, largest first: kernel, count, device_ms."""
    per_kernel: dict[str, list[float]] = {}
    for r in rows:
        per_kernel.setdefault(r["kernel"], []).append(r["device_ms"])
    totals = sorted(((k, len(v), sum(v)) for k, v in per_kernel.items()), key=lambda x: -x[2])
    return [{"kernel": k, "count": n, "device_ms": ms} for k, n, ms in totals]


def summarize_profile(rows: list[dict], top: int = 12) -> list[tuple[str, int, float]]:
    """(kind, count, total ms) per kernel/label kind, largest first."""
    agg: dict[str, list[float]] = {}
    for r in rows:
        label = r["label"]
        op = label.split("=", 1)[1].split("(")[0].strip() if "=" in label else label.split(" ")[0]
        key = f"{op}: {r['kernel']}"
        agg.setdefault(key, []).append(r["ms"])
    out = sorted(((k, len(v), sum(v)) for k, v in agg.items()), key=lambda x: -x[2])
    return out[:top]


# ---------------------------------------------------------------- worker and driver


def _worker(peer: str, folder: Path, cases: list[tuple[int, int]], threads: int, precision: str,
            onnx_path: Path | None, budget: float, device: str | None) -> list[dict]:
    results = []
    for b, t in cases:
        fn, facts = make_runner(peer, folder, b, t, threads, precision, onnx_path, device)
        r = time_runner(fn, budget_s=budget)
        r.update(batch=b, tokens=t, peer=peer, peak_rss_mib=_rss_mib())
        if "compile_ms" in facts:
            r["compile_ms"] = facts["compile_ms"]
        results.append(r)
    return results


def run_benchmark(model: str | None = None, peers: tuple[str, ...] = PEERS, cases=CASES, threads: int | None = None,
                  precision: str = "f32", budget: float = 3.0, device: str | None = "cpu", log=print) -> dict:
    """Run every available peer in its own subprocess; returns {peer: results or reason}."""
    from rlx import env
    from rlx.models.bert import resolve_model_path

    folder = resolve_model_path(model)
    threads = threads or env.num_threads()
    report: dict = {"threads": threads, "precision": precision, "folder": str(folder), "device": device or "cpu",
                    "peers": {}}
    with tempfile.TemporaryDirectory(prefix="rlx-bench-") as tmp:
        onnx_path = Path(tmp) / "bert.onnx"
        for peer in peers:
            why = peer_available(peer)
            if why:
                report["peers"][peer] = why
                log(f"  {peer}: skipped ({why})")
                continue
            if peer == "ort" and not onnx_path.exists():
                log("  exporting the PyTorch model to ONNX ...")
                code = ("import sys; from pathlib import Path; from rlx.models.bench_bert import export_onnx; "
                        "export_onnx(Path(sys.argv[1]), Path(sys.argv[2]))")
                r = subprocess.run([sys.executable, "-c", code, str(folder), str(onnx_path)], capture_output=True,
                                   text=True)
                if r.returncode != 0:
                    report["peers"][peer] = f"ONNX export failed: {r.stderr.strip().splitlines()[-1:]}"
                    log(f"  {peer}: skipped ({report['peers'][peer]})")
                    continue
            log(f"  running {peer} ...")
            cmd = [sys.executable, "-m", "rlx.models.bench_bert", "--worker", peer, "--folder", str(folder),
                   "--threads", str(threads), "--precision", precision, "--budget", str(budget),
                   "--cases", ",".join(f"{b}x{t}" for b, t in cases), "--onnx", str(onnx_path),
                   "--device", device or "cpu"]
            envv = dict(os.environ)      # the child's environment: same thread count for every peer
            envv.update({"RLX_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1",
                         "TRANSFORMERS_OFFLINE": "1"})
            r = subprocess.run(cmd, capture_output=True, text=True, env=envv)
            if r.returncode != 0:
                report["peers"][peer] = f"failed: {r.stderr.strip()[-500:]}"
                log(f"  {peer}: failed\n{r.stderr.strip()[-2000:]}")
                continue
            report["peers"][peer] = json.loads(r.stdout.strip().splitlines()[-1])
    return report


def format_report(report: dict) -> str:
    peers = {p: v for p, v in report["peers"].items() if isinstance(v, list)}
    rl = {(r["batch"], r["tokens"]): r for r in peers.get("rlx", [])}
    others = [p for p in peers if p != "rlx"]
    head = ["batch x tokens", f"rlx {report['precision']} ms"] + [f"{p} ms" for p in others] + \
           [f"rlx/{p}" for p in others] + ["rlx compile ms", "peak RSS MiB (" + ", ".join(peers) + ")"]
    lines = [head]
    cases = sorted({(r["batch"], r["tokens"]) for v in peers.values() for r in v}, key=lambda c: c[0] * c[1])
    for c in cases:
        row = [f"{c[0]} x {c[1]}"]
        mine = rl.get(c)
        row.append(f"{mine['median_ms']:.2f}" if mine else "-")
        by = {p: {(r["batch"], r["tokens"]): r for r in peers[p]}.get(c) for p in others}
        row += [f"{by[p]['median_ms']:.2f}" if by[p] else "-" for p in others]
        row += [f"{mine['median_ms'] / by[p]['median_ms']:.2f}x" if mine and by[p] else "-" for p in others]
        row.append(f"{mine['compile_ms']:.0f}" if mine and "compile_ms" in mine else "-")
        rss = [{(r["batch"], r["tokens"]): r for r in peers[p]}.get(c) for p in peers]
        row.append(" / ".join(f"{r['peak_rss_mib']:.0f}" if r else "-" for r in rss))
        lines.append(row)
    widths = [max(len(str(r[i])) for r in lines) for i in range(len(head))]
    out = ["  ".join(str(x).rjust(w) for x, w in zip(r, widths)) for r in lines]
    skipped = [f"{p}: {v}" for p, v in report["peers"].items() if not isinstance(v, list)]
    out.append(f"median of timed runs after warm-up; {report['threads']} threads everywhere; last hidden state of "
               f"full sequences; peers in f32; peak RSS = each peer's own process high-water mark (ru_maxrss).")
    if skipped:
        out.append("skipped: " + "; ".join(skipped))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rlx.models.bench_bert")
    p.add_argument("--worker", choices=PEERS, required=True)
    p.add_argument("--folder", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--precision", default="f32")
    p.add_argument("--budget", type=float, default=3.0)
    p.add_argument("--cases", default=",".join(f"{b}x{t}" for b, t in CASES))
    p.add_argument("--onnx", default=None)
    p.add_argument("--device", default="cpu")
    a = p.parse_args(argv)
    cases = [tuple(int(v) for v in c.split("x")) for c in a.cases.split(",")]
    res = _worker(a.worker, Path(a.folder), cases, a.threads, a.precision, Path(a.onnx) if a.onnx else None,
                  a.budget, a.device)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
