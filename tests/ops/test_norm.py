"""The transformer op set (rlx/ir/ops_nn.py) against rlx/reference/core.py on
the CPU device: f32 and f16, odd and degenerate sizes, broadcasting,
strided views, both matmul paths. Tolerances: tests/conftest.py."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TOL, assert_matches_reference
from hypothesis import given, settings
from hypothesis import strategies as st

import rlx
from rlx.runtime import lowering_nn

SIZES = [1, 3, 17, 1000, 4097]
DTYPES = ["f32", "f16"]


def _rand(rng, shape, dtype, scale=1.0, offset=0.0):
    return (rng.standard_normal(shape) * scale + offset).astype(np.float16 if dtype == "f16" else np.float32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", ["relu", "tanh", "exp", "neg", "sqrt", "rsqrt", "scale_shift"])
def test_unary(rng, op, n, dtype):
    g = rlx.Graph()
    x = g.input("x", (n,), dtype)
    y = g.scale_shift(x, 1.5, -0.25) if op == "scale_shift" else getattr(g, op)(x)
    g.set_outputs(y=y)
    positive = op in ("sqrt", "rsqrt")
    data = _rand(rng, n, dtype, 2.0)
    if positive:
        data = (np.abs(data) + 0.1).astype(data.dtype)
    assert_matches_reference(g, {"x": data})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((17,), (17,)), ((3, 1000), (1000,)), ((4, 1, 5), (1, 3, 5)), ((1,), (4097,))])
@pytest.mark.parametrize("op", ["sub", "div", "maximum", "minimum"])
def test_binary(rng, op, shapes, dtype):
    g = rlx.Graph()
    a, b = g.input("a", shapes[0], dtype), g.input("b", shapes[1], dtype)
    g.set_outputs(y=getattr(g, op)(a, b))
    bv = _rand(rng, shapes[1], dtype)
    if op == "div":
        bv = (np.sign(bv) * (np.abs(bv) + 0.5)).astype(bv.dtype)
    assert_matches_reference(g, {"a": _rand(rng, shapes[0], dtype), "b": bv})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", [((1,), 0), ((17,), -1), ((3, 1000), 1), ((3, 1000), 0), ((2, 5, 7), 1),
                                        ((4097, 2), 0)])
@pytest.mark.parametrize("op", ["sum", "mean", "max", "argmax"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(rng, op, shape, axis, dtype, keepdims):
    g = rlx.Graph()
    x = g.input("x", shape, dtype)
    g.set_outputs(y=getattr(g, op)(x, axis=axis, keepdims=keepdims))
    tol = dict(TOL[dtype])
    if op == "sum" and dtype == "f16":
        tol = dict(rtol=2e-3, atol=2e-2)  # f16 result of up to 4097 terms: one f16 rounding of a larger sum
    assert_matches_reference(g, {"x": _rand(rng, shape, dtype)}, tol=tol)


def test_argmax_ties_take_the_first_index():
    g = rlx.Graph()
    x = g.input("x", (2, 6))
    g.set_outputs(i=g.argmax(x))
    exe = rlx.compile(g)
    data = np.array([[1, 5, 5, 0, 5, 2], [-np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf]], np.float32)
    np.testing.assert_array_equal(exe.run(x=data)["i"], [1, 0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask_shape", [None, (1, 1, 5, -1), (2, 1, 1, -1), (-1,), (2, 3, 5, -1)])
@pytest.mark.parametrize("cols", [5, 17])   # rows of up to RLX_ROW_CACHE per thread stay in registers
def test_masked_softmax(rng, mask_shape, dtype, cols):
    shape = (2, 3, 5, cols)
    mask_shape = None if mask_shape is None else tuple(cols if d == -1 else d for d in mask_shape)
    g = rlx.Graph()
    x = g.input("x", shape, dtype)
    mask = None if mask_shape is None else g.input("m", mask_shape, dtype)
    g.set_outputs(y=g.masked_softmax(x, mask, scale=0.125))
    feed = {"x": _rand(rng, shape, dtype, 4.0)}
    if mask_shape is not None:
        m = np.where(rng.random(mask_shape) < 0.3, -np.inf, 0.0).astype(feed["x"].dtype)
        feed["m"] = m
    assert_matches_reference(g, feed)


def test_masked_softmax_fully_masked_row_is_zero():
    g = rlx.Graph()
    x, m = g.input("x", (2, 4)), g.input("m", (2, 4))
    g.set_outputs(y=g.masked_softmax(x, m))
    mask = np.array([[0, 0, -np.inf, 0], [-np.inf] * 4], np.float32)
    out = rlx.compile(g).run(x=np.ones((2, 4), np.float32), m=mask)["y"]
    np.testing.assert_allclose(out, [[1 / 3, 1 / 3, 0, 1 / 3], [0, 0, 0, 0]], rtol=1e-6)


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


LINEAR_TOL = {"f32": dict(rtol=1e-4, atol=1e-4), "f16": dict(rtol=5e-3, atol=5e-3)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", ["gemm", "row_kernel"])
@pytest.mark.parametrize("activation", [None, "gelu", "gelu_tanh", "silu", "relu"])
@pytest.mark.parametrize("transpose_b,bias", [(True, True), (False, True), (True, False)])
def test_linear_paths(rng, monkeypatch, dtype, path, activation, transpose_b, bias):
    # Force the path over the cost model's choice.
    monkeypatch.setattr(lowering_nn, "use_row_kernel", lambda *a, **k: path == "row_kernel")
    m, k, n = 3, 65, 17
    g = rlx.Graph()
    x = g.input("x", (m, k), dtype)
    w = g.param("w", (n, k) if transpose_b else (k, n), dtype)
    b = g.param("b", (n,), dtype) if bias else None
    g.set_outputs(y=g.linear(x, w, b, activation=activation, transpose_b=transpose_b))
    params = {"w": _rand(rng, (n, k) if transpose_b else (k, n), dtype, 0.2)}
    if bias:
        params["b"] = _rand(rng, (n,), dtype)
    exe, _ = assert_matches_reference(g, {"x": _rand(rng, (m, k), dtype)}, params, tol=LINEAR_TOL[dtype])
    kinds = [t.kernel or "gemm" for t in exe.thunks]
    assert kinds[0] == ("gemm" if path == "gemm" else f"matmul_rows_{dtype}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ["silu", "gelu", "gelu_tanh"])
def test_glu_reads_halves_of_a_packed_projection(rng, dtype, activation):
    g = rlx.Graph()
    packed = g.input("p", (2, 7, 2 * 33), dtype)
    gate, up = g.narrow(packed, 2, 0, 33), g.narrow(packed, 2, 33, 33)
    g.set_outputs(y=g.glu(gate, up, activation))
    exe, _ = assert_matches_reference(g, {"p": _rand(rng, (2, 7, 66), dtype)})
    assert [t.kernel for t in exe.thunks] == [f"glu_{dtype}"]   # no copies


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(rng, dtype, axis):
    g = rlx.Graph()
    a, b = g.input("a", (2, 3, 4), dtype), g.input("b", (2, 3, 4), dtype)
    c = g.transpose(g.input("c", (4, 3, 2), dtype), (2, 1, 0))
    g.set_outputs(y=g.concat([a, b, c], axis=axis))
    assert_matches_reference(g, {"a": _rand(rng, (2, 3, 4), dtype), "b": _rand(rng, (2, 3, 4), dtype),
                                 "c": _rand(rng, (4, 3, 2), dtype)})


def test_ir_errors_name_the_problem():
    g = rlx.Graph()
    x = g.input("x", (3, 4))
    with pytest.raises(rlx.ShapeError, match="weight shape"):
        g.rmsnorm(x, g.param("w", (5,)))
    with pytest.raises(rlx.GraphError, match="activation"):
        g.linear(x, g.param("w2", (6, 4)), activation="swish")
    with pytest.raises(rlx.ShapeError, match="has K=4"):
        g.linear(x, g.param("w3", (6, 5)))
    with pytest.raises(rlx.ShapeError, match="does not broadcast"):
        g.masked_softmax(x, g.input("m", (5,)))
    with pytest.raises(rlx.ShapeError, match="outside axis"):
        g.concat([x, g.input("y", (2, 5))], axis=0)


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
