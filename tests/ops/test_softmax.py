"""NaN and infinity semantics against PyTorch and rlx.run_reference.

One rule everywhere (numpy's and PyTorch's): a NaN input gives NaN. maximum
and minimum are NaN when either operand is; max and softmax of a row with a
NaN are NaN; argmax takes the first NaN; relu, sigmoid, SiLU, GELU and tanh
pass NaN through. The one documented difference from torch: a softmax,
masked softmax or attention row masked everywhere (all -inf) gives zeros,
not NaN (so fusing softmax(scores + mask) into attention changes nothing).

Every comparison checks that the NaN positions match exactly, then the rest
with the suite's tolerances (tests/conftest.py). Rows of 1, 7, 33 and 257
columns run both forms of the masked softmax (rows of up to RLX_ROW_CACHE
columns per thread stay in registers). The --rlx-group-size option of
conftest.py runs all of this at a GPU group size too.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import TOL

import rlx
from rlx.runtime import lowering_attention, lowering_nn

NAN, INF = np.float32(np.nan), np.float32(np.inf)
DTYPES = ["f32", "f16"]
COLS = [1, 7, 33, 257]
NO_FUSION = {"passes": {"fusion": False}}
FUSION = [pytest.param({}, id="fused"), pytest.param(NO_FUSION, id="unfused")]


def _np_dtype(dtype):
    return np.float16 if dtype == "f16" else np.float32


def _assert_same(got, want, tol, what):
    """NaN positions equal, the rest close (inf equal to inf)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, what
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN positions")
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], err_msg=what, **tol)


def _check(g, feed, torch_want, dtype, compile_kw=None, tol=None):
    """Run g, compare its output "y" with torch's result and the numpy reference."""
    got = rlx.compile(g, **(compile_kw or {})).run(feed)["y"]
    tol = tol or TOL[dtype]
    _assert_same(got, rlx.run_reference(g, feed)["y"], tol, "against rlx.run_reference")
    if torch_want is not None:   # rounded to the output dtype, as rlx stores it (f16 overflows to inf)
        with np.errstate(over="ignore"):
            _assert_same(got, np.asarray(torch_want).astype(got.dtype), tol, "against torch")
    return got


def _t(a):
    """A torch tensor in float32 (the f16 data upcast, as the kernels compute)."""
    return torch.from_numpy(np.asarray(a, np.float32))


def _rows(rng, cols, dtype):
    """Rows of random data, then NaN first / middle / last, two NaNs (the
    first counts), a NaN-only row, +inf and -inf rows, and a mixed row."""
    rows = [rng.standard_normal(cols) * 3]
    for pos in sorted({0, cols // 2, cols - 1}):
        r = rng.standard_normal(cols)
        r[pos] = np.nan
        rows.append(r)
    if cols > 2:
        r = rng.standard_normal(cols)
        r[[1, cols - 1]] = np.nan
        rows.append(r)
    rows += [np.full(cols, np.nan), np.full(cols, np.inf), np.full(cols, -np.inf)]
    r = rng.standard_normal(cols)
    r[0] = np.inf
    r[-1] = -np.inf
    rows.append(r)
    return np.array(rows).astype(_np_dtype(dtype))


def _special(rng, n, dtype):
    x = (rng.standard_normal(n) * 4).astype(_np_dtype(dtype))
    x[::5] = np.nan
    return x


# ---- elementwise -------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", COLS)
@pytest.mark.parametrize("op", ["relu", "silu", "gelu", "gelu_tanh", "tanh", "exp"])
def test_unary_propagates_nan(rng, op, n, dtype):
    g = rlx.Graph()
    x = g.input("x", (n,), dtype)
    y = g.gelu(x, "tanh") if op == "gelu_tanh" else getattr(g, op)(x)
    g.set_outputs(y=y)
    data = _special(rng, n, dtype)
    fn = {"relu": torch.relu, "silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu,
          "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"), "tanh": torch.tanh,
          "exp": torch.exp}[op]
    got = _check(g, {"x": data}, fn(_t(data)).numpy(), dtype)
    assert np.isnan(got[np.isnan(data)]).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["relu", "silu", "gelu", "gelu_tanh", "tanh"])
