"""rlx/opt/sibling_ropes.py: a decoder's query and key norms (rmsnorm_rope)
over adjacent slices of the siblings pass's merged projection become one
dispatch with a second weight, and each reads its heads back as a narrow.
Checked: it fires on that pattern only (not on different attributes, not
when the slices are not adjacent, not with the siblings pass off), the
compiled graph matches the reference on the device under test, f32 and
f16, and it stays right when the key heads then go into a KV cache."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_matches_reference

import rlx


def qk_graph(hq=4, hk=1, d=16, t=1, dtype="f32", k_base=1e6, order=("q", "k", "v"), hidden=24, cache=False):
    """Query and key projections of h (siblings), their per-head norms and
    RoPE as Gemma's decoder writes them (fusion makes rmsnorm_rope)."""
    g = rlx.Graph()
    h = g.input("h", (t, hidden), dtype)
    pos = g.input("pos", (t,), "i32")
    heads = {"q": hq, "k": hk, "v": hk}
    proj = {name: g.reshape(g.linear(h, g.param(f"w{name}", (heads[name] * d, hidden), dtype)), (t, heads[name], d))
            for name in order}
    q = g.rope(g.rmsnorm(proj["q"], g.param("qn", (d,), dtype), add_one=True), pos, base=1e6)
    k = g.rope(g.rmsnorm(proj["k"], g.param("kn", (d,), dtype), add_one=True), pos, base=k_base)
    outs = {"q": g.mul(q, g.constant(np.full((1,), 2.0, np.float32), dtype=dtype)),
            "k": g.add(k, g.constant(np.full((1,), 1.0, np.float32), dtype=dtype))}
    if "v" in order:
        outs["v"] = g.mul(proj["v"], proj["v"])
    if cache:
        state = g.state("k_cache", (8, hk, d), dtype)
        outs["cached"] = g.mul(g.set_rows(state, k, g.input("slot", (2,), "i32")),
                               g.constant(np.full((1,), 1.0, np.float32), dtype=dtype))
    g.set_outputs(**outs)
    return g


def feed(g, rng, t=1, hidden=24, dtype=np.float32):
    params = {name: (rng.standard_normal(n.shape) * 0.3).astype(dtype) for name, n in g.params.items()}
    ins = {"h": rng.standard_normal((t, hidden)).astype(dtype), "pos": np.arange(t, dtype=np.int32) * 37 + 5}
    if "slot" in g.inputs:
        ins["slot"] = np.array([3, t], np.int32)
    return ins, params


def rope_dispatches(exe) -> int:
    return sum((t.kernel or "").startswith("rmsnorm_rope") for t in exe.thunks)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("hq, hk, d, t", [(4, 1, 16, 1), (2, 2, 10, 3), (3, 1, 6, 2)])
def test_query_and_key_norms_become_one_dispatch(rng, dtype, hq, hk, d, t):
    g = qk_graph(hq, hk, d, t, dtype)
    ins, params = feed(g, rng, t, dtype=np.float16 if dtype == "f16" else np.float32)
    exe, _ = assert_matches_reference(g, ins, params)
    assert rope_dispatches(exe) == 1
    assert any(line.startswith("sibling ropes: 1") for line in exe.compile_report), exe.compile_report


def test_the_merged_keys_go_into_a_cache(rng):
    g = qk_graph(4, 1, 16, 2, cache=True)
    ins, params = feed(g, rng, 2)
    exe, _ = assert_matches_reference(g, ins, params)
    assert rope_dispatches(exe) == 1


@pytest.mark.parametrize("case", ["other base", "siblings off"])
def test_pairs_that_do_not_fit_stay_two_dispatches(rng, case):
    g = qk_graph(4, 1, 16, 1, **({"k_base": 1e4} if case == "other base" else {}))
    ins, params = feed(g, rng)
    passes = {"siblings": False} if case == "siblings off" else None
    exe, _ = assert_matches_reference(g, ins, params, passes=passes)
    assert rope_dispatches(exe) == 2


@pytest.mark.parametrize("gap", [0, 16])
def test_only_adjacent_slices_merge(rng, gap):
    """Query heads [0, 64) and key heads [64 + gap, 80 + gap) of one packed
    projection: one dispatch when they touch, two across a gap."""
    t, d = 2, 16
    g = rlx.Graph()
    p = g.input("p", (t, 80 + gap))
    pos = g.input("pos", (t,), "i32")
    q = g.reshape(g.narrow(p, 1, 0, 64), (t, 4, d))
    k = g.reshape(g.narrow(p, 1, 64 + gap, 16), (t, 1, d))
    outs = [g.rmsnorm_rope(x, pos, g.param(f"w{i}", (d,)), add_one=True) for i, x in enumerate((q, k))]
    g.set_outputs(q=g.mul(outs[0], outs[0]), k=g.mul(outs[1], outs[1]))
    ins = {"p": rng.standard_normal((t, 80 + gap)).astype(np.float32), "pos": np.array([2, 900], np.int32)}
    params = {f"w{i}": rng.standard_normal(d).astype(np.float32) for i in range(2)}
    exe, _ = assert_matches_reference(g, ins, params)
    assert rope_dispatches(exe) == (1 if gap == 0 else 2)
