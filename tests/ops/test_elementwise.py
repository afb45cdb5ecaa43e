"""Elementwise ops against rlx/reference/core.py on the device under test:
binary add, sub, mul, div, maximum, minimum (same shape, broadcast, merged
and split dimensions, strided views) and unary gelu, silu, relu, tanh, exp,
neg, sqrt, rsqrt, scale_shift; f32 and f16, odd sizes. Then their NaN and
infinity semantics (tests/ops/helpers.py) and the accuracy of SiLU, GELU
and exp in their tails. Tolerances: tests/conftest.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_matches_reference

import rlx

from .helpers import COLS, DTYPES, GELU_X, INF, NAN, SILU_X
from .helpers import assert_gelu_accurate as _assert_gelu_accurate
from .helpers import assert_silu_accurate as _assert_silu_accurate
from .helpers import check_nan_semantics as _check
from .helpers import np_dtype as _np_dtype
from .helpers import rand as _rand
from .helpers import to_torch as _t

SIZES = [1, 7, 33, 1023]          # the binary and gelu/silu sizes
WIDE_SIZES = [1, 3, 17, 1000, 4097]   # the other unary ops' sizes


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES + [100_003])
@pytest.mark.parametrize("op", ["add", "mul"])
def test_binary_same_shape(rng, op, n, dtype):
    g = rlx.Graph()
    a, b = g.input("a", (n,), dtype), g.input("b", (n,), dtype)
    g.set_outputs(y=getattr(g, op)(a, b))
    assert_matches_reference(g, {"a": _rand(rng, n, dtype), "b": _rand(rng, n, dtype)})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((7, 33), (33,)), ((3, 1, 5), (1, 4, 5)), ((1,), (17, 3)), ((2, 3, 4, 5), (4, 1))])
def test_binary_broadcast(rng, shapes, dtype):
    g = rlx.Graph()
    a, b = g.input("a", shapes[0], dtype), g.input("b", shapes[1], dtype)
    g.set_outputs(sum=g.add(a, b), prod=g.mul(a, b))
    assert_matches_reference(g, {"a": _rand(rng, shapes[0], dtype), "b": _rand(rng, shapes[1], dtype)})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((17,), (17,)), ((3, 1000), (1000,)), ((4, 1, 5), (1, 3, 5)), ((1,), (4097,))])
@pytest.mark.parametrize("op", ["sub", "div", "maximum", "minimum"])
def test_binary(rng, op, shapes, dtype):
    g = rlx.Graph()
    a, b = g.input("a", shapes[0], dtype), g.input("b", shapes[1], dtype)
    g.set_outputs(y=getattr(g, op)(a, b))
    bv = _rand(rng, shapes[1], dtype)
    if op == "div":
        bv = (np.sign(bv) * (np.abs(bv) + 0.5)).astype(bv.dtype)
    assert_matches_reference(g, {"a": _rand(rng, shapes[0], dtype), "b": bv})


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("shapes", [((1, 9, 384), (9, 384)), ((9, 384), (1, 384)), ((2, 3, 1, 700), (3, 1, 700)),
                                    ((5, 1, 2049), (1, 7, 2049)), ((4097,), (1,))])
def test_binary_broadcast_merged_and_split(rng, shapes, dtype):
    g = rlx.Graph()
    a, b = g.input("a", shapes[0], dtype), g.input("b", shapes[1], dtype)
    g.set_outputs(sum=g.add(a, b), diff=g.sub(b, a), prod=g.mul(a, b))
    assert_matches_reference(g, {"a": _rand(rng, shapes[0], dtype), "b": _rand(rng, shapes[1], dtype)})


@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_reads_strided_views_without_copy(rng, dtype):
    g = rlx.Graph()
    a = g.input("a", (6, 9), dtype)
    t = g.transpose(a, (1, 0))                       # (9, 6) strided
    n = g.narrow(g.input("b", (9, 10), dtype), 1, 2, 6)  # (9, 6) offset + strided
    g.set_outputs(y=g.add(t, n))
    exe, _ = assert_matches_reference(g, {"a": _rand(rng, (6, 9), dtype), "b": _rand(rng, (9, 10), dtype)})
    assert exe.stats.thunks == 1   # views cost no thunk


def test_constants(rng):
    g = rlx.Graph()
    x = g.input("x", (2, 3))
    c = g.constant(np.arange(3, dtype=np.float32))
    g.set_outputs(y=g.add(x, c))
    assert_matches_reference(g, {"x": _rand(rng, (2, 3), "f32")})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", ["gelu", "gelu_tanh", "silu"])
def test_unary_gelu_silu(rng, kind, n, dtype):
    g = rlx.Graph()
    x = g.input("x", (n,), dtype)
    y = g.gelu(x, approximate="tanh") if kind == "gelu_tanh" else getattr(g, kind)(x)
    g.set_outputs(y=y)
    assert_matches_reference(g, {"x": _rand(rng, n, dtype, 3.0)})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", WIDE_SIZES)
@pytest.mark.parametrize("op", ["relu", "tanh", "exp", "log", "neg", "sqrt", "rsqrt", "scale_shift"])
def test_unary(rng, op, n, dtype):
    g = rlx.Graph()
    x = g.input("x", (n,), dtype)
    y = g.scale_shift(x, 1.5, -0.25) if op == "scale_shift" else getattr(g, op)(x)
    g.set_outputs(y=y)
    positive = op in ("sqrt", "rsqrt", "log")
    data = _rand(rng, n, dtype, 2.0)
    if positive:
        data = (np.abs(data) + 0.1).astype(data.dtype)
    assert_matches_reference(g, {"x": data})


# ---------------------------------------------------------------- NaN and infinities


def _special(rng, n, dtype):
    x = (rng.standard_normal(n) * 4).astype(_np_dtype(dtype))
    x[::5] = np.nan
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", COLS)
@pytest.mark.parametrize("op", ["relu", "silu", "gelu", "gelu_tanh", "tanh", "exp"])
def test_unary_propagates_nan(rng, op, n, dtype):
    g = rlx.Graph()
    x = g.input("x", (n,), dtype)
    y = g.gelu(x, "tanh") if op == "gelu_tanh" else getattr(g, op)(x)
    g.set_outputs(y=y)
    data = _special(rng, n, dtype)
    fn = {"relu": torch.relu, "silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu,
          "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"), "tanh": torch.tanh,
          "exp": torch.exp}[op]
    got = _check(g, {"x": data}, fn(_t(data)).numpy(), dtype)
    assert np.isnan(got[np.isnan(data)]).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["relu", "silu", "gelu", "gelu_tanh", "tanh"])
def test_unary_at_infinities(op, dtype):
    # Against the reference only: torch's gelu gives NaN at +inf, the limit is inf.
    g = rlx.Graph()
    x = g.input("x", (4,), dtype)
    g.set_outputs(y=g.gelu(x, "tanh") if op == "gelu_tanh" else getattr(g, op)(x))
    _check(g, {"x": np.array([INF, -INF, NAN, 0.5], _np_dtype(dtype))}, None, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_at_its_edges(dtype):
    """log 0 = -inf, log(x < 0) = NaN, log NaN = NaN, log inf = inf (the reference's numpy rules)."""
    g = rlx.Graph()
    x = g.input("x", (6,), dtype)
    g.set_outputs(y=g.log(x))
    got = _check(g, {"x": np.array([0.0, -1.0, NAN, INF, 1.0, 1e-4], _np_dtype(dtype))}, None, dtype)
    assert got[0] == -INF and np.isnan(got[1]) and np.isnan(got[2]) and got[3] == INF and got[4] == 0


def test_log_is_accurate_over_every_float_magnitude(rng):
    """log's relative error against float64 over normal floats from 1e-38 to
    3e38, subnormals, -0 and the values next to 1 where log is small (the
    CPU's vectorized form, shaders/prelude/cpu.h rlx_cpu_log, measured
    1.7e-7 on 2026-12-03; libm and the GPUs' logf are within it too)."""
    near_one = 1.0 + rng.uniform(-0.3, 0.42, 4093)
    values = np.concatenate([np.exp(rng.uniform(-87.3, 88.7, 65536)), near_one, rng.uniform(0, 1e-38, 512),
                             [1.4e-45, 1.1754942e-38, 1.1754944e-38, 3.4028235e38, -0.0, 1.0, 2.0]]).astype(np.float32)
    g = rlx.Graph()
    g.set_outputs(y=g.log(g.input("x", values.shape)))
    got = rlx.compile(g).run(x=values)["y"].astype(np.float64)
    with np.errstate(divide="ignore"):
        want = np.log(values.astype(np.float64))
    assert got[-3] == -INF and got[-2] == 0.0
    finite = np.isfinite(want) & (want != 0)
    rel = np.abs(got[finite] - want[finite]) / np.abs(want[finite])
    assert rel.max() <= 4e-7, (rel.max(), values[finite][rel.argmax()])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((7,), (7,)), ((3, 33), (33,)), ((1,), (257,))])
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_propagate_nan_from_either_side(rng, op, shapes, dtype):
    g = rlx.Graph()
    a, b = g.input("a", shapes[0], dtype), g.input("b", shapes[1], dtype)
    g.set_outputs(y=getattr(g, op)(a, b))
    av = (rng.standard_normal(shapes[0])).astype(_np_dtype(dtype))
    bv = (rng.standard_normal(shapes[1])).astype(_np_dtype(dtype))
    av.reshape(-1)[::3] = np.nan
    bv.reshape(-1)[1::4] = np.nan
    bv.reshape(-1)[2::5] = INF
    want = getattr(torch, op)(_t(av), _t(bv)).numpy()
    for a_, b_ in ((av, bv), (bv, av)) if shapes[0] == shapes[1] else ((av, bv),):
        _check(g, {"a": a_, "b": b_}, getattr(torch, op)(_t(a_), _t(b_)).numpy(), dtype)
    assert np.isnan(want).sum() > 0


