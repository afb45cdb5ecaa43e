"""A decoder layer's query/key norm and RoPE with its KV cache writes
(rlx/lowering/rope_cache.py): where a set_rows pair takes one write's
values from an rmsnorm_rope's output (one token: its key heads are whole
rows of it), the writes run inside the rope's dispatch as
rmsnorm_rope_cache; elsewhere (several tokens, a reader of a cache in
between) they stay a set_rows_pair. The outputs and both caches match the
numpy reference across runs either way, ring wrap and empty slots
included. Tolerances: f32 1e-5 relative (the reference rounds the same
float32 ops); f16 one half-precision rounding, 2e-3."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import drop_capabilities

import rlx
from rlx.reference import run_reference

from .helpers import kernels_of, np_dtype


def _layer_graph(rows: int, t: int, hq: int, hk: int, d: int, dtype: str, *, v_first: bool = False,
                 between: bool = False, rotary_dim: int | None = None, v_after: str = "") -> rlx.Graph:
    """qk [t, hq + hk, d] normed and rotated in one rmsnorm_rope (query
    heads by wq, key heads by wk); its key heads and v [t, hk * d] written
    into two caches of `rows` rows at one slot; the output reads the
    rotated queries and both caches, as attention does. v_first: the V
    write is lowered first; between: a reader of the K cache comes before
    the V write; v_after: V is computed after the rope, "independent" of it
    (as a projection of another block format) or from a value that
    "reads_rope"."""
    g = rlx.Graph()
    qk = g.input("qk", (t, hq + hk, d), dtype)
    pos = g.input("pos", (t,), "i32")
    slot = g.input("slot", (2,), "i32")
    v = g.input("v", (t, hk * d), dtype)
    wq, wk = g.input("wq", (d,), dtype), g.input("wk", (d,), dtype)
    r = g.rmsnorm_rope(qk, pos, wq, eps=1e-6, add_one=True, base=1000.0, rotary_dim=rotary_dim,
                       weight_b=wk, weight_b_from=hq)
    keys = g.reshape(g.narrow(r, 1, hq, hk), (t, hk * d))
    if v_after == "independent":
        v = g.mul(v, v)
    elif v_after == "reads_rope":
        v = g.add(v, g.reshape(g.narrow(r, 1, hq + hk - 1, 1), (t, d)) if hk == 1 else v)
    k_state = g.state("cache.k", (rows, hk * d), dtype)
    v_state = g.state("cache.v", (rows, hk * d), dtype)
    outs = {}
    if v_first:
        v_cache = g.set_rows(v_state, v, slot)
        k_cache = g.set_rows(k_state, keys, slot)
    else:
        k_cache = g.set_rows(k_state, keys, slot)
        if between:
            outs["seen"] = g.add(k_cache, k_cache)
            v = g.add(v, g.narrow(outs["seen"], 0, 0, t))
        v_cache = g.set_rows(v_state, v, slot)
    # kv first: the outputs' order is the lowering's, and attention reads the queries after the writes.
    outs["kv"] = g.add(k_cache, g.mul(v_cache, v_cache))
    outs["q"] = g.mul(g.narrow(r, 1, 0, hq), g.narrow(r, 1, 0, hq))
    g.set_outputs(**outs)
    return g


def _check_runs(g: rlx.Graph, t: int, hq: int, hk: int, d: int, rows: int, dtype: str, rng) -> None:
    exe = rlx.compile(g)
    ref_state: dict[str, np.ndarray] = {}
    npd = np_dtype(dtype)
    tol = 2e-3 if dtype == "f16" else 1e-5
    for start, count in [(0, t), (rows - 1, t), (-2, t), (rows * 3 + 1, max(0, t - 1)), (1, t + 5), (0, -3),
                         (5, t)]:
        feed = {"qk": rng.standard_normal((t, hq + hk, d)).astype(npd),
                "pos": rng.integers(0, 4000, t).astype(np.int32), "slot": np.array([start, count], np.int32),
                "v": rng.standard_normal((t, hk * d)).astype(npd),
                "wq": (0.3 * rng.standard_normal(d)).astype(npd), "wk": (0.3 * rng.standard_normal(d)).astype(npd)}
        got = exe.run(feed)
        want = run_reference(g, feed, state=ref_state)
        for name in want:
            ref = want[name].astype(np.float64)
            np.testing.assert_allclose(got[name].astype(np.float64), ref, rtol=tol,
                                       atol=tol * float(np.abs(ref).max(initial=1.0)),
                                       err_msg=f"{name} at slot {(start, count)}")
        for name in ("cache.k", "cache.v"):
            ref = ref_state[name].astype(np.float64)
            np.testing.assert_allclose(exe.read_state(name).astype(np.float64), ref, rtol=tol,
                                       atol=tol * float(np.abs(ref).max(initial=1.0)),
                                       err_msg=f"{name} at slot {(start, count)}")


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("rows, hq, hk, d, rotary_dim", [(7, 4, 1, 32, None), (16, 2, 2, 6, None),
                                                         (1, 3, 1, 10, 6), (5, 1, 3, 33, 32), (9, 0, 2, 8, None)])
@pytest.mark.parametrize("v_first", [False, True])
def test_one_token_writes_fold_into_the_rope(dtype, rows, hq, hk, d, rotary_dim, v_first, rng):
    g = _layer_graph(rows, 1, hq, hk, d, dtype, v_first=v_first, rotary_dim=rotary_dim)
    kernels = kernels_of(rlx.compile(g))
    assert f"rmsnorm_rope_cache_{dtype}" in kernels
    assert not any(k.startswith(("set_rows", "rmsnorm_rope_f")) for k in kernels), kernels
    _check_runs(g, 1, hq, hk, d, rows, dtype, rng)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("hq, hk, d", [(4, 1, 32), (2, 3, 10)])
def test_a_value_computed_after_the_rope_folds_at_the_pair(dtype, hq, hk, d, rng):
    """V computed after the rope, independently of it: the rope moves on to
    the pair's place and folds there."""
    g = _layer_graph(6, 1, hq, hk, d, dtype, v_after="independent")
    kernels = kernels_of(rlx.compile(g))
    assert f"rmsnorm_rope_cache_{dtype}" in kernels
    assert not any(k.startswith(("set_rows", "rmsnorm_rope_f")) for k in kernels), kernels
    _check_runs(g, 1, hq, hk, d, 6, dtype, rng)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("t, between, v_after", [(3, False, ""), (1, True, ""), (1, False, "reads_rope")])
