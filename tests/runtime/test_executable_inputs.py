"""Executable.run's input checks (the per-run fast path and the fallbacks):
every wrong name, dtype, shape or index still raises an InputError before
the run crosses into C, and accepted inputs give the reference's results."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import rlx
from rlx.errors import InputError
from rlx.reference import run_reference


def _gather_exe(dtype: str, rows: int = 10):
    g = rlx.Graph()
    g.set_outputs(y=g.gather(g.param("t", (rows, 4)), g.input("i", (2, 3), dtype)))
    table = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
    return rlx.compile(g, params={"t": table}), g, table


@pytest.mark.parametrize("dtype", ["i32", "i64"])
@pytest.mark.parametrize("bad", [-1, 10, -(2**31), 2**31 - 1])
def test_out_of_range_index_raises_at_either_end(dtype, bad):
    exe, _, _ = _gather_exe(dtype)
    np_dtype = np.int32 if dtype == "i32" else np.int64
    idx = np.array([[0, 1, 2], [3, bad, 5]], np_dtype)
    with pytest.raises(InputError, match=r"index out of range \[0, 10\).*min .*max "):
        exe.run(i=idx)
    # The executable stays usable, and the edges of the range are accepted.
    ok = np.array([[0, 9, 2], [9, 0, 5]], np_dtype)
    np.testing.assert_array_equal(exe.run(i=ok)["y"], np.arange(40, dtype=np.float32).reshape(10, 4)[ok])


def test_i64_index_beyond_32_bits_raises():
    exe, _, _ = _gather_exe("i64")
    for bad in (2**32, 2**32 + 1, -(2**32)):
        with pytest.raises(InputError, match="index out of range"):
            exe.run(i=np.array([[0, 1, 2], [3, 4, bad]], np.int64))


def test_index_check_on_non_contiguous_and_converted_inputs():
    exe, g, table = _gather_exe("i32")
    wide = np.array([[0, 7, 1, 7, 2, 7], [3, 7, 4, 7, 5, 7]], np.int32)
    strided = wide[:, ::2]                      # not contiguous: copied, then checked
    ref = run_reference(g, {"i": np.ascontiguousarray(strided)}, {"t": table})["y"]
    np.testing.assert_array_equal(exe.run(i=strided)["y"], ref)
    bad = wide.copy()
    bad[1, 4] = -3
    with pytest.raises(InputError, match="index out of range"):
        exe.run(i=bad[:, ::2])
    # A nested list converts to the declared dtype, and is range-checked too.
    np.testing.assert_array_equal(exe.run(i=[[0, 1, 2], [3, 4, 5]])["y"], table[np.arange(6).reshape(2, 3)])
    with pytest.raises(InputError, match="index out of range"):
        exe.run(i=[[0, 1, 2], [3, 4, 50]])


def test_names_dtypes_and_shapes_through_every_calling_form(rng):
    g = rlx.Graph()
    x = g.input("x", (3, 4))
    y = g.input("y", (3, 4))
    g.set_outputs(z=g.add(x, y))
    exe = rlx.compile(g)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    want = a + b
    np.testing.assert_array_equal(exe.run({"x": a, "y": b})["z"], want)
    np.testing.assert_array_equal(exe.run(x=a, y=b)["z"], want)
    np.testing.assert_array_equal(exe.run({"x": a}, y=b)["z"], want)
    np.testing.assert_array_equal(exe.run(OrderedDict(x=a, y=b))["z"], want)   # any Mapping
    np.testing.assert_array_equal(exe.run([("x", a), ("y", b)])["z"], want)     # pairs, as dict() takes
    np.testing.assert_array_equal(exe.run(x=a.view(np.matrix), y=b)["z"], want)  # an ndarray subclass
    # Same count of names, one of them wrong: unknown and missing are both named.
    with pytest.raises(InputError, match=r"unknown input\(s\) \['w'\]; missing input\(s\) \['y'\]"):
        exe.run(x=a, w=b)
    with pytest.raises(InputError, match="missing input"):
        exe.run(x=a)
    with pytest.raises(InputError, match="unknown input"):
        exe.run(x=a, y=b, w=b)
    with pytest.raises(InputError, match=r"input 'y': dtype float64"):
        exe.run(x=a, y=b.astype(np.float64))
    with pytest.raises(InputError, match=r"input 'x': shape \(4, 3\), expected \(3, 4\)"):
        exe.run(x=a.T.copy(), y=b)
    with pytest.raises(InputError, match="cannot convert"):
        exe.run(x=a, y=object())
    # Outputs are fresh arrays: a later run does not overwrite an earlier result.
    first = exe.run(x=a, y=b)["z"]
    exe.run(x=b, y=b)
    np.testing.assert_array_equal(first, want)
