"""Every tensor of a real GGUF model (Gemma 3 270M Q4_K_M: F32, Q5_0,
Q4_K, Q8_0 and Q6_K tensors) through rlx on the device under test
(--rlx-device): dequantized by shaders/quant.h equal to gguf's dequantizer,
bit for bit in f32; and a decode-shaped product (one row) against the
float64 product of the oracle's values for one tensor of each format."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
import rlx.gguf
import rlx.reference.blocks


@pytest.fixture(scope="module")
def gemma(gemma_path):
    with rlx.gguf.open(gemma_path) as f:
        yield f


def _quantized(gemma):
    return [t for t in gemma.tensors.values() if t.type not in ("F32", "F16")]


def test_every_quantized_tensor_dequantizes_like_gguf(gemma):
    tensors = _quantized(gemma)
    assert {t.type for t in tensors} >= {"Q5_0", "Q4_K", "Q8_0", "Q6_K"}
    chunk = 1 << 15   # rows at a time: the 262144 x 640 embedding is 670 MB of f32 otherwise
    for t in tensors:
        data = t.data                      # (rows, bytes per row), a view of the file
        k = t.shape[-1]
        for r0 in range(0, data.shape[0], chunk):
            part = data[r0:r0 + chunk]
            g = rlx.Graph()
            g.set_outputs(y=g.dequantize(g.param("w", (part.shape[0], k), t.dtype)))
            got = rlx.compile(g, params={"w": part}).run()["y"]
            want = rlx.reference.blocks.dequantize_values(t.dtype, part, (part.shape[0], k))
            assert np.array_equal(got, want), f"{t.name} ({t.type}{list(t.shape)}) rows {r0}+ differ from gguf's"


def test_one_decode_product_per_format(gemma):
    rng = np.random.default_rng(0)
    seen = set()
    for t in _quantized(gemma):
        if t.type in seen or len(t.shape) != 2 or t.name.startswith("token_embd"):
            continue
        seen.add(t.type)
        n, k = t.shape
        g = rlx.Graph()
        x = g.input("x", (1, k))
        g.set_outputs(y=g.linear(x, g.param("w", (n, k), t.dtype)))
        xv = rng.standard_normal((1, k)).astype(np.float32)
        got = rlx.compile(g, params={"w": t}).run(x=xv)["y"].astype(np.float64)
        w = t.dequantize().astype(np.float64)
        want = xv.astype(np.float64) @ w.T
        bound = 1e-5 * (np.abs(xv.astype(np.float64)) @ np.abs(w).T) + 1e-6
        assert (np.abs(got - want) <= bound).all(), f"{t.name} ({t.type}): max error {np.abs(got - want).max()}"
    assert seen >= {"Q5_0", "Q4_K", "Q8_0", "Q6_K"}