def test_maximum_scalar_cases():
    g = rlx.Graph()
    a, b = g.input("a", (4,)), g.input("b", (4,))
    g.set_outputs(mx=g.maximum(a, b), mn=g.minimum(a, b))
    out = rlx.compile(g).run(a=np.array([NAN, 1, NAN, -INF], np.float32), b=np.array([1, NAN, NAN, NAN], np.float32))
    assert np.isnan(out["mx"]).all() and np.isnan(out["mn"]).all()


# ---------------------------------------------------------------- accuracy


def test_silu_relative_error_unary():
    g = rlx.Graph()
    x = g.input("x", SILU_X.shape)
    g.set_outputs(y=g.silu(x))
    _assert_silu_accurate(rlx.compile(g).run(x=SILU_X)["y"], SILU_X)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_overflows_to_inf_and_keeps_its_top_range(dtype):
    """exp is finite up to ln(FLT_MAX) (88.72) and +inf past it, as expf; the
    CPU polynomial once clamped at 88 and gave 1.65e38 for exp(inf)."""
    v = np.array([88.5, 88.72, 89.0, np.inf, -np.inf, NAN, -86.9, -90.0, 0.0, 11.0, 12.0], np.float32)
    if dtype == "f16":
        v = v[np.abs(v) < 20].astype(np.float16)   # exp(12) overflows f16: the last one is +inf
    g = rlx.Graph()
    g.set_outputs(y=g.exp(g.input("x", v.shape, dtype)))
    got = rlx.compile(g).run(x=v)["y"].astype(np.float64)
    with np.errstate(over="ignore"):
        want = np.exp(v.astype(np.float64)).astype(v.dtype).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    # below -87 the CPU gives exactly 0 rather than a subnormal (documented in prelude/cpu.h)
    np.testing.assert_allclose(got[finite], want[finite], rtol=5e-6 if dtype == "f32" else 1e-3, atol=2e-38)


