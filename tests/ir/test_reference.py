"""The numpy oracle: each op against hand-computed or independent numpy values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlx.errors import InputError, ParameterError, UnsupportedOpError
from rlx.ir import Graph, OpDef, TensorType, register_op
from rlx.reference import REFERENCE, erf, register_reference, run_reference

RNG = np.random.default_rng(0)


def _run1(build, *arrays, dtype="f32", params=None):
    """Build a one-op graph over inputs a0, a1, ... and run it."""
    g = Graph()
    xs = [g.input(f"a{i}", a.shape, a.dtype) for i, a in enumerate(arrays)]
    g.set_outputs(y=build(g, *xs))
    return run_reference(g, {f"a{i}": a for i, a in enumerate(arrays)}, params)["y"]


def test_every_builtin_compute_op_has_a_reference():
    for op in ("add", "mul", "gelu", "silu", "softmax", "layernorm", "gather", "matmul", "reshape",
               "transpose", "narrow", "copy", "cast"):
        assert op in REFERENCE


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_add_mul_broadcast(dt):
    a = RNG.standard_normal((2, 3)).astype(dt)
    b = RNG.standard_normal((3,)).astype(dt)
    y = _run1(lambda g, x, z: g.add(x, z), a, b)
    assert y.dtype == dt
    np.testing.assert_array_equal(y, (a.astype(np.float32) + b.astype(np.float32)).astype(dt))
    y = _run1(lambda g, x, z: x * z, a, b)
    np.testing.assert_array_equal(y, (a.astype(np.float32) * b.astype(np.float32)).astype(dt))


def test_add_hand_values():
    a, b = np.array([[1, 2], [3, 4]], np.float32), np.array([10, 20], np.float32)
    y = _run1(lambda g, x, z: g.add(x, z), a, b)
    np.testing.assert_array_equal(y, [[11, 22], [13, 24]])


# gelu(x) = x * Phi(x), Phi the standard normal CDF (values from tables, to 16 digits)
GELU_EXACT = {
    0.0: 0.0,
    1.0: 0.8413447460685429,
    -1.0: -0.15865525393145707,
    2.0: 1.9544997361036416,
    -0.5: -0.15426876936299344,
    3.0: 2.99595030590511,
}


def test_erf_accuracy():
    xs = np.linspace(-6, 6, 241)
    np.testing.assert_allclose(erf(xs), [math.erf(v) for v in xs], rtol=0, atol=1e-15)
    assert erf(np.zeros((0,))).shape == (0,)


def test_gelu_exact_known_values():
    x = np.array(list(GELU_EXACT), np.float32)
    y = _run1(lambda g, v: g.gelu(v), x)
    np.testing.assert_allclose(y, list(GELU_EXACT.values()), rtol=0, atol=1e-6)


def test_gelu_tanh():
    x = np.linspace(-5, 5, 101).astype(np.float32)
    y = _run1(lambda g, v: g.gelu(v, approximate="tanh"), x)
    xd = x.astype(np.float64)
    want = 0.5 * xd * (1 + np.tanh(math.sqrt(2 / math.pi) * (xd + 0.044715 * xd**3)))
    np.testing.assert_allclose(y, want, rtol=0, atol=2e-6)
    # the tanh form is close to, but not the same as, the exact form
    exact = _run1(lambda g, v: g.gelu(v), x)
    assert 1e-5 < np.max(np.abs(exact - y)) < 1e-2


def test_gelu_f16():
    x = np.array([-2, -0.5, 0, 0.5, 1, 2], np.float16)
    y = _run1(lambda g, v: g.gelu(v), x)
    assert y.dtype == np.float16
    want = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=1e-3, atol=1e-3)


def test_silu():
    x = np.array([-100.0, -1.0, 0.0, 1.0, 3.0, 100.0], np.float32)
    y = _run1(lambda g, v: g.silu(v), x)
    xd = x.astype(np.float64)
    np.testing.assert_allclose(y, xd / (1 + np.exp(-xd)), rtol=1e-6, atol=1e-30)
    assert np.all(np.isfinite(y)) and y[0] <= 0 and abs(y[0]) < 1e-30


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_softmax(dt):
    x = (RNG.standard_normal((3, 4, 9)) * 5).astype(dt)
    y = _run1(lambda g, v: g.softmax(v), x)
    assert y.dtype == dt and y.shape == x.shape
    sum_tol = 1e-6 if dt == np.float32 else 5e-3
    np.testing.assert_allclose(y.astype(np.float64).sum(-1), 1.0, rtol=0, atol=sum_tol)
    xd = x.astype(np.float64)
    want = np.exp(xd - xd.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=1e-5 if dt == np.float32 else 2e-3, atol=1e-7)


def test_softmax_stable_with_large_values():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1e4, 0.0, 1e4]], np.float32)
    y = _run1(lambda g, v: g.softmax(v), x)
    assert np.all(np.isfinite(y))
    e = np.exp([-2.0, -1.0, 0.0])
    np.testing.assert_allclose(y[0], e / e.sum(), rtol=1e-6)
    np.testing.assert_allclose(y[1], [0, 0, 1], atol=1e-7)


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_layernorm_vs_float64(dt):
    d = 48
    x = (RNG.standard_normal((2, 5, d)) * 3 + 1).astype(dt)
    w = RNG.standard_normal(d).astype(dt)
    b = RNG.standard_normal(d).astype(dt)
    g = Graph()
    xi = g.input("x", x.shape, x.dtype)
    g.set_outputs(y=g.layernorm(xi, g.param("w", (d,), x.dtype), g.param("b", (d,), x.dtype), eps=1e-5))
    y = run_reference(g, {"x": x}, {"w": w, "b": b})["y"]
    assert y.dtype == dt
    xd, wd, bd = (a.astype(np.float64) for a in (x, w, b))
    mu = xd.mean(-1, keepdims=True)
    var = ((xd - mu) ** 2).mean(-1, keepdims=True)
    want = (xd - mu) / np.sqrt(var + 1e-5) * wd + bd
    tol = 1e-5 if dt == np.float32 else 1e-2
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=tol, atol=tol)


def test_layernorm_hand_values():
    x = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    g = Graph()
    xi = g.input("x", (1, 4))
    w, b = g.constant(np.full(4, 2.0)), g.constant(np.full(4, 0.5))
    g.set_outputs(y=g.layernorm(xi, w, b, eps=0.0))
    y = run_reference(g, {"x": x})["y"]
    # mean 2.5, biased var 1.25
    want = np.array([-1.5, -0.5, 0.5, 1.5]) / math.sqrt(1.25) * 2 + 0.5
    np.testing.assert_allclose(y[0], want, rtol=1e-6)


@pytest.mark.parametrize("idt", [np.int32, np.int64])
def test_gather(idt):
    table = np.arange(12, dtype=np.float16).reshape(4, 3)
    ids = np.array([[3, 0], [1, 1]], idt)
    g = Graph()
    t = g.param("emb", table.shape, "f16")
    i = g.input("ids", ids.shape, ids.dtype)
    g.set_outputs(y=g.gather(t, i))
    y = run_reference(g, {"ids": ids}, {"emb": table})["y"]
    assert y.shape == (2, 2, 3) and y.dtype == np.float16
    np.testing.assert_array_equal(y, table[ids])
    for bad in (4, -1):
        with pytest.raises(InputError, match=f"index {bad} is out of range.*4 rows"):
            run_reference(g, {"ids": np.array([[0, bad], [1, 1]], idt)}, {"emb": table})


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul(dt, tb):
    a = RNG.standard_normal((2, 3, 5)).astype(dt)
    w = RNG.standard_normal((4, 5) if tb else (5, 4)).astype(dt)
    y = _run1(lambda g, x, z: g.matmul(x, z, transpose_b=tb), a, w)
    assert y.shape == (2, 3, 4) and y.dtype == dt
    wd = w.astype(np.float64).T if tb else w.astype(np.float64)
    want = a.astype(np.float64) @ wd
    tol = 1e-5 if dt == np.float32 else 5e-3
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=tol, atol=tol)


def test_matmul_batched_and_hand_values():
    a = np.array([[[1, 2], [3, 4]]], np.float32)
    b = np.array([[[5, 6], [7, 8]]], np.float32)
    np.testing.assert_array_equal(_run1(lambda g, x, z: g.matmul(x, z), a, b), [[[19, 22], [43, 50]]])
    np.testing.assert_array_equal(_run1(lambda g, x, z: g.matmul(x, z, transpose_b=True), a, b),
                                  [[[17, 23], [39, 53]]])


def test_views_and_copy():
    x = np.arange(24, dtype=np.float16).reshape(2, 3, 4)
    np.testing.assert_array_equal(_run1(lambda g, v: g.reshape(v, (4, -1)), x), x.reshape(4, 6))
    np.testing.assert_array_equal(_run1(lambda g, v: g.transpose(v, (2, 0, 1)), x), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(_run1(lambda g, v: g.narrow(v, 2, 1, 2), x), x[:, :, 1:3])
    np.testing.assert_array_equal(_run1(lambda g, v: g.narrow(v, -2, 2, 1), x), x[:, 2:3, :])
    c = _run1(lambda g, v: g.copy(g.transpose(v, (0, 2, 1))), x)
    assert c.flags.c_contiguous
    np.testing.assert_array_equal(c, x.transpose(0, 2, 1))
    ids = np.arange(6, dtype=np.int32).reshape(2, 3)
    r = _run1(lambda g, v: g.transpose(g.reshape(v, (3, 2)), (1, 0)), ids)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r, ids.reshape(3, 2).T)


def test_cast():
    x = np.array([1.0, 1.0 / 3.0, 70000.0, -2.5], np.float32)
    y = _run1(lambda g, v: g.cast(v, "f16"), x)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, [1.0, np.float16(1.0 / 3.0), np.inf, -2.5])  # f16 overflow -> inf
    z = _run1(lambda g, v: g.cast(g.cast(v, "f16"), "f32"), x)
    assert z.dtype == np.float32
    np.testing.assert_array_equal(z, y.astype(np.float32))


def test_f16_results_are_rounded_from_f32():
    a = np.array([1.0, 2048.0], np.float16)
    b = np.array([0.0004, 1.0], np.float16)
    y = _run1(lambda g, x, z: g.add(x, z), a, b)
    np.testing.assert_array_equal(y, (a.astype(np.float32) + b.astype(np.float32)).astype(np.float16))


def test_constants_and_scalars():
    x = np.array([1.0, 2.0], np.float32)
    np.testing.assert_array_equal(_run1(lambda g, v: v * 0.5 + 1.0, x), [1.5, 2.0])


def test_outputs_are_fresh_arrays():
    x = np.ones((2, 2), np.float32)
    g = Graph()
    xi = g.input("x", (2, 2))
    g.set_outputs(x=xi, r=g.reshape(xi, (4,)))
    out = run_reference(g, {"x": x})
    assert list(out) == ["x", "r"]
    out["x"][0, 0] = 7
    out["r"][1] = 7
    assert x[0, 0] == 1 and x[0, 1] == 1


# ---------------------------------------------------------------- binding errors


def _mm_graph():
    g = Graph()
    x = g.input("x", (2, 3))
    w = g.param("w", (3, 4))
    g.set_outputs(y=g.matmul(x, w))
    return g


def test_missing_and_unknown_bindings():
    g = _mm_graph()
    x, w = np.zeros((2, 3), np.float32), np.zeros((3, 4), np.float32)
    assert run_reference(g, {"x": x}, {"w": w})["y"].shape == (2, 4)
    with pytest.raises(InputError, match="missing input 'x'"):
        run_reference(g, {}, {"w": w})
    with pytest.raises(ParameterError, match="missing param 'w'"):
        run_reference(g, {"x": x})
    with pytest.raises(InputError, match="unknown input.*'z'"):
        run_reference(g, {"x": x, "z": x}, {"w": w})
    with pytest.raises(ParameterError, match="unknown param.*'q'"):
        run_reference(g, {"x": x}, {"w": w, "q": w})


def test_wrong_shape_or_dtype():
    g = _mm_graph()
    w = np.zeros((3, 4), np.float32)
    with pytest.raises(InputError, match=r"'x'.*expected f32\[2,3\].*got float32\[2, 4\]"):
        run_reference(g, {"x": np.zeros((2, 4), np.float32)}, {"w": w})
    with pytest.raises(InputError, match=r"'x'.*expected f32\[2,3\].*got float16\[2, 3\]"):
        run_reference(g, {"x": np.zeros((2, 3), np.float16)}, {"w": w})
    with pytest.raises(ParameterError, match=r"'w'.*expected f32\[3,4\].*got float64"):
        run_reference(g, {"x": np.zeros((2, 3), np.float32)}, {"w": w.astype(np.float64)})


# ---------------------------------------------------------------- user ops


def test_user_op_reference():
    register_op(OpDef("test_ref_square", 1, lambda ts, a: ts[0]), replace=True)
    g = Graph()
    x = g.input("x", (3,), "f16")
    g.set_outputs(y=g.op("test_ref_square", [x]))
    data = np.array([1, 2, 3], np.float16)
    with pytest.raises(UnsupportedOpError, match="test_ref_square"):
        run_reference(g, {"x": data})
    register_reference("test_ref_square", lambda xs, attrs, out: xs[0].astype(np.float32) ** 2)
    y = run_reference(g, {"x": data})["y"]
    assert y.dtype == np.float16  # cast to the node's dtype by the runner
    np.testing.assert_array_equal(y, [1, 4, 9])
    del REFERENCE["test_ref_square"]


def test_tensor_type_passed_to_reference():
    seen = []
    register_op(OpDef("test_ref_seen", 1, lambda ts, a: ts[0]), replace=True)
    register_reference("test_ref_seen", lambda xs, attrs, out: seen.append(out) or xs[0])
    g = Graph()
    x = g.input("x", (2,))
    g.set_outputs(y=g.op("test_ref_seen", [x]))
    run_reference(g, {"x": np.zeros(2, np.float32)})
    assert seen == [TensorType((2,), "f32")]
    del REFERENCE["test_ref_seen"]
