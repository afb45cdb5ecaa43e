"""FFT on the CPU (shaders/fft.h, issue 19): a batched complex transform at
N = 256, 1024, 4096 and 65536 (and 4097, Bluestein; 3000 and 10000, other
2^a 3^b 5^c) and a batched rfft and irfft at N = 400
(Whisper's 25 ms frames at 16 kHz), rlx against scipy.fft (the same worker count as
rlx's threads) and numpy.fft in the same run. Each case transforms about
the same number of points (BATCH_POINTS) so the times compare across N.
The issue's target: rlx <= 1.0x scipy's time at N <= 4096.

rlx is timed through Executable.run, the user-visible time: on the CPU
it reads the input and writes the output array in place (RLX_BIND_IO), so
the copies through the arena that earlier runs paid are gone. "rlx-kernels" times the same
program's thunks alone (Program.run_one each, no copies), so the summary
shows how much of the gap is the copies and how much the transform.

Run: python -m pytest benchmarks/test_fft_bench.py --benchmark-enable
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft as scipy_fft
from conftest import device_threads

import rlx

BATCH_POINTS = 1 << 18
# 4097 = 17 x 241: Bluestein; 3000 and 10000: 2^a 3^b 5^c past 2048 (the CPU's
# mixed-radix form in one dispatch; its four-step of 125 x 80)
COMPLEX_SIZES = [256, 1024, 4096, 65536, 4097, 3000, 10000]
REAL_SIZES = [400, 2025]   # 2025 = 3^4 5^2: odd, a full-length transform of real samples


def _signal(op: str, n: int) -> np.ndarray:
    rng = np.random.default_rng(n)
    batch = max(1, BATCH_POINTS // n)
    x = rng.standard_normal((batch, n)).astype(np.float32)
    if op == "fft":
        return (x + 1j * rng.standard_normal((batch, n)).astype(np.float32)).astype(np.complex64)
    if op == "irfft":   # a spectrum of n // 2 + 1 bins, back to n samples
        return np.fft.rfft(x).astype(np.complex64)
    return x


def _length(op: str, n: int) -> dict:
    """irfft's output length, passed to every side: its default 2 (M - 1)
    is even, so an odd n would otherwise time n - 1."""
    return {"n": n} if op == "irfft" else {}


def _compiled(op: str, x: np.ndarray, n: int) -> rlx.Executable:
    g = rlx.Graph()
    node = g.input("x", x.shape, "c64" if op in ("fft", "irfft") else "f32")
    g.set_outputs(y=getattr(g, op)(node, **_length(op, n)))
    return rlx.compile(g)


def _checked(op: str, x: np.ndarray, n: int) -> rlx.Executable:
    """The compiled op, its result on x checked against numpy.fft (what is
    timed is right); the run copies x into the program's input slot, for
    the kernels-only timing (a plain run reads x in place)."""
    exe = _compiled(op, x, n)
    want = getattr(np.fft, op)(x.astype(np.complex128 if op in ("fft", "irfft") else np.float64), **_length(op, n))
    with exe.copying_io():
        got = exe.run(x=x)["y"]
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 1e-5 * np.log2(x.shape[-1]) * scale
    return exe


CASES = [("fft", n) for n in COMPLEX_SIZES] + [(op, n) for op in ("rfft", "irfft") for n in REAL_SIZES]


@pytest.mark.parametrize("op, n", CASES, ids=[f"{op}-{n}" for op, n in CASES])
def test_rlx(benchmark, record, op, n):
    x = _signal(op, n)
    exe = _checked(op, x, n)
    benchmark(lambda: exe.run(x=x))
    record(f"{op} N={n} x{x.shape[0]}", "rlx", benchmark)


@pytest.mark.parametrize("op, n", CASES, ids=[f"{op}-{n}" for op, n in CASES])
def test_rlx_kernels(benchmark, record, op, n):
    x = _signal(op, n)
    exe = _checked(op, x, n)   # kept alive: it owns the program's memory
    benchmark(lambda: [exe.program.run_one(i) for i in range(exe.program.thunk_count)])
    record(f"{op} N={n} x{x.shape[0]}", "rlx-kernels", benchmark)


@pytest.mark.parametrize("op, n", CASES, ids=[f"{op}-{n}" for op, n in CASES])
def test_scipy(benchmark, record, op, n):
    x = _signal(op, n)
    workers = device_threads()
    benchmark(getattr(scipy_fft, op), x, workers=workers, **_length(op, n))
    record(f"{op} N={n} x{x.shape[0]}", "scipy.fft", benchmark)


@pytest.mark.parametrize("op, n", CASES, ids=[f"{op}-{n}" for op, n in CASES])
def test_numpy(benchmark, record, op, n):
    x = _signal(op, n)
    benchmark(getattr(np.fft, op), x, **_length(op, n))
    record(f"{op} N={n} x{x.shape[0]}", "numpy.fft", benchmark)
