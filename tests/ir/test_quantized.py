"""GGUF block formats in the IR: sizes, where a quantized tensor is allowed,
what the passes do with it, the reference's values and param binding."""

from __future__ import annotations

import pickle

import gguf
import numpy as np
import pytest

import rlx
from rlx.errors import DTypeError, ParameterError, ShapeError
from rlx.ir.dtype import QUANTIZED, bf16, f16, f32, quantized
from rlx.opt.precision import apply_precision
from rlx.opt.siblings import merge_siblings
from rlx.reference import run_reference
from rlx.runtime.executable import IOSpec, coerce_param


@pytest.mark.parametrize("name", sorted(QUANTIZED))
def test_block_sizes_are_ggmls(name):
    dt = quantized(name.upper())
    assert (dt.block, dt.block_bytes) == gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name.upper()]]
    assert dt.quantized and dt.storage_only and not dt.is_float
    assert pickle.loads(pickle.dumps(dt)) is dt and rlx.ir.dtype.DType.of(name) is dt
    with pytest.raises(DTypeError, match="block format"):
        _ = dt.itemsize
    assert dt.nbytes(3 * dt.block, dt.block) == 3 * dt.block_bytes
    assert dt.storage_shape((5, 2 * dt.block)) == (5, 2 * dt.block_bytes)
    with pytest.raises(DTypeError, match="multiple"):
        dt.storage_shape((5, dt.block + 1))


def test_gguf_bf16_is_rlx_bf16_and_unknown_names_are_refused():
    assert quantized("BF16") is bf16
    with pytest.raises(DTypeError, match="unknown quantized format"):
        quantized("q9_9")
    assert f32.nbytes(7) == 28 and not f32.quantized and f32.storage_shape((2, 3)) == (2, 3)


def test_where_a_quantized_tensor_is_allowed():
    g = rlx.Graph()
    x = g.input("x", (3, 512))
    w = g.param("w", (7, 512), "q4_k")
    assert g.linear(x, w).type == rlx.ir.TensorType((3, 7), f32)
    assert g.matmul(x, w, transpose_b=True).shape == (3, 7)
    assert g.linear(g.cast(x, "f16"), w).dtype == f16
    assert g.dequantize(w).type == rlx.ir.TensorType((7, 512), f32)
    assert g.dequantize(w, "f16").dtype == f16
    table = g.param("t", (10, 64), "q8_0")
    assert g.gather(table, g.input("i", (4,), "i32")).type == rlx.ir.TensorType((4, 64), f32)
    for bad, err, match in (
            (lambda: g.add(w, w), DTypeError, "only dequantize input 0, gather input 0"),
            (lambda: g.reshape(w, (512 * 7,)), DTypeError, "quantized block format"),
            (lambda: g.narrow(w, 0, 0, 2), DTypeError, "quantized block format"),
            (lambda: g.linear(w, w), DTypeError, "input 0 is q4_k"),
            (lambda: g.matmul(x, w), DTypeError, "transpose_b"),
            (lambda: g.set_outputs(w=w), DTypeError, "outputs are values"),
            (lambda: g.param("b", (3, 100), "q4_k"), DTypeError, "multiple of its block"),
            (lambda: g.input("z", (3, 256), "q4_k"), DTypeError, "storage of weights"),
            (lambda: g.dequantize(x), DTypeError, "quantized block format or bf16"),
            (lambda: g.dequantize(w, "i32"), DTypeError, "f32 or f16"),
            (lambda: g.linear(g.input("x2", (3, 100)), g.param("w2", (7, 100), "q8_0")), DTypeError, "multiple"),
            (lambda: g.linear(g.input("x3", (3, 7)), g.param("w3", (512, 7), "q4_k"), transpose_b=False),
             DTypeError, "multiple"),
    ):
        with pytest.raises(err, match=match):
            bad()
    # A 3-D block-format weight is not a linear/matmul weight.
    with pytest.raises((ShapeError, DTypeError)):
        g.matmul(g.input("x4", (2, 3, 32)), g.param("w4", (2, 5, 32), "q8_0"), transpose_b=True)


def _q8(rng, rows, k):
    w = rng.standard_normal((rows, k)).astype(np.float32)
    return gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)


def _graph(k=64):
    g = rlx.Graph()
    x = g.input("x", (3, k))
    w = g.param("w", (7, k), "q8_0")
    t = g.param("t", (11, k), "q8_0")
    i = g.input("i", (5,), "i32")
    g.set_outputs(y=g.linear(x, w, activation="gelu"), d=g.dequantize(w, "f16"), e=g.gather(t, i))
    return g


