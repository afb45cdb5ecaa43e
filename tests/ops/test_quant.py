"""Quantized (GGUF block-format) weights end to end through rlx.compile on
the device under test (--rlx-device, --rlx-group-size): linear / matmul by
the fused GEMV (up to 8 rows) and by dequantize + gemm (more rows, tiled),
dequantize, and gather from a quantized table, for every format, against
the float64 product of gguf's dequantized weights.

Tolerances: a product's error is bounded by its magnitude, not by the
result (cancellation): |got - want| <= rel * sum_k |x_k w_k| + abs, rel
1e-5 in f32 (f32 sums), 4e-3 in f16 (f16 x and output rounding)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.ir.dtype import quantized
from rlx.reference.blocks import dequantize_values

from .quant_helpers import FORMATS, random_blocks

REL = {"f32": 1e-5, "f16": 4e-3}


def _x(rng, shape, dtype):
    return rng.standard_normal(shape).astype(np.float16 if dtype == "f16" else np.float32)


def _weight(fmt, rng, n, k):
    raw = random_blocks(fmt, n, k, rng)
    return raw, dequantize_values(quantized(fmt), raw, (n, k)).astype(np.float64)


def _check_product(got, x, w, bias, act, dtype, rel=None):
    x64 = x.astype(np.float64).reshape(-1, x.shape[-1])
    pre = x64 @ w.T + (0.0 if bias is None else bias.astype(np.float64))
    want = rlx.reference.REFERENCE["gelu"]([pre], {}, None) if act == "gelu" else pre
    scale = np.abs(x64) @ np.abs(w).T + (0.0 if bias is None else np.abs(bias.astype(np.float64)))
    err = np.abs(got.astype(np.float64).reshape(want.shape) - want)
    bound = (rel or REL[dtype]) * (scale + np.abs(want)) + (1e-6 if dtype == "f32" else 1e-3)
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert (err <= bound).all(), f"worst at {worst}: got {got.reshape(want.shape)[worst]}, want {want[worst]}"


def _k_for(fmt):
    block = quantized(fmt).block
    return 3 * block if block > 1 else 77


@pytest.fixture
def gemv_preferred(monkeypatch):
    """The cost model's GEMV-or-dequantize choice pinned to the GEMV, so the
    fused path of every m <= 8 is exercised whatever the calibration says
    (tests/tune covers the choice itself)."""
    from rlx.tune.cost import CostModel

    monkeypatch.setattr(CostModel, "prefer_quant_gemv", lambda self, *a, **kw: True)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("rows", [1, 3, 8, 9, 33])
def test_linear_with_quantized_weights(fmt, dtype, rows, rng, gemv_preferred):
    """1-8 rows: the fused GEMV (with bias and GELU inside); 9 and 33 rows:
    dequantize + gemm + the epilogue."""
    n, k = 13, _k_for(fmt)
    raw, w = _weight(fmt, rng, n, k)
    g = rlx.Graph()
    x = g.input("x", (rows, k), dtype)
    b = g.param("b", (n,), dtype)
    g.set_outputs(y=g.linear(x, g.param("w", (n, k), quantized(fmt)), b, activation="gelu"))
    xv, bv = _x(rng, (rows, k), dtype), _x(rng, (n,), dtype)
    exe = rlx.compile(g, params={"w": raw, "b": bv})
    kernels = {t.kernel for t in exe.thunks if t.kernel}
    rel = None
    if fmt == "bf16" and dtype == "f32" and exe.target.backend == "host":
        assert not any(kn.startswith(("gemv", "dequantize_")) for kn in kernels), kernels   # the host's bf16 gemm
        rel = 2.0 ** -7   # which may round x to bf16 too (docs/compile.md)
    else:
        path = ("gemv1_" if rows == 1 else "gemv_") if rows <= 8 else "dequantize_"
        assert any(kn.startswith(path + fmt) for kn in kernels), kernels
    _check_product(exe.run(x=xv)["y"], xv, w, bv, "gelu", dtype, rel)


@pytest.mark.parametrize("fmt", ["q8_0", "q4_k"])
@pytest.mark.parametrize("rows", [1, 3])
def test_gemv_reads_x_at_an_offset(fmt, rows, rng, gemv_preferred):
    """x a narrow of a larger value (a nonzero element offset): the GEMV's
    params carry no offset, so the lowering hands it x at its binding's start.
    (A bug until issue 18: the GEMV read the value's first rows instead.)"""
    n, k = 13, _k_for(fmt)
    raw, w = _weight(fmt, rng, n, k)
    g = rlx.Graph()
    both = g.input("both", (2, rows, k))
    x = g.reshape(g.narrow(both, 0, 1, 1), (rows, k))
    g.set_outputs(y=g.linear(x, g.param("w", (n, k), quantized(fmt))))
    bv = _x(rng, (2, rows, k), "f32")
    exe = rlx.compile(g, params={"w": raw})
    assert any((t.kernel or "").startswith("gemv") for t in exe.thunks)
    _check_product(exe.run(both=bv)["y"], bv[1], w, None, None, "f32")


@pytest.mark.parametrize("fmt", ["q4_0", "q8_0", "q4_k", "q6_k", "iq4_xs"])
def test_matmul_and_the_env_var_that_turns_the_gemv_off(fmt, rng, monkeypatch):
    n, k = 21, _k_for(fmt)
    raw, w = _weight(fmt, rng, n, k)
    g = rlx.Graph()
    x = g.input("x", (2, k))
    g.set_outputs(y=g.matmul(x, g.param("w", (n, k), quantized(fmt)), transpose_b=True))
    xv = _x(rng, (2, k), "f32")
    _check_product(rlx.compile(g, params={"w": raw}).run(x=xv)["y"], xv, w, None, None, "f32")
    monkeypatch.setenv("RLX_QUANT_NO_GEMV", fmt.upper())
    exe = rlx.compile(g, params={"w": raw})
    assert not any((t.kernel or "").startswith("gemv") for t in exe.thunks)
    _check_product(exe.run(x=xv)["y"], xv, w, None, None, "f32")
    monkeypatch.setenv("RLX_QUANT_NO_GEMV", "q4_k,q9_9")
    with pytest.raises(rlx.errors.ConfigError, match="q9_9"):
        rlx.compile(g, params={"w": raw})


def test_many_rows_dequantize_a_tile_at_a_time(rng, monkeypatch):
    """A weight larger than the scratch tile: several dequantize + gemm pairs,
    each writing its columns of the output."""
    import rlx.lowering.quant as lq

    n, k = 70, 256
    raw, w = _weight("q4_k", rng, n, k)
    monkeypatch.setattr(lq, "DEQUANT_TILE_BYTES", 16 * k * 4)   # 16 rows a tile: 5 tiles, the last of 6 rows
    g = rlx.Graph()
    x = g.input("x", (12, k))
    g.set_outputs(y=g.linear(x, g.param("w", (n, k), "q4_k")))
    exe = rlx.compile(g, params={"w": raw})
    assert sum(1 for t in exe.thunks if (t.kernel or "").startswith("dequantize_")) == 5
    xv = _x(rng, (12, k), "f32")
    _check_product(exe.run(x=xv)["y"], xv, w, None, None, "f32")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_dequantize_equals_ggufs(fmt, dtype, rng):
    rows, k = 5, _k_for(fmt)
    raw, w = _weight(fmt, rng, rows, k)
    g = rlx.Graph()
    g.set_outputs(y=g.dequantize(g.param("w", (rows, k), quantized(fmt)), dtype))
    got = rlx.compile(g, params={"w": raw}).run()["y"]
    np.testing.assert_array_equal(got, w.astype(np.float32).astype(got.dtype))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("index_dtype", ["i32", "i64"])
def test_gather_from_a_quantized_table(fmt, index_dtype, rng):
    rows, dim = 9, _k_for(fmt)
    raw, table = _weight(fmt, rng, rows, dim)
    g = rlx.Graph()
    idx = g.input("i", (2, 3), index_dtype)
    g.set_outputs(e=g.gather(g.param("t", (rows, dim), quantized(fmt)), idx))
    iv = np.array([[0, 8, 3], [3, 1, 8]], np.int32 if index_dtype == "i32" else np.int64)
    got = rlx.compile(g, params={"t": raw}).run(i=iv)["e"]
    np.testing.assert_array_equal(got, table.astype(np.float32)[iv])


def test_merged_quantized_projections_run_as_one(rng):
    """Sibling fusion concatenates equal-format weights' rows (raw blocks)."""
    k = 64
    (ra, wa), (rb, wb) = _weight("q8_0", rng, 8, k), _weight("q8_0", rng, 5, k)
    g = rlx.Graph()
    x = g.input("x", (2, k))
    a = g.linear(x, g.param("a", (8, k), "q8_0"))
    b = g.linear(x, g.param("b", (5, k), "q8_0"))
    g.set_outputs(y=g.add(g.narrow(a, 1, 0, 5), b))
    exe = rlx.compile(g, params={"a": ra, "b": rb})
    xv = _x(rng, (2, k), "f32")
    want = xv.astype(np.float64) @ wa[:5].T + xv.astype(np.float64) @ wb.T
    np.testing.assert_allclose(exe.run(x=xv)["y"], want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("fmt", ["q8_0", "q4_k", "q6_k"])
def test_tied_embedding_table_is_also_the_output_projection(fmt, rng):
    """One quantized [V, D] param read by the token gather and by the final
    linear (tied embeddings, as in Gemma): logits = embed(ids) @ table^T."""
    vocab, dim = 37, _k_for(fmt)
    raw, table = _weight(fmt, rng, vocab, dim)
    g = rlx.Graph()
    ids = g.input("ids", (1, 3), "i32")
    t = g.param("table", (vocab, dim), quantized(fmt))
    g.set_outputs(logits=g.linear(g.gather(t, ids), t))
    iv = np.array([[4, 36, 0]], np.int32)
    got = rlx.compile(g, params={"table": raw}).run(ids=iv)["logits"]
    rows = table[iv[0]]
    _check_product(got, rows.astype(np.float32), table, None, None, "f32")


@pytest.mark.parametrize("fmt", FORMATS)
def test_arbitrary_bytes_decode_like_gguf_and_never_crash(fmt, rng):
    """Blocks of random bytes (NaN, inf and subnormal scales, every index
    and sign pattern): dequantize still equals gguf's values (NaN where gguf
    has NaN) and the GEMV and gather run without a crash."""
    dt = quantized(fmt)
    k = 2 * dt.block if dt.block > 1 else 64
    raw = rng.integers(0, 256, size=(5, dt.nbytes(k, k) if dt.quantized else 2 * k), dtype=np.uint8)
    g = rlx.Graph()
    w, t = g.param("w", (5, k), dt), g.param("t", (5, k), dt)
    g.set_outputs(d=g.dequantize(w), y=g.linear(g.input("x", (2, k)), w), e=g.gather(t, g.input("i", (3,), "i32")))
    out = rlx.compile(g, params={"w": raw, "t": raw}).run(x=np.ones((2, k), np.float32),
                                                          i=np.array([4, 0, 2], np.int32))
    with np.errstate(invalid="ignore", over="ignore"):   # gguf's numpy: inf * 0 in the oracle itself
        want = dequantize_values(dt, raw, (5, k))
    np.testing.assert_array_equal(out["d"], want)
    assert out["y"].shape == (2, 5) and out["e"].shape == (3, k)


@pytest.mark.parametrize("fmt", ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_0"])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_gemv_of_x_with_a_wide_range_zeros_and_repeated_runs(fmt, dtype, rng, gemv_preferred):
    """x that stresses a GEMV which converts x to integers per block (the
    AVX-512 VNNI form of the K-quants, csrc/host_quant_vnni.h; every other
    form takes the same inputs): magnitudes over 2^-20..2^15 inside a
    block, one spike per block, an all-zero row, values near the f16 /
    f32 underflow; and one executable run on new x each time (the VNNI form
    keeps its integer x per dispatch: a stale copy would repeat the previous
    run's result)."""
    n, k = 37, 512
    raw, w = _weight(fmt, rng, n, k)
    g = rlx.Graph()
    x = g.input("x", (4, k), dtype)
    g.set_outputs(y=g.linear(x, g.param("w", (n, k), quantized(fmt))))
    exe = rlx.compile(g, params={"w": raw})
    npdt = np.float16 if dtype == "f16" else np.float32
    wide = rng.standard_normal((4, k)) * np.exp2(rng.uniform(-20, 15 if dtype == "f32" else 0, (4, k)))
    spiky = rng.standard_normal((4, k)) * 1e-3
    spiky[:, ::256] = 3e4 if dtype == "f32" else 30.0   # f16: the products stay under its 65504
    spiky[2] = 0.0
    tiny = rng.standard_normal((4, k)) * (1e-36 if dtype == "f32" else 1e-7)
    for xv in (wide, spiky, tiny, _x(rng, (4, k), dtype)):
        xv = xv.astype(npdt)
        _check_product(exe.run(x=xv)["y"], xv, w, None, None, dtype)


@pytest.mark.parametrize("fmt", ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_0"])
@pytest.mark.parametrize("m", [1, 3])
def test_gemv_of_a_spike_on_zero_weights(fmt, m, rng, gemv_preferred):
    """Each block of x is small values with one spike 3e7 times larger,
    placed on the column where the most weight rows are zero (or nearest
    zero): for those rows the spike adds nothing to the product, so the
    bound (sum |x||w|) is the small values' alone, and a form that rounds
    x relative to its block maximum (the VNNI form's integer x) loses them.
    Such blocks must take a form that keeps them (the f32 one)."""
    n, k = 41, 512
    raw, w = _weight(fmt, rng, n, k)
    g = rlx.Graph()
    g.set_outputs(y=g.linear(g.input("x", (m, k)), g.param("w", (n, k), quantized(fmt))))
    exe = rlx.compile(g, params={"w": raw})
    xv = (rng.standard_normal((m, k)) * 1e-3).astype(np.float32)
    for b in range(0, k, 256):
        cols = np.abs(w[:, b:b + 256])
        zeros = (cols == 0).sum(axis=0)
        col = b + int(np.argmax(zeros) if zeros.max() else np.argmin(cols.sum(axis=0)))
        xv[:, col] = 3e4
    _check_product(exe.run(x=xv)["y"], xv, w, None, None, "f32")


@pytest.mark.parametrize("fmt", ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k"])
def test_gemv_propagates_nan_and_infinity_of_x(fmt, rng, gemv_preferred):
    """A NaN or an infinity in one row of x reaches that row's outputs (the
    VNNI form hands such x to the f32 form); the other rows stay exact."""
    n, k = 9, 256
    raw, w = _weight(fmt, rng, n, k)
    g = rlx.Graph()
    x = g.input("x", (3, k))
    g.set_outputs(y=g.linear(x, g.param("w", (n, k), quantized(fmt))))
    exe = rlx.compile(g, params={"w": raw})
    xv = _x(rng, (3, k), "f32")
    xv[1, 5] = np.nan
    y = exe.run(x=xv)["y"]
    assert np.isnan(y[1]).all()
    _check_product(y[[0, 2]], xv[[0, 2]], w, None, None, "f32")
    xv[1, 5] = np.inf
    y = exe.run(x=xv)["y"]
    want_inf = np.where(w[:, 5] > 0, np.inf, np.where(w[:, 5] < 0, -np.inf, np.nan))
    np.testing.assert_array_equal(y[1], want_inf.astype(np.float32))
    _check_product(y[[0, 2]], xv[[0, 2]], w, None, None, "f32")


@pytest.mark.parametrize("fmt,n,k,want", [("q4_k", 262144, 768, "gemv1i_q4_k"), ("q8_0", 65536, 640, "gemv1i_q8_0"),
                                          ("q8_0", 65536, 4096, "gemv1i_q8_0"), ("q8_0", 65536, 5120, "gemv1_q8_0"),
                                          ("q4_k", 16384, 4096, "gemv1i_q4_k"), ("q4_k", 8192, 4096, "gemv1_q4_k"),
                                          ("q4_k", 4096, 768, "gemv1_q4_k"), ("iq4_xs", 262144, 768, "gemv1_iq4_xs"),
                                          ("q6_k", 640, 2048, "gemv1_q6_k"), ("q5_0", 21, 1024, "gemv1_q5_0"),
                                          ("iq4_xs", 4096, 4096, "gemv1_iq4_xs")])
def test_cuda_takes_the_integer_gemv_on_tall_weights_only(fmt, n, k, want, gemv_preferred):
    """CUDA's decode step lowers to gemv1i (the integer form) for the formats
    with int8 codes when a group gets >= 64 rows (tall weights: the
    vocabulary projection; 16384 rows and up) and x's pieces fit its shared
    memory (k <= 4096), and to gemv1 otherwise; lowered without a device."""
    _check_cuda_gemv_kernel(fmt, n, k, want)


def _check_cuda_gemv_kernel(fmt: str, n: int, k: int, want: str) -> None:
    from rlx.runtime.target import Target
    from rlx.tune.cost import decision_model
    from rlx.tune.decide import lower_for

    cuda = Target(backend="cuda", compute_units=132, max_threads_per_group=1024, simd_width=32,
                  max_buffer_length=1 << 36)
    g = rlx.Graph()
    g.set_outputs(y=g.linear(g.input("x", (1, k)), g.param("w", (n, k), quantized(fmt))))
    kernels = [t.kernel for t in lower_for(g, cuda, decision_model("cuda")) if t.kernel]
    assert [kn for kn in kernels if kn.startswith("gemv")] == [f"{want}_f32"], kernels
    host = [t.kernel for t in lower_for(g, replace_backend(cuda, "host"), decision_model("host")) if t.kernel]
    assert not any(kn.startswith("gemv1i") for kn in host), host


@pytest.mark.parametrize("n,rows", [(640, 8), (2048, 8), (4095, 8), (4096, 16), (8192, 32), (16384, 64),
                                    (262144, 256)])
def test_cuda_gemv_rows_a_group_grow_with_the_weight(n, rows):
    """8 rows a group (one a SIMD group) up to 4095 rows, then more a group
    once the weight fills GEMV_MIN_GROUPS groups without, up to 32 a SIMD
    group (the H200's measured choice: benchmarks/README.md)."""
    from types import SimpleNamespace

    from rlx.lowering.quant import gemv_grid
    from rlx.runtime.target import Target

    cuda = Target(backend="cuda", compute_units=132, max_threads_per_group=1024, simd_width=32,
                  max_buffer_length=1 << 36)
    got, (grid, threads) = gemv_grid(SimpleNamespace(target=cuda), n, 640)
    assert (got, threads) == (rows, (256, 1, 1))
    assert grid == (-(-n // rows), 1, 1)


def replace_backend(target, backend: str):
    import dataclasses

    return dataclasses.replace(target, backend=backend, simd_width=1, max_threads_per_group=1)
