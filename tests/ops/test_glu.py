"""glu (gate activation times up) against rlx/reference/core.py on the
device under test: halves of a packed projection read without copies, NaN
propagation (tests/ops/helpers.py) and the accuracy of its SiLU."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_matches_reference

import rlx

from .helpers import COLS, DTYPES, SILU_X
from .helpers import assert_silu_accurate as _assert_silu_accurate
from .helpers import check_nan_semantics as _check
from .helpers import np_dtype as _np_dtype
from .helpers import rand as _rand
from .helpers import to_torch as _t


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
