"""softmax and masked_softmax against rlx/reference/core.py on the device
under test: f32 and f16, broadcast masks, rows short and long, many short
rows (a GPU's stacked groups), fully masked rows; then rows with NaN and
infinities, fused and unfused (tests/ops/helpers.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_matches_reference

import rlx

from .helpers import COLS, DTYPES, FUSION, NO_FUSION
from .helpers import check_nan_semantics as _check
from .helpers import nan_rows as _rows
from .helpers import rand as _rand
from .helpers import to_torch as _t


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 33), (5, 1023), (2, 3, 17)])
def test_softmax(rng, shape, dtype):
    g = rlx.Graph()
    x = g.input("x", shape, dtype)
    g.set_outputs(y=g.softmax(x))
    _, got = assert_matches_reference(g, {"x": _rand(rng, shape, dtype, 4.0)})
    np.testing.assert_allclose(got["y"].astype(np.float64).sum(-1), 1.0, rtol=0, atol=1e-2 if dtype == "f16" else 1e-5)


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


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_masked_softmax_over_many_short_rows(rng, dtype):
    """Enough rows for the GPU's stacked groups (4 x 132 cores and more),
    a row count that leaves the last group part-empty, short odd rows."""
    shape = (3, 7, 29, 19)                         # 609 rows
    g = rlx.Graph()
    x = g.input("x", shape, dtype)
    m = g.input("m", (3, 1, 1, 19), dtype)
    g.set_outputs(y=g.masked_softmax(x, m, scale=0.3))
    np_dtype = np.float32 if dtype == "f32" else np.float16
    mask = np.where(rng.random((3, 1, 1, 19)) < 0.3, -np.inf, 0.0).astype(np_dtype)
    assert_matches_reference(g, {"x": (4 * rng.standard_normal(shape)).astype(np_dtype), "m": mask})


# ---------------------------------------------------------------- NaN and infinities


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
