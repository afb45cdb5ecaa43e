"""FFT on an NVIDIA GPU (issue 19): rlx's fft/rfft/irfft graphs against
cuFFT through torch.fft, and a Whisper-style log-mel front end against the
same computation written in PyTorch (eager and replayed from a CUDA graph),
in one process. Writes JSON (argv[1], default stdout).

Times are device times of the transform alone: for rlx the sum over the
executable's thunks of Program.run_one (CUDA events in the shim; each
thunk its own launch), and for the log-mel graph also the executable
replayed as one CUDA graph with no input or output copies
(cuda_timing.bare_replay, as fft_breakdown.py: the issue's "replayed"),
for torch CUDA events around the call (eager) or around a graph replay. Every rlx
result is checked against numpy's float64 transform first, so a fast wrong
answer cannot pass; the log-mel result against the torch one.

Run on the H200:  PYTHONPATH=$PWD python3 benchmarks/gpu/fft_cuda.py OUT.json"""

from __future__ import annotations

import json
import math
import statistics
import sys

import numpy as np
import torch
from cuda_timing import bare_replay, events_ms, graph_of, replay_ms  # benchmarks/gpu/cuda_timing.py (own folder)
from results import emit  # benchmarks/gpu/results.py

import rlx
from rlx import signal

POINTS = 1 << 22                      # ~the same work per case: 32 MB of c64 in
COMPLEX_SIZES = [256, 1024, 4096, 65536, 1000, 4099]   # powers of two, a mixed radix, a Bluestein prime
REAL_SIZES = [400, 512]
REPS = 30


def _events_ms(fn, reps: int = REPS) -> float:
    return events_ms(fn, reps, warmup=3)


def _graph_ms(fn) -> float:
    return _events_ms(graph_of(fn).replay)


def _rlx_device_ms(exe) -> tuple[float, int]:
    """Median over REPS of the summed device time of every thunk."""
    n = len(exe.thunks)
    for i in range(n):
        exe.program.run_one(i)
    totals = [sum(exe.program.run_one(i) for i in range(n)) for _ in range(REPS)]
    return statistics.median(totals) * 1e3, n


def _transform_row(op: str, n: int) -> dict:
    rng = np.random.default_rng(n)
    batch = max(1, POINTS // n)
    if op == "fft":
        x = (rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))).astype(np.complex64)
        dtype, want = "c64", np.fft.fft(x.astype(np.complex128))
    elif op == "rfft":
        x = rng.standard_normal((batch, n)).astype(np.float32)
        dtype, want = "f32", np.fft.rfft(x.astype(np.float64))
    else:   # irfft of a spectrum of n // 2 + 1 bins, back to n points
        x = np.fft.rfft(rng.standard_normal((batch, n))).astype(np.complex64)
        dtype, want = "c64", np.fft.irfft(x.astype(np.complex128), n)
    g = rlx.Graph()
    node = g.input("x", x.shape, dtype)
    g.set_outputs(y=g.irfft(node, n) if op == "irfft" else getattr(g, op)(node))
    exe = rlx.compile(g, device="cuda")
    got = exe.run(x=x)["y"]
    err = float(np.abs(got - want).max() / np.abs(want).max())
    rlx_ms, thunks = _rlx_device_ms(exe)
    tx = torch.from_numpy(x).cuda()
    call = (lambda: torch.fft.irfft(tx, n)) if op == "irfft" else (lambda: getattr(torch.fft, op)(tx))
    torch_ms = _events_ms(call)
    torch_graph_ms = _graph_ms(call)
    row = {"op": op, "n": n, "batch": batch, "rlx_rel_err": err, "correct": err <= 1e-5 * max(1.0, math.log2(n)),
           "rlx_kernels": sorted({t.kernel for t in exe.thunks if t.kernel}), "rlx_thunks": thunks,
           "rlx_device_ms": rlx_ms, "cufft_eager_ms": torch_ms, "cufft_graph_ms": torch_graph_ms,
           "rlx_over_cufft": rlx_ms / torch_graph_ms}
    print(json.dumps(row), flush=True)
    return row


def _torch_log_mel(y: torch.Tensor, fb: torch.Tensor, n_fft: int, hop: int, amin: float):
    window = torch.hann_window(n_fft, periodic=True, device=y.device)
    spec = torch.stft(y, n_fft, hop, window=window, center=True, pad_mode="constant", return_complex=True)
    power = spec.real.square() + spec.imag.square()                    # [B, bins, T]
    mel = torch.matmul(fb, power)                                        # [B, n_mels, T]
    return 10.0 * torch.log10(torch.clamp(mel, min=amin))


def _log_mel_row(batch: int, seconds: float) -> dict:
    sr, n_fft, hop, n_mels, amin = 16000, 400, 160, 80, 1e-10
    y = np.random.default_rng(3).standard_normal((batch, int(sr * seconds))).astype(np.float32)
    g = rlx.Graph()
    x = g.input("y", y.shape)
    g.set_outputs(m=signal.log_mel_spectrogram(g, x, sr=sr, n_fft=n_fft, hop_length=hop, n_mels=n_mels,
                                                 amin=amin))
    exe = rlx.compile(g, device="cuda")
    got = exe.run(y=y)["m"]
    fb = torch.from_numpy(signal.mel_filterbank(sr, n_fft, n_mels=n_mels).astype(np.float32)).cuda()
    ty = torch.from_numpy(y).cuda()
    want = _torch_log_mel(ty, fb, n_fft, hop, amin).cpu().numpy()
    err_db = float(np.abs(got - want).max())
    rlx_ms, thunks = _rlx_device_ms(exe)
    replayed_ms = replay_ms(bare_replay(exe), REPS)   # the whole graph as one CUDA graph, as a user runs it
    eager_ms = _events_ms(lambda: _torch_log_mel(ty, fb, n_fft, hop, amin))
    graph_ms = _graph_ms(lambda: _torch_log_mel(ty, fb, n_fft, hop, amin))
    row = {"op": "log_mel", "batch": batch, "seconds": seconds, "n_fft": n_fft, "hop": hop, "n_mels": n_mels,
           "max_abs_diff_db_vs_torch": err_db, "correct": err_db <= 1e-2, "rlx_thunks": thunks,
           "rlx_device_ms": rlx_ms, "rlx_replay_ms": replayed_ms, "torch_eager_ms": eager_ms,
           "torch_graph_ms": graph_ms, "rlx_over_torch_eager": rlx_ms / eager_ms,
           "rlx_over_torch_graph": rlx_ms / graph_ms, "rlx_replay_over_torch_graph": replayed_ms / graph_ms,
           "rlx_replay_over_torch_eager": replayed_ms / eager_ms}
    print(json.dumps(row), flush=True)
    return row


def main(out_path: str | None) -> None:
    rows = [_transform_row("fft", n) for n in COMPLEX_SIZES]
    rows += [_transform_row(op, n) for op in ("rfft", "irfft") for n in REAL_SIZES]
    rows += [_log_mel_row(b, s) for b, s in ((1, 30.0), (16, 30.0))]
    result = {"what": __doc__.splitlines()[0], "command": "PYTHONPATH=$PWD python3 benchmarks/gpu/fft_cuda.py OUT",
              "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    emit(result, out_path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
