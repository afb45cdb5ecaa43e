"""The linear's bias rides in the gemm where the device's shim takes one
(rlx_device_info.gemm_bias: host, cuda with cuBLASLt), so a biased linear is
one thunk; an activation still takes the epilogue kernel, without the bias.
Numerics against rlx/reference/core.py; the device comes from --rlx-device."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_matches_reference

import rlx
from rlx.lowering import linear as lowering_linear


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
