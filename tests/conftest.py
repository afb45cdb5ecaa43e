"""Shared fixtures: random data and the reference comparison with stated
tolerances.

Tolerances: f32 kernels accumulate in f32 like the numpy reference, so they
agree to rounding (rtol 1e-5, atol 1e-5; reductions over up to ~4k terms in
a different order). f16 kernels read f16, compute in f32 and round once on
store, as the reference does; results differ by at most an f16 rounding of
intermediate values (one ulp is ~1e-3 relative): rtol 2e-3, atol 2e-3.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx

TOL = {"f32": dict(rtol=1e-5, atol=1e-5), "f16": dict(rtol=2e-3, atol=2e-3)}


def assert_matches_reference(graph, inputs, params=None, device="cpu", tol=None, **compile_kw):
    exe = rlx.compile(graph, device=device, params=params, **compile_kw)
    got = exe.run(inputs)
    want = rlx.run_reference(graph, inputs, params)
    assert set(got) == set(want)
    for name in want:
        dtype = str(want[name].dtype)
        key = "f16" if dtype == "float16" else "f32"
        t = tol or TOL[key]
        assert got[name].dtype == want[name].dtype, name
        assert got[name].shape == want[name].shape, name
        np.testing.assert_allclose(got[name].astype(np.float64), want[name].astype(np.float64),
                                   err_msg=f"output {name}", **t)
    return exe, got


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
