"""Host kernels at BERT and decoder shapes against numpy and PyTorch CPU
(same run; the ratio table prints at the end)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

SOFTMAX_SHAPES = {"bert-12x128x128": (12, 128, 128), "decoder-8x1x4096": (8, 1, 4096)}
NORM_SHAPES = {"bert-128x384": (128, 384), "decoder-1x2048": (1, 2048)}


def _softmax_exe(shape):
    g = rlx.Graph()
    g.set_outputs(y=g.softmax(g.input("x", shape)))
    return rlx.compile(g)


def _layernorm_exe(shape):
    g = rlx.Graph()
    x = g.input("x", shape)
    g.set_outputs(y=g.layernorm(x, g.param("w", shape[-1:]), g.param("b", shape[-1:])))
    d = shape[-1]
    return rlx.compile(g, params={"w": np.ones(d, np.float32), "b": np.zeros(d, np.float32)})


@pytest.mark.parametrize("case", list(SOFTMAX_SHAPES))
@pytest.mark.parametrize("who", ["rlx", "numpy", "torch"])
def test_softmax(benchmark, record, case, who):
    shape = SOFTMAX_SHAPES[case]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    if who == "rlx":
        exe = _softmax_exe(shape)
        benchmark(exe.run, x=x)
    elif who == "numpy":
        def np_softmax():
            e = np.exp(x - x.max(-1, keepdims=True))
            return e / e.sum(-1, keepdims=True)
        benchmark(np_softmax)
    else:
        torch = pytest.importorskip("torch", reason="PyTorch not installed: peer skipped")
        t = torch.from_numpy(x)
        benchmark(torch.softmax, t, -1)
    record(f"softmax {case}", who, benchmark)


@pytest.mark.parametrize("case", list(NORM_SHAPES))
@pytest.mark.parametrize("who", ["rlx", "numpy", "torch"])
def test_layernorm(benchmark, record, case, who):
    shape = NORM_SHAPES[case]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    w, b = np.ones(shape[-1], np.float32), np.zeros(shape[-1], np.float32)
    if who == "rlx":
        exe = _layernorm_exe(shape)
        benchmark(exe.run, x=x)
    elif who == "numpy":
        def np_ln():
            m = x.mean(-1, keepdims=True)
            v = ((x - m) ** 2).mean(-1, keepdims=True)
            return (x - m) / np.sqrt(v + 1e-5) * w + b
        benchmark(np_ln)
    else:
        torch = pytest.importorskip("torch", reason="PyTorch not installed: peer skipped")
        t, tw, tb = (torch.from_numpy(a) for a in (x, w, b))
        benchmark(torch.nn.functional.layer_norm, t, (shape[-1],), tw, tb)
    record(f"layernorm {case}", who, benchmark)
