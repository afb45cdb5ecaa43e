"""matmul and linear against rlx/reference/core.py on the device under
test: both matmul paths (the gemm with its epilogue kernel, the row kernel),
the bias in the gemm where the shim takes one, NaN through the epilogues and
their SiLU/GELU accuracy, contractions over K = 0, and bf16 weights on the
host (precision="bf16"). Tolerances: tests/conftest.py; bf16's below."""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import assert_matches_reference

import rlx
from rlx.errors import DTypeError, UnsupportedPrecisionError
from rlx.ir.dtype import bf16, from_bf16, to_bf16
from rlx.lowering import linear as lowering_linear
from rlx.opt.precision import apply_precision
from rlx.runtime import shim

from .helpers import DTYPES, FUSION, GELU_X, SILU_X
from .helpers import assert_gelu_accurate as _assert_gelu_accurate
from .helpers import assert_same_nan as _assert_same
from .helpers import assert_silu_accurate as _assert_silu_accurate
from .helpers import np_dtype as _np_dtype
from .helpers import rand as _rand
from .helpers import to_torch as _t

LINEAR_TOL = {"f32": dict(rtol=1e-4, atol=1e-4), "f16": dict(rtol=5e-3, atol=5e-3)}


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


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", ["gemm", "row_kernel"])
@pytest.mark.parametrize("activation", [None, "gelu", "gelu_tanh", "silu", "relu"])
@pytest.mark.parametrize("transpose_b,bias", [(True, True), (False, True), (True, False)])
def test_linear_paths(rng, monkeypatch, dtype, path, activation, transpose_b, bias):
    # Force the path over the cost model's choice.
    monkeypatch.setattr(lowering_linear, "use_row_kernel", lambda *a, **k: path == "row_kernel")
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


# ---------------------------------------------------------------- the bias in the gemm

# The linear's bias rides in the gemm where the device's shim takes one
# (rlx_device_info.gemm_bias: host, cuda with cuBLASLt), so a biased linear is
# one thunk; an activation still takes the epilogue kernel, without the bias.


def _linear_graph(m, k, n, dtype, activation, transpose_b, bias=True):
    g = rlx.Graph()
    x = g.input("x", (m, k), dtype)
    w = g.param("w", (n, k) if transpose_b else (k, n), dtype)
    b = g.param("b", (n,), dtype) if bias else None
    g.set_outputs(y=g.linear(x, w, b, activation=activation, transpose_b=transpose_b))
    return g


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("m,k,n,act,tb", [(16, 384, 1152, None, False), (9, 37, 61, "gelu", True),
                                          (33, 64, 130, None, True), (130, 48, 17, "relu", False)])
def test_bias_in_the_gemm(rng, monkeypatch, dtype, m, k, n, act, tb):
    # Force the gemm path (the row kernel has its own bias epilogue).
    monkeypatch.setattr(lowering_linear, "use_row_kernel", lambda *a, **kw: False)
    np_dt = np.float32 if dtype == "f32" else np.float16
    g = _linear_graph(m, k, n, dtype, act, tb)
    params = {"w": (rng.standard_normal((n, k) if tb else (k, n)) / np.sqrt(k)).astype(np_dt),
              "b": rng.standard_normal(n).astype(np_dt)}
    exe, _ = assert_matches_reference(g, {"x": rng.standard_normal((m, k)).astype(np_dt)}, params)
    kernels = [t.kernel for t in exe.thunks]
    gemms = [t for t in exe.thunks if t.kernel is None]
    assert len(gemms) == 1
    if exe.target.gemm_bias:
        assert gemms[0].gemm["bias"] is not None
        # Only an activation leaves an epilogue kernel, and it adds no bias.
        assert kernels.count(f"bias_act_{dtype}") == (1 if act else 0)
    else:
        assert gemms[0].gemm["bias"] is None and kernels.count(f"bias_act_{dtype}") == 1


