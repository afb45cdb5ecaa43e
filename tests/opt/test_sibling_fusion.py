"""Horizontal fusion of sibling projections (rlx/opt/siblings.py): q, k and v
(and a decoder's gate and up) become one gemm over concatenated weights,
read back through narrow views without copies."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_matches_reference, drop_capabilities

import rlx
from rlx.blocks import bert_layer, causal_mask, decoder_layer, random_params
from rlx.errors import ParameterError

OFF = {"siblings": False}


def bert_graph(batch=2, seq=7, hidden=24, heads=3, ffn=40, dtype="f32", layers=1):
    g = rlx.Graph()
    x = g.input("x", (batch, seq, hidden), dtype)
    mask = g.input("mask", (batch, 1, 1, seq), dtype)
    for i in range(layers):
        x = bert_layer(g, x, mask, f"l{i}", heads, ffn)
    g.set_outputs(y=x)
    return g


def bert_feed(rng, batch=2, seq=7, hidden=24, dtype=np.float32):
    mask = np.zeros((batch, 1, 1, seq), np.float32)
    mask[-1, ..., seq - 2:] = -1e4          # padding in the last sequence
    return {"x": rng.standard_normal((batch, seq, hidden)).astype(dtype), "mask": mask.astype(dtype)}


def decoder_graph(seq=5, hidden=24, heads=3, ffn=36, dtype="f32"):
    g = rlx.Graph()
    x = g.input("x", (1, seq, hidden), dtype)
    mask = g.input("mask", (1, 1, seq, seq), dtype)
    g.set_outputs(y=decoder_layer(g, x, mask, "d0", heads, ffn))
    return g


def products(exe) -> int:
    """Projections run: gemms, or the row kernel where the cost model picks
    it for few rows (GPUs do at small M); attention's own gemms (its BLAS
    path) are not projections."""
    return sum((t.kernel is None or (t.kernel or "").startswith("matmul_rows")) and "= attention(" not in t.label
               for t in exe.thunks)


def copies(exe) -> int:
    return sum((t.kernel or "").startswith("copy") for t in exe.thunks)


def report(exe) -> str:
    return "\n".join(exe.compile_report)


def wide_ops(exe, op="linear"):
    return [n for n in exe.graph.topo_order() if n.op == op]


# ---- structure ---------------------------------------------------------------------------------


@pytest.mark.parametrize("layers", [1, 3])
def test_bert_qkv_becomes_one_gemm_without_copies(rng, layers):
    g = bert_graph(layers=layers)
    params = random_params(g)
    off = rlx.compile(g, params=params, passes=OFF)
    on = rlx.compile(g, params=params)
    assert products(off) - products(on) == 2 * layers          # 3 projections -> 1 per layer
    assert on.stats.thunks <= off.stats.thunks - 2 * layers
    assert copies(on) == copies(off) == 0
    widths = sorted(n.shape[-1] for n in wide_ops(on))
    assert widths.count(3 * 24) == layers
    assert sum(n.op == "narrow" for n in on.graph.topo_order()) == 3 * layers
    merged = [p for p in on.graph.params if "+" in p]
    assert sorted(merged) == sorted(f"l{i}.q.{k}+l{i}.k.{k}+l{i}.v.{k}" for i in range(layers) for k in "wb")
    # the sources are no longer uploaded on their own
    assert not any(f"l0.{p}.w" in on.graph.params for p in "qkv")
    assert on.stats.resident_bytes <= off.stats.resident_bytes
    assert f"siblings: {3 * layers} projections -> {layers}" in report(on)
    feed = bert_feed(rng)
    # Same products, but cuBLAS may pick another algorithm (summation order)
    # for the wider gemm: equal to f32 rounding, not bit for bit.
    np.testing.assert_allclose(on.run(feed)["y"], off.run(feed)["y"], rtol=1e-5, atol=1e-6)


def test_decoder_qkv_and_gate_up_become_one_gemm_each():
    g = decoder_graph()
    params = random_params(g)
    off = rlx.compile(g, params=params, passes=OFF)
    on = rlx.compile(g, params=params)
    assert products(off) == 7 and products(on) == 4           # q,k,v -> 1 and gate,up -> 1
    assert copies(on) == copies(off)
    text = report(on)
    assert "merged matmul d0.q.w, d0.k.w, d0.v.w -> N=24+24+24" in text
    assert "merged matmul d0.gate.w, d0.up.w -> N=36+36" in text


def test_compile_report_and_verbose_mention_the_merge(monkeypatch, capsys):
    monkeypatch.setenv("RLX_VERBOSE", "1")
    g = bert_graph()
    rlx.compile(g, params=random_params(g))
    err = capsys.readouterr().err
    assert "siblings: 3 projections -> 1" in err and "merged linear l0.q.w, l0.k.w, l0.v.w -> N=24+24+24" in err


# ---- numerics ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("shape", [(1, 1, 12, 2, 20), (3, 5, 30, 5, 18), (2, 33, 24, 3, 40)])
def test_bert_layer_matches_the_reference(rng, dtype, shape):
    batch, seq, hidden, heads, ffn = shape
    g = bert_graph(batch, seq, hidden, heads, ffn, dtype)
    params = random_params(g)
    feed = bert_feed(rng, batch, seq, hidden, np.float16 if dtype == "f16" else np.float32)
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == "f16" else dict(rtol=1e-4, atol=1e-4)
    exe, _ = assert_matches_reference(g, feed, params, tol=tol)
    assert any(n.shape[-1] == 3 * hidden for n in wide_ops(exe))
    assert copies(exe) == copies(rlx.compile(g, params=params, passes=OFF))


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_decoder_layer_matches_the_reference(rng, dtype):
    g = decoder_graph(seq=9, dtype=dtype)
    params = random_params(g)
    nd = np.float16 if dtype == "f16" else np.float32
    feed = {"x": rng.standard_normal((1, 9, 24)).astype(nd), "mask": causal_mask(9, nd)}
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == "f16" else dict(rtol=1e-4, atol=1e-4)
    exe, _ = assert_matches_reference(g, feed, params, tol=tol)
    assert products(exe) == 4


@pytest.mark.parametrize("policy", ["f16", "auto"])
def test_precision_converts_the_merged_params(rng, policy):
    g = bert_graph(2, 7, 24, 3, 40)
    params = random_params(g)
    feed = bert_feed(rng)
    exe = rlx.compile(g, params=params, precision=policy)
    merged = [p for name, p in exe.graph.params.items() if "+" in name]
    assert merged and all(p.dtype.name == "f16" for p in merged)
    want = rlx.run_reference(g, feed, params)["y"]
    np.testing.assert_allclose(exe.run(feed)["y"], want, rtol=3e-2, atol=3e-2)


def test_transposed_weights_and_constants(rng):
    """PyTorch-layout weights [N, K] concatenate by rows; constant weights
    become one constant."""
    g = rlx.Graph()
    x = g.input("x", (2, 5, 11))
    outs = {}
    for name, n in (("a", 7), ("b", 3), ("c", 9)):
        outs[name] = g.linear(x, g.param(f"{name}.w", (n, 11)), g.param(f"{name}.b", (n,)), transpose_b=True)
    consts = [g.matmul(x, g.constant(rng.standard_normal((11, n)).astype(np.float32))) for n in (4, 6)]
    g.set_outputs(y=g.add(g.mul(outs["a"], outs["a"]), g.add(outs["a"], outs["a"])),   # a: read twice
                  z=g.add(g.narrow(outs["b"], 2, 0, 3), g.narrow(outs["c"], 2, 0, 3)),
                  w=g.add(g.narrow(consts[0], 2, 0, 4), g.narrow(consts[1], 2, 2, 4)))
    params = {k: rng.standard_normal(tuple(p.shape)).astype(np.float32) for k, p in g.params.items()}
    exe, _ = assert_matches_reference(g, {"x": rng.standard_normal((2, 5, 11)).astype(np.float32)}, params)
    assert products(exe) == 2 and copies(exe) == 0
    assert "a.w+b.w+c.w" in exe.graph.params


# ---- what is left alone ------------------------------------------------------------------------


def _three_linears(act=(None, None, None), weight_kind="param"):
    g = rlx.Graph()
    x = g.input("x", (3, 8))
    ys = []
    for i, a in enumerate(act):
        w = g.param(f"w{i}", (8, 5)) if weight_kind == "param" else g.input(f"w{i}", (8, 5))
        ys.append(g.linear(x, w, g.param(f"b{i}", (5,)), activation=a, transpose_b=False))
    g.set_outputs(y=g.add(g.add(ys[0], ys[1]), ys[2]))
    return g


def _feed_and_params(g, rng):
    feed = {k: rng.standard_normal(tuple(n.shape)).astype(np.float32) for k, n in g.inputs.items()}
    params = {k: rng.standard_normal(tuple(n.shape)).astype(np.float32) for k, n in g.params.items()}
    return feed, params


@pytest.mark.parametrize("act, gemms", [((None, None, None), 1), (("gelu", None, "relu"), 3),
                                        (("gelu", None, "gelu"), 2), (("silu", "silu", "silu"), 1)])
def test_only_siblings_with_one_activation_merge(rng, act, gemms):
    g = _three_linears(act)
    feed, params = _feed_and_params(g, rng)
    exe, _ = assert_matches_reference(g, feed, params)
    assert products(exe) == gemms


def test_run_time_weights_are_left_alone(rng):
    g = _three_linears(weight_kind="input")
    feed, params = _feed_and_params(g, rng)
    exe, _ = assert_matches_reference(g, feed, params)
    assert products(exe) == 3 and "siblings: nothing merged" in report(exe)


def test_shared_weights_outputs_and_dense_readers_are_left_alone(rng):
    g = rlx.Graph()
    x = g.input("x", (4, 6))
    tied = g.param("tied", (6, 6))
    a = g.matmul(x, tied)
    b = g.matmul(x, g.param("wb", (6, 6)))
    c = g.matmul(x, g.param("wc", (6, 6)))
    d = g.matmul(x, g.param("wd", (6, 6)))
    # tied is read twice; c is an output; d feeds a kernel that reads densely
    g.set_outputs(y=g.add(g.matmul(a, tied), b), c=c, s=g.softmax(d))
    feed, params = _feed_and_params(g, rng)
    exe, _ = assert_matches_reference(g, feed, params)
    assert products(exe) == 5 and copies(exe) == 0
    text = report(exe)
    assert "left alone wc: it is a graph output" in text and "left alone wd: softmax" in text


@pytest.mark.parametrize("steps", [2, 3])
def test_groups_of_one_set_of_weights_share_one_merged_weight(rng, steps):
    """The steps of a decode block: each step's three projections read the
    same three weights; every step's group merges, into one merged param.
    A fourth weight also read outside such a group stays alone."""
    g = rlx.Graph()
    x = g.input("x", (1, 8))
    ws = [g.param(f"w{i}", (5, 8)) for i in range(3)]
    shared = g.param("shared", (5, 8))
    h = x
    for _ in range(steps):
        ys = [g.linear(h, w) for w in ws]
        other = g.linear(h, shared)
        h = g.add(g.narrow(g.add(g.add(ys[0], ys[1]), ys[2]), 1, 0, 5), g.narrow(h, 1, 0, 5))
        h = g.concat([h, g.narrow(h, 1, 0, 3)], axis=1)
        h = g.add(h, g.concat([other, g.narrow(other, 1, 0, 3)], axis=1))
    g.set_outputs(y=h, z=g.linear(x, shared))
    feed, params = _feed_and_params(g, rng)
    exe, _ = assert_matches_reference(g, feed, params)
    merged = [name for name in exe.graph.params if "+" in name]
    assert merged == ["w0+w1+w2"], merged
    assert products(exe) == 2 * steps + 1   # a wide gemm and `other` a step, and z
    assert "left alone shared: its weight is also read outside groups of its weights" in report(exe)


def test_target_can_opt_out(monkeypatch, rng):
    drop_capabilities(monkeypatch, "linear_siblings")
    g = bert_graph()
    exe = rlx.compile(g, params=random_params(g))
    assert products(exe) == 6 and not any("siblings" in line for line in exe.compile_report)


# ---- params: set_params and share_params_with -----------------------------------------------------


@pytest.mark.parametrize("transpose_b", [False, True])
def test_set_params_on_a_source_updates_its_slice(rng, transpose_b):
    g = rlx.Graph()
    x = g.input("x", (3, 10))
    ys = [g.linear(x, g.param(f"w{i}", (n, 10) if transpose_b else (10, n)), g.param(f"b{i}", (n,)),
                   transpose_b=transpose_b) for i, n in enumerate((4, 7, 5))]
    g.set_outputs(y=g.add(g.narrow(ys[0], 1, 0, 4), g.add(g.narrow(ys[1], 1, 3, 4), g.narrow(ys[2], 1, 1, 4))))
    feed, params = _feed_and_params(g, rng)
    exe = rlx.compile(g, params=params)
    assert products(exe) == 1
    assert {"w0", "w1", "w2", "b0", "b1", "b2"} <= {s.name for s in exe.param_specs}
    new = {"w1": rng.standard_normal(tuple(g.params["w1"].shape)), "b2": rng.standard_normal((5,))}
    exe.set_params(new)
    want = rlx.run_reference(g, feed, {**params, **{k: v.astype(np.float32) for k, v in new.items()}})["y"]
    np.testing.assert_allclose(exe.run(feed)["y"], want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ParameterError, match="shape"):
        exe.set_params(w0=np.zeros((3, 3), np.float32))


@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_buckets_share_the_merged_params(rng, precision):
    """Shape buckets (rlx/models/embedder.py) read the first executable's
    merged weights; set_params on a source reaches every bucket."""
    big, small = bert_graph(2, 7), bert_graph(1, 4)
    params = random_params(big)
    first = rlx.compile(big, params=params, precision=precision)
    second = rlx.compile(small, share_params_with=first, precision=precision)    # no params needed
    assert second.stats.resident_bytes < first.stats.resident_bytes // 10
    feed = bert_feed(rng, 1, 4)
    tol = dict(rtol=3e-2, atol=3e-2) if precision == "f16" else dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(second.run(feed)["y"], rlx.run_reference(small, feed, params)["y"], **tol)
    new = dict(params, **{"l0.k.w": random_params(big, seed=9)["l0.k.w"]})
    first.set_params({"l0.k.w": new["l0.k.w"]})
    np.testing.assert_allclose(second.run(feed)["y"], rlx.run_reference(small, feed, new)["y"], **tol)


def test_merged_params_need_their_sources():
    g = bert_graph()
    params = random_params(g)
    del params["l0.k.w"]
    with pytest.raises(ParameterError, match=r"'l0.k.w'.*merged into 'l0.q.w\+l0.k.w\+l0.v.w'"):
        rlx.compile(g, params=params)


def test_an_unmerged_executable_does_not_share_a_source_slice(rng):
    """A bucket compiled without the pass reads its own q/k/v (given) rather
    than a slice of another executable's merged weight."""
    g = bert_graph()
    params = random_params(g)
    first = rlx.compile(g, params=params)
    second = rlx.compile(g, params=params, passes=OFF, share_params_with=first)
    feed = bert_feed(rng)
    np.testing.assert_allclose(second.run(feed)["y"], first.run(feed)["y"], rtol=1e-5, atol=1e-5)
    with pytest.raises(ParameterError, match="missing value"):
        rlx.compile(g, passes=OFF, share_params_with=first)


