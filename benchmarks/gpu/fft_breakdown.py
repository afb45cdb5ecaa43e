"""Where the FFT and log-mel graphs spend their GPU time (issue 19), three
ways in one process: each thunk alone (Program.run_one, CUDA events in the
shim: each launch's round trip counted, which is what fft_cuda.py sums), the
whole executable replayed as one CUDA graph with no input or output copies
(a bare Program over the executable's arena, as a PyTorch graph replay;
device time from the shim's events), and the kernels' own durations inside
that replay as CUPTI records them (torch.profiler), next to PyTorch's graph
of the same computation traced the same way. Writes JSON (argv[1]).

Run on the H200:  PYTHONPATH=$PWD python3 benchmarks/gpu/fft_breakdown.py OUT.json"""

from __future__ import annotations

import json
import statistics
import sys

import numpy as np
import torch
from cuda_timing import bare_replay, events_ms, graph_of, kernel_table, replay_ms  # benchmarks/gpu/cuda_timing.py
from fft_cuda import _torch_log_mel  # benchmarks/gpu/fft_cuda.py: the same PyTorch log-mel
from results import emit  # benchmarks/gpu/results.py

import rlx
from rlx import signal

REPS = 50


def per_thunk_us(exe) -> list[dict]:
    rows = []
    for i, t in enumerate(exe.thunks):
        exe.program.run_one(i)
        us = statistics.median(exe.program.run_one(i) for _ in range(REPS)) * 1e6
        rows.append({"thunk": t.label[:80], "kernel": t.kernel or "gemm", "run_one_us": round(us, 2)})
    return rows


def log_mel_row(batch: int, fusion: bool = True) -> dict:
    sr, n_fft, hop, n_mels, amin = 16000, 400, 160, 80, 1e-10
    y = np.random.default_rng(3).standard_normal((batch, sr * 30)).astype(np.float32)
    g = rlx.Graph()
    x = g.input("y", y.shape)
    g.set_outputs(m=signal.log_mel_spectrogram(g, x, sr=sr, n_fft=n_fft, hop_length=hop, n_mels=n_mels, amin=amin))
    exe = rlx.compile(g, device="cuda", passes={"fusion": fusion})
    got = exe.run(y=y)["m"]
    fb = torch.from_numpy(signal.mel_filterbank(sr, n_fft, n_mels=n_mels).astype(np.float32)).cuda()
    ty = torch.from_numpy(y).cuda()
    want = _torch_log_mel(ty, fb, n_fft, hop, amin).cpu().numpy()
    bare = bare_replay(exe)
    graph = graph_of(lambda: _torch_log_mel(ty, fb, n_fft, hop, amin))
    case = f"log_mel batch {batch}" + ("" if fusion else " (fusion off)")
    row = {"case": case, "max_abs_diff_db_vs_torch": float(np.abs(got - want).max()),
           "thunks": len(exe.thunks), "rlx_replay_ms": replay_ms(bare, REPS),
           "rlx_sum_of_run_one_ms": sum(r["run_one_us"] for r in per_thunk_us(exe)) / 1e3,
           "per_thunk": per_thunk_us(exe),
           "torch_eager_ms": events_ms(lambda: _torch_log_mel(ty, fb, n_fft, hop, amin), REPS, warmup=3),
           "torch_graph_ms": events_ms(graph.replay, REPS, warmup=3),
           "rlx_kernels": kernel_table(lambda: bare.run([], [])), "torch_graph_kernels": kernel_table(graph.replay)}
    row["rlx_replay_over_torch_graph"] = row["rlx_replay_ms"] / row["torch_graph_ms"]
    row["rlx_replay_over_torch_eager"] = row["rlx_replay_ms"] / row["torch_eager_ms"]
    print(json.dumps(row), flush=True)
    return row


def fft_row(n: int, batch: int) -> dict:
    x = (np.random.default_rng(n).standard_normal((batch, n))
         + 1j * np.random.default_rng(n + 1).standard_normal((batch, n))).astype(np.complex64)
    g = rlx.Graph()
    g.set_outputs(y=g.fft(g.input("x", x.shape, "c64")))
    exe = rlx.compile(g, device="cuda")
    got = exe.run(x=x)["y"]
    want = np.fft.fft(x.astype(np.complex128))
    bare = bare_replay(exe)
    tx = torch.from_numpy(x).cuda()
    graph = graph_of(lambda: torch.fft.fft(tx))
    row = {"case": f"fft {n} x {batch}", "rel_err": float(np.abs(got - want).max() / np.abs(want).max()),
           "rlx_replay_ms": replay_ms(bare, REPS), "cufft_graph_ms": events_ms(graph.replay, REPS, warmup=3),
           "rlx_kernels": kernel_table(lambda: bare.run([], [])), "cufft_graph_kernels": kernel_table(graph.replay)}
    print(json.dumps(row), flush=True)
    return row


def main(out_path: str | None) -> None:
    rows = [log_mel_row(b, fusion) for b in (1, 16) for fusion in (True, False)]
    rows += [fft_row(n, (1 << 22) // n) for n in (256, 4096)]
    emit({"what": __doc__.splitlines()[0], "command": "PYTHONPATH=$PWD python3 benchmarks/gpu/fft_breakdown.py OUT",
          "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, out_path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