# ---------------------------------------------------------------- NaN and accuracy of the epilogues


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", ["gemm", "row_kernel"])
@pytest.mark.parametrize("activation", ["relu", "silu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("compile_kw", FUSION)
def test_linear_epilogue_propagates_nan(rng, monkeypatch, dtype, path, activation, compile_kw):
    monkeypatch.setattr(lowering_linear, "use_row_kernel", lambda *a, **k: path == "row_kernel")
    m, k, n = 4, 33, 7
    nd = _np_dtype(dtype)
    xv = (rng.standard_normal((m, k)) * 0.3).astype(nd)
    xv[1, 5] = np.nan                          # row 1 of the product is NaN, before the activation
    wv, bv = (rng.standard_normal((n, k)) * 0.3).astype(nd), rng.standard_normal(n).astype(nd)
    bv[3] = np.nan                             # column 3 NaN through the bias
    g = rlx.Graph()
    x, w, b = g.input("x", (m, k), dtype), g.param("w", (n, k), dtype), g.param("b", (n,), dtype)
    lin = g.linear(x, w, b)
    y = {"relu": g.relu, "silu": g.silu, "gelu": g.gelu, "gelu_tanh": lambda t: g.gelu(t, "tanh")}[activation](lin)
    g.set_outputs(y=y)                         # fused into the linear's epilogue unless fusion is off
    exe = rlx.compile(g, params={"w": wv, "b": bv}, **compile_kw)
    got = exe.run(x=xv)["y"]
    want_ref = rlx.run_reference(g, {"x": xv}, {"w": wv, "b": bv})["y"]
    pre = torch.nn.functional.linear(_t(xv), _t(wv), _t(bv))
    act = {"relu": torch.relu, "silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu,
           "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh")}[activation]
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "f32" else dict(rtol=5e-3, atol=5e-3)
    _assert_same(got, want_ref, tol, "against rlx.run_reference")
    _assert_same(got, act(pre).numpy().astype(got.dtype), tol, "against torch")
    assert np.isnan(got[1]).all() and np.isnan(got[:, 3]).all()


@pytest.mark.parametrize("path", ["gemm", "row_kernel"])
def test_silu_relative_error_linear_epilogue(monkeypatch, path):
    # x @ I is exact, so the output is the epilogue's SiLU of x itself.
    monkeypatch.setattr(lowering_linear, "use_row_kernel", lambda *a, **k: path == "row_kernel")
    k = 16
    x = SILU_X.reshape(-1, k)
    g = rlx.Graph()
    xn, w = g.input("x", x.shape), g.param("w", (k, k))
    g.set_outputs(y=g.linear(xn, w, activation="silu"))
    got = rlx.compile(g, params={"w": np.eye(k, dtype=np.float32)}).run(x=x)["y"]
    _assert_silu_accurate(got.ravel(), SILU_X)


@pytest.mark.parametrize("path", ["gemm", "row_kernel"])
def test_gelu_relative_error_linear_epilogue(monkeypatch, path):
    monkeypatch.setattr(lowering_linear, "use_row_kernel", lambda *a, **k: path == "row_kernel")
    k = 11
    x = GELU_X[: (GELU_X.size // k) * k].reshape(-1, k)
    g = rlx.Graph()
    g.set_outputs(y=g.linear(g.input("x", x.shape), g.param("w", (k, k)), activation="gelu"))
    got = rlx.compile(g, params={"w": np.eye(k, dtype=np.float32)}).run(x=x)["y"]
    _assert_gelu_accurate(got.ravel(), x.ravel())


# ---------------------------------------------------------------- empty contractions

# Contractions over K = 0 sum nothing: matmul gives zeros, linear gives
# activation(bias) (rlx/opt/empty.py). Checked after other values used the
# arena, so stale bytes in a reused slot would show.

DTYPE_PAIRS = [("f32", np.float32), ("f16", np.float16)]


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
@pytest.mark.parametrize("dtype, np_dtype", DTYPE_PAIRS)
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
@pytest.mark.parametrize("dtype, np_dtype", DTYPE_PAIRS)
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


# ---------------------------------------------------------------- bf16 weights

# bf16 is host-only: "cpu:0" names the host itself, which --rlx-device does not redirect.
HOST = "cpu:0"

# precision="bf16" on the host: linear/matmul weights stored as bf16, the
# host gemm (csrc/host_bf16.h) with f32 A and C, its forced fallback
# (RLX_HOST_BF16=0 / device option bf16=0), and the precision pass.
#
# Tolerance: the product differs from the f32 one only by rounding each weight
# to bf16 (8 significant bits: relative error <= u = 2^-8) and, in the AVX-512
# BF16 kernels, each element of A too (another u); f32 sums add ~k * 2^-24.
# So per element |got - f32 product| <= (2u + u^2) * (|A| @ |B|) + 1e-5, the
# bound checked below (2^-7 * 1.01).
# Against the product of the rounded operands (numpy, f64) the kernels agree
# to f32 accumulation error.


SHAPES = [(1, 17, 33), (3, 5, 7), (9, 31, 63), (16, 45, 129), (17, 33, 31), (130, 77, 385), (9, 100, 1),
          (40, 96, 600)]


KERNELS_MARK = "[AVX-512 BF16]"   # in the host device's name when its bf16 kernels run


def _cpu_has_avx512_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512_bf16" in flags and " avx512bw" in flags and " avx512vl" in flags


def _kernels_run(device) -> bool:
    return KERNELS_MARK in device.info.name


def test_device_says_whether_the_bf16_kernels_run():
    from rlx import env

    allowed = env.host_isa() in (None, "avx512", "avx512vnni")   # RLX_HOST_ISA below avx512 turns them off
    assert _kernels_run(shim.Device("host", 0)) == (_cpu_has_avx512_bf16() and platform.machine() == "x86_64"
                                                    and allowed)
    assert not _kernels_run(shim.Device("host", 0, options_override={"bf16": "0"}))


def _round(x: np.ndarray) -> np.ndarray:
    return from_bf16(to_bf16(x)).astype(np.float64)


def _bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return 1.01 * 2.0 ** -7 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))) + 1e-5


