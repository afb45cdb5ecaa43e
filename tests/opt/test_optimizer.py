"""The compile pipeline (issue 4): backend-aware fusion, view elision, mixed
precision, hazard-aware barriers, segments, pass switches and reports."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rlx
from rlx.blocks import bert_layer, causal_mask, decoder_layer, random_params
from rlx.lowering import Thunk, place_barriers
from rlx.opt.fusion import fuse
from rlx.opt.segments import GEMM, REPLAY, Step, segment
from rlx.runtime import devices
from rlx.runtime.views import Storage

ALL = frozenset({"linear", "add_layernorm", "add_rmsnorm", "glu", "attention"})


def bert_graph(batch=2, seq=9, hidden=32, heads=4, ffn=64, dtype="f32"):
    g = rlx.Graph()
    x = g.input("x", (batch, seq, hidden), dtype)
    mask = g.input("mask", (batch, 1, 1, seq), dtype)
    g.set_outputs(y=bert_layer(g, x, mask, "l0", heads, ffn))
    return g


def decoder_graph(batch=1, seq=7, hidden=32, heads=4, ffn=48, dtype="f32"):
    g = rlx.Graph()
    x = g.input("x", (batch, seq, hidden), dtype)
    mask = g.input("mask", (1, 1, seq, seq), dtype)
    g.set_outputs(y=decoder_layer(g, x, mask, "d0", heads, ffn))
    return g


def bert_feed(rng, batch=2, seq=9, hidden=32, dtype=np.float32):
    mask = np.zeros((batch, 1, 1, seq), np.float32)
    mask[-1, ..., seq - 3:] = -np.inf           # padding in the last sequence
    return {"x": rng.standard_normal((batch, seq, hidden)).astype(dtype), "mask": mask.astype(dtype)}


def ops_of(graph) -> Counter:
    return Counter(n.op for n in graph.topo_order())


# ---- structure ---------------------------------------------------------------------------------


def test_bert_layer_fuses_to_linear_attention_and_add_layernorm():
    fused, report = fuse(bert_graph(), ALL)
    ops = ops_of(fused)
    assert ops["linear"] == 6 and ops["attention"] == 1 and ops["add_layernorm"] == 2
    for gone in ("matmul", "softmax", "layernorm", "gelu", "add", "mul"):
        assert ops[gone] == 0, gone
    assert report.fused == Counter(linear=6, attention=1, add_layernorm=2)
    assert report.nodes_after < report.nodes_before


def test_decoder_layer_fuses_glu_and_attention_but_keeps_reused_residual():
    fused, _ = fuse(decoder_graph(), ALL)
    ops = ops_of(fused)
    assert ops["glu"] == 1 and ops["attention"] == 1
    # The residual sum feeds both the second RMSNorm and the final add: it
    # must stay an add, so no add_rmsnorm; the bias-free projections stay matmuls.
    assert ops["add_rmsnorm"] == 0 and ops["rmsnorm"] == 2 and ops["matmul"] == 7


def test_target_without_a_fused_op_gets_the_primitive_chain():
    fused, _ = fuse(bert_graph(), ALL - {"add_layernorm", "attention"})
    ops = ops_of(fused)
    assert ops["add_layernorm"] == 0 and ops["layernorm"] == 2 and ops["attention"] == 0 and ops["softmax"] == 1
    assert ops["linear"] == 6


def test_capabilities_come_from_the_target(monkeypatch, rng):
    real = devices.open_device

    def no_fusion_target(name):
        dev, target = real(name)
        return dev, dataclasses.replace(target, capabilities=frozenset({"linear"}))

    monkeypatch.setattr(devices, "open_device", no_fusion_target)
    g = bert_graph()
    exe = rlx.compile(g, params=random_params(g))
    assert set(exe.stats.fused) == {"linear"}


# ---- numerics ----------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["bert", "decoder"])
def test_fused_and_unfused_agree_with_the_reference(rng, which):
    g = bert_graph() if which == "bert" else decoder_graph()
    params = random_params(g)
    feed = bert_feed(rng) if which == "bert" else {"x": rng.standard_normal((1, 7, 32)).astype(np.float32),
                                                   "mask": causal_mask(7)}
    want = rlx.run_reference(g, feed, params)["y"]
    for passes in ({}, {"fusion": False}, {"views": False}, {"memory_reuse": False}, {"segments": False}):
        got = rlx.compile(g, params=params, passes=passes).run(feed)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(passes))


@pytest.mark.parametrize("policy", ["f16", "auto"])
def test_mixed_precision_matches_within_f16_tolerance(rng, policy):
    g = bert_graph()
    params = random_params(g)
    feed = bert_feed(rng)
    want = rlx.run_reference(g, feed, params)["y"]
    exe = rlx.compile(g, params=params, precision=policy)
    got = exe.run(feed)["y"]
    assert got.dtype == np.float32
    # f16 storage of activations and weights: ~1e-3 relative per rounding,
    # accumulated through one layer whose outputs are layer-normed (O(1)).
    np.testing.assert_allclose(got, want, rtol=3e-2, atol=3e-2)
    lowered = exe.graph.topo_order()
    casts = [n for n in lowered if n.op == "cast"]
    assert not any(c.inputs[0].op == "cast" for c in casts), "a cast of a cast: round trip not removed"
    assert any(n.op == "linear" and n.dtype.name == "f16" for n in lowered)
    norms = [n for n in lowered if n.op == "add_layernorm"]
    assert all(n.dtype.name == ("f32" if policy == "auto" else "f16") for n in norms)
    text = "\n".join(exe.compile_report)
    why = "the output keeps its declared dtype" if policy == "f16" else "add_layernorm computes in f32"
    assert f"precision: {policy}" in text and why in text


def test_auto_keeps_elementwise_ops_between_f32_neighbours_in_f32():
    """Under "auto" an elementwise op whose float inputs are all f32 (an
    input, a norm's output, a view of one) and whose every consumer
    computes in f32 (a norm) or is an output stays f32: x + neg(x) into an
    rmsnorm is exactly zero, where f16 would leave rounding noise that the
    norm blows up (fuzz seed 534179). An elementwise op next to an f16
    computation (a linear) keeps the f16 of "auto"."""
    from rlx.opt.precision import apply_precision

    g = rlx.Graph()
    x = g.input("x", (4, 64))
    w = g.param("w", (64,))
    y = g.rmsnorm(g.add(x, g.neg(x)), w)                  # both elementwise ops between f32 neighbours
    z = g.relu(g.reshape(g.rmsnorm(x, w), (4, 64)))       # a view of an f32 norm, then an output
    h = g.gelu(g.linear(x, g.param("lw", (64, 64))))      # next to an f16 linear
    g.set_outputs(y=y, z=z, h=h)
    lowered, report = apply_precision(g, "auto", "host")
    dtypes = {n.op: n.dtype.name for n in lowered.topo_order() if n.op in ("add", "neg", "relu", "gelu", "linear")}
    assert dtypes == {"add": "f32", "neg": "f32", "relu": "f32", "gelu": "f16", "linear": "f16"}
    assert all("gelu" not in why and "relu" not in why for *_, why in report.casts)
    rng = np.random.default_rng(3)
    feed = {"x": (rng.standard_normal((4, 64)) * 1e3).astype(np.float32)}
    params = {"w": np.ones(64, np.float32), "lw": (rng.standard_normal((64, 64)) * 0.05).astype(np.float32)}
    out = rlx.compile(g, params=params, precision="auto").run(feed)
    np.testing.assert_array_equal(out["y"], np.zeros((4, 64), np.float32))


def test_auto_keeps_f16_for_an_elementwise_op_with_one_f16_neighbour():
    """One consumer that computes in f16 (a linear), or one input that an
    f16 op computed, is enough for "auto"'s f16: the rule above never adds
    a cast."""
    from rlx.opt.precision import apply_precision

    g = rlx.Graph()
    x = g.input("x", (4, 64))
    w = g.param("w", (64,))
    s = g.add(x, g.rmsnorm(x, w))                                   # f32 inputs ...
    g.set_outputs(a=g.rmsnorm(s, w), b=g.linear(s, g.param("lw", (64, 64))),   # ... and one f16 consumer
                  c=g.rmsnorm(g.mul(g.linear(x, g.param("l2", (64, 64))), x), w))   # an f16 input
    lowered, _ = apply_precision(g, "auto", "host")
    dtypes = {n.op: n.dtype.name for n in lowered.topo_order() if n.op in ("add", "mul")}
    assert dtypes == {"add": "f16", "mul": "f16"}


def test_f16_casts_params_at_compile_time_not_per_run(rng):
    g = bert_graph()
    exe = rlx.compile(g, params=random_params(g), precision="f16")
    lowered = exe.graph
    assert all(p.dtype.name == "f16" for p in lowered.params.values())
    casts = [n for n in lowered.topo_order() if n.op == "cast"]
    assert {c.inputs[0].op for c in casts} <= {"input", "add_layernorm"}   # inputs in, the output back out


# ---- views, segments, barriers --------------------------------------------------------------


def test_view_elision_can_be_switched_off(rng):
    g = bert_graph()
    params = random_params(g)
    on = rlx.compile(g, params=params)
    off = rlx.compile(g, params=params, passes={"views": False})
    assert off.stats.thunks > on.stats.thunks
    assert not any((t.kernel or "").startswith("copy") for t in on.thunks)


def test_segments_split_at_gemms_and_carry_boundaries(rng, monkeypatch):
    from rlx.lowering import linear as lowering_linear

    monkeypatch.setattr(lowering_linear, "use_row_kernel", lambda *a, **k: False)
    g = bert_graph()
    exe = rlx.compile(g, params=random_params(g))
    kinds = [s.kind for s in exe.segments]
    assert GEMM in kinds and REPLAY in kinds
    assert sum(s.count for s in exe.segments) == exe.stats.thunks
    first_gemm = next(s for s in exe.segments if s.kind == GEMM)
    assert first_gemm.inputs and first_gemm.outputs
    off = rlx.compile(g, params=random_params(g), passes={"segments": False})
    assert not off.program.replaying


def test_segmenter_merges_dispatch_runs():
    def step(is_gemm, reads=(), writes=()):
        return Step(is_gemm, True, frozenset(reads), frozenset(writes))

    segs = segment([step(False, "a", "b"), step(False, "b", "c"), step(True, "c", "d"), step(False, "d", "e")],
                   frozenset("e"))
    assert [(s.kind, s.start, s.count) for s in segs] == [(REPLAY, 0, 2), (GEMM, 2, 1), (REPLAY, 3, 1)]
    assert segs[0].inputs == {"a"} and segs[0].outputs == {"c"}
    assert segs[2].outputs == {"e"}


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10**9), n=st.integers(1, 30))
def test_property_no_hazard_is_left_unguarded(seed, n):
    rnd = random.Random(seed)
    storages = [Storage(f"s{i}", 256, slot=rnd.randint(0, 1), offset=rnd.choice([0, 128, 256])) for i in range(4)]
    thunks = []
    for i in range(n):
        t = Thunk(0, f"t{i}")
        for _ in range(rnd.randint(0, 3)):
            s = rnd.choice(storages)
            a = rnd.randrange(0, 200)
            (t.reads if rnd.random() < 0.6 else t.writes).append((s, a, a + rnd.randint(1, 56)))
        thunks.append(t)
    place_barriers(thunks)

    def spans(rs):
        return [(s.slot, s.offset + a, s.offset + b) for s, a, b in rs]

    def overlap(x, y):
        return x[0] == y[0] and x[1] < y[2] and y[1] < x[2]

    for j, later in enumerate(thunks):
        for i in range(j):
            earlier = thunks[i]
            raw = any(overlap(w, r) for w in spans(earlier.writes) for r in spans(later.reads))
            war = any(overlap(r, w) for r in spans(earlier.reads) for w in spans(later.writes))
            waw = any(overlap(w, w2) for w in spans(earlier.writes) for w2 in spans(later.writes))
            if raw or war or waw:
                assert any(thunks[k].barrier for k in range(i + 1, j + 1)), f"hazard {i}->{j} unguarded"


# ---- switches and reports -------------------------------------------------------------------


def test_unknown_pass_and_policy_are_config_errors():
    g = bert_graph()
    with pytest.raises(rlx.ConfigError, match="unknown pass"):
        rlx.compile(g, params=random_params(g), passes={"fuse": False})
    with pytest.raises(rlx.ConfigError, match="precision"):
        rlx.compile(g, params=random_params(g), precision="bf8")


def test_verbose_reports_every_pass(monkeypatch, capsys, rng):
    monkeypatch.setenv("RLX_VERBOSE", "1")
    g = bert_graph()
    rlx.compile(g, params=random_params(g), precision="auto").run(bert_feed(rng))
    err = capsys.readouterr().err
    for word in ("fusion:", "precision: auto", "cast", "views:", "memory: arena", "lowering:", "barriers",
                 "segments:", "nodes ->"):
        assert word in err, word


# ---- attention fusion fires only where it computes what the graph says ---------------------------


def _attention_chain(rng, *, tq=4, tk=4, heads=2, d=8, scores_scale=0.25,
                     softmax="masked", softmax_scale=2.0, mask_shape=(1, 1, 1, 4), mask_via_softmax=False):
    """y = softmax-ish((Q_h @ K_h^T) * scores_scale [+ mask]) @ V_h over [B, T, H, D] inputs."""
    g = rlx.Graph()
    q = g.input("q", (1, tq, heads, d))
    k = g.input("k", (1, tk, heads, d))
    v = g.input("v", (1, tk, heads, d))
    s = g.matmul(g.transpose(q, (0, 2, 1, 3)), g.transpose(k, (0, 2, 3, 1)))
    if scores_scale is not None:
        s = g.mul(s, g.constant(np.float32(scores_scale)))
    m = g.input("m", mask_shape) if mask_shape is not None else None
    if softmax == "masked":
        p = g.masked_softmax(s, m, scale=softmax_scale) if mask_via_softmax else g.masked_softmax(
            s if m is None else g.add(s, m), None, scale=softmax_scale)
    else:
        p = g.softmax(s if m is None else g.add(s, m))
    g.set_outputs(y=g.matmul(p, g.transpose(v, (0, 2, 1, 3))))
    feed = {name: rng.standard_normal(node.shape).astype(np.float32) for name, node in g.inputs.items()}
    return g, feed


@pytest.mark.parametrize("case, fuses", [
    # the graph means softmax((qk * 0.25 + mask) * 2): the mask is scaled too, attention cannot say that
    (dict(softmax="masked", softmax_scale=2.0), False),
    (dict(softmax="masked", softmax_scale=1.0), True),
    (dict(softmax="masked", softmax_scale=2.0, mask_via_softmax=True), True),   # softmax(qk * 0.5 + mask)
    (dict(softmax="masked", softmax_scale=3.0, mask_shape=None), True),
    # the mask broadcasts the single query row to 5: the add's shape is not the scores' shape
    (dict(softmax="plain", tq=1, mask_shape=(1, 2, 5, 4)), False),
    (dict(softmax="plain", tq=1, mask_shape=(1, 2, 1, 4)), True),
    (dict(softmax="masked", softmax_scale=1.0, scores_scale=None, mask_shape=(1, 2, 4, 4)), True),
])
def test_attention_fusion_preserves_meaning_or_does_not_fire(rng, case, fuses):
    g, feed = _attention_chain(rng, **case)
    fused, report = fuse(g, ALL)
    assert (report.fused["attention"] == 1) == fuses, (case, report.describe())
    want = rlx.run_reference(g, feed, {})["y"]
    np.testing.assert_allclose(rlx.run_reference(fused, feed, {})["y"], want, rtol=1e-5, atol=1e-5)
    for passes in ({}, {"fusion": False}):
        got = rlx.compile(g, passes=passes).run(feed)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(passes))