# ---- the real model builder --------------------------------------------------------------------


def test_unpacked_bert_model_merges_like_the_hand_packed_graph(tmp_path, rng):
    pytest.importorskip("safetensors.numpy")
    pytest.importorskip("tokenizers")
    from models.test_bert import make_tiny_bert

    from rlx.models import BertModel

    model = BertModel.load(make_tiny_bert(tmp_path / "tiny"))
    b, t = 2, 5
    feed = {"input_ids": rng.integers(5, 20, (b, t)).astype(np.int32), "attention_mask": np.ones((b, t), np.float32)}
    feed["attention_mask"][1, 3:] = 0
    packed = rlx.compile(model.build_graph(b, t, pooled=False), params=model.params("f32"))
    g = model.build_graph(b, t, pooled=False, packed_qkv=False)
    unpacked = rlx.compile(g, params=model.params("f32", packed_qkv=False))
    off = rlx.compile(g, params=model.params("f32", packed_qkv=False), passes=OFF)
    assert products(unpacked) == products(packed) == products(off) - 2 * model.config.num_hidden_layers
    assert unpacked.stats.thunks == packed.stats.thunks and copies(unpacked) == copies(off)
    got = unpacked.run(feed)["last_hidden_state"]
    np.testing.assert_allclose(got, packed.run(feed)["last_hidden_state"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, off.run(feed)["last_hidden_state"], rtol=1e-5, atol=1e-5)


def test_siblings_follow_a_frames_view_of_a_projection(rng):
    """A sibling projection read through the frames view (overlapping
    frames of its last axis): the fused result is still right."""
    g = rlx.Graph()
    x = g.input("x", (2, 5, 16))
    w1, w2 = g.param("w1", (24, 16)), g.param("w2", (24, 16))
    a = g.frames(g.linear(x, w1), 8, 4)
    b = g.linear(x, w2)
    g.set_outputs(a=g.mul(a, a), b=g.mul(b, b))
    params = {"w1": rng.standard_normal((24, 16)).astype(np.float32),
              "w2": rng.standard_normal((24, 16)).astype(np.float32)}
    exe, _ = assert_matches_reference(g, {"x": rng.standard_normal((2, 5, 16)).astype(np.float32)}, params)
    assert products(exe) == 1, report(exe)
