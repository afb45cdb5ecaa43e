"""Norms (layernorm, rmsnorm and the fused residual add_layernorm,
add_rmsnorm) against rlx/reference/core.py on the device under test: f32
and f16, odd and large rows, a property test over random shapes, and NaN
propagation (tests/ops/helpers.py). Tolerances: tests/conftest.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import TOL, assert_matches_reference
from hypothesis import given, settings
from hypothesis import strategies as st

import rlx
from rlx.errors import DTypeError, ShapeError

from .helpers import COLS, DTYPES
from .helpers import check_nan_semantics as _check
from .helpers import np_dtype as _np_dtype
from .helpers import rand as _rand
from .helpers import to_torch as _t


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (4, 1023), (2, 3, 64)])
def test_layernorm(rng, shape, dtype):
    g = rlx.Graph()
    x = g.input("x", shape, dtype)
    w, b = g.param("w", shape[-1:], dtype), g.param("b", shape[-1:], dtype)
    g.set_outputs(y=g.layernorm(x, w, b, eps=1e-5))
    params = {"w": _rand(rng, shape[-1:], dtype), "b": _rand(rng, shape[-1:], dtype)}
    # A large mean checks the two-pass variance.
    assert_matches_reference(g, {"x": (_rand(rng, shape, "f32") + 3).astype(params["w"].dtype)}, params)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [1, 3, 17, 1000, 4097])
@pytest.mark.parametrize("add_one", [False, True])
def test_rmsnorm(rng, cols, dtype, add_one):
    g = rlx.Graph()
    x, w = g.input("x", (3, cols), dtype), g.param("w", (cols,), dtype)
    g.set_outputs(y=g.rmsnorm(x, w, eps=1e-6, add_one=add_one))
    assert_matches_reference(g, {"x": _rand(rng, (3, cols), dtype)}, {"w": _rand(rng, (cols,), dtype)})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [1, 7, 17, 384, 4097])
def test_fused_residual_norms(rng, cols, dtype):
    g = rlx.Graph()
    x, r = g.input("x", (2, 3, cols), dtype), g.input("r", (2, 3, cols), dtype)
    w, b = g.param("w", (cols,), dtype), g.param("b", (cols,), dtype)
    g.set_outputs(ln=g.add_layernorm(x, r, w, b, eps=1e-5), rms=g.add_rmsnorm(x, r, w, eps=1e-6, add_one=True))
    inputs = {"x": _rand(rng, (2, 3, cols), dtype, offset=2.0), "r": _rand(rng, (2, 3, cols), dtype)}
    assert_matches_reference(g, inputs,
                             {"w": _rand(rng, (cols,), dtype), "b": _rand(rng, (cols,), dtype)})


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 9), cols=st.integers(1, 300), scale=st.floats(0.01, 4.0), seed=st.integers(0, 10**6))
def test_property_softmax_and_norms(rows, cols, scale, seed):
    rng = np.random.default_rng(seed)
    g = rlx.Graph()
    x = g.input("x", (rows, cols))
    w, b = g.param("w", (cols,)), g.param("b", (cols,))
    g.set_outputs(sm=g.masked_softmax(x, scale=scale), ln=g.layernorm(x, w, b), rms=g.rmsnorm(x, w))
    _, got = assert_matches_reference(g, {"x": _rand(rng, (rows, cols), "f32", 3.0)},
                                      {"w": _rand(rng, (cols,), "f32"), "b": _rand(rng, (cols,), "f32")},
                                      tol=dict(rtol=1e-4, atol=1e-5))
    np.testing.assert_allclose(got["sm"].sum(-1), 1.0, rtol=1e-5)


# ---------------------------------------------------------------- NaN


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", COLS)
def test_norms_propagate_nan(rng, cols, dtype):
    nd = _np_dtype(dtype)
    data = rng.standard_normal((3, cols)).astype(nd)
    data[1, cols // 2] = np.nan
    w, bias = rng.standard_normal(cols).astype(nd), rng.standard_normal(cols).astype(nd)
    g = rlx.Graph()
    x = g.input("x", data.shape, dtype)
    wn, bn = g.input("w", (cols,), dtype), g.input("b", (cols,), dtype)
    g.set_outputs(y=g.layernorm(x, wn, bn))
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "f32" else TOL["f16"]
    want = torch.nn.functional.layer_norm(_t(data), (cols,), _t(w), _t(bias), 1e-5).numpy()
    feed = {"x": data, "w": w, "b": bias}
    got = _check(g, feed, want, dtype, tol=tol)
    assert np.isnan(got[1]).all() and not np.isnan(got[[0, 2]]).any()
    g2 = rlx.Graph()
    x2, w2 = g2.input("x", data.shape, dtype), g2.input("w", (cols,), dtype)
    g2.set_outputs(y=g2.rmsnorm(x2, w2, eps=1e-6))
    want = torch.nn.functional.rms_norm(_t(data), (cols,), _t(w), 1e-6).numpy()
    got = _check(g2, {"x": data, "w": w}, want, dtype, tol=tol)
    assert np.isnan(got[1]).all() and not np.isnan(got[[0, 2]]).any()


# ---------------------------------------------------------------- post-norm residuals (sandwich norms)


def _post_norm_graph(shape, dtype, add_one, then_norm, fused):
    """x + rmsnorm(o, w) (then rmsnorm of the sum with w2), as the fused op or
    as the chain of plain ops it stands for."""
    g = rlx.Graph()
    o, x = g.input("o", shape, dtype), g.input("x", shape, dtype)
    w, w2 = g.param("w", shape[-1:], dtype), g.param("w2", shape[-1:], dtype)
    if fused and then_norm:
        s, h = g.rmsnorm_add_rmsnorm(o, x, w, w2, eps=1e-6, add_one=add_one, next_eps=1e-5, next_add_one=not add_one)
        g.set_outputs(s=s, h=h)
    elif fused:
        g.set_outputs(s=g.rmsnorm_add(o, x, w, eps=1e-6, add_one=add_one))
    else:
        s = g.add(x, g.rmsnorm(o, w, eps=1e-6, add_one=add_one))
        g.set_outputs(**({"s": s, "h": g.rmsnorm(s, w2, eps=1e-5, add_one=not add_one)} if then_norm else {"s": s}))
    return g


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (2, 3, 33), (5, 640), (2, 4097)])
@pytest.mark.parametrize("add_one", [False, True])
@pytest.mark.parametrize("then_norm", [False, True])
def test_rmsnorm_add_fused(rng, shape, dtype, add_one, then_norm):
    """The fused post-norm residual (and next pre-norm) against the float64
    reference, and that reference against the plain chain's; one kernel."""
    g = _post_norm_graph(shape, dtype, add_one, then_norm, fused=True)
    inputs = {"o": _rand(rng, shape, dtype, scale=3.0), "x": _rand(rng, shape, dtype, offset=1.0)}
    params = {"w": _rand(rng, shape[-1:], dtype), "w2": _rand(rng, shape[-1:], dtype)}
    exe, _ = assert_matches_reference(g, inputs, params)
    assert [t.kernel for t in exe.thunks] == [f"rmsnorm_add_{dtype}"]
    chain = rlx.run_reference(_post_norm_graph(shape, dtype, add_one, then_norm, fused=False), inputs, params)
    want = rlx.run_reference(g, inputs, params)
    for name in chain:
        np.testing.assert_allclose(want[name].astype(np.float64), chain[name].astype(np.float64), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_add_reads_offset_inputs(rng, dtype):
    """o and x as narrows of a wider tensor (nonzero element offsets)."""
    g = rlx.Graph()
    both = g.input("both", (2, 3, 17), dtype)
    w, w2 = g.param("w", (17,), dtype), g.param("w2", (17,), dtype)
    o, x = (g.reshape(g.narrow(both, 0, i, 1), (3, 17)) for i in (1, 0))
    s, h = g.rmsnorm_add_rmsnorm(o, x, w, w2, add_one=True)
    g.set_outputs(s=s, h=h)
    assert_matches_reference(g, {"both": _rand(rng, (2, 3, 17), dtype)},
                             {"w": _rand(rng, (17,), dtype), "w2": _rand(rng, (17,), dtype)})


def test_rmsnorm_add_checks_its_operands():
    g = rlx.Graph()
    o, w = g.input("o", (3, 8)), g.param("w", (8,))
    with pytest.raises(ShapeError, match="x shape"):
        g.rmsnorm_add(o, g.input("x", (3, 4)), w)
    with pytest.raises(ShapeError, match="next_weight"):
        g.rmsnorm_add_rmsnorm(o, g.input("x2", (3, 8)), w, g.param("w2", (7,)))
    with pytest.raises(DTypeError):
        g.rmsnorm_add(o, g.input("x3", (3, 8), "f16"), w)
