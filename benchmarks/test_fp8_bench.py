"""FP8 decode GEMV on the CPU (shaders/fp8.h, issue 20): the weight-stream
bandwidth of y = x (w * s)^T (m = 1, e4m3 weights, a scale per output
channel; x f32, and f16 as "rlx-f16x") on a 4096 x 4096 and a vocabulary-sized 262144 x 640 matrix, beside
the copy of the same bytes (numpy over the device's threads) and the GGUF
Q8_0 GEMV (the nearest 8-bit format, 34 bytes per 32 weights) in the same
run. rlx/copy is the GEMV's time over the copy's: <= 1.25 is >= 80% of the
copy bandwidth.

Run: python -m pytest benchmarks/test_fp8_bench.py --benchmark-enable -s
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import rlx

SHAPES = {"4096x4096": (4096, 4096), "262144x640": (262144, 640)}


def _weight(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n + k)
    codes = rng.integers(0, 256, (n, k), dtype=np.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x38   # no NaN codes: 1.0 instead
    return codes.view(ml_dtypes.float8_e4m3fn), rng.uniform(0.5, 2, n).astype(np.float32)


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("x_dtype", ["f32", "f16"])
def test_gemv_fp8(benchmark, record, shape, x_dtype):
    n, k = SHAPES[shape]
    codes, scale = _weight(n, k)
    g = rlx.Graph()
    x = g.input("x", (1, k), x_dtype)
    g.set_outputs(y=g.scaled_linear(x, g.param("w", (n, k), "f8e4m3"), g.param("s", (n,))))
    exe = rlx.compile(g, params={"w": codes, "s": scale})
    xv = np.random.default_rng(1).standard_normal((1, k)).astype(np.float32 if x_dtype == "f32" else np.float16)
    want = xv.astype(np.float64) @ (codes[:64].astype(np.float64) * scale[:64, None]).T
    tol = {"rtol": 1e-4, "atol": 1e-3} if x_dtype == "f32" else {"rtol": 2e-3, "atol": 0.5}   # f16 y: 11 bits
    got = exe.run(x=xv)["y"][:, :64].astype(np.float64)
    np.testing.assert_allclose(got, want, **tol)   # what is timed is right
    benchmark(exe.run, x=xv)
    record(f"gemv fp8 {shape}", "rlx" if x_dtype == "f32" else "rlx-f16x", benchmark)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_gemv_q8_0(benchmark, record, shape):
    n, k = SHAPES[shape]
    blocks = np.random.default_rng(2).integers(0, 256, (n, k // 32 * 34), dtype=np.uint8)
    blocks.reshape(n, k // 32, 34)[:, :, 1] = 0x3C   # f16 block scales near 1, finite
    g = rlx.Graph()
    x = g.input("x", (1, k))
    g.set_outputs(y=g.linear(x, g.param("w", (n, k), "q8_0")))
    exe = rlx.compile(g, params={"w": blocks})
    xv = np.random.default_rng(1).standard_normal((1, k)).astype(np.float32)
    benchmark(exe.run, x=xv)
    record(f"gemv fp8 {shape}", "q8_0", benchmark)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_copy_of_the_same_bytes(benchmark, record, threaded_copy, shape):
    n, k = SHAPES[shape]
    benchmark(threaded_copy(n * k))
    record(f"gemv fp8 {shape}", "copy", benchmark)