def test_bf16_conversion_rounds_to_nearest_even():
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -2.5, np.inf, 0.0], np.float32)
    assert from_bf16(to_bf16(x)).tolist() == [1.0, 1.0, 1 + 4 * 2 ** -8, 1 + 2 ** -7, -2.5, np.inf, 0.0]
    assert np.isnan(from_bf16(to_bf16(np.array([np.nan], np.float32)))).all()
    assert to_bf16(np.float32(1.0)).dtype == np.uint16


@pytest.mark.parametrize("transpose_b", [True, False])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_linear_bf16_weights(rng, m, n, k, transpose_b):
    g = rlx.Graph()
    x = g.input("x", (m, k))
    w = g.param("w", (n, k) if transpose_b else (k, n))
    bias = g.param("b", (n,))
    g.set_outputs(y=g.linear(x, w, bias, activation="gelu", transpose_b=transpose_b),
                  z=g.linear(x, w, transpose_b=transpose_b))
    W = rng.standard_normal((n, k) if transpose_b else (k, n)).astype(np.float32)
    B = rng.standard_normal(n).astype(np.float32)
    X = rng.standard_normal((m, k)).astype(np.float32)
    exe = rlx.compile(g, device=HOST, params={"w": W, "b": B}, precision="bf16")
    out = exe.run(x=X)
    Wt = W.T if transpose_b else W
    # z = x @ W^T: within the bf16 rounding bound of the f32 product ...
    f32 = X.astype(np.float64) @ Wt.astype(np.float64)
    ratio = np.abs(out["z"] - f32) / _bound(X, Wt)
    assert ratio.max() <= 1, (ratio.max(), np.unravel_index(ratio.argmax(), ratio.shape))
    # ... and y = gelu(z + b) as the f32 graph computes it from the bf16-weight product.
    want = rlx.run_reference(g, {"x": X}, {"w": from_bf16(to_bf16(W)), "b": B})
    np.testing.assert_allclose(out["y"], want["y"], rtol=2e-2, atol=2e-2 * max(1.0, float(np.abs(f32).max())) / 8)
    # The weight is bf16 in the compiled graph; every gemm reads it as operand B.
    assert exe.graph.params["w"].dtype is bf16 and exe.graph.params["b"].dtype.name == "f32"
    gemms = [t.gemm for t in exe.thunks if t.gemm]
    assert gemms and all(gm["b_dtype"] == 2 and gm["dtype"] == 0 and gm["c_dtype"] == 0 for gm in gemms)


