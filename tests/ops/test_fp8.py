"""FP8 (shaders/fp8.h, rlx/ir/ops/fp8.py, rlx/fp8.py): casts bit for bit
against ml_dtypes, scaled values and scaled_linear against the float64
product of the dequantized operands, at every granularity, odd shapes, f32
and f16. Runs on --rlx-device (and --rlx-group-size) like the other op suites.

Tolerances. Casts and scaled_dequantize in f32 are exact (an FP8 code times
an f32 scale is one f32 rounding, the reference's too). scaled_linear,
against float64 with the same inputs: |err| <= 1e-5 * sum_k |x| |w * s| + 1e-6
in f32 (f32 accumulation over k < 300 terms in blocks), then through the
activation (Lipschitz <= 1.13); f16 outputs (and the f16 gemm path's f16
dequantized weights) add 4e-3 of that sum and of |y|.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import rlx
from rlx import fp8
from rlx.errors import DTypeError, ShapeError
from rlx.reference import run_reference
from rlx.reference.fp8 import scaled_values

from .helpers import kernels_of

FORMATS = {"f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2}


def _cast(x: np.ndarray, to: str, saturate: bool = True) -> np.ndarray:
    g = rlx.Graph()
    g.set_outputs(y=g.cast(g.input("x", x.shape, x.dtype), to, saturate=saturate))
    return rlx.compile(g).run(x=x)["y"]


def _oracle(x: np.ndarray, fmt: str, saturate: bool) -> np.ndarray:
    x = x.astype(np.float32)
    if saturate:
        top = float(ml_dtypes.finfo(FORMATS[fmt]).max)
        x = np.where(np.isnan(x), x, np.clip(x, -top, top))
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(FORMATS[fmt]).view(np.uint8)


def _hard_f32_values(fmt: str) -> np.ndarray:
    """Every FP8 value, the midpoints between neighbours (ties: round to
    even decides) and one f32 ulp either side, beyond the largest finite,
    below the smallest subnormal, infinities, NaNs, signed zeros, and
    random values over the whole f32 exponent range."""
    codes = np.arange(256, dtype=np.uint8).view(FORMATS[fmt]).astype(np.float64)
    finite = np.unique(codes[np.isfinite(codes)])
    mids = (finite[1:] + finite[:-1]) / 2
    top = finite.max()
    edges = np.array([top * 1.0625, top * 1.07, top * 1.2, top * 4, 1e30, finite[finite > 0].min() / 2,
                      finite[finite > 0].min() / 3, 1e-40, 0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan])
    base = np.concatenate([finite, mids, edges, -edges]).astype(np.float32)
    ulps = np.concatenate([np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(-np.inf))])
    rng = np.random.default_rng(7)
    wide = (rng.standard_normal(4096) * np.exp2(rng.integers(-30, 30, 4096))).astype(np.float32)
    return np.concatenate([base, ulps, wide])


@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_cast_to_fp8_is_bit_exact_with_ml_dtypes(fmt, saturate):
    x = _hard_f32_values(fmt)
    np.testing.assert_array_equal(_cast(x, fmt, saturate).view(np.uint8), _oracle(x, fmt, saturate))
    every_half = np.arange(1 << 16, dtype=np.uint16).view(np.float16)   # f16 in: every bit pattern
    np.testing.assert_array_equal(_cast(every_half, fmt, saturate).view(np.uint8), _oracle(every_half, fmt, saturate))


@pytest.mark.parametrize("to", ["float32", "float16"])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_cast_from_fp8_is_exact(fmt, to):
    codes = np.arange(256, dtype=np.uint8).view(FORMATS[fmt]).reshape(16, 16)
    got, want = _cast(codes, to), codes.astype(to)
    assert got.dtype == np.dtype(to)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32 if to == "float32" else np.uint16),
                                  want[~nan].view(np.uint32 if to == "float32" else np.uint16))


def test_cast_round_trip_odd_shape_and_errors(rng):
    x = (rng.standard_normal((3, 7, 13)) * 10).astype(np.float32)
    q = _cast(x, "f8e4m3")
    assert q.dtype == ml_dtypes.float8_e4m3fn and q.shape == x.shape
    np.testing.assert_array_equal(_cast(q, "float32"), q.astype(np.float32))
    g = rlx.Graph()
    v = g.input("v", (4,), "f8e4m3")
    with pytest.raises(DTypeError, match="cast"):
        g.cast(v, "f8e5m2")
    with pytest.raises(DTypeError, match="f8e4m3"):
        g.relu(v)   # no op but cast and the scaled ops computes on FP8
    with pytest.raises(DTypeError, match="cast"):
        g.cast(g.input("i", (4,), "int32"), "f8e4m3")


GRANULARITIES = [("tensor", None), ("channel", None), ("block", (16, 32)), ("block", (7, 5))]


def _weight(rng, n, k, fmt, granularity, block):
    w = (rng.standard_normal((n, k)) * rng.uniform(0.1, 3, (n, 1))).astype(np.float32)
    return fp8.quantize_array(w, fmt, granularity, block)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("granularity, block", GRANULARITIES)
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_scaled_dequantize(rng, fmt, granularity, block, dtype):
    codes, scale = _weight(rng, 37, 53, fmt, granularity, block)
    g = rlx.Graph()
    g.set_outputs(y=g.scaled_dequantize(g.param("w", codes.shape, fmt), g.param("s", scale.shape), dtype, block))
    got = rlx.compile(g, params={"w": codes, "s": scale}).run()["y"]
    want = scaled_values(codes, scale, (1, 53) if granularity == "channel" else
                         (37, 53) if granularity == "tensor" else block)
    np.testing.assert_array_equal(got, want.astype(np.float32).astype(dtype))


@pytest.mark.parametrize("granularity, block", GRANULARITIES)
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_dequantize_array_is_the_values_the_codes_stand_for(rng, fmt, granularity, block):
    w = (rng.standard_normal((37, 53)) * rng.uniform(0.1, 3, (37, 1))).astype(np.float32)
    codes, scale = fp8.quantize_array(w, fmt, granularity, block)
    got = fp8.dequantize_array(codes, scale, block)
    want = scaled_values(codes, scale, (1, 53) if granularity == "channel" else
                         (37, 53) if granularity == "tensor" else block)
    np.testing.assert_array_equal(got, want.astype(np.float32))
    # Round to nearest: within half a step of the format's mantissa (3 bits
    # for e4m3, 2 for e5m2) of the value, wherever the code is normal.
    half_step = 2.0 ** -(ml_dtypes.finfo(FORMATS[fmt]).nmant + 1)
    normal = np.abs(codes.astype(np.float32)) >= ml_dtypes.finfo(FORMATS[fmt]).smallest_normal
    assert normal.mean() > 0.9
    assert (np.abs(got - w) <= half_step * np.abs(w) * (1 + 1e-5))[normal].all()
    if granularity == "block":
        with pytest.raises(rlx.RlxError, match="block"):
            fp8.dequantize_array(codes, scale)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("granularity, block", GRANULARITIES)
@pytest.mark.parametrize("m", [1, 3, 8, 37])
def test_scaled_linear_matches_the_float64_product(rng, m, granularity, block, dtype):
    n, k, fmt = 45, 283, "f8e4m3" if m != 3 else "f8e5m2"
    codes, scale = _weight(rng, n, k, fmt, granularity, block)
    g = rlx.Graph()
    x = g.input("x", (m, k), dtype)
    y = g.scaled_linear(x, g.param("w", (n, k), fmt), g.param("s", scale.shape), g.param("b", (n,), dtype),
                        activation="gelu" if m % 2 else None, block=block)
    g.set_outputs(y=y)
    params = {"w": codes, "s": scale, "b": rng.standard_normal(n).astype(dtype)}
    xv = rng.standard_normal((m, k)).astype(dtype)
    exe = rlx.compile(g, params=params)
    assert ("gemv_f8_" + ("f32" if dtype == "float32" else "f16") in kernels_of(exe)) == (m <= 8)
    got = exe.run(x=xv)["y"].astype(np.float64)
    want = run_reference(g, {"x": xv}, params)["y"].astype(np.float64)
    w = np.abs(scaled_values(codes, scale, y.attrs["block"]))
    size = np.abs(xv.astype(np.float64)) @ w.T
    slack = 1e-5 if dtype == "float32" else 4e-3
    bound = 1.2 * (slack * size + 1e-6) + slack * np.abs(want)
    assert (np.abs(got - want) <= bound).all(), np.max(np.abs(got - want) - bound)


# Rows of whole 16-code pieces (k a multiple of 16): GPUs take a piece a
# lane where each piece sits in one scale block (block columns a multiple of
# 16, or one block a row), else a code a lane; both against float64.
WHOLE_PIECE_SCALES = [("tensor", None), ("channel", None), ("block", (16, 32)), ("block", (3, 48)),
                      ("block", (5, 24))]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("granularity, block", WHOLE_PIECE_SCALES)
@pytest.mark.parametrize("m, k", [(1, 208), (5, 96), (8, 1024)])
def test_scaled_linear_on_whole_pieces_matches_the_float64_product(rng, m, k, granularity, block, dtype):
    n, fmt = 37, "f8e5m2" if m == 5 else "f8e4m3"
    codes, scale = _weight(rng, n, k, fmt, granularity, block)
    g = rlx.Graph()
    y = g.scaled_linear(g.input("x", (m, k), dtype), g.param("w", (n, k), fmt), g.param("s", scale.shape),
                        g.param("b", (n,), dtype), activation="silu" if m == 8 else None, block=block)
    g.set_outputs(y=y)
    params = {"w": codes, "s": scale, "b": rng.standard_normal(n).astype(dtype)}
    xv = rng.standard_normal((m, k)).astype(dtype)
    exe = rlx.compile(g, params=params)
    assert "gemv_f8_" + ("f32" if dtype == "float32" else "f16") in kernels_of(exe)
    got = exe.run(x=xv)["y"].astype(np.float64)
    want = run_reference(g, {"x": xv}, params)["y"].astype(np.float64)
    size = np.abs(xv.astype(np.float64)) @ np.abs(scaled_values(codes, scale, y.attrs["block"])).T
    slack = 1e-5 if dtype == "float32" else 4e-3
    bound = 1.2 * (slack * size + 1e-6) + slack * np.abs(want)
    assert (np.abs(got - want) <= bound).all(), np.max(np.abs(got - want) - bound)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_gemv_decodes_every_code_in_whole_pieces(fmt, dtype):
    """test_gemv_decodes_every_code with k = 32 (two pieces a row): x picks
    a column in the first piece and the last column of the second, so row
    j of y is code j's value times them (NaN where the code is)."""
    codes = np.repeat(np.arange(256, dtype=np.uint8)[:, None], 32, axis=1).view(FORMATS[fmt])
    x = np.zeros((2, 32), dtype)
    x[0, 5], x[1, 31] = 1.0, -2.0
    g = rlx.Graph()
    g.set_outputs(y=g.scaled_linear(g.input("x", x.shape, dtype), g.param("w", codes.shape, fmt),
                                    g.param("s", (1,))))
    got = rlx.compile(g, params={"w": codes, "s": np.ones(1, np.float32)}).run(x=x)["y"]
    with np.errstate(invalid="ignore", over="ignore"):
        want = (x.astype(np.float64) @ codes.astype(np.float64).T).astype(dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_cast_and_gemv_read_a_narrowed_input_where_it_starts(rng, fmt, dtype):
    """x a narrow of a larger value, starting 2 rows in: the FP8 cast and
    the FP8 GEMV take no element offset in their params, so the lowering
    hands them x at its first byte (the differential fuzzer's seed 2475:
    both read the rows before the narrow instead)."""
    g = rlx.Graph()
    big = g.input("x", (9, 64), dtype)
    x = g.narrow(big, 0, 2, 5)
    codes, scale = _weight(rng, 7, 64, fmt, "channel", None)
    g.set_outputs(c=g.cast(x, fmt, saturate=True), back=g.cast(g.cast(x, fmt), dtype),
                  y=g.scaled_linear(x, g.param("w", (7, 64), fmt), g.param("s", scale.shape)))
    xv = (rng.standard_normal((9, 64)) * 40).astype(dtype)
    exe = rlx.compile(g, params={"w": codes, "s": scale})
    assert "gemv_f8_" + ("f32" if dtype == "float32" else "f16") in kernels_of(exe)
    got = exe.run(x=xv)
    want = run_reference(g, {"x": xv}, {"w": codes, "s": scale})
    np.testing.assert_array_equal(got["c"].view(np.uint8), _oracle(xv[2:7], fmt, True))
    np.testing.assert_array_equal(got["back"], want["back"])
    np.testing.assert_allclose(got["y"].astype(np.float64), want["y"].astype(np.float64),
                               rtol=1e-5 if dtype == "float32" else 4e-3, atol=1e-3 if dtype == "float32" else 0.5)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_gemv_decodes_every_code(fmt):
    """Every code through the GEMV's own decoder (the CPU's is a vector one,
    not rlx_f8_decode): row j of w holds code j; x picks one column, so y is
    code j's value (NaN where the code is NaN, and where 0 * inf meets an
    infinity), against the float64 product."""
    codes = np.repeat(np.arange(256, dtype=np.uint8)[:, None], 19, axis=1).view(FORMATS[fmt])
    x = np.zeros((2, 19), np.float32)
    x[0, 3], x[1, 17] = 1.0, -2.0   # a column inside the 8-wide steps and one in the tail
    g = rlx.Graph()
    g.set_outputs(y=g.scaled_linear(g.input("x", x.shape), g.param("w", codes.shape, fmt), g.param("s", (1,))))
    got = rlx.compile(g, params={"w": codes, "s": np.ones(1, np.float32)}).run(x=x)["y"]
    with np.errstate(invalid="ignore"):
        want = x.astype(np.float64) @ codes.astype(np.float64).T
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_fp8_x_fp8_product_accumulates_in_f32(rng):
    m, n, k = 5, 33, 96
    wc, ws = _weight(rng, n, k, "f8e4m3", "channel", None)
    xc, xs = fp8.quantize_array(rng.standard_normal((m, k)), "f8e4m3", "channel")
    g = rlx.Graph()
    y = g.scaled_linear(g.input("x", (m, k), "f8e4m3"), g.param("w", (n, k), "f8e4m3"), g.param("s", (n,)),
                        x_scale=g.param("xs", (m,)))
    g.set_outputs(y=y)
    params = {"w": wc, "s": ws, "xs": xs}
    got = rlx.compile(g, params=params).run(x=xc)["y"].astype(np.float64)
    want = scaled_values(xc, xs, (1, k)) @ scaled_values(wc, ws, (1, k)).T
    size = np.abs(scaled_values(xc, xs, (1, k))) @ np.abs(scaled_values(wc, ws, (1, k))).T
    assert (np.abs(got - want) <= 1e-5 * size + 1e-6).all()
    with pytest.raises(DTypeError, match="x_scale"):
        g.scaled_linear(g.input("x2", (m, k), "f8e4m3"), g.param("w2", (n, k), "f8e4m3"), g.param("s2", (n,)))


def test_dynamic_quantize_on_the_device_matches_the_host(rng):
    x = (rng.standard_normal((6, 77)) * rng.uniform(0.01, 100, (6, 1))).astype(np.float32)
    x[2] = 0.0   # an all-zero row: the smallest scale, codes of zero
    g = rlx.Graph()
    codes, scale = fp8.quantize(g, g.input("x", x.shape))
    g.set_outputs(q=codes, s=scale)
    out = rlx.compile(g).run(x=x)
    want_q, want_s = fp8.quantize_array(x, "f8e4m3", "channel")
    np.testing.assert_allclose(out["s"][:, 0], want_s, rtol=1e-6)
    # Codes agree except where the two scales' last-bit difference moves a value across a rounding boundary.
    assert (out["q"].view(np.uint8) == want_q.view(np.uint8)).mean() > 0.99
    assert not out["q"][2].astype(np.float32).any()


def test_scale_shape_errors():
    g = rlx.Graph()
    w = g.param("w", (10, 64), "f8e4m3")
    x = g.input("x", (1, 64))
    with pytest.raises(ShapeError, match="granularity"):
        g.scaled_linear(x, w, g.param("s", (3,)))
    with pytest.raises(ShapeError, match="block 4x32"):
        g.scaled_linear(x, w, g.param("s2", (2, 2)), block=(4, 32))
    with pytest.raises(DTypeError, match="f32"):
        g.scaled_linear(x, w, g.param("s3", (10,), "f16"))
    with pytest.raises(DTypeError, match="f8e4m3 or f8e5m2"):
        g.scaled_linear(x, g.param("w4", (10, 64)), g.param("s4", (10,)))


def test_precision_fp8_quantizes_linear_weights_and_set_params(rng):
    g = rlx.Graph()
    x = g.input("x", (4, 96))
    h = g.linear(x, g.param("w1", (64, 96)), g.param("b1", (64,)), activation="gelu")
    g.set_outputs(y=g.linear(h, g.param("w2", (32, 64))))
    params = {"w1": rng.standard_normal((64, 96)).astype(np.float32) / 10,
              "b1": rng.standard_normal(64).astype(np.float32),
              "w2": rng.standard_normal((32, 64)).astype(np.float32) / 8}
    xv = rng.standard_normal((4, 96)).astype(np.float32)
    want = run_reference(g, {"x": xv}, params)["y"]
    for policy in ("fp8", "fp8-dynamic"):
        exe = rlx.compile(g, params=params, precision=policy)
        assert {"w1", "w2", "w1.fp8_scale", "w2.fp8_scale"} <= {s.name for s in exe.param_specs}
        got = exe.run(x=xv)["y"]
        rel = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert rel < 0.08, (policy, rel)    # e4m3 keeps 3 mantissa bits: a few percent
        exe.set_params(w2=params["w2"] * 2)   # float values are quantized again, scale included
        np.testing.assert_allclose(exe.run(x=xv)["y"], 2 * got, rtol=0.02, atol=0.02 * np.abs(got).max())


def _decoder_layer(t: int, hidden: int, heads: int, ffn: int) -> rlx.Graph:
    """A pre-norm decoder layer (RMSNorm, causal attention, SwiGLU) whose
    projections are linear layers with [out, in] weights, as checkpoints store them."""
    g = rlx.Graph()
    x = g.input("x", (1, t, hidden))
    hd = hidden // heads

    def proj(v, name, n_in, n_out):
        return g.linear(v, g.param(name, (n_out, n_in)))

    h = g.rmsnorm(x, g.param("rms1", (hidden,)))
    q, k, v = (g.reshape(proj(h, n, hidden, hidden), (1, t, heads, hd)) for n in ("wq", "wk", "wv"))
    ctx = g.reshape(g.attention(q, k, v, causal=True), (1, t, hidden))
    x2 = g.add(x, proj(ctx, "wo", hidden, hidden))
    h2 = g.rmsnorm(x2, g.param("rms2", (hidden,)))
    mlp = g.glu(proj(h2, "wg", hidden, ffn), proj(h2, "wu", hidden, ffn), "silu")
    g.set_outputs(y=g.add(x2, proj(mlp, "wd", ffn, hidden)))
    return g


@pytest.mark.parametrize("t", [1, 13])
def test_decoder_layer_in_fp8_is_close_to_f32(rng, t):
    """precision="fp8" / "fp8-dynamic" on a decoder layer against its f32
    reference: every projection's weight is e4m3 with a scale per output
    channel (relative rounding up to 2^-4 a weight), activations f16 (the
    "auto" policy). Stated tolerance: relative L2 error of the layer's
    change to x (y - x) <= 10%, and of y <= 8% (the worst of 12 seeds x 2
    lengths x 2 policies on 2026-12-02: 7.2% and 5.8%)."""
    hidden, heads, ffn = 64, 4, 96
    g = _decoder_layer(t, hidden, heads, ffn)
    params = {n: (rng.standard_normal(tuple(node.shape)) / np.sqrt(node.shape[-1])).astype(np.float32)
              for n, node in g.params.items()}
    params["rms1"] = params["rms2"] = np.ones(hidden, np.float32)
    x = rng.standard_normal((1, t, hidden)).astype(np.float32)
    want = run_reference(g, {"x": x}, params)["y"].astype(np.float64)
    for policy in ("fp8", "fp8-dynamic"):
        exe = rlx.compile(g, params=params, precision=policy)
        weights = [s for s in exe.param_specs if len(s.shape) == 2]
        assert weights and all(s.dtype.name == "f8e4m3" for s in weights)   # q/k/v and gate/up merged by siblings
        got = exe.run(x=x)["y"].astype(np.float64)
        delta = np.linalg.norm((got - x) - (want - x)) / np.linalg.norm(want - x)
        whole = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert delta <= 0.10 and whole <= 0.08, (policy, delta, whole)
    merged = next(s.name for s in exe.param_specs if "wq" in s.name and s.dtype.name == "f8e4m3")
    assert merged != "wq"   # a merged source is not settable on its own under fp8 (its scale rows would go stale)
    with pytest.raises(rlx.ParameterError, match="unknown parameter"):
        exe.set_params(wq=params["wq"])
    exe.set_params({merged: np.concatenate([params["wq"], params["wk"], params["wv"]])})   # the merged one is
    np.testing.assert_array_equal(exe.run(x=x)["y"], got.astype(np.float32))
