"""Every op of the first kernel set against rlx/reference/core.py on the CPU
device: f32 and f16, odd sizes, broadcasting, strided views."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_matches_reference

import rlx

SIZES = [1, 7, 33, 1023]
DTYPES = ["f32", "f16"]


def _rand(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float16 if dtype == "f16" else np.float32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES + [100_003])
@pytest.mark.parametrize("op", ["add", "mul"])
def test_binary_same_shape(rng, op, n, dtype):
    g = rlx.Graph()
    a, b = g.input("a", (n,), dtype), g.input("b", (n,), dtype)
    g.set_outputs(y=getattr(g, op)(a, b))
    assert_matches_reference(g, {"a": _rand(rng, n, dtype), "b": _rand(rng, n, dtype)})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((7, 33), (33,)), ((3, 1, 5), (1, 4, 5)), ((1,), (17, 3)), ((2, 3, 4, 5), (4, 1))])
def test_binary_broadcast(rng, shapes, dtype):
    g = rlx.Graph()
    a, b = g.input("a", shapes[0], dtype), g.input("b", shapes[1], dtype)
    g.set_outputs(sum=g.add(a, b), prod=g.mul(a, b))
    assert_matches_reference(g, {"a": _rand(rng, shapes[0], dtype), "b": _rand(rng, shapes[1], dtype)})


@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_reads_strided_views_without_copy(rng, dtype):
    g = rlx.Graph()
    a = g.input("a", (6, 9), dtype)
    t = g.transpose(a, (1, 0))                       # (9, 6) strided
    n = g.narrow(g.input("b", (9, 10), dtype), 1, 2, 6)  # (9, 6) offset + strided
    g.set_outputs(y=g.add(t, n))
    exe, _ = assert_matches_reference(g, {"a": _rand(rng, (6, 9), dtype), "b": _rand(rng, (9, 10), dtype)})
    assert exe.stats.thunks == 1   # views cost no thunk


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", ["gelu", "gelu_tanh", "silu"])
def test_unary(rng, kind, n, dtype):
    g = rlx.Graph()
    x = g.input("x", (n,), dtype)
    y = g.gelu(x, approximate="tanh") if kind == "gelu_tanh" else getattr(g, kind)(x)
    g.set_outputs(y=y)
    assert_matches_reference(g, {"x": _rand(rng, n, dtype, 3.0)})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 33), (5, 1023), (2, 3, 17)])
def test_softmax(rng, shape, dtype):
    g = rlx.Graph()
    x = g.input("x", shape, dtype)
    g.set_outputs(y=g.softmax(x))
    _, got = assert_matches_reference(g, {"x": _rand(rng, shape, dtype, 4.0)})
    np.testing.assert_allclose(got["y"].astype(np.float64).sum(-1), 1.0, rtol=0, atol=1e-2 if dtype == "f16" else 1e-5)


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
@pytest.mark.parametrize("index_dtype", ["i32", "i64"])
@pytest.mark.parametrize("idx_shape", [(1,), (7,), (3, 11)])
def test_gather(rng, dtype, index_dtype, idx_shape):
    g = rlx.Graph()
    table = g.param("table", (33, 17), dtype)
    idx = g.input("idx", idx_shape, index_dtype)
    g.set_outputs(y=g.gather(table, idx))
    np_idx = rng.integers(0, 33, idx_shape).astype(np.int32 if index_dtype == "i32" else np.int64)
    assert_matches_reference(g, {"idx": np_idx}, {"table": _rand(rng, (33, 17), dtype)})


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_copy_and_views(rng, dtype):
    g = rlx.Graph()
    x = g.input("x", (4, 7, 9), dtype)
    t = g.transpose(x, (2, 0, 1))
    nar = g.narrow(t, 1, 1, 2)
    g.set_outputs(t=g.copy(t), n=g.copy(nar), r=g.reshape(nar, (9, 14)))
    assert_matches_reference(g, {"x": _rand(rng, (4, 7, 9), dtype)})


@pytest.mark.parametrize("pair", [("f32", "f16"), ("f16", "f32")])
def test_cast(rng, pair):
    g = rlx.Graph()
    x = g.input("x", (33,), pair[0])
    g.set_outputs(y=g.cast(x, pair[1]))
    assert_matches_reference(g, {"x": _rand(rng, (33,), pair[0])})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mkn", [(1, 1, 1), (7, 33, 5), (17, 64, 129), (2, 1023, 3)])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul(rng, mkn, dtype, transpose_b):
    m, k, n = mkn
    g = rlx.Graph()
    a = g.input("a", (m, k), dtype)
    w = g.param("w", (n, k) if transpose_b else (k, n), dtype)
    g.set_outputs(y=g.matmul(a, w, transpose_b=transpose_b))
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "f32" else dict(rtol=5e-3, atol=5e-3)
    assert_matches_reference(g, {"a": _rand(rng, (m, k), dtype)},
                             {"w": _rand(rng, (n, k) if transpose_b else (k, n), dtype, 0.2)}, tol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_matmul_and_folded_batch(rng, dtype):
    g = rlx.Graph()
    a = g.input("a", (3, 5, 8), dtype)
    b = g.input("b", (3, 8, 4), dtype)
    w = g.param("w", (8, 6), dtype)
    g.set_outputs(batched=g.matmul(a, b), folded=g.matmul(a, w),
                  bt=g.matmul(a, g.input("c", (3, 7, 8), dtype), transpose_b=True))
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "f32" else dict(rtol=5e-3, atol=5e-3)
    assert_matches_reference(g, {"a": _rand(rng, (3, 5, 8), dtype), "b": _rand(rng, (3, 8, 4), dtype),
                                 "c": _rand(rng, (3, 7, 8), dtype)}, {"w": _rand(rng, (8, 6), dtype)}, tol=tol)


def test_output_that_is_a_parameter_or_view_is_materialized(rng):
    g = rlx.Graph()
    w = g.param("w", (3, 4))
    x = g.input("x", (4, 3))
    g.set_outputs(w=w, xt=g.transpose(x, (1, 0)), x=x)
    assert_matches_reference(g, {"x": _rand(rng, (4, 3), "f32")}, {"w": _rand(rng, (3, 4), "f32")})


def test_constants(rng):
    g = rlx.Graph()
    x = g.input("x", (2, 3))
    c = g.constant(np.arange(3, dtype=np.float32))
    g.set_outputs(y=g.add(x, c))
    assert_matches_reference(g, {"x": _rand(rng, (2, 3), "f32")})