def test_unary_at_infinities(op, dtype):
    # Against the reference only: torch's gelu gives NaN at +inf, the limit is inf.
    g = rlx.Graph()
    x = g.input("x", (4,), dtype)
    g.set_outputs(y=g.gelu(x, "tanh") if op == "gelu_tanh" else getattr(g, op)(x))
    _check(g, {"x": np.array([INF, -INF, NAN, 0.5], _np_dtype(dtype))}, None, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((7,), (7,)), ((3, 33), (33,)), ((1,), (257,))])
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_propagate_nan_from_either_side(rng, op, shapes, dtype):
    g = rlx.Graph()
    a, b = g.input("a", shapes[0], dtype), g.input("b", shapes[1], dtype)
    g.set_outputs(y=getattr(g, op)(a, b))
    av = (rng.standard_normal(shapes[0])).astype(_np_dtype(dtype))
    bv = (rng.standard_normal(shapes[1])).astype(_np_dtype(dtype))
    av.reshape(-1)[::3] = np.nan
    bv.reshape(-1)[1::4] = np.nan
    bv.reshape(-1)[2::5] = INF
    want = getattr(torch, op)(_t(av), _t(bv)).numpy()
    for a_, b_ in ((av, bv), (bv, av)) if shapes[0] == shapes[1] else ((av, bv),):
        _check(g, {"a": a_, "b": b_}, getattr(torch, op)(_t(a_), _t(b_)).numpy(), dtype)
    assert np.isnan(want).sum() > 0


def test_maximum_scalar_cases():
    g = rlx.Graph()
    a, b = g.input("a", (4,)), g.input("b", (4,))
    g.set_outputs(mx=g.maximum(a, b), mn=g.minimum(a, b))
    out = rlx.compile(g).run(a=np.array([NAN, 1, NAN, -INF], np.float32), b=np.array([1, NAN, NAN, NAN], np.float32))
    assert np.isnan(out["mx"]).all() and np.isnan(out["mn"]).all()


# ---- reductions --------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("axis", [-1, 0])
def test_max_and_argmax_with_nan(rng, cols, dtype, axis):
    data = _rows(rng, cols, dtype)
    if axis == 0:
        data = np.ascontiguousarray(data.T)   # the reduced axis strided (inner > 1)
    g = rlx.Graph()
    x = g.input("x", data.shape, dtype)
    g.set_outputs(y=g.max(x, axis=axis), i=g.argmax(x, axis=axis))
    exe = rlx.compile(g)
    got = exe.run(x=data)
    ref = rlx.run_reference(g, {"x": data})
    want_max = torch.amax(_t(data), dim=axis).numpy()
    for want in (ref["y"], want_max):
        _assert_same(got["y"], want, TOL[dtype], "max")
    np.testing.assert_array_equal(got["i"], ref["i"])
    np.testing.assert_array_equal(got["i"], torch.argmax(_t(data), dim=axis).numpy())
    assert ((got["i"] >= 0) & (got["i"] < data.shape[axis])).all()


def test_max_of_the_fuzzed_row():
    g = rlx.Graph()
    x = g.input("x", (4,))
    g.set_outputs(m=g.max(x), i=g.argmax(x))
    out = rlx.compile(g).run(x=np.array([1, NAN, 3, -2], np.float32))
    assert np.isnan(out["m"]) and out["i"] == 1


# ---- softmax -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("compile_kw", FUSION)
def test_softmax_row_with_nan_is_nan(rng, cols, dtype, compile_kw):
    data = _rows(rng, cols, dtype)
    g = rlx.Graph()
    x = g.input("x", data.shape, dtype)
    g.set_outputs(y=g.softmax(x))
    want = torch.softmax(_t(data), -1).numpy()
    want[np.isneginf(data).all(-1)] = 0.0       # rlx's documented rule; torch gives NaN there
    got = _check(g, {"x": data}, want, dtype, compile_kw)
    assert np.isnan(got[np.isnan(data).any(-1)]).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("with_mask", [False, True])