def test_matmul_bf16_weight_with_batched_activations(rng):
    """A 2-D weight against [batch, m, k] activations folds the batch into M."""
    g = rlx.Graph()
    x = g.input("x", (3, 7, 45))
    w = g.param("w", (45, 29))
    g.set_outputs(y=g.matmul(x, w))
    W = rng.standard_normal((45, 29)).astype(np.float32)
    X = rng.standard_normal((3, 7, 45)).astype(np.float32)
    exe = rlx.compile(g, device=HOST, params={"w": W}, precision="bf16")
    y = exe.run(x=X)["y"]
    assert (np.abs(y - X.astype(np.float64) @ W) <= _bound(X, W)).all()
    assert exe.graph.params["w"].dtype is bf16


# ---------------------------------------------------------------- the shim's bf16 gemm directly


def _gemm(device, A, Bbits, m, n, k, *, trans_b, batch=1, strides=(0, 0, 0), outer=1,
          outer_strides=(0, 0, 0), alpha=1.0, beta=0.0, C0=None, ldc=None, bias=None):
    ldc = ldc or n
    lda, ldb = k, (k if trans_b else n)
    a = device.alloc(A.nbytes)
    a.write(0, A)
    b = device.alloc(Bbits.nbytes)
    b.write(0, Bbits)
    csize = (outer - 1) * outer_strides[2] + (batch - 1) * strides[2] + (m - 1) * ldc + n
    C = np.zeros(csize, np.float32) if C0 is None else C0.copy()
    c = device.alloc(C.nbytes)
    c.write(0, C)
    bias_buf = None
    if bias is not None:   # at an offset, to check bias_offset is honoured
        bias_buf = device.alloc(bias.nbytes + 64)
        bias_buf.write(64, bias)
    with shim.CommandBuffer(device) as cb:
        cb.gemm(a, b, c, m, n, k, lda=lda, ldb=ldb, ldc=ldc, trans_b=trans_b, dtype=shim.DTYPE_F32,
                b_dtype=shim.DTYPE_BF16, c_dtype=shim.DTYPE_F32, alpha=alpha, beta=beta, batch=batch,
                stride_a=strides[0], stride_b=strides[1], stride_c=strides[2], outer=outer,
                outer_strides=outer_strides, bias=bias_buf, bias_offset=64 if bias is not None else 0)
        cb.commit()
        cb.wait()
    return np.frombuffer(c.read(0, C.nbytes), np.float32).copy()


@pytest.fixture(scope="module", params=["kernels", "fallback"])
def host(request):
    """The host device with the bf16 kernels (where the CPU has them) and with
    them switched off (device option bf16=0, what RLX_HOST_BF16=0 passes)."""
    return request.param, shim.Device("host", 0, options_override={"bf16": "0"} if request.param == "fallback"
                                      else None)


@pytest.mark.parametrize("trans_b", [True, False])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_shim_gemm_f32_bf16_f32(rng, host, m, n, k, trans_b):
    _, device = host
    A = rng.standard_normal((m, k)).astype(np.float32)
    Bf = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    Bbits = to_bf16(Bf)
    Bt = from_bf16(Bbits).astype(np.float64)
    Bt = Bt.T if trans_b else Bt
    ldc = n + 3   # C's padding columns stay untouched
    C0 = rng.standard_normal(m * ldc).astype(np.float32)[: (m - 1) * ldc + n]
    bias = rng.standard_normal(n).astype(np.float32)
    got = _gemm(device, A, Bbits, m, n, k, trans_b=trans_b, alpha=1.5, beta=0.5, C0=C0, ldc=ldc, bias=bias)
    pad = np.ones_like(got, bool)
    for r in range(m):
        pad[r * ldc: r * ldc + n] = False
    assert (got[pad] == C0[pad]).all()
    got = np.stack([got[r * ldc: r * ldc + n] for r in range(m)])
    base = np.stack([C0[r * ldc: r * ldc + n] for r in range(m)]).astype(np.float64)
    if not _kernels_run(device):
        want = 1.5 * (A.astype(np.float64) @ Bt) + 0.5 * base + bias   # A stays f32
    else:
        want = 1.5 * (_round(A) @ Bt) + 0.5 * base + bias               # A rounded to bf16 as well
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1, k) ** 0.5)


