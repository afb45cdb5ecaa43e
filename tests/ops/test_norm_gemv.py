"""gemv1n: the decode GEMV that forms its x from the rmsnorm_add(_rmsnorm)
dispatch before it (rlx/lowering/quant.py norm_gemv, shaders/quant_gemv.h
rlx_q_stage_x_norm). GPUs take it for one row with k in whole chunks; the
CPU does not (each of its one-thread groups would form the chain again),
so these tests turn it on there to check the kernel's values in CI. Against
the float64 reference: the GEMV within the quant suites' bound, the chain's
own output (which group 0 writes) within the norm suites' tolerance."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.ir.dtype import quantized
from rlx.lowering import quant as quant_lowering
from rlx.reference.blocks import dequantize_values

from .helpers import DTYPES, kernels_of
from .helpers import np_dtype as _np_dtype
from .quant_helpers import random_blocks


@pytest.fixture
def fold_everywhere(monkeypatch):
    """The fold on the CPU too, and the cost model's GEMV-or-dequantize
    choice pinned to the GEMV (as tests/ops/test_quant.py pins it), so a
    GPU takes the fold at every shape here whatever its calibration says."""
    from rlx.tune.cost import CostModel

    monkeypatch.setattr(quant_lowering, "NORM_GEMV_ON_ONE_THREAD_GROUPS", True)
    monkeypatch.setattr(CostModel, "prefer_quant_gemv", lambda self, *a, **kw: True)


def _chain_graph(k: int, n: int, fmt: str, dtype: str, then_norm: bool, add_one: bool, bias: bool):
    g = rlx.Graph()
    o, x = g.input("o", (1, k), dtype), g.input("x", (1, k), dtype)
    w, w2 = g.param("nw", (k,), dtype), g.param("nw2", (k,), dtype)
    if then_norm:
        s, h = g.rmsnorm_add_rmsnorm(o, x, w, w2, eps=1e-6, add_one=add_one, next_eps=1e-5, next_add_one=not add_one)
    else:
        s = h = g.rmsnorm_add(o, x, w, eps=1e-6, add_one=add_one)
    b = g.param("b", (n,), dtype) if bias else None
    y = g.linear(h, g.param("wq", (n, k), quantized(fmt)), b)
    g.set_outputs(y=y, s=s, h=h) if then_norm else g.set_outputs(y=y, s=s)
    return g


def _chain64(o, x, w, w2, then_norm, add_one, nd):
    """s = x + rmsnorm(o, w) and h = rmsnorm(s, w2), each rounded to the
    dtype where the kernels round them (rlx/reference/norm.py's steps)."""
    def rms(v, wt, eps, one):
        ms = np.mean(np.square(v), axis=-1, keepdims=True)
        return (v / np.sqrt(ms + eps) * ((1.0 + wt) if one else wt)).astype(nd).astype(np.float64)
    s = (x + rms(o, w, 1e-6, add_one)).astype(nd).astype(np.float64)
    return s, (rms(s, w2, 1e-5, not add_one) if then_norm else s)


@pytest.mark.parametrize("fmt,k", [("q4_0", 96), ("q5_0", 640), ("q8_0", 2304), ("q4_k", 256), ("q6_k", 2304),
                                   ("iq4_nl", 160), ("q4_1", 64)])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("then_norm", [True, False])
def test_gemv_forms_x_from_the_norm_chain(rng, fold_everywhere, fmt, k, dtype, then_norm):
    """The chain's dispatch is gone into the GEMV (one thunk), whose output
    matches the float64 product over the chain's values, and the chain's
    own output (group 0's store) matches the reference chain. k from 64
    (cached in registers at a GPU's 256 threads) to 2304 (streamed past
    the 2048 that 256 threads cache; at the CPU's one thread every k
    streams); n odd, so the last group is partial."""
    n, add_one, bias = 37, then_norm, fmt == "q5_0"
    nd = _np_dtype(dtype)
    g = _chain_graph(k, n, fmt, dtype, then_norm, add_one, bias)
    o = rng.standard_normal((1, k)).astype(nd)
    x = rng.standard_normal((1, k)).astype(nd)
    w, w2 = (rng.standard_normal(k) * 0.5).astype(nd), (rng.standard_normal(k) * 0.5).astype(nd)
    b = rng.standard_normal(n).astype(nd)
    raw = random_blocks(fmt, n, k, rng)
    params = {"nw": w, "nw2": w2, "wq": raw, **({"b": b} if bias else {})}
    exe = rlx.compile(g, params=params)
    kernels = kernels_of(exe)
    assert f"gemv1n_{fmt}_{dtype}" in kernels and not any(kn.startswith("rmsnorm") for kn in kernels), kernels
    got = exe.run(o=o, x=x)
    s64, h64 = _chain64(*(np.asarray(a, np.float64) for a in (o, x, w, w2)), then_norm, add_one, nd)
    tol = {"rtol": 2e-6, "atol": 2e-6} if dtype == "f32" else {"rtol": 2e-3, "atol": 2e-3}
    np.testing.assert_allclose(got["s"].astype(np.float64), s64, **tol)
    if then_norm:
        np.testing.assert_allclose(got["h"].astype(np.float64), h64, **tol)
    wd = dequantize_values(quantized(fmt), raw, (n, k)).astype(np.float64)
    want = h64 @ wd.T + (b.astype(np.float64) if bias else 0.0)
    scale = np.abs(h64) @ np.abs(wd).T
    rel, floor = (1e-5, 1e-6) if dtype == "f32" else (4e-3, 1e-3)
    err = np.abs(got["y"].astype(np.float64) - want)
    assert (err <= rel * (scale + np.abs(want)) + floor).all(), float(err.max())


def test_norm_chain_folds_only_where_it_may(rng, fold_everywhere):
    """No fold when k is not whole chunks or past GEMV1N_MAX_K, when the
    GEMV reads the chain's output at an offset (the sums half of rmsnorm_add_rmsnorm) or through a
    copy, or when the chain has more than one row; the CPU's own choice (the
    switch off) keeps the chain's dispatch."""
    def kernels(g, **params):
        return kernels_of(rlx.compile(g, params=params))

    def weights(k, n, fmt="q8_0"):
        return {"nw": np.ones(k, np.float32), "nw2": np.ones(k, np.float32), "wq": random_blocks(fmt, n, k, rng)}

    g = rlx.Graph()   # k = 48: not whole chunks (bf16 blocks are one element; f16 x: a block weight everywhere)
    o, x = g.input("o", (1, 48), "f16"), g.input("x", (1, 48), "f16")
    s = g.rmsnorm_add(o, x, g.param("nw", (48,), "f16"))
    g.set_outputs(y=g.linear(s, g.param("wq", (5, 48), quantized("bf16"))))
    found = kernels(g, nw=np.ones(48, np.float16), wq=random_blocks("bf16", 5, 48, rng))
    assert "rmsnorm_add_f16" in found and any(kn and kn.startswith("gemv1_bf16") for kn in found), found

    g = rlx.Graph()   # the GEMV reads the sums (the packed value's second half)
    o, x = g.input("o", (1, 64)), g.input("x", (1, 64))
    s, h = g.rmsnorm_add_rmsnorm(o, x, g.param("nw", (64,)), g.param("nw2", (64,)))
    g.set_outputs(y=g.linear(s, g.param("wq", (5, 64), quantized("q8_0"))), h=h)
    assert "rmsnorm_add_f32" in kernels(g, **weights(64, 5))

    g = rlx.Graph()   # k past gemv1n's tile room (GEMV1N_MAX_K: the last two chunk rows are Metal's scratch)
    k = quant_lowering.GEMV1N_MAX_K + 32
    o, x = g.input("o", (1, k)), g.input("x", (1, k))
    s = g.rmsnorm_add(o, x, g.param("nw", (k,)))
    g.set_outputs(y=g.linear(s, g.param("wq", (5, k), quantized("q8_0"))))
    found = kernels(g, nw=np.ones(k, np.float32), wq=random_blocks("q8_0", 5, k, rng))
    assert "rmsnorm_add_f32" in found and "gemv1n_q8_0_f32" not in found, found

    g = rlx.Graph()   # two rows
    o, x = g.input("o", (2, 64)), g.input("x", (2, 64))
    s = g.rmsnorm_add(o, x, g.param("nw", (64,)))
    g.set_outputs(y=g.linear(s, g.param("wq", (5, 64), quantized("q8_0"))))
    assert "rmsnorm_add_f32" in kernels(g, nw=np.ones(64, np.float32), wq=random_blocks("q8_0", 5, 64, rng))


def test_the_cpu_keeps_the_norm_chain_dispatch(rng):
    g = _chain_graph(64, 5, "q8_0", "f32", True, False, False)
    exe = rlx.compile(g, params={"nw": np.ones(64, np.float32), "nw2": np.ones(64, np.float32),
                                 "wq": random_blocks("q8_0", 5, 64, rng)})
    if exe.target.one_thread_groups:
        assert "rmsnorm_add_f32" in kernels_of(exe) and "gemv1n_q8_0_f32" not in kernels_of(exe)
    else:   # a GPU under --rlx-device: the fold is its own choice
        assert "gemv1n_q8_0_f32" in kernels_of(exe) and "rmsnorm_add_f32" not in kernels_of(exe)
