"""Log-mel spectrogram on the CPU (issue 19): Whisper's front end (30 s at
16 kHz, n_fft 400, hop 160, 80 mels, constant centre padding, dB), rlx's
compiled `rlx.signal.log_mel_spectrogram` against PyTorch (torch.stft, the
same filterbank as a matmul, 10 log10(max(amin, S))) and librosa
(melspectrogram + power_to_db) in the same run, batches of 1 and 4. Every
result is checked against PyTorch's first (what is timed is right).

Run: python -m pytest benchmarks/test_logmel_bench.py --benchmark-enable
or:  python benchmarks/test_logmel_bench.py --json FILE  (each peer in its own
process, three runs a process, alternating; medians and ratios with the
machine, bench_machine.py)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import device_threads  # noqa: E402

import rlx  # noqa: E402
from rlx import signal  # noqa: E402

SR, N_FFT, HOP, N_MELS, SECONDS = 16000, 400, 160, 80, 30
AMIN = 1e-10
BATCHES = [1, 4]
torch = pytest.importorskip("torch") if __name__ != "__main__" else __import__("torch")
librosa = pytest.importorskip("librosa") if __name__ != "__main__" else __import__("librosa")


def _audio(batch: int) -> np.ndarray:
    return np.random.default_rng(batch).standard_normal((batch, SR * SECONDS)).astype(np.float32) * 0.1


def _rlx(batch: int):
    g = rlx.Graph()
    x = g.input("x", (batch, SR * SECONDS))
    g.set_outputs(m=signal.log_mel_spectrogram(g, x, sr=SR, n_fft=N_FFT, hop_length=HOP, n_mels=N_MELS, amin=AMIN))
    exe = rlx.compile(g)
    return lambda audio: exe.run(x=audio)["m"]


def _torch():
    torch.set_num_threads(device_threads())
    window = torch.hann_window(N_FFT)
    fb = torch.from_numpy(signal.mel_filterbank(SR, N_FFT, n_mels=N_MELS).astype(np.float32))   # [mels, bins]

    def run(audio: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            spec = torch.stft(torch.from_numpy(audio), N_FFT, HOP, window=window, center=True, pad_mode="constant",
                              return_complex=True)                      # [B, bins, frames]
            mel = torch.matmul(fb, spec.abs() ** 2)                    # [B, mels, frames]
            return (10.0 * torch.log10(torch.clamp(mel, min=AMIN))).numpy()
    return run


def _librosa(audio: np.ndarray) -> np.ndarray:
    mel = librosa.feature.melspectrogram(y=audio, sr=SR, n_fft=N_FFT, hop_length=HOP, n_mels=N_MELS,
                                         pad_mode="constant", htk=False, norm="slaney")
    return librosa.power_to_db(mel, ref=1.0, amin=AMIN, top_db=None)


def _peers(batch: int) -> dict:
    """{who: run}, each result checked against PyTorch's to 0.05 dB where
    the power is above 1e-8 of its maximum (float32 power spectra differ in
    their smallest bins)."""
    audio = _audio(batch)
    runs = {"rlx": _rlx(batch), "torch": _torch(), "librosa": _librosa}
    want = runs["torch"](audio)
    for who, run in runs.items():
        got = run(audio)
        assert got.shape == want.shape, (who, got.shape, want.shape)
        loud = want > want.max() - 80.0
        assert np.abs(got - want)[loud].max() < 0.05, who
    return runs


@pytest.mark.parametrize("who", ["rlx", "torch", "librosa"])
@pytest.mark.parametrize("batch", BATCHES)
def test_log_mel(benchmark, record, batch, who):
    run, audio = _peers(batch)[who], _audio(batch)
    benchmark(run, audio)
    record(f"log-mel 30 s x{batch}", who, benchmark)


def _time_one(who: str, batch: int, runs: int) -> list[float]:
    """`runs` timed runs of one peer after three warm-up runs (a process's
    first runs were up to twice as slow: page faults, thread pools), in
    this process."""
    audio = _audio(batch)
    run = {"rlx": lambda: _rlx(batch), "torch": _torch, "librosa": lambda: _librosa}[who]()
    for _ in range(3):
        run(audio)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        run(audio)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    import json
    import subprocess

    from bench_machine import write_results

    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--one", nargs=3, metavar=("WHO", "BATCH", "RUNS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:   # a child: one peer's times as JSON on stdout
        print(json.dumps(_time_one(args.one[0], int(args.one[1]), int(args.one[2]))))
        return
    if not args.json:
        parser.error("--json FILE is required")
    rows = []
    for batch in BATCHES:
        _peers(batch)   # every peer's result checked against PyTorch's first
        times: dict[str, list[float]] = {"rlx": [], "torch": [], "librosa": []}
        # Each peer in a process of its own, three runs a process, the processes
        # alternating: in one process the peers' worker threads (PyTorch's OpenMP,
        # numpy's BLAS) spin on after their runs and slowed the next peer up to 2x.
        for _ in range(-(-args.rounds // 3)):
            for who in times:
                out = subprocess.run([sys.executable, __file__, "--one", who, str(batch), "3"], check=True,
                                     capture_output=True, text=True).stdout
                times[who] += json.loads(out.splitlines()[-1])
        ms = {who: 1e3 * statistics.median(ts) for who, ts in times.items()}
        row = {"batch": batch, "median_ms": ms, "rlx_over_torch": ms["rlx"] / ms["torch"],
               "rlx_over_librosa": ms["rlx"] / ms["librosa"],
               "all_ms": {w: [1e3 * t for t in ts] for w, ts in times.items()}}
        print(batch, {k: round(v, 2) for k, v in ms.items()}, "rlx/torch", round(row["rlx_over_torch"], 3))
        rows.append(row)
    write_results(args.json, f"python benchmarks/test_logmel_bench.py --json FILE --rounds {args.rounds}",
                  what="log-mel (30 s at 16 kHz, n_fft 400, hop 160, 80 mels, dB) on the CPU: rlx vs torch vs "
                       "librosa, each peer in its own process",
                  torch=torch.__version__, librosa=librosa.__version__, threads=device_threads(), rows=rows)


if __name__ == "__main__":
    main()