def test_shim_gemm_bf16_batched_and_outer(rng, host):
    _, device = host
    m, n, k, batch, outer = 5, 19, 37, 3, 2
    sa, sb, sc = m * k, n * k, m * n
    A = rng.standard_normal(outer * batch * sa).astype(np.float32)
    Bf = rng.standard_normal(outer * batch * sb).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    got = _gemm(device, A, to_bf16(Bf), m, n, k, trans_b=True, batch=batch, strides=(sa, sb, sc), outer=outer,
                outer_strides=(batch * sa, batch * sb, batch * sc), bias=bias)
    Br = from_bf16(to_bf16(Bf)).astype(np.float64)
    for e in range(outer * batch):
        a = A[e * sa:(e + 1) * sa].reshape(m, k)
        b = Br[e * sb:(e + 1) * sb].reshape(n, k)
        c = got[e * sc:(e + 1) * sc].reshape(m, n)
        assert (np.abs(c - a.astype(np.float64) @ b.T - bias) <= _bound(a, b.T)).all()   # same bias every entry


def test_fallback_matches_f32_a_exactly_and_kernels_round_a(rng):
    kernels = shim.Device("host", 0)
    if not _kernels_run(kernels):
        pytest.skip("no AVX-512 BF16 kernels here (CPU or build): both devices take the fallback")
    fallback = shim.Device("host", 0, options_override={"bf16": "0"})
    A = rng.standard_normal((9, 64)).astype(np.float32)
    Bbits = to_bf16(rng.standard_normal((48, 64)).astype(np.float32))
    a = _gemm(kernels, A, Bbits, 9, 48, 64, trans_b=True).reshape(9, 48)
    b = _gemm(fallback, A, Bbits, 9, 48, 64, trans_b=True).reshape(9, 48)
    Bt = from_bf16(Bbits).astype(np.float64).T
    np.testing.assert_allclose(a, _round(A) @ Bt, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b, A.astype(np.float64) @ Bt, rtol=1e-5, atol=1e-5)
    assert not np.array_equal(a, b)


def test_env_var_switches_the_kernels_off(monkeypatch):
    monkeypatch.setenv("RLX_HOST_BF16", "0")
    assert shim._options("host", None)["bf16"] == "0"
    monkeypatch.setenv("RLX_HOST_BF16", "1")
    assert "bf16" not in shim._options("host", None)
    with pytest.raises(rlx.RlxError, match="bf16=2"):
        shim.Device("host", 0, options_override={"bf16": "2"})


def test_shim_refuses_other_bf16_combinations(rng):
    device = shim.Device("host", 0)
    buf = device.alloc(4096)
    with shim.CommandBuffer(device) as cb, pytest.raises(rlx.RlxError, match="no bf16 x bf16 -> f32 gemm"):
        cb.gemm(buf, buf, buf, 4, 4, 4, lda=4, ldb=4, ldc=4, dtype=shim.DTYPE_BF16, b_dtype=shim.DTYPE_BF16,
                c_dtype=shim.DTYPE_F32)


# ---------------------------------------------------------------- bf16: the precision pass and errors


