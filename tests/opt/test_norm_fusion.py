"""The norm fusions of a decoder step (issue 18; rlx/opt/fusion.py): the
post-norm residual with the next pre-norm (rmsnorm_add_rmsnorm), a post-norm
residual alone (rmsnorm_add) and the per-head norm before RoPE
(rmsnorm_rope). Each fires on its pattern, leaves graphs alone where the
pattern does not hold (an intermediate read elsewhere, a broadcast, a
weight made after the sum), and the compiled graph matches the reference
with fusion on and off."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import rlx
from rlx.opt.fusion import fuse
from rlx.runtime.target import Target

CAPS = Target.__dataclass_fields__["capabilities"].default


def ops_of(graph) -> Counter:
    return Counter(n.op for n in graph.topo_order())


def sandwich_decoder(layers=2, t=3, d=24, heads=2, hd=8, dtype="f32", add_one=True):
    """Gemma's layer shape, small: pre-norm, q/k norms before RoPE, a
    post-norm on each residual branch."""
    g = rlx.Graph()
    x = g.input("x", (t, d), dtype)
    pos = g.input("pos", (t,), "i32")

    def norm(v, name):
        return g.rmsnorm(v, g.param(name, (v.shape[-1],), dtype), eps=1e-6, add_one=add_one)

    for i in range(layers):
        h = norm(x, f"{i}.attn_norm")
        q = g.reshape(g.matmul(h, g.param(f"{i}.wq", (d, heads * hd), dtype)), (t, heads, hd))
        k = g.reshape(g.matmul(h, g.param(f"{i}.wk", (d, heads * hd), dtype)), (t, heads, hd))
        q = g.rope(norm(q, f"{i}.q_norm"), pos, base=1e6)
        k = g.rope(norm(k, f"{i}.k_norm"), pos, base=1e6, layout="interleaved")
        o = g.matmul(g.reshape(g.mul(q, k), (t, heads * hd)), g.param(f"{i}.wo", (heads * hd, d), dtype))
        x = g.add(x, norm(o, f"{i}.post_attn_norm"))
        f = g.matmul(norm(x, f"{i}.ffn_norm"), g.param(f"{i}.wf", (d, d), dtype))
        x = g.add(x, norm(f, f"{i}.post_ffw_norm"))
    g.set_outputs(y=norm(x, "out_norm"))
    return g


def feed(g, rng, t=3, d=24, dtype=np.float32):
    params = {name: (rng.standard_normal(n.shape) * 0.5).astype(dtype) for name, n in g.params.items()}
    return {"x": rng.standard_normal((t, d)).astype(dtype), "pos": np.array([3, 11, 400][:t], np.int32)}, params


def test_a_sandwich_norm_decoder_fuses_to_one_kernel_per_norm_pair():
    g = sandwich_decoder(layers=2)
    fused, report = fuse(g, CAPS)
    ops = ops_of(fused)
    # Per layer: post-attention residual + ffn_norm, post-ffw residual + the
    # next pre-norm (the last one: the output norm); layer 0's attn_norm stays.
    assert ops["rmsnorm_add_rmsnorm"] == 4 and ops["rmsnorm"] == 1 and ops["add"] == 0
    assert ops["rmsnorm_rope"] == 4 and ops["rope"] == 0
    assert report.fused["rmsnorm_add_rmsnorm"] == 4 and report.fused["rmsnorm_rope"] == 4


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("add_one", [False, True])
def test_fused_and_unfused_decoders_agree_with_the_reference(rng, dtype, add_one):
    g = sandwich_decoder(dtype=dtype, add_one=add_one)
    inputs, params = feed(g, rng, dtype=np.float16 if dtype == "f16" else np.float32)
    want = rlx.run_reference(g, inputs, params)["y"].astype(np.float64)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == "f16" else dict(rtol=1e-4, atol=1e-4)
    counts = {}
    for passes in ({}, {"fusion": False}):
        exe = rlx.compile(g, params=params, passes=passes)
        counts[bool(passes)] = len(exe.thunks)
        np.testing.assert_allclose(exe.run(inputs)["y"].astype(np.float64), want, err_msg=str(passes), **tol)
    assert counts[False] <= counts[True] - 12   # 4 x 2 norms + 4 adds folded in, at least


def test_the_sum_stays_readable_by_its_other_readers_and_as_an_output(rng):
    g = rlx.Graph()
    o, x = g.input("o", (4, 9)), g.input("x", (4, 9))
    s = g.add(x, g.rmsnorm(o, g.param("w", (9,)), add_one=True))
    h = g.rmsnorm(s, g.param("w2", (9,)))
    g.set_outputs(s=s, h=h, twice=g.mul(s, s))
    fused, _ = fuse(g, CAPS)
    assert ops_of(fused)["rmsnorm_add_rmsnorm"] == 1 and ops_of(fused)["add"] == 0
    inputs = {"o": rng.standard_normal((4, 9)).astype(np.float32), "x": rng.standard_normal((4, 9)).astype(np.float32)}
    params = {"w": rng.standard_normal(9).astype(np.float32), "w2": rng.standard_normal(9).astype(np.float32)}
    want = rlx.run_reference(g, inputs, params)
    got = rlx.compile(g, params=params).run(inputs)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5, err_msg=name)


def _residual(shape_x=(4, 9), inner_is_output=False, weight_after=False, then_norm=True):
    g = rlx.Graph()
    o, x = g.input("o", (4, 9)), g.input("x", shape_x)
    inner = g.rmsnorm(o, g.param("w", (9,)))
    s = g.add(x, inner)
    w2 = g.mul(g.param("w2", (9,)), g.constant(np.full((9,), 2.0, np.float32))) if weight_after else g.param("w2", (9,))
    outs = {"h": g.rmsnorm(s, w2)} if then_norm else {"s": s}
    if inner_is_output:
        outs["inner"] = inner
    g.set_outputs(**outs)
    return g


@pytest.mark.parametrize("case, want", [
    ("plain", {"rmsnorm_add_rmsnorm": 1}),
    ("residual alone", {"rmsnorm_add": 1}),
    ("inner norm is an output", {"rmsnorm": 1, "add_rmsnorm": 1}),   # the inner norm must stay
    ("broadcast residual", {"rmsnorm": 2, "add": 1}),                # x (1, 9) + norm (4, 9): not row by row
    ("next weight made after the sum", {"rmsnorm": 1, "add_rmsnorm": 1}),
])
def test_residual_fusions_fire_only_on_their_pattern(rng, case, want):
    g = {"plain": lambda: _residual(), "residual alone": lambda: _residual(then_norm=False),
         "inner norm is an output": lambda: _residual(inner_is_output=True),
         "broadcast residual": lambda: _residual(shape_x=(1, 9)),
         "next weight made after the sum": lambda: _residual(weight_after=True)}[case]()
    fused, _ = fuse(g, CAPS)
    ops = ops_of(fused)
    got = {op: ops[op] for op in ("rmsnorm", "add", "add_rmsnorm", "rmsnorm_add", "rmsnorm_add_rmsnorm") if ops[op]}
    assert got == want
    inputs = {"o": rng.standard_normal((4, 9)).astype(np.float32),
              "x": rng.standard_normal(g.inputs["x"].shape).astype(np.float32)}
    params = {name: rng.standard_normal(n.shape).astype(np.float32) for name, n in g.params.items()}
    want_values = rlx.run_reference(g, inputs, params)
    got_values = rlx.compile(g, params=params).run(inputs)
    for name in want_values:
        np.testing.assert_allclose(got_values[name], want_values[name], rtol=1e-5, atol=1e-5, err_msg=name)


def test_rope_fusion_leaves_a_norm_read_elsewhere_alone():
    g = rlx.Graph()
    q, pos = g.input("q", (3, 2, 8)), g.input("pos", (3,), "i32")
    normed = g.rmsnorm(q, g.param("w", (8,)))
    g.set_outputs(y=g.rope(normed, pos), normed=normed)
    ops = ops_of(fuse(g, CAPS)[0])
    assert ops["rmsnorm_rope"] == 0 and ops["rope"] == 1 and ops["rmsnorm"] == 1


def test_a_target_without_the_fused_ops_keeps_the_chain():
    g = sandwich_decoder(layers=1)
    ops = ops_of(fuse(g, CAPS - {"rmsnorm_add_rmsnorm", "rmsnorm_add", "rmsnorm_rope", "add_rmsnorm"})[0])
    assert ops["rmsnorm"] == 7 and ops["rope"] == 2 and ops["add"] == 2