def test_gelu_relative_error_unary_and_reference():
    g = rlx.Graph()
    g.set_outputs(y=g.gelu(g.input("x", GELU_X.shape)))
    _assert_gelu_accurate(rlx.compile(g).run(x=GELU_X)["y"], GELU_X)
    _assert_gelu_accurate(rlx.run_reference(g, {"x": GELU_X}, {})["y"], GELU_X)


# ---------------------------------------------------------------- fused chains (fused_elementwise)
# rlx/opt/fusion.py turns trees of elementwise ops into one ew_chain pass
# whose steps compute in f32 registers. The oracle is the same graph built
# in f32 on the same (dtype-rounded) inputs, rounded to the dtype at the end:
# what the fused kernel computes. The unfused f16 reference rounds every
# intermediate to f16, which a chain of several ops moves past TOL.


def _chain_check(rng, build, shapes, dtype, passes=1, positive=()):
    """Compile build(g, *inputs) in dtype, check it runs in ``passes``
    ew_chain dispatches and matches the f32 graph on the same inputs."""
    def graph(dt):
        g = rlx.Graph()
        ins = [g.input(f"x{i}", s, dt) for i, s in enumerate(shapes)]
        g.set_outputs(y=build(g, *ins))
        return g

    feed = {}
    for i, s in enumerate(shapes):
        v = _rand(rng, s, dtype)
        feed[f"x{i}"] = np.abs(v) + v.dtype.type(0.25) if i in positive else v
    exe = rlx.compile(graph(dtype))   # the suite's device (conftest.py)
    got = exe.run(feed)["y"]
    want = rlx.run_reference(graph("f32"), {k: v.astype(np.float32) for k, v in feed.items()})["y"]
    assert [t.kernel for t in exe.thunks if t.kernel != f"copy_{dtype}_{dtype}"] == [f"ew_chain_{dtype}"] * passes
    np.testing.assert_allclose(got.astype(np.float64), want.astype(_np_dtype(dtype)).astype(np.float64),
                               **TOL_CHAIN[dtype])
    return exe