def _mlp():
    g = rlx.Graph()
    x = g.input("x", (4, 32))
    emb = g.param("emb", (10, 32))
    ids = g.input("ids", (4,), "i32")
    w1, b1 = g.param("w1", (64, 32)), g.param("b1", (64,))
    w2 = g.param("w2", (64, 16))
    h = g.add(x, g.gather(emb, ids))
    h = g.linear(h, w1, b1, activation="relu")
    g.set_outputs(y=g.matmul(h, w2), e=g.gather(emb, ids))
    return g


def test_precision_pass_converts_only_matmul_weights():
    g, report = apply_precision(_mlp(), "bf16", "host")
    assert sorted(report.converted) == ["w1", "w2"]
    assert {n: p.dtype.name for n, p in g.params.items()} == {"emb": "f32", "w1": "bf16", "b1": "f32", "w2": "bf16"}
    assert not report.casts and "stored as bf16" in report.describe()
    assert all(n.dtype.name != "bf16" for n in g.topo_order() if n.op not in ("param",))


def test_bf16_params_set_and_shared(rng):
    g = _mlp()
    params = {"emb": rng.standard_normal((10, 32)).astype(np.float32),
              "w1": rng.standard_normal((64, 32)).astype(np.float32),
              "b1": rng.standard_normal(64).astype(np.float32),
              "w2": rng.standard_normal((64, 16)).astype(np.float32)}
    inputs = {"x": rng.standard_normal((4, 32)).astype(np.float32), "ids": np.array([1, 2, 3, 9], np.int32)}
    exe = rlx.compile(g, device=HOST, params=params, precision="bf16")
    other = rlx.compile(g, device=HOST, precision="bf16", share_params_with=exe)
    rounded = {k: (from_bf16(to_bf16(v)) if k in ("w1", "w2") else v) for k, v in params.items()}
    want = rlx.run_reference(g, inputs, rounded)["y"]
    scale = float(np.abs(want).max())
    for e in (exe, other):
        np.testing.assert_allclose(e.run(inputs)["y"], want, atol=2e-2 * scale)
    exe.set_params(w2=2 * params["w2"])    # floats in, rounded to bf16, seen by both
    np.testing.assert_allclose(other.run(inputs)["y"], 2 * want, atol=4e-2 * scale)
    with pytest.raises(rlx.ParameterError, match="expected float values"):
        exe.set_params(w2=np.zeros((64, 16), np.int32))


def test_bf16_needs_the_host():
    with pytest.raises(UnsupportedPrecisionError, match="host"):
        apply_precision(_mlp(), "bf16", "cuda")
    assert issubclass(UnsupportedPrecisionError, rlx.RlxError)


def test_bf16_is_storage_only():
    g = rlx.Graph()
    with pytest.raises(DTypeError, match="storage"):
        g.input("x", (2, 2), bf16)
    x = g.input("y", (2, 2))
    with pytest.raises(DTypeError):
        g.cast(x, bf16)
    w = g.param("w", (2, 2), bf16)
    with pytest.raises(DTypeError, match="storage"):
        g.add(w, w)
    with pytest.raises(DTypeError):
        rlx.DType.of("bf16")   # not a user-facing dtype name


@pytest.mark.parametrize("precision", ["bf16", "f16", "auto"])
def test_a_weight_that_is_also_an_output_keeps_its_f32_bits(precision):
    """A param read as a matmul weight and returned as an output: the output
    is the param's exact value (under bf16 it stays an f32 param, and no
    bf16 -> bf16 copy is ever needed)."""
    rng = np.random.default_rng(6)
    g = rlx.Graph()
    x = g.input("x", (3, 5))
    w = g.param("w", (5, 4))
    g.set_outputs(y=g.matmul(x, w), w_out=w)
    params = {"w": rng.standard_normal((5, 4)).astype(np.float32)}
    xv = rng.standard_normal((3, 5)).astype(np.float32)
    try:
        exe = rlx.compile(g, params=params, precision=precision)
    except rlx.UnsupportedPrecisionError:
        pytest.skip(f"{precision} does not run on this device")
    out = exe.run(x=xv)
    np.testing.assert_array_equal(out["w_out"], params["w"])
    np.testing.assert_allclose(out["y"], xv @ params["w"], rtol=2e-2, atol=2e-2)
