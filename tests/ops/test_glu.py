"""glu (gate activation times up) against rlx/reference/core.py on the
device under test: halves of a packed projection read without copies, NaN
propagation (tests/ops/helpers.py) and the accuracy of its SiLU; and
glu_linear (a gated FFN's down projection over block-format weights)
against the float64 product of gguf's dequantized weights, fused into the
GEMV on GPUs and as the glu kernel plus the GEMV elsewhere."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_matches_reference

import rlx
from rlx.ir.dtype import quantized
from rlx.opt.fusion import fuse
from rlx.reference.blocks import dequantize_values
from rlx.runtime.target import Target

from .helpers import COLS, DTYPES, SILU_X
from .helpers import assert_silu_accurate as _assert_silu_accurate
from .helpers import check_nan_semantics as _check
from .helpers import np_dtype as _np_dtype
from .helpers import rand as _rand
from .helpers import to_torch as _t
from .quant_helpers import random_blocks


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ["silu", "gelu", "gelu_tanh"])
def test_glu_reads_halves_of_a_packed_projection(rng, dtype, activation):
    g = rlx.Graph()
    packed = g.input("p", (2, 7, 2 * 33), dtype)
    gate, up = g.narrow(packed, 2, 0, 33), g.narrow(packed, 2, 33, 33)
    g.set_outputs(y=g.glu(gate, up, activation))
    exe, _ = assert_matches_reference(g, {"p": _rand(rng, (2, 7, 66), dtype)})
    assert [t.kernel for t in exe.thunks] == [f"glu_{dtype}"]   # no copies


# ---------------------------------------------------------------- NaN and accuracy


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


def test_silu_relative_error_glu():
    g = rlx.Graph()
    gate, up = g.input("g", (6, 1000)), g.input("u", (6, 1000))
    g.set_outputs(y=g.glu(gate, up, "silu"))
    x = SILU_X.reshape(6, 1000)
    _assert_silu_accurate(rlx.compile(g).run(g=x, u=np.ones_like(x))["y"].ravel(), SILU_X)


# ---------------------------------------------------------------- glu_linear


def _glu64(gate, up, activation):
    g, u = gate.astype(np.float64), up.astype(np.float64)
    if activation == "gelu_tanh":
        return 0.5 * g * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (g + 0.044715 * g ** 3))) * u
    assert activation == "silu"
    return g / (1.0 + np.exp(-g)) * u


def _check_glu_product(got, gate, up, w, activation, dtype):
    """|got - want| <= rel * sum |glu_k w_k| + abs against the float64
    product (tests/ops/test_quant.py's bound: rel 1e-5 f32, 4e-3 f16)."""
    x = _glu64(gate, up, activation).reshape(-1, gate.shape[-1])
    want, scale = x @ w.T, np.abs(x) @ np.abs(w).T
    rel, floor = (1e-5, 1e-6) if dtype == "f32" else (4e-3, 1e-3)
    err = np.abs(got.astype(np.float64).reshape(want.shape) - want)
    assert (err <= rel * (scale + np.abs(want)) + floor).all(), float(err.max())


@pytest.mark.parametrize("fmt", ["q4_0", "q5_0", "q8_0", "q4_k", "q6_k", "iq4_nl", "tq2_0", "mxfp4"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
def test_glu_linear_of_a_packed_gate_and_up(rng, fmt, dtype, rows, activation):
    """A gated FFN's down projection, as a decoder writes it: gate and up
    projected by one merged GEMV (siblings), glu, then a block-format W.
    Fusion makes one glu_linear; on GPUs its GEMV (one row, k whole chunks)
    forms the glu itself, so no glu kernel runs; elsewhere the glu kernel
    and the GEMV. Against the float64 product either way."""
    k = 2 * quantized(fmt).block if quantized(fmt).block >= 64 else 96
    _check_glu_linear(rng, fmt, dtype, rows, activation, k)


@pytest.mark.parametrize("fmt", ["q4_k", "q5_0", "q8_0"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_glu_linear_of_long_rows(rng, fmt, dtype):
    """The same at k = 1280 (40 chunks of 32 a row): on GPUs one row of x
    over weight rows of >= 32 chunks takes gemv1's direct rows (a SIMD
    group a weight row, read straight from memory) after the glu is
    formed in the tile, as Gemma's down projection (k = 2048) does."""
    _check_glu_linear(rng, fmt, dtype, 1, "gelu_tanh", 1280)


def _check_glu_linear(rng, fmt: str, dtype: str, rows: int, activation: str, k: int) -> None:
    # n = 133 (17 groups of 8 rows, the last one partial): with fewer rows
    # the cost model prefers dequantize + gemm at k = 1280 on a GPU, and
    # the GEMV this test is about would not run.
    hidden, n = 64, 133
    g = rlx.Graph()
    h = g.input("h", (rows, hidden), dtype)
    gate = g.linear(h, g.param("wg", (k, hidden), dtype))
    up = g.linear(h, g.param("wu", (k, hidden), dtype))
    g.set_outputs(y=g.linear(g.glu(gate, up, activation), g.param("wd", (n, k), quantized(fmt))))
    nd = _np_dtype(dtype)
    wg, wu = (rng.standard_normal((k, hidden)) * 0.2).astype(nd), (rng.standard_normal((k, hidden)) * 0.2).astype(nd)
    raw = random_blocks(fmt, n, k, rng)
    exe = rlx.compile(g, params={"wg": wg, "wu": wu, "wd": raw})
    assert "glu_linear" in "\n".join(exe.compile_report), exe.compile_report
    hv = rng.standard_normal((rows, hidden)).astype(nd)
    kernels = [t.kernel for t in exe.thunks if t.kernel]
    if exe.target.backend != "host" and rows == 1:
        assert not any(kn.startswith("glu_") for kn in kernels), kernels   # the GEMV formed the glu
        assert any(kn.startswith(f"gemv1_{fmt}") for kn in kernels), kernels
    else:
        assert any(kn.startswith("glu_") for kn in kernels), kernels
    gate_v = (hv.astype(np.float32) @ wg.astype(np.float32).T).astype(nd)
    up_v = (hv.astype(np.float32) @ wu.astype(np.float32).T).astype(nd)
    w = dequantize_values(quantized(fmt), raw, (n, k)).astype(np.float64)
    _check_glu_product(exe.run(h=hv)["y"], gate_v, up_v, w, activation, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_glu_linear_of_separate_gate_and_up_and_of_the_mul_chain(rng, dtype):
    """gate and up in storages of their own (inputs): the GEMV cannot form
    the glu from one binding, so the glu kernel runs first; and the
    mul(act(gate), up) chain before linear fuses into glu_linear too."""
    k, n = 64, 9
    raw = random_blocks("q8_0", n, k, rng)
    w = dequantize_values(quantized("q8_0"), raw, (n, k)).astype(np.float64)
    nd = _np_dtype(dtype)
    gv, uv = rng.standard_normal((1, k)).astype(nd), rng.standard_normal((1, k)).astype(nd)
    for chain in (False, True):
        g = rlx.Graph()
        gate, up = g.input("g", (1, k), dtype), g.input("u", (1, k), dtype)
        x = g.mul(g.silu(gate), up) if chain else g.glu(gate, up, "silu")
        g.set_outputs(y=g.linear(x, g.param("w", (n, k), quantized("q8_0"))))
        exe = rlx.compile(g, params={"w": raw})
        assert "glu_linear" in "\n".join(exe.compile_report), exe.compile_report
        assert any((t.kernel or "").startswith("glu_") for t in exe.thunks)
        _check_glu_product(exe.run(g=gv, u=uv)["y"], gv, uv, w, "silu", dtype)


def test_glu_linear_fuses_block_weights_only():
    """A float W stays a linear (the precision passes convert linear
    weights; they leave block formats alone), as does one with a bias."""
    caps = Target("host", 1, 1, 1, 1 << 30).capabilities
    for w_dtype, bias in (("f32", False), ("q8_0", True), ("q8_0", False)):
        g = rlx.Graph()
        gate, up = g.input("g", (1, 64)), g.input("u", (1, 64))
        w = g.param("w", (5, 64), quantized(w_dtype) if w_dtype != "f32" else "f32")
        g.set_outputs(y=g.linear(g.glu(gate, up), w, g.param("b", (5,)) if bias else None))
        _, report = fuse(g, caps)
        assert (report.fused["glu_linear"] == 1) == (w_dtype == "q8_0" and not bias), (w_dtype, bias)


def test_glu_linear_refuses_a_quantized_gate_and_mismatched_k():
    g = rlx.Graph()
    gate, up = g.input("g", (1, 64)), g.input("u", (1, 64))
    with pytest.raises(rlx.ShapeError, match="K=64"):
        g.glu_linear(gate, up, g.param("w", (5, 96), quantized("q8_0")))
    with pytest.raises(rlx.DTypeError):
        g.glu_linear(g.param("q", (1, 64), quantized("q8_0")), up, g.param("w2", (5, 64), quantized("q8_0")))
