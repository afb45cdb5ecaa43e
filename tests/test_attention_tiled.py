"""The tiled attention kernel (shaders/attention.h `attention_tiled`: one
thread per query, keys and values staged through threadgroup memory in tiles
of 32, online softmax) against rlx/reference.py. GPUs pick it for several
queries and head dims up to 64; the CPU runs it here one query per group
(TILED_ON_CPU), so CI checks the kernel source the GPUs compile. Odd query
and key counts leave partial tiles and partial groups."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_matches_reference
from test_attention_rope import _attention_graph, _attention_inputs

from rlx.runtime import lowering_attention


@pytest.fixture(autouse=True)
def _tiled_everywhere(monkeypatch):
    monkeypatch.setattr(lowering_attention, "TILED_ON_CPU", True)
    monkeypatch.setattr(lowering_attention, "TILED_ON_GPU", True)


def _check(rng, b, tq, tk, hq, hkv, d, dv=None, dtype="f32", mask=None, **kw):
    g = _attention_graph(b, tq, tk, hq, hkv, d, dv, dtype, None if mask is None else mask.shape, **kw)
    exe, got = assert_matches_reference(g, _attention_inputs(rng, b, tq, tk, hq, hkv, d, dv, dtype, mask))
    assert [t.kernel for t in exe.thunks] == [f"attention_tiled_{dtype}"]
    return got["o"]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("b,tq,tk,hq,hkv,d,dv", [
    (1, 2, 1, 1, 1, 8, 8), (2, 9, 9, 4, 4, 32, 32), (1, 33, 65, 3, 1, 40, 24), (3, 128, 128, 12, 12, 32, 32),
    (1, 5, 300, 8, 2, 64, 64), (2, 70, 31, 2, 2, 17, 64)])
def test_tiled_shapes(rng, dtype, b, tq, tk, hq, hkv, d, dv):
    _check(rng, b, tq, tk, hq, hkv, d, dv, dtype)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("kind", ["padding", "full", "all_masked_row"])
def test_tiled_masks(rng, dtype, kind):
    b, tq, tk, hq = 2, 37, 70, 4
    if kind == "padding":            # [B, 1, 1, Tk], the last keys of one sequence masked
        m = np.zeros((b, 1, 1, tk), np.float32)
        m[-1, ..., tk - 40:] = -np.inf
    elif kind == "full":             # a different additive mask per head and query
        m = rng.standard_normal((b, hq, tq, tk)).astype(np.float32)
    else:                            # one query row sees no key at all: zeros, not NaN
        m = np.zeros((b, 1, tq, tk), np.float32)
        m[0, 0, 3, :] = -np.inf
    out = _check(rng, b, tq, tk, hq, hq, 32, dtype=dtype, mask=m)
    assert np.all(np.isfinite(out))
    if kind == "all_masked_row":
        assert np.all(out[0, 3] == 0)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("kw", [dict(causal=True), dict(causal=True, window=7), dict(softcap=5.0),
                                dict(scale=0.3)])
def test_tiled_causal_window_softcap(rng, dtype, kw):
    _check(rng, 2, 45, 45, 4, 2, 32, dtype=dtype, **kw)


def test_decode_and_wide_heads_keep_the_other_kernels(rng):
    """One query, or a head dimension past 64, is not the tiled kernel's."""
    g = _attention_graph(1, 1, 40, 4, 4, 32)
    exe, _ = assert_matches_reference(g, _attention_inputs(rng, 1, 1, 40, 4, 4, 32))
    assert "attention_tiled_f32" not in [t.kernel for t in exe.thunks]
    g = _attention_graph(1, 8, 8, 2, 2, 80)
    exe, _ = assert_matches_reference(g, _attention_inputs(rng, 1, 8, 8, 2, 2, 80))
    assert "attention_tiled_f32" not in [t.kernel for t in exe.thunks]
