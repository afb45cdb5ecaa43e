"""Decode GEMV from quantized weights (shaders/quant.h, issue 17): the
weight-stream bandwidth of y = x W^T (m = 1) for Q4_K, Q5_0, Q6_K and Q8_0
on a 4096 x 4096 and a vocabulary-sized 262144 x 640 matrix, beside the
machine's copy bandwidth in the same run: numpy copying a buffer of the
weight's bytes, split over the device's threads. Copy bandwidth = bytes
copied / time, GEMV bandwidth = weight bytes / time, so their ratio is the
copy's time over the GEMV's (the ratio table prints rlx/copy, its inverse;
the issue's target, >= 80% of the copy bandwidth, is rlx/copy <= 1.25).

Run: python -m pytest benchmarks/test_quant_bench.py --benchmark-enable -s
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import rlx
from rlx.ir.dtype import quantized

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ops"))
from quant_helpers import large_weight, whole_blocks  # noqa: E402  (tests/ops/quant_helpers.py)

SHAPES = {"4096x4096": (4096, 4096), "262144x640": (262144, 640)}
FORMATS = ["q4_k", "q5_0", "q6_k", "q8_0"]


def _shape(fmt: str, name: str) -> tuple[int, int]:
    """The case's [N, K], K in whole blocks (K-quants on the vocabulary shape: 768)."""
    n, k = SHAPES[name]
    return n, whole_blocks(fmt, k)


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_gemv(benchmark, record, fmt, shape):
    n, k = _shape(fmt, shape)
    raw = large_weight(fmt, n, k)
    g = rlx.Graph()
    x = g.input("x", (1, k))
    g.set_outputs(y=g.linear(x, g.param("w", (n, k), fmt)))
    exe = rlx.compile(g, params={"w": raw})
    xv = np.random.default_rng(1).standard_normal((1, k)).astype(np.float32)
    benchmark(exe.run, x=xv)
    record(f"gemv {fmt} {shape}", "rlx", benchmark)


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_copy_of_the_same_bytes(benchmark, record, threaded_copy, fmt, shape):
    """A copy of the weight's bytes over the device's threads."""
    n, k = _shape(fmt, shape)
    benchmark(threaded_copy(quantized(fmt).nbytes(n * k, k)))
    record(f"gemv {fmt} {shape}", "copy", benchmark)
