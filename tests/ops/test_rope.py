"""RoPE against rlx/reference/attention.py on the device under test: head
dims, partial rotary dims, position forms, large positions and bases, both
layouts, and a packed QKV tensor read without copies (then attention).

Tolerances (conftest.TOL): RoPE's reference works in float64 from the very
float32 angle the kernel computes; the kernel's sin/cos is within 1.2e-7 of
it. f16: rtol/atol 2e-3 (one f16 rounding of the output)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TOL, assert_matches_reference

import rlx
from rlx.errors import DTypeError, GraphError, ShapeError

from .helpers import DTYPES
from .helpers import kernels_of as _kernels
from .helpers import packed_qkv_graph as _packed_qkv_graph
from .helpers import rand as _rand

pytestmark = pytest.mark.usefixtures("fused_attention_kernel")   # tests/ops/conftest.py


def _rope_check(rng, x_shape, pos_shape, dtype, layout="neox", rotary_dim=None, base=10000.0, max_pos=600):
    g = rlx.Graph()
    x = g.input("x", x_shape, dtype)
    pos = g.input("pos", pos_shape, "i32")
    g.set_outputs(y=g.rope(x, pos, base=base, layout=layout, rotary_dim=rotary_dim))
    ins = {"x": _rand(rng, x_shape, dtype), "pos": rng.integers(0, max_pos, pos_shape).astype(np.int32)}
    exe, got = assert_matches_reference(g, ins)
    assert _kernels(exe) == [f"rope_{dtype}"]
    return ins, got["y"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["neox", "interleaved"])
@pytest.mark.parametrize("d", [32, 64, 80, 128, 256])
def test_rope_head_dims(rng, dtype, layout, d):
    _rope_check(rng, (2, 7, 3, d), (2, 7), dtype, layout)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["neox", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [2, 16, 32, 62])
def test_rope_partial_rotary_dim(rng, dtype, layout, rotary_dim):
    ins, y = _rope_check(rng, (2, 5, 3, 64), (5,), dtype, layout, rotary_dim)
    np.testing.assert_array_equal(y[..., rotary_dim:], ins["x"][..., rotary_dim:])   # pass-through


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["neox", "interleaved"])
@pytest.mark.parametrize("x_shape, pos_shape", [((9, 4, 32), (9,)), ((2, 9, 4, 32), (9,)), ((2, 9, 4, 32), (2, 9)),
                                                ((1, 1, 1, 8), (1,)), ((1, 513, 2, 64), (1, 513))])
def test_rope_position_forms(rng, dtype, layout, x_shape, pos_shape):
    _rope_check(rng, x_shape, pos_shape, dtype, layout)


@pytest.mark.parametrize("layout", ["neox", "interleaved"])
def test_rope_large_positions_and_base(rng, layout):
    """Positions up to 500k (long-context decoders), a large base (Llama 3: 500000)."""
    _rope_check(rng, (1, 64, 2, 128), (64,), "f32", layout, base=500000.0, max_pos=500_000)
    _rope_check(rng, (1, 64, 2, 128), (64,), "f32", layout, max_pos=500_000)


def test_rope_position_zero_is_identity(rng):
    g = rlx.Graph()
    x = g.input("x", (3, 2, 16))
    g.set_outputs(y=g.rope(x, g.input("pos", (3,), "i32"), layout="interleaved"))
    xs = _rand(rng, (3, 2, 16), "f32")
    got = rlx.compile(g).run(x=xs, pos=np.zeros(3, np.int32))["y"]
    np.testing.assert_array_equal(got, xs)


def test_rope_neox_matches_rotate_half(rng):
    """The neox layout is HF's rotate_half form: x * cos + rotate_half(x) * sin."""
    t, h, d = 5, 2, 16
    g = rlx.Graph()
    g.set_outputs(y=g.rope(g.input("x", (t, h, d)), g.input("pos", (t,), "i32")))
    xs, pos = _rand(rng, (t, h, d), "f32"), np.arange(t, dtype=np.int32) * 7
    got = rlx.compile(g).run(x=xs, pos=pos)["y"]
    inv = 1.0 / (10000.0 ** (np.arange(0, d, 2) / d))
    ang = np.concatenate([pos[:, None] * inv] * 2, axis=-1)[:, None, :]
    rot = np.concatenate([-xs[..., d // 2:], xs[..., : d // 2]], axis=-1)
    np.testing.assert_allclose(got, xs * np.cos(ang) + rot * np.sin(ang), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["neox", "interleaved"])
def test_rope_reads_packed_tensor_without_copy(rng, dtype, layout):
    """RoPE on q and k head slices of a packed QKV tensor, then attention on
    the rotated q, k and the v slice: three kernels, no copy."""
    b, t, hq, hkv, d = 2, 9, 4, 2, 32
    g, q, k, v = _packed_qkv_graph(b, t, hq, hkv, d, dtype)
    pos = g.input("pos", (b, t), "i32")
    qr = g.rope(q, pos, layout=layout, rotary_dim=16)
    kr = g.rope(k, pos, layout=layout, rotary_dim=16)
    g.set_outputs(q=qr, o=g.attention(qr, kr, v, causal=True))
    ins = {"qkv": _rand(rng, (b, t, (hq + 2 * hkv) * d), dtype),
           "pos": (np.arange(t)[None] + np.array([[0], [40]])).astype(np.int32)}
    exe, _ = assert_matches_reference(g, ins)
    assert _kernels(exe) == [f"rope_{dtype}", f"rope_{dtype}", f"attention_{dtype}"]
    # the two ropes share one inv_freq table
    assert sum(1 for s in exe.thunks[0].bindings if "rope_inv_freq" in s.storage.key) == 1
    assert exe.thunks[0].bindings[2].storage is exe.thunks[1].bindings[2].storage


# ---------------------------------------------------------------- IR errors


def _g():
    return rlx.Graph()


def test_rope_ir_errors():
    g = _g()
    x = g.input("x", (2, 5, 3, 8))
    pos = g.input("pos", (5,), "i32")
    with pytest.raises(ShapeError, match=r"rope: x must be.*\(5, 8\)"):
        g.rope(g.input("x2", (5, 8)), pos)
    with pytest.raises(DTypeError, match="positions must be i32"):
        g.rope(x, g.input("pf", (5,), "f32"))
    with pytest.raises(DTypeError, match="positions must be i32"):
        g.rope(x, g.input("p64", (5,), "i64"))
    with pytest.raises(DTypeError, match="float"):
        g.rope(g.input("xi", (5, 3, 8), "i32"), pos)
    with pytest.raises(ShapeError, match=r"positions shape \(4,\)"):
        g.rope(x, g.input("p4", (4,), "i32"))
    with pytest.raises(ShapeError, match=r"positions shape \(3, 5\)"):
        g.rope(x, g.input("p35", (3, 5), "i32"))
    with pytest.raises(ShapeError, match=r"positions shape \(2, 5\)"):
        g.rope(g.input("x3", (5, 3, 8)), g.input("p25", (2, 5), "i32"))
    for rd in (3, 10, 0, -2):
        with pytest.raises(ShapeError, match="rotary_dim"):
            g.rope(x, pos, rotary_dim=rd)
    with pytest.raises(ShapeError, match="rotary_dim"):
        g.rope(g.input("xodd", (5, 3, 7)), pos)                   # default rotary_dim = D must be even
    with pytest.raises(GraphError, match="layout"):
        g.rope(x, pos, layout="gptj")
    with pytest.raises(GraphError, match="base"):
        g.rope(x, pos, base=0.0)
    with pytest.raises(GraphError, match="base"):
        g.rope(x, pos, base="10000")
    with pytest.raises(GraphError, match="unknown attribute"):
        g.op("rope", (x, pos), theta=1.0)
    node = g.rope(x, pos)
    assert node.attrs == {"base": 10000.0, "layout": "neox", "rotary_dim": 8, "freq_factors": None}
    for bad, match in (([1.0, 2.0, 3.0], "must be 4 finite positive"), ([1.0, 0.0, 1.0, 1.0], "finite positive"),
                       ([1.0, float("nan"), 1.0, 1.0], "finite positive"), (["a", 1, 1, 1], "sequence of numbers"),
                       (3.0, "sequence of numbers")):
        with pytest.raises(GraphError, match=match):
            g.rope(x, pos, freq_factors=bad)
    assert g.rope(x, pos, freq_factors=np.array([1, 2, 4, 8])).attrs["freq_factors"] == (1.0, 2.0, 4.0, 8.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["neox", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [None, 16])
def test_rope_freq_factors(rng, dtype, layout, rotary_dim):
    """Per-pair frequency divisors (Llama 3's rope_freqs; a linear scale as 1 / s) against the reference,
    the reference against the float64 angle pos * base^(-2i/rd) / f[i], and two factor tables in one graph
    (each rope reads its own)."""
    d, rd = 32, rotary_dim or 32
    f1 = tuple(float(v) for v in rng.uniform(0.5, 8.0, rd // 2))
    f2 = tuple(1.0 / 4.0 for _ in range(rd // 2))
    g = rlx.Graph()
    x = g.input("x", (1, 6, 2, d), dtype)
    pos = g.input("pos", (6,), "i32")
    kw = dict(base=500000.0, layout=layout, rotary_dim=rotary_dim)
    g.set_outputs(a=g.rope(x, pos, freq_factors=f1, **kw), b=g.rope(x, pos, freq_factors=f2, **kw),
                  c=g.rope(x, pos, **kw))
    ins = {"x": _rand(rng, (1, 6, 2, d), dtype), "pos": rng.integers(0, 9000, (6,)).astype(np.int32)}
    assert_matches_reference(g, ins)
    ref = rlx.run_reference(g, ins)
    xs = ins["x"].astype(np.float64)
    for name, factors in (("a", f1), ("b", f2)):
        inv = 500000.0 ** (-2.0 * np.arange(rd // 2) / rd) / np.asarray(factors)
        ang = ins["pos"].astype(np.float64)[:, None, None] * inv
        a, b = (xs[..., :rd // 2], xs[..., rd // 2:rd]) if layout == "neox" else (xs[..., 0:rd:2], xs[..., 1:rd:2])
        want = a * np.cos(ang) - b * np.sin(ang)
        got = ref[name][..., :rd // 2] if layout == "neox" else ref[name][..., 0:rd:2]
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=0, atol=2e-3 * np.abs(xs).max())


def test_fused_rmsnorm_rope_keeps_the_freq_factors(rng):
    """rmsnorm then rope with factors fuses into rmsnorm_rope carrying them (one kernel, the reference's
    result)."""
    factors = tuple(float(v) for v in rng.uniform(0.5, 4.0, 16))
    g = _rmsnorm_rope_graph((5, 3, 32), (5,), "f32", False, False, base=1e4, freq_factors=factors)
    ins = {"x": _rand(rng, (5, 3, 32), "f32"), "pos": rng.integers(0, 3000, (5,)).astype(np.int32)}
    exe, _ = assert_matches_reference(g, ins, {"w": _rand(rng, (32,), "f32")})
    assert _kernels(exe) == ["rmsnorm_rope_f32"]
    plain = _rmsnorm_rope_graph((5, 3, 32), (5,), "f32", False, False, base=1e4)
    w = {"w": _rand(rng, (32,), "f32")}
    assert not np.allclose(rlx.run_reference(g, ins, w)["y"], rlx.run_reference(plain, ins, w)["y"])


# ---------------------------------------------------------------- rmsnorm + RoPE (per-head q/k norms)


def _rmsnorm_rope_graph(x_shape, pos_shape, dtype, fused, add_one, **rope_kw):
    g = rlx.Graph()
    x = g.input("x", x_shape, dtype)
    pos = g.input("pos", pos_shape, "i32")
    w = g.param("w", x_shape[-1:], dtype)
    if fused:
        y = g.rmsnorm_rope(x, pos, w, eps=1e-6, add_one=add_one, **rope_kw)
    else:
        y = g.rope(g.rmsnorm(x, w, eps=1e-6, add_one=add_one), pos, **rope_kw)
    g.set_outputs(y=y)
    return g


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["neox", "interleaved"])
@pytest.mark.parametrize("x_shape, pos_shape, rotary_dim", [((1, 4, 64), (1,), None), ((3, 5, 2, 6), (3, 5), None),
                                                            ((7, 3, 34), (7,), 18), ((2, 9, 1, 256), (9,), None),
                                                            ((1, 1, 1, 2), (1,), None)])
@pytest.mark.parametrize("add_one", [False, True])
def test_rmsnorm_rope_fused(rng, dtype, layout, x_shape, pos_shape, rotary_dim, add_one):
    """The fused norm + RoPE against the float64 reference (odd head dims,
    partial rotary dims, both position forms, a large base), one kernel,
    and the reference against the plain chain's."""
    kw = dict(base=1e6, layout=layout, rotary_dim=rotary_dim)
    g = _rmsnorm_rope_graph(x_shape, pos_shape, dtype, True, add_one, **kw)
    ins = {"x": _rand(rng, x_shape, dtype, scale=4.0), "pos": rng.integers(0, 5000, pos_shape).astype(np.int32)}
    params = {"w": _rand(rng, x_shape[-1:], dtype)}
    exe, _ = assert_matches_reference(g, ins, params)
    assert _kernels(exe) == [f"rmsnorm_rope_{dtype}"]
    chain = rlx.run_reference(_rmsnorm_rope_graph(x_shape, pos_shape, dtype, False, add_one, **kw), ins, params)
    np.testing.assert_allclose(rlx.run_reference(g, ins, params)["y"].astype(np.float64),
                               chain["y"].astype(np.float64), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_rope_reads_a_packed_qkv_slice(rng, dtype):
    """q as a head slice of a packed [T, 3 * H * D] projection: read through
    strides, no copy."""
    t, h, d = 5, 3, 16
    g = rlx.Graph()
    qkv = g.input("qkv", (t, 3 * h * d), dtype)
    pos = g.input("pos", (t,), "i32")
    q = g.reshape(g.narrow(qkv, 1, h * d, h * d), (t, h, d))
    g.set_outputs(y=g.rmsnorm_rope(q, pos, g.param("w", (d,), dtype), add_one=True))
    exe, _ = assert_matches_reference(g, {"qkv": _rand(rng, (t, 3 * h * d), dtype),
                                          "pos": np.arange(t, dtype=np.int32) * 7},
                                      {"w": _rand(rng, (d,), dtype)})
    assert _kernels(exe) == [f"rmsnorm_rope_{dtype}"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("h, split", [(5, 4), (3, 1), (2, 0), (2, 2), (7, 3)])
@pytest.mark.parametrize("layout", ["neox", "interleaved"])
def test_rmsnorm_rope_with_a_second_weight(rng, dtype, h, split, layout):
    """Heads from weight_b_from normed by the second weight (a query's and a
    key's heads in one dispatch), read from a slice of a wider projection,
    odd head dims and partial rotary dims; the edges 0 (every head takes
    weight_b) and H (none does)."""
    t, d = 3, 18
    g = rlx.Graph()
    packed = g.input("p", (t, (h + 1) * d), dtype)
    pos = g.input("pos", (t,), "i32")
    x = g.reshape(g.narrow(packed, 1, d, h * d), (t, h, d))
    g.set_outputs(y=g.rmsnorm_rope(x, pos, g.param("wa", (d,), dtype), add_one=True, base=1e6, layout=layout,
                                   rotary_dim=10, weight_b=g.param("wb", (d,), dtype), weight_b_from=split))
    exe, _ = assert_matches_reference(g, {"p": _rand(rng, (t, (h + 1) * d), dtype, scale=4.0),
                                          "pos": rng.integers(0, 5000, (t,)).astype(np.int32)},
                                      {"wa": _rand(rng, (d,), dtype), "wb": _rand(rng, (d,), dtype)})
    assert _kernels(exe) == [f"rmsnorm_rope_{dtype}"]


def test_rmsnorm_rope_checks_its_second_weight():
    g = rlx.Graph()
    x, pos = g.input("x", (2, 3, 8)), g.input("pos", (2,), "i32")
    w = g.param("w", (8,))
    with pytest.raises(ShapeError, match="weight_b_from"):
        g.rmsnorm_rope(x, pos, w, weight_b=g.param("wb", (8,)), weight_b_from=4)
    with pytest.raises(ShapeError, match="weight_b shape"):
        g.rmsnorm_rope(x, pos, w, weight_b=g.param("wb4", (4,)), weight_b_from=1)
    with pytest.raises(GraphError, match="second weight"):
        g.op("rmsnorm_rope", (x, pos, w), weight_b_from=1)


def test_rmsnorm_rope_checks_its_weight():
    g = rlx.Graph()
    x, pos = g.input("x", (2, 3, 8)), g.input("pos", (2,), "i32")
    with pytest.raises(ShapeError, match="weight shape"):
        g.rmsnorm_rope(x, pos, g.param("w", (4,)))
    with pytest.raises(DTypeError):
        g.rmsnorm_rope(x, pos, g.param("w16", (8,), "f16"))
    with pytest.raises(GraphError, match="layout"):
        g.rmsnorm_rope(x, pos, g.param("w8", (8,)), layout="sideways")