def test_masked_softmax_nan_and_fully_masked_rows(rng, cols, dtype, with_mask):
    data = _rows(rng, cols, dtype)
    g = rlx.Graph()
    x = g.input("x", data.shape, dtype)
    feed = {"x": data}
    scores = _t(data) * 0.5
    fully_masked = np.isneginf(data).all(-1)
    if with_mask:
        m = np.where(rng.random(data.shape) < 0.3, -np.inf, 0.0).astype(data.dtype)
        m[0] = -np.inf                         # a finite row masked everywhere
        m[1, 0] = np.nan                       # NaN from the mask
        feed["m"] = m
        scores = scores + _t(m)
        fully_masked = fully_masked | torch.isneginf(scores).all(-1).numpy()
    g.set_outputs(y=g.masked_softmax(x, g.input("m", data.shape, dtype) if with_mask else None, scale=0.5))
    want = torch.softmax(scores, -1).numpy()
    want[fully_masked] = 0.0                  # rlx's documented rule; torch gives NaN there
    got = _check(g, feed, want, dtype)
    assert np.isnan(got[np.isnan(scores.numpy()).any(-1)]).all()
    assert (got[fully_masked] == 0).all() and fully_masked.any()


def test_softmax_fused_into_masked_softmax_keeps_nan():
    # x * scale + mask, then softmax: fusion turns this into one masked softmax.
    g = rlx.Graph()
    x, m = g.input("x", (3, 9)), g.input("m", (3, 9))
    g.set_outputs(y=g.softmax(g.add(g.scale_shift(x, 0.25), m)))
    xv = np.ones((3, 9), np.float32)
    mv = np.zeros((3, 9), np.float32)
    mv[0, 4], mv[2] = np.nan, -np.inf
    for kw in ({}, NO_FUSION):
        got = rlx.compile(g, **kw).run(x=xv, m=mv)["y"]
        assert np.isnan(got[0]).all() and (got[2] == 0).all()   # all -inf: zeros, fused or not
        np.testing.assert_allclose(got[1], 1 / 9, rtol=1e-6)


# ---- attention ---------------------------------------------------------------


def _torch_attention(q, k, v, mask, causal, scale):
    qt, kt, vt = (_t(a).permute(0, 2, 1, 3) for a in (q, k, v))
    rep = qt.shape[1] // kt.shape[1]
    kt, vt = kt.repeat_interleave(rep, 1), vt.repeat_interleave(rep, 1)
    s = qt @ kt.transpose(-1, -2) * scale
    if mask is not None:
        s = s + _t(mask)
    if causal:
        tq, tk = s.shape[-2:]
        keep = torch.arange(tk)[None, :] <= torch.arange(tq)[:, None] + (tk - tq)
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, -1)
    dead = torch.isneginf(s).all(-1, keepdim=True)
    p = torch.where(dead, torch.zeros_like(p), p)      # rlx's rule for rows masked everywhere
    return (p @ vt).permute(0, 2, 1, 3).numpy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tk", [1, 7, 33])