def test_reference_takes_values_from_ggufs_dequantizer():
    rng = np.random.default_rng(1)
    w, t = _q8(rng, 7, 64), _q8(rng, 11, 64)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    idx = np.array([0, 10, 3, 3, 7], np.int32)
    out = run_reference(_graph(), {"x": x, "i": idx}, {"w": w, "t": t})
    dw = gguf.quants.dequantize(w, gguf.GGMLQuantizationType.Q8_0)
    dt = gguf.quants.dequantize(t, gguf.GGMLQuantizationType.Q8_0)
    np.testing.assert_array_equal(out["d"], dw.astype(np.float16))
    np.testing.assert_array_equal(out["e"], dt[idx])
    pre = x.astype(np.float64) @ dw.astype(np.float64).T
    np.testing.assert_allclose(out["y"], rlx.reference.REFERENCE["gelu"]([pre], {}, None), rtol=1e-5, atol=1e-6)
    with pytest.raises(ParameterError, match="expected q8_0"):
        run_reference(_graph(), {"x": x, "i": idx}, {"w": w[:, :-1], "t": t})


def test_reference_takes_bf16_leaves_as_their_values():
    """A bf16 tensor (GGUF's BF16 weights) is stored as uint16 bits; the
    reference computes on the values they encode, as the kernels do (found by
    the fuzzer: run_reference read the bits as integers, 49152 for -1.89)."""
    rng = np.random.default_rng(2)
    values = rng.standard_normal((5, 32)).astype(np.float32)
    bits = (values.view(np.uint32) >> 16).astype(np.uint16)
    exact = (bits.astype(np.uint32) << 16).view(np.float32)
    g = rlx.Graph()
    x, w = g.input("x", (2, 32)), g.param("w", (5, 32), bf16)
    g.set_outputs(y=g.linear(x, w), d=g.dequantize(w), e=g.gather(w, g.input("i", (3,), "i32")))
    xv, idx = rng.standard_normal((2, 32)).astype(np.float32), np.array([4, 0, 4], np.int32)
    out = run_reference(g, {"x": xv, "i": idx}, {"w": bits})
    np.testing.assert_array_equal(out["d"], exact)
    np.testing.assert_array_equal(out["e"], exact[idx])
    np.testing.assert_allclose(out["y"], xv.astype(np.float64) @ exact.astype(np.float64).T, rtol=1e-6)
    got = rlx.compile(g, params={"w": bits}).run(x=xv, i=idx)
    np.testing.assert_array_equal(got["d"], out["d"])
    # The host's AVX-512 BF16 gemm may round x to bf16 as well (docs/compile.md).
    bound = 2.0 ** -7 * (np.abs(xv).astype(np.float64) @ np.abs(exact).astype(np.float64).T) + 1e-6
    assert (np.abs(got["y"] - out["y"]) <= bound).all()


@pytest.mark.parametrize("policy", ["f16", "auto", "bf16"])
def test_precision_passes_leave_quantized_weights_alone(policy):
    g, report = apply_precision(_graph(), policy, "host")
    assert g.params["w"].dtype.name == "q8_0" and g.params["t"].dtype.name == "q8_0"
    assert "w" not in report.converted and "t" not in report.converted
    assert not any(n.op == "cast" and n.inputs[0].dtype.quantized for n in g.nodes)


def test_sibling_fusion_merges_only_equal_formats():
    g = rlx.Graph()
    x = g.input("x", (2, 64))
    a = g.linear(x, g.param("a", (8, 64), "q8_0"))
    b = g.linear(x, g.param("b", (8, 64), "q8_0"))
    c = g.linear(x, g.param("c", (8, 64), "q4_0"))
    g.set_outputs(y=g.add(g.add(a, b), c))   # consumers that read narrow views: mergeable
    merged, report = merge_siblings(g)
    assert [(op, sorted(members)) for op, members, _ in report.groups] == [("linear", ["a", "b"])], \
        report.describe()
    assert any(p.dtype.name == "q8_0" and p.shape == (16, 64) for p in merged.params.values())


def test_param_binding_takes_raw_blocks_or_a_gguf_tensor():
    spec = IOSpec("w", (7, 64), quantized("q8_0"))
    raw = _q8(np.random.default_rng(2), 7, 64)
    assert coerce_param(spec, raw).shape == (7, 68)
    assert coerce_param(spec, raw.ravel()).shape == (7, 68)

    class FakeTensor:   # what rlx.gguf gives: type, shape, data
        type, shape, data = "Q8_0", (7, 64), raw

    assert np.array_equal(coerce_param(spec, FakeTensor()), raw)
    FakeTensor.type = "Q4_0"
    with pytest.raises(ParameterError, match="GGUF Q4_0 tensor, expected q8_0"):
        coerce_param(spec, FakeTensor())
    with pytest.raises(ParameterError, match="raw blocks"):
        coerce_param(spec, raw.astype(np.float32))
    with pytest.raises(ParameterError, match="bytes in shape"):
        coerce_param(spec, raw[:, :-2])
    assert spec.nbytes == 7 * 68