TOL_CHAIN = {"f32": dict(rtol=2e-5, atol=2e-5), "f16": dict(rtol=4e-3, atol=4e-3)}
CHAIN_SHAPES = [((7,), (7,)), ((3, 5, 33), (5, 1)), ((2, 1, 1023), (4, 1)), ((1,), (17, 3)), ((4097,), (4097,))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", CHAIN_SHAPES)
def test_chain_of_binary_and_unary_ops_is_one_pass(rng, shapes, dtype):
    def build(g, a, b):
        t = g.gelu(g.add(g.mul(a, b), b), approximate="tanh")
        return g.scale_shift(g.maximum(t, g.neg(b)), scale=0.5, shift=-1.0)
    _chain_check(rng, build, shapes, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["add", "mul", "sub", "div", "maximum", "minimum", "gelu", "gelu_tanh", "silu", "relu",
                                "tanh", "exp", "log", "neg", "sqrt", "rsqrt", "scale_shift"])
def test_every_op_inside_a_chain(rng, op, dtype):
    """Each op code of the kernel (its CPU block loops and GPU switch), as a
    chain's middle step over odd shapes."""
    shapes = [(5, 67), (67,)]
    positive = (0, 1) if op in ("log", "sqrt", "rsqrt", "div") else ()

    def build(g, a, b):
        if op in ("add", "mul", "sub", "div", "maximum", "minimum"):
            mid = getattr(g, op)(a, b)
        elif op == "gelu_tanh":
            mid = g.gelu(a, approximate="tanh")
        elif op == "scale_shift":
            mid = g.scale_shift(a, scale=-3.0, shift=0.25)
        else:
            mid = getattr(g, op)(a)
        return g.add(g.mul(mid, b), b)
    _chain_check(rng, build, shapes, dtype, positive=positive)


@pytest.mark.parametrize("dtype", DTYPES)
def test_chain_reads_strided_views_and_a_value_twice(rng, dtype):
    """re^2 + im^2 of a transposed and a narrowed view: one pass, and the
    value both operands of a mul read takes one input slot."""
    def build(g, a, b):
        t = g.transpose(a, (1, 0))                  # (9, 6), strided
        n = g.narrow(b, 1, 2, 6)                     # (9, 6), offset and strided
        return g.add(g.mul(t, t), g.mul(n, n))
    exe = _chain_check(rng, build, [(6, 9), (9, 10)], dtype)
    assert exe.stats.thunks == 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_chain_reads_long_strided_runs_across_blocks(rng, dtype):
    """A transposed [4, 300, 77] view and a narrowed one, big enough for
    many blocks of the CPU's chain and several groups, so that blocks and
    chunks start mid-row and runs wrap across two dimensions."""
    def build(g, a, b):
        t = g.transpose(a, (0, 2, 1))                # (4, 77, 300), strided
        n = g.narrow(b, 2, 3, 300)                    # (4, 77, 300), offset and strided rows
        return g.add(g.mul(t, t), g.mul(n, n))
    exe = _chain_check(rng, build, [(4, 300, 77), (4, 77, 305)], dtype)
    assert exe.stats.thunks == 1


def test_power_of_a_spectrum_reads_its_parts_in_place(rng):
    """re^2 + im^2 of a c64 [3, 301, 201] (log-mel's power): the real and
    imaginary views, stride 2, read by one chain against numpy."""
    z = (rng.standard_normal((3, 301, 201)) + 1j * rng.standard_normal((3, 301, 201))).astype(np.complex64)
    g = rlx.Graph()
    x = g.input("z", z.shape, "c64")
    re, im = g.real(x), g.imag(x)
    g.set_outputs(y=g.add(g.mul(re, re), g.mul(im, im)))
    exe = rlx.compile(g)
    assert [t.kernel for t in exe.thunks if t.kernel] == ["ew_chain_f32"]
    np.testing.assert_allclose(exe.run(z=z)["y"], np.abs(z.astype(np.complex128)) ** 2, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_chain_splits_past_four_inputs_and_eight_steps(rng, dtype):
    def wide(g, *xs):               # six distinct inputs: two passes
        t = xs[0]
        for x in xs[1:]:
            t = g.add(g.mul(t, x), x)
        return t

    def long(g, a):                 # eleven unary steps: two passes
        t = a
        for i in range(11):
            t = g.scale_shift(g.tanh(t) if i % 2 else t, scale=1.1, shift=0.01 * i)
        return t
    _chain_check(rng, wide, [(3, 17)] * 6, dtype, passes=2)
    _chain_check(rng, long, [(33,)], dtype, passes=2)


def test_chain_leaves_values_other_ops_read_and_outputs():
    """An intermediate read by a second op, or a graph output, is computed
    once and stays a value: the chain reads it as an input."""
    g = rlx.Graph()
    a, b = g.input("a", (4, 9)), g.input("b", (9,))
    shared = g.exp(g.add(a, b))           # read by two chains
    out1 = g.mul(shared, b)
    out2 = g.tanh(g.sub(shared, a))
    g.set_outputs(shared=shared, y1=out1, y2=out2)
    rng = np.random.default_rng(3)
    exe, _ = assert_matches_reference(g, {"a": _rand(rng, (4, 9), "f32"), "b": _rand(rng, (9,), "f32")})
    chains = [t for t in exe.thunks if t.kernel == "ew_chain_f32"]
    singles = [t for t in exe.thunks if t.kernel in ("binary_f32", "unary_f32")]
    assert len(chains) == 2 and len(singles) == 1   # exp(add) and tanh(sub) fuse; mul alone stays binary


def test_chain_propagates_nan_and_infinity():
    g = rlx.Graph()
    a, b = g.input("a", (6,)), g.input("b", (6,))
    g.set_outputs(y=g.scale_shift(g.maximum(g.exp(a), b), scale=2.0, shift=1.0))
    av = np.array([NAN, 0.0, 100.0, -INF, 1.0, 0.0], np.float32)
    bv = np.array([0.0, NAN, 0.0, 0.0, INF, -INF], np.float32)
    exe = rlx.compile(g)
    assert [t.kernel for t in exe.thunks] == ["ew_chain_f32"]
    np.testing.assert_array_equal(exe.run(a=av, b=bv)["y"], rlx.run_reference(g, {"a": av, "b": bv})["y"])


def test_fused_elementwise_op_checks_its_steps():
    g = rlx.Graph()
    a = g.input("a", (3,))
    for steps, match in [((), "steps"), ((("pow", 0, -1, 1.0, 0.0),), "unknown op"),
                         ((("add", 0, 1, 1.0, 0.0),), "earlier slot"), ((("exp", 0, 0, 1.0, 0.0),), "one operand"),
                         ((("exp", 0, -1, 1.0, 0.0),) * 9, "steps")]:
        with pytest.raises(rlx.GraphError, match=match):
            g.op("fused_elementwise", [a], steps=steps)
    with pytest.raises(rlx.GraphError, match="1 to 4 inputs"):
        g.op("fused_elementwise", [a] * 5, steps=(("add", 0, 1, 1.0, 0.0),))
    y = g.op("fused_elementwise", [a, g.input("b", (2, 1))], steps=(("add", 0, 1, 1.0, 0.0), ("exp", 2, -1, 1, 0)))
    assert tuple(y.shape) == (2, 3)


def test_chain_step_names_are_the_kernel_op_codes():
    """The IR's step names (rlx/ir/ops/elementwise.py) are exactly the ops
    the lowering has kernel codes for, so no valid step lacks one."""
    from rlx.ir.ops.elementwise import CHAIN_BINARY, CHAIN_UNARY
    from rlx.lowering.elementwise import BINARY_OPS, UNARY_OPS

    assert set(CHAIN_BINARY) == set(BINARY_OPS) and set(CHAIN_UNARY) == set(UNARY_OPS)
