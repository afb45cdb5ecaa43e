"""Contractions over K = 0 sum nothing: matmul gives zeros, linear gives
activation(bias) (rlx/opt/empty.py). Checked after other values used the
arena, so stale bytes in a reused slot would show."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

DTYPES = [("f32", np.float32), ("f16", np.float16)]


def _with_busy_arena(g: rlx.Graph, y: rlx.Graph) -> None:
    """Outputs: y, plus a chain of temporaries computed before it whose
    slots the planner may hand to y's bytes when outputs are not pinned."""
    noise = g.input("noise", (64,))
    t = noise
    for _ in range(4):
        t = g.exp(g.tanh(t))
    g.set_outputs(y=y, t=t)


def _run(g, feed, params=None, **kw):
    feed = dict(feed, noise=np.linspace(-3, 3, 64, dtype=np.float32))
    exe = rlx.compile(g, params=params or {}, **kw)
    first = exe.run(feed)["y"]
    np.testing.assert_array_equal(exe.run(feed)["y"], first)
    return first


@pytest.mark.parametrize("pin", [True, False])
@pytest.mark.parametrize("dtype, np_dtype", DTYPES)
@pytest.mark.parametrize("a_shape, b_shape", [((3, 0), (0, 4)), ((2, 3, 0), (2, 0, 4)), ((1, 0), (0, 7)),
                                              ((2, 5, 3, 0), (2, 5, 0, 1))])
def test_matmul_over_k_zero_is_zeros(pin, dtype, np_dtype, a_shape, b_shape):
    g = rlx.Graph()
    y = g.matmul(g.input("a", a_shape, dtype), g.input("b", b_shape, dtype))
    _with_busy_arena(g, y)
    feed = {"a": np.zeros(a_shape, np_dtype), "b": np.zeros(b_shape, np_dtype)}
    got = _run(g, feed, pin_outputs=pin)
    want = np.matmul(feed["a"], feed["b"])
    assert got.shape == want.shape and got.dtype == np_dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("activation", [None, "gelu", "gelu_tanh", "silu", "relu"])
@pytest.mark.parametrize("transpose_b", [True, False])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("dtype, np_dtype", DTYPES)
def test_linear_over_k_zero_is_activation_of_bias(activation, transpose_b, with_bias, dtype, np_dtype):
    g = rlx.Graph()
    w_shape = (5, 0) if transpose_b else (0, 5)
    bias = g.param("bias", (5,), dtype) if with_bias else None
    y = g.linear(g.input("x", (2, 3, 0), dtype), g.param("w", w_shape, dtype), bias, activation=activation,
                 transpose_b=transpose_b)
    _with_busy_arena(g, y)
    params = {"w": np.zeros(w_shape, np_dtype)}
    if with_bias:
        params["bias"] = np.linspace(-2, 2, 5).astype(np_dtype)
    feed = {"x": np.zeros((2, 3, 0), np_dtype)}
    got = _run(g, feed, params, pin_outputs=False)
    want = rlx.run_reference(g, dict(feed, noise=np.zeros(64, np.float32)), params)["y"]
    assert got.shape == (2, 3, 5)
    tol = 1e-6 if dtype == "f32" else 2e-3
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol, atol=tol)
    if not with_bias:
        np.testing.assert_array_equal(got, np.zeros((2, 3, 5), np_dtype))


def test_the_report_says_what_became_zeros():
    g = rlx.Graph()
    g.set_outputs(y=g.matmul(g.input("a", (3, 0)), g.input("b", (0, 4))))
    exe = rlx.compile(g)
    assert any("empty contractions: 1" in line for line in exe.compile_report)