@pytest.mark.parametrize("path", ["kernel", "gemm", "causal"])
def test_attention_nan_scores(rng, monkeypatch, dtype, tk, path):
    monkeypatch.setattr(lowering_attention, "_use_gemm_path", lambda *a: path == "gemm")
    b, tq, hq, hkv, d = 2, 5, 4, 2, 16
    nd = _np_dtype(dtype)
    q = rng.standard_normal((b, tq, hq, d)).astype(nd)
    k = rng.standard_normal((b, tk, hkv, d)).astype(nd)
    v = rng.standard_normal((b, tk, hkv, d)).astype(nd)
    mask = np.zeros((b, hq, tq, tk), nd)
    q[0, 1, 2, 3] = np.nan                  # one query row NaN
    k[1, tk - 1, 0, 0] = np.nan             # the last key of batch 1, kv head 0: NaN scores (unless masked)
    mask[0, 0, 3, tk // 2] = np.nan         # NaN from the mask
    mask[1, 3, 2, :] = -np.inf              # a row masked everywhere: zeros
    mask[0, 1, 4, 0] = np.inf               # +inf score: inf - inf, NaN (torch)
    g = rlx.Graph()
    qn, kn, vn = g.input("q", q.shape, dtype), g.input("k", k.shape, dtype), g.input("v", v.shape, dtype)
    mn = g.input("m", mask.shape, dtype)
    causal = path == "causal"
    g.set_outputs(y=g.attention(qn, kn, vn, mn, causal=causal))
    want = _torch_attention(q, k, v, mask, causal, 1 / np.sqrt(d))
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "f32" else dict(rtol=5e-3, atol=5e-3)
    got = _check(g, {"q": q, "k": k, "v": v, "m": mask}, want, dtype, tol=tol)
    assert (got[1, 2, 3] == 0).all()
    if not causal or tk >= tq:                # else causal masking hides every key from query 1
        assert np.isnan(got[0, 1, 2]).all()


# ---- norms, GLU and linear epilogues -----------------------------------------


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


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("activation", ["silu", "gelu", "gelu_tanh"])
def test_glu_propagates_nan(rng, cols, dtype, activation):
    nd = _np_dtype(dtype)
    gate, up = rng.standard_normal((3, cols)).astype(nd), rng.standard_normal((3, cols)).astype(nd)
    gate[0, 0], up[1, cols - 1], gate[2, cols // 2] = np.nan, np.nan, -np.inf
    g = rlx.Graph()
    gn, un = g.input("g", gate.shape, dtype), g.input("u", up.shape, dtype)
    g.set_outputs(y=g.glu(gn, un, activation))
    act = {"silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu,
           "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh")}[activation]
    got = _check(g, {"g": gate, "u": up}, (act(_t(gate)) * _t(up)).numpy(), dtype)
    assert np.isnan(got[0, 0]) and np.isnan(got[1, cols - 1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", ["gemm", "row_kernel"])
@pytest.mark.parametrize("activation", ["relu", "silu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("compile_kw", FUSION)
def test_linear_epilogue_propagates_nan(rng, monkeypatch, dtype, path, activation, compile_kw):
    monkeypatch.setattr(lowering_nn, "use_row_kernel", lambda *a, **k: path == "row_kernel")
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


# ---- sigmoid / SiLU accuracy -------------------------------------------------

# exp(-|x|) bounds sigmoid's accuracy. On the CPU its reduction is folded
# by -fassociative-math (shaders/prelude/cpu.h): relative error < 1e-6 on
# [-20, 20] and < 4e-6 out to |x| = 80. The old 1 - 1 / (1 + e) form had
# 6e-4 at x = -9 and was -0 from x = -17.
SILU_X = np.concatenate([np.linspace(-80, 20, 4000), np.linspace(-20, 0, 2000)]).astype(np.float32)


def _silu64(x):
    x = x.astype(np.float64)
    return x / (1.0 + np.exp(-x))


def _assert_silu_accurate(got, x):
    want = _silu64(x)
    nz = want != 0
    rel = np.abs(got.astype(np.float64)[nz] - want[nz]) / np.abs(want[nz])
    near = np.abs(x[nz]) <= 20
    assert rel[near].max() < 1.5e-6, (rel[near].max(), x[nz][near][rel[near].argmax()])
    assert rel.max() < 5e-6, (rel.max(), x[nz][rel.argmax()])


def test_silu_relative_error_unary():
    g = rlx.Graph()
    x = g.input("x", SILU_X.shape)
    g.set_outputs(y=g.silu(x))
    _assert_silu_accurate(rlx.compile(g).run(x=SILU_X)["y"], SILU_X)


def test_silu_relative_error_glu():
    g = rlx.Graph()
    gate, up = g.input("g", (6, 1000)), g.input("u", (6, 1000))
    g.set_outputs(y=g.glu(gate, up, "silu"))
    x = SILU_X.reshape(6, 1000)
    _assert_silu_accurate(rlx.compile(g).run(g=x, u=np.ones_like(x))["y"].ravel(), SILU_X)


@pytest.mark.parametrize("path", ["gemm", "row_kernel"])
def test_silu_relative_error_linear_epilogue(monkeypatch, path):
    # x @ I is exact, so the output is the epilogue's SiLU of x itself.
    monkeypatch.setattr(lowering_nn, "use_row_kernel", lambda *a, **k: path == "row_kernel")
    k = 16
    x = SILU_X.reshape(-1, k)
    g = rlx.Graph()
    xn, w = g.input("x", x.shape), g.param("w", (k, k))
    g.set_outputs(y=g.linear(xn, w, activation="silu"))
    got = rlx.compile(g, params={"w": np.eye(k, dtype=np.float32)}).run(x=x)["y"]
    _assert_silu_accurate(got.ravel(), SILU_X)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_overflows_to_inf_and_keeps_its_top_range(dtype):
    """exp is finite up to ln(FLT_MAX) (88.72) and +inf past it, as expf; the
    CPU polynomial once clamped at 88 and gave 1.65e38 for exp(inf)."""
    v = np.array([88.5, 88.72, 89.0, np.inf, -np.inf, NAN, -86.9, -90.0, 0.0, 11.0, 12.0], np.float32)
    if dtype == "f16":
        v = v[np.abs(v) < 20].astype(np.float16)   # exp(12) overflows f16: the last one is +inf
    g = rlx.Graph()
    g.set_outputs(y=g.exp(g.input("x", v.shape, dtype)))
    got = rlx.compile(g).run(x=v)["y"].astype(np.float64)
    with np.errstate(over="ignore"):
        want = np.exp(v.astype(np.float64)).astype(v.dtype).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    # below -87 the CPU gives exactly 0 rather than a subnormal (documented in prelude/cpu.h)
    np.testing.assert_allclose(got[finite], want[finite], rtol=5e-6 if dtype == "f32" else 1e-3, atol=2e-38)


# ---- GELU (erf) accuracy in the negative tail ----------------------------------

GELU_X = np.concatenate([np.linspace(-12, 6, 3601), np.linspace(-4, 0, 801)]).astype(np.float32)


def _assert_gelu_accurate(got, x):
    """Relative error against float64 math.erfc: 0.5 x (1 + erf) from an erf
    of absolute error 1.5e-7 was off by 4% at x = -5 and gave 0 from -6."""
    import math

    want = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])
    nz = np.abs(want) > 1e-37                      # past that f32 holds subnormals (or 0) only
    rel = np.abs(got.astype(np.float64)[nz] - want[nz]) / np.abs(want[nz])
    assert rel.max() < 2e-5, (rel.max(), x[nz][rel.argmax()])
    near = np.abs(x[nz]) <= 4
    assert rel[near].max() < 2e-6, (rel[near].max(), x[nz][near][rel[near].argmax()])


def test_gelu_relative_error_unary_and_reference():
    g = rlx.Graph()
    g.set_outputs(y=g.gelu(g.input("x", GELU_X.shape)))
    _assert_gelu_accurate(rlx.compile(g).run(x=GELU_X)["y"], GELU_X)
    _assert_gelu_accurate(rlx.run_reference(g, {"x": GELU_X}, {})["y"], GELU_X)


@pytest.mark.parametrize("path", ["gemm", "row_kernel"])
def test_gelu_relative_error_linear_epilogue(monkeypatch, path):
    monkeypatch.setattr(lowering_nn, "use_row_kernel", lambda *a, **k: path == "row_kernel")
    k = 11
    x = GELU_X[: (GELU_X.size // k) * k].reshape(-1, k)
    g = rlx.Graph()
    g.set_outputs(y=g.linear(g.input("x", x.shape), g.param("w", (k, k)), activation="gelu"))
    got = rlx.compile(g, params={"w": np.eye(k, dtype=np.float32)}).run(x=x)["y"]
    _assert_gelu_accurate(got.ravel(), x.ravel())
