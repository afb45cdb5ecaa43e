"""Per-thunk CPU times of strided copies and elementwise passes (Program.run_one,
medians of 9, no input or output copies): a concat of [B, 480000] signals
with 200-sample sides, a broadcast add and a transposed multiply over
[64, 128, 384] (unfused), and the log-mel graph's thunks (30 s at 16 kHz,
n_fft 400, hop 160, 80 mels) at batches 1 and 4. Each result is checked
against numpy first. The figures of session 18's strided walk (RlxWalk in
shaders/prelude/common.h) came from these cases.

Run: PYTHONPATH=$PWD python benchmarks/strided_thunks.py [--json FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rlx  # noqa: E402
from rlx import signal  # noqa: E402


def _thunk_ms(exe: rlx.Executable, inputs: dict) -> list[dict]:
    with exe.copying_io():   # the inputs into the program's slots, so run_one reads them
        exe.run(**inputs)
    program, rows = exe.program, []
    for i in range(program.thunk_count):
        times = []
        for _ in range(9):
            t0 = time.perf_counter()
            program.run_one(i)
            times.append(time.perf_counter() - t0)
        rows.append({"thunk": exe.thunks[i].label[:80], "kernel": exe.thunks[i].kernel,
                     "ms": 1e3 * statistics.median(times)})
    return rows


def _cases(rng: np.random.Generator):
    for batch in (1, 4):
        g = rlx.Graph()
        x, side = g.input("x", (batch, 480000)), g.input("side", (batch, 200))
        g.set_outputs(c=g.concat([side, x, side], axis=-1))
        xs, sides = rng.random((batch, 480000), np.float32), rng.random((batch, 200), np.float32)
        yield f"concat [{batch}, 480400]", g, {}, {"x": xs, "side": sides}, \
            {"c": np.concatenate([sides, xs, sides], -1)}
    g = rlx.Graph()
    x, b, t = g.input("x", (64, 128, 384)), g.input("b", (384,)), g.input("t", (384, 128, 64))
    g.set_outputs(y=g.add(x, b), z=g.mul(x, g.transpose(t, (2, 1, 0))))
    xs, bs, ts = (rng.standard_normal(s).astype(np.float32) for s in ((64, 128, 384), (384,), (384, 128, 64)))
    yield "broadcast add, transposed mul [64, 128, 384]", g, {"fusion": False}, {"x": xs, "b": bs, "t": ts}, \
        {"y": xs + bs, "z": xs * ts.transpose(2, 1, 0)}
    for batch in (1, 4):
        g = rlx.Graph()
        x = g.input("x", (batch, 480000))
        g.set_outputs(m=signal.log_mel_spectrogram(g, x, sr=16000, n_fft=400, hop_length=160, n_mels=80))
        audio = rng.standard_normal((batch, 480000)).astype(np.float32) * 0.1
        want = signal.log_mel_spectrogram_array(audio, sr=16000, n_fft=400, hop_length=160, n_mels=80)
        yield f"log-mel batch {batch}", g, {}, {"x": audio}, {"m": want}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    rng, results = np.random.default_rng(0), []
    for case, g, passes, inputs, want in _cases(rng):
        exe = rlx.compile(g, passes=passes) if passes else rlx.compile(g)
        got = exe.run(**inputs)
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-4, err_msg=f"{case}: {name}")
        rows = _thunk_ms(exe, inputs)
        results.append({"case": case, "thunks": rows})
        print(case)
        for row in rows:
            print(f"   {row['ms']:8.3f} ms  {row['kernel']}  {row['thunk']}")
    if args.json:
        from bench_machine import write_results

        write_results(args.json, "PYTHONPATH=$PWD python benchmarks/strided_thunks.py --json FILE",
                      what="per-thunk CPU times of strided copies and elementwise passes", cases=results)


if __name__ == "__main__":
    main()