def test_writes_that_cannot_move_stay_a_pair(dtype, t, between, v_after, rng):
    """Several tokens: the key heads are not whole rows of one value row
    apart (a copy makes them dense); a reader of the K cache before the V
    write: the writes cannot move to the rope; V computed after the rope
    from its output: neither the writes nor the rope can move. None folds."""
    hq, hk, d, rows = 2, 1, 16, 6
    g = _layer_graph(rows, t, hq, hk, d, dtype, between=between, v_after=v_after)
    kernels = kernels_of(rlx.compile(g))
    assert not any(k.startswith("rmsnorm_rope_cache") for k in kernels), kernels
    assert any(k.startswith("set_rows") for k in kernels), kernels
    _check_runs(g, t, hq, hk, d, rows, dtype, rng)


def test_two_writes_from_the_rope_stay_a_pair(rng):
    """Both writes take rows of the rope's output (its query heads into one
    cache, its key heads into the other): copying one inside the rope's
    dispatch would race the groups that form it, so the pair stays."""
    g = rlx.Graph()
    qk = g.input("qk", (1, 2, 16), "f32")
    pos = g.input("pos", (1,), "i32")
    slot = g.input("slot", (2,), "i32")
    r = g.rmsnorm_rope(qk, pos, g.input("w", (16,), "f32"))
    a = g.set_rows(g.state("a", (5, 16), "f32"), g.reshape(g.narrow(r, 1, 0, 1), (1, 16)), slot)
    b = g.set_rows(g.state("b", (5, 16), "f32"), g.reshape(g.narrow(r, 1, 1, 1), (1, 16)), slot)
    g.set_outputs(y=g.add(a, b))
    exe = rlx.compile(g)
    kernels = kernels_of(exe)
    assert "set_rows_pair_f32" in kernels and "rmsnorm_rope_f32" in kernels, kernels
    ref_state: dict[str, np.ndarray] = {}
    for start in (0, 4, 7):
        feed = {"qk": rng.standard_normal((1, 2, 16)).astype(np.float32), "pos": np.array([start], np.int32),
                "slot": np.array([start, 1], np.int32), "w": rng.standard_normal(16).astype(np.float32)}
        np.testing.assert_allclose(exe.run(feed)["y"], run_reference(g, feed, state=ref_state)["y"], rtol=1e-5,
                                   atol=1e-5)


def test_a_target_without_the_capability_keeps_the_pair(monkeypatch, rng):
    drop_capabilities(monkeypatch, "rope_cache")
    g = _layer_graph(7, 1, 4, 1, 32, "f32")
    kernels = kernels_of(rlx.compile(g))
    assert "rmsnorm_rope_f32" in kernels and "set_rows_pair_f32" in kernels, kernels
    _check_runs(g, 1, 4, 1, 32, 7, "f32", rng)
