"""Reductions (sum, mean, max, argmax) against rlx/reference/core.py on the
device under test, f32 and f16, any axis, with and without keepdims; then
max and argmax of rows with NaN and infinities (tests/ops/helpers.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import TOL, assert_matches_reference

import rlx
import rlx.lowering.reduce as reduce_lowering

from .helpers import COLS, DTYPES, NAN
from .helpers import assert_same_nan as _assert_same
from .helpers import nan_rows as _rows
from .helpers import rand as _rand
from .helpers import to_torch as _t


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


# ---------------------------------------------------------------- NaN and infinities


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


# ---------------------------------------------------------------- long rows: the split argmax


def _long_rows(rng, length: int, case: str, dtype: str) -> np.ndarray:
    data = rng.standard_normal((1, length)).astype(np.float32)
    if case == "last":          # the max in the row's last element (the last, partial chunk)
        data[0, -1] = 50.0
    elif case == "tie":         # the same max early and late: the first index wins across chunks
        data[0, [length // 3, length // 3 + 5000, length - 2]] = 50.0
    elif case == "nan":         # a NaN after a larger finite value: the first NaN wins
        data[0, 7] = 60.0
        data[0, [length // 2 + 3, length - 1]] = np.nan
    elif case == "ninf":        # every element -inf: index 0
        data[:] = -np.inf
    elif case == "tie_near":    # the same max twice in one CPU block and once in a later one
        data[0, [length // 2 + 1, length // 2 + 4, length // 2 + 700]] = 50.0
    elif case == "first":       # the max at index 0 and again at the row's end
        data[0, [0, length - 1]] = 50.0
    return data.astype(np.float16 if dtype == "f16" else np.float32)


@pytest.mark.parametrize("split_on_cpu", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("length", [16384, 20001, 262147])
@pytest.mark.parametrize("case", ["random", "last", "tie", "nan", "ninf", "tie_near", "first"])
def test_argmax_of_long_rows(rng, monkeypatch, length, case, dtype, split_on_cpu):
    """A long row: GPUs split it (argmax_chunks + argmax_merge); the CPU
    takes the one-pass kernel unless ARGMAX_SPLIT_CPU, which runs the split
    kernels here too."""
    monkeypatch.setattr(reduce_lowering, "ARGMAX_SPLIT_CPU", split_on_cpu)
    data = _long_rows(rng, length, case, dtype)
    g = rlx.Graph()
    x = g.input("x", data.shape, dtype)
    g.set_outputs(i=g.argmax(x, axis=-1))
    exe = rlx.compile(g)
    got = exe.run(x=data)["i"]
    np.testing.assert_array_equal(got, rlx.run_reference(g, {"x": data})["i"])
    np.testing.assert_array_equal(got, torch.argmax(_t(data), dim=-1).numpy())
    split = any((t.kernel or "").startswith("argmax_chunks") for t in exe.thunks)
    assert split == (split_on_cpu if exe.target.one_thread_groups else exe.target.compute_units > 1)


@pytest.mark.parametrize("split_on_cpu", [False, True])
def test_argmax_of_long_strided_rows(rng, monkeypatch, split_on_cpu):
    monkeypatch.setattr(reduce_lowering, "ARGMAX_SPLIT_CPU", split_on_cpu)
    data = rng.standard_normal((30001, 2)).astype(np.float32)
    data[[5, 29999], 1] = 9.0
    g = rlx.Graph()
    x = g.input("x", data.shape)
    g.set_outputs(i=g.argmax(x, axis=0))
    np.testing.assert_array_equal(rlx.compile(g).run(x=data)["i"], np.argmax(data, axis=0))
