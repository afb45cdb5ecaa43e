"""The FP8 x FP8 gemm path of scaled_linear (rlx/lowering/fp8_gemm.py,
csrc/cuda's cuBLASLt FP8 gemm, shaders/fp8.h fp8_gemm_epilogue): the
choice (capability, operands, shape, cost model), the epilogue kernel
against numpy, the host's refusal of an FP8 gemm descriptor, and FP8 x FP8
products on --rlx-device against the float64 product of the dequantized
operands (through cuBLASLt where the device has FP8 gemms: cuda on compute
capability >= 8.9; the kernel path elsewhere).

Tolerances: the codes' products are exact in f32; cuBLASLt's FP8 matmul
accumulates in f32 with periodic promotion (not the fast-accumulation
mode), so |err| <= 2e-4 * sum_k |x w| + 1e-6 (the f32 kernel path is held
to 1e-5 of that, as in test_fp8.py); f16 outputs add 4e-3 of the sum and of |y|.
"""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import pytest

import rlx
from rlx import fp8
from rlx.errors import RlxError, UnsupportedOpError
from rlx.lowering.fp8_gemm import choose_fp8_gemm, epilogue_params, fp8_gemm_shape_ok
from rlx.reference.fp8 import scaled_values
from rlx.runtime import shim
from rlx.runtime.shim import DTYPE_F8E4M3, DTYPE_F32, CommandBuffer
from rlx.runtime.target import Target
from rlx.tune.cost import decision_model
from rlx.tune.decide import lower_for

from .helpers import kernels_of
from .test_quant_kernels import _run, qdev  # noqa: F401  (qdev: the fixture)

ACTS = {None: 0, "gelu": 1, "gelu_tanh": 2, "silu": 3, "relu": 4}
CUDA_FP8 = Target(backend="cuda", compute_units=132, max_threads_per_group=1024, simd_width=32,
                  max_buffer_length=1 << 36, gemm_bias=True, gemm_fp8=True)


def _graph(m: int, n: int, k: int, *, dtype: str = "f32", w_granularity: str = "channel", block=None,
           bias: bool = True, activation: str | None = "gelu", dynamic: bool = False, x_granularity: str = "row"):
    """scaled_linear of e4m3 x (x_scale per row, or one for the tensor) and
    an e4m3 weight; with ``dynamic`` x is quantized on the device (precision
    fp8-dynamic's form)."""
    g = rlx.Graph()
    if dynamic:
        codes, xs = fp8.quantize(g, g.input("x", (m, k), "f32"))
        x = g.scaled_dequantize(codes, xs, dtype)
    else:
        xs_shape = (m, 1) if x_granularity == "row" else (1, 1)
        x = g.scaled_dequantize(g.input("x", (m, k), "f8e4m3"), g.input("xs", xs_shape, "f32"), dtype)
    w_scale_shape = {"tensor": (1,), "channel": (n,)}.get(w_granularity)
    if w_scale_shape is None:
        w_scale_shape = (-(-n // block[0]), -(-k // block[1]))
    y = g.scaled_linear(x, g.param("w", (n, k), "f8e4m3"), g.param("ws", w_scale_shape),
                        g.param("b", (n,), dtype) if bias else None, activation=activation, block=block)
    g.set_outputs(y=y)
    return g, y


# ---- the choice -----------------------------------------------------------------------------
def _scaled_linear_node(g):
    return next(node for node in g.topo_order() if node.op == "scaled_linear")


@pytest.mark.parametrize("m,n,k,granularity,block,want", [
    (4096, 384, 384, "channel", None, True),        # MiniLM 32 x 128 tokens
    (4096, 1536, 384, "tensor", None, True),
    (128, 640, 2048, "channel", None, True),        # Gemma 3 270M, 128-token prefill
    (8, 2048, 640, "channel", None, False),         # the GEMV's rows
    (4096, 384, 392, "channel", None, False),       # k not a multiple of 16
    (4096, 390, 384, "channel", None, False),       # n not a multiple of 16
    (4096, 384, 384, "block", (128, 128), False),   # block scales keep the kernel path
])
def test_choice_needs_capability_operands_and_shape(m, n, k, granularity, block, want):
    g, _ = _graph(m, n, k, w_granularity=granularity, block=block)
    node = _scaled_linear_node(g)
    model = decision_model("cuda")
    assert choose_fp8_gemm(CUDA_FP8, model, node) is want
    # Without the capability (host, Metal, cuda before 8.9 or RLX_CUDA_FP8_GEMM=0): the kernel path.
    assert choose_fp8_gemm(dataclasses.replace(CUDA_FP8, gemm_fp8=False), model, node) is False
    assert fp8_gemm_shape_ok(m, n, k) == (m > 8 and k % 16 == 0 and n % 16 == 0)


def test_choice_asks_the_cost_model():
    g, _ = _graph(256, 384, 384)
    node = _scaled_linear_node(g)

    class Decider:
        def __init__(self, answer):
            self.answer, self.asked = answer, []

        def prefer_fp8_gemm(self, m, n, k, dtype_name, *, bias, activation, epilogue):
            self.asked.append((m, n, k, dtype_name, bias, activation, epilogue))
            return self.answer

    for answer in (True, False):
        decider = Decider(answer)
        assert choose_fp8_gemm(CUDA_FP8, decider, node) is answer
        assert decider.asked == [(256, 384, 384, "f32", True, True, True)]
    assert choose_fp8_gemm(CUDA_FP8, object(), node) is False   # a decider that cannot price it
    # Per-tensor scales, no bias or activation: priced as the direct form (no epilogue).
    direct = _scaled_linear_node(_graph(256, 384, 384, w_granularity="tensor", x_granularity="tensor",
                                        bias=False, activation=None)[0])
    decider = Decider(True)
    assert choose_fp8_gemm(CUDA_FP8, decider, direct) is True
    assert decider.asked == [(256, 384, 384, "f32", False, False, False)]


def test_cost_model_prices_both_paths():
    model = decision_model("cuda")
    fp8_s = model.fp8_gemm_seconds(4096, 384, 384, "f16", bias=True)
    kernel_s = model.fp8_kernel_path_seconds(4096, 384, 384, "f16", bias=True)
    assert 0 < fp8_s < kernel_s
    # The direct form is the gemm alone: cheaper than the gemm and its epilogue.
    assert 0 < model.fp8_gemm_seconds(4096, 384, 384, "f16", epilogue=False) < fp8_s
    assert model.prefer_fp8_gemm(4096, 384, 384, "f16", bias=True)
    assert any("FP8 x FP8 linear 4096x384x384" in line for line in model.describe_decisions())


@pytest.mark.parametrize("dynamic", [False, True])
def test_lowering_for_an_fp8_target(dynamic):
    """Lowered for a target with FP8 gemms (pure Python, no device): one
    e4m3 x e4m3 -> f32 gemm and the epilogue; x's dequantize (and its cast
    under precision auto) is not lowered. Without the capability: the
    kernel path (dequantize, gemm, bias_act)."""
    g, _ = _graph(256, 384, 384, dynamic=dynamic)
    thunks = lower_for(g, CUDA_FP8, decision_model("cuda"))
    gemms = [t.gemm for t in thunks if t.gemm is not None]
    assert [(x["dtype"], x["b_dtype"], x["c_dtype"], x["trans_b"]) for x in gemms] == [(3, 3, 0, 1)]
    kernels = [t.kernel for t in thunks if t.kernel]
    assert "fp8_gemm_epilogue_f32" in kernels
    assert not any(k.startswith("dequantize_f8") for k in kernels)
    plain = lower_for(g, dataclasses.replace(CUDA_FP8, gemm_fp8=False), decision_model("cuda"))
    assert not any(t.kernel and t.kernel.startswith("fp8_gemm_epilogue") for t in plain)
    assert all(t.gemm["dtype"] != 3 for t in plain if t.gemm is not None)


@pytest.mark.parametrize("dtype,c_dtype", [("f32", 0), ("f16", 1)])
def test_lowering_of_the_direct_form(dtype, c_dtype):
    """Per-tensor x and weight scales, no bias, no activation: one scaled
    gemm into the output's dtype, the two scales as its scale pointers, and
    no epilogue. A per-row x scale, a per-channel weight scale, a bias or an
    activation each keep the epilogue."""
    g, _ = _graph(256, 384, 384, dtype=dtype, w_granularity="tensor", x_granularity="tensor", bias=False,
                  activation=None)
    thunks = lower_for(g, CUDA_FP8, decision_model("cuda"))
    gemms = [t.gemm for t in thunks if t.gemm is not None]
    assert [(x["dtype"], x["b_dtype"], x["c_dtype"], x["trans_b"]) for x in gemms] == [(3, 3, c_dtype, 1)]
    assert gemms[0]["a_scale"] is not None and gemms[0]["b_scale"] is not None
    assert gemms[0]["a_scale"].storage is not gemms[0]["b_scale"].storage or \
        gemms[0]["a_scale"].offset != gemms[0]["b_scale"].offset
    assert not any(t.kernel and t.kernel.startswith(("fp8_gemm_epilogue", "dequantize_f8")) for t in thunks)
    for change in (dict(x_granularity="row"), dict(w_granularity="channel"), dict(bias=True),
                   dict(activation="relu")):
        kw = dict(dtype=dtype, w_granularity="tensor", x_granularity="tensor", bias=False, activation=None)
        kw.update(change)
        other = lower_for(_graph(256, 384, 384, **kw)[0], CUDA_FP8, decision_model("cuda"))
        assert any(t.kernel == f"fp8_gemm_epilogue_{dtype}" for t in other), change
        assert all(t.gemm["a_scale"] is None and t.gemm["b_scale"] is None for t in other if t.gemm), change


@pytest.mark.parametrize("dtype,c_dtype", [("f32", 0), ("f16", 1)])
def test_lowering_of_the_outer_form(dtype, c_dtype):
    """x scaled per row and the weight per channel, no bias, no activation,
    on a target whose FP8 gemm takes outer-vector scales for the output's
    dtype (gemm_fp8_outer): one gemm with both scale vectors (scale_mode 1)
    and no epilogue. Without that dtype in gemm_fp8_outer, with a bias, an
    activation or a per-tensor x scale: the gemm and the epilogue."""
    outer = dataclasses.replace(CUDA_FP8, gemm_fp8_outer=frozenset({dtype}))
    g, _ = _graph(256, 384, 384, dtype=dtype, bias=False, activation=None)
    thunks = lower_for(g, outer, decision_model("cuda"))
    gemms = [t.gemm for t in thunks if t.gemm is not None]
    assert [(x["dtype"], x["c_dtype"], x["scale_mode"]) for x in gemms] == [(3, c_dtype, 1)]
    assert gemms[0]["a_scale"] is not None and gemms[0]["b_scale"] is not None
    # The thunk reads every byte of both vectors (m and n f32): the memory plan keeps them alive.
    scales = [(gemms[0][key].storage, gemms[0][key].offset) for key in ("a_scale", "b_scale")]
    spans = [hi - lo for t in thunks if t.gemm for st, lo, hi in t.reads
             if any(st is storage and lo == offset for storage, offset in scales)]
    assert sorted(spans) == [256 * 4, 384 * 4]
    assert not any(t.kernel and t.kernel.startswith(("fp8_gemm_epilogue", "dequantize_f8")) for t in thunks)
    other_dtype = "f16" if dtype == "f32" else "f32"
    for target, change in ((dataclasses.replace(CUDA_FP8, gemm_fp8_outer=frozenset({other_dtype})), {}),
                           (CUDA_FP8, {}), (outer, dict(bias=True)), (outer, dict(activation="gelu")),
                           (outer, dict(x_granularity="tensor"))):
        kw = dict(dtype=dtype, bias=False, activation=None)
        kw.update(change)
        other = lower_for(_graph(256, 384, 384, **kw)[0], target, decision_model("cuda"))
        assert any(t.kernel == f"fp8_gemm_epilogue_{dtype}" for t in other), change
        assert all(t.gemm.get("scale_mode", 0) == 0 for t in other if t.gemm), change


def test_env_switch_turns_the_path_off(monkeypatch):
    from rlx import env

    monkeypatch.setenv("RLX_CUDA_FP8_GEMM", "0")
    assert env.cuda_fp8_gemm() is False
    monkeypatch.setenv("RLX_CUDA_FP8_GEMM", "1")
    assert env.cuda_fp8_gemm() is True


# ---- the epilogue kernel --------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["f32", "f16"])
@pytest.mark.parametrize("m,n", [(1, 5), (7, 33), (37, 130)])
@pytest.mark.parametrize("x_per_row,w_per_row", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("act", [None, "gelu", "relu"])
@pytest.mark.parametrize("threads", [1, 32])
def test_epilogue_matches_numpy(qdev, dt, m, n, x_per_row, w_per_row, act, threads):  # noqa: F811
    np_dt = np.float32 if dt == "f32" else np.float16
    r = np.random.default_rng(m * 131 + n)
    acc = (r.standard_normal((m, n)) * 300).astype(np.float32)
    xs = r.uniform(1e-3, 1e-2, m if x_per_row else 1).astype(np.float32)
    ws = r.uniform(1e-3, 1e-2, n if w_per_row else 1).astype(np.float32)
    has_bias = act != "relu"
    bias = r.standard_normal(n).astype(np_dt)
    params = epilogue_params(m, n, x_per_row, w_per_row, has_bias, ACTS[act])
    got = _run(qdev, f"fp8_gemm_epilogue_{dt}", [acc, xs, ws, None, bias], params, 3, m * n, np_dt, m,
               threads).reshape(m, n).astype(np.float64)
    v = acc.astype(np.float64) * (xs[:, None] if x_per_row else xs[0]) * (ws[None, :] if w_per_row else ws[0])
    if has_bias:
        v = v + bias.astype(np.float64)
    if act == "gelu":
        from scipy.special import erf

        v = 0.5 * v * (1 + erf(v / np.sqrt(2)))
    elif act == "relu":
        v = np.maximum(v, 0)
    tol = 1e-5 if dt == "f32" else 2e-3
    np.testing.assert_allclose(got, v, rtol=tol, atol=tol)


def test_epilogue_params_layout():
    assert epilogue_params(3, 4, True, False, True, 1) == struct.pack("<8I", 3, 4, 1, 0, 1, 1, 0, 0)


# ---- the shims: FP8 descriptors -------------------------------------------------------------
def _host_device():
    return shim.open_device("host", 0)   # the host shim is built everywhere: a failure, not a skip, if not


def test_host_refuses_an_fp8_gemm_and_keeps_working():
    device = _host_device()
    assert device.info.gemm_fp8 is False
    a, b, c = device.alloc(64 * 64), device.alloc(64 * 64), device.alloc(64 * 64 * 4)
    with CommandBuffer(device) as cb:
        with pytest.raises(UnsupportedOpError, match="gemm_fp8"):
            cb.gemm(a, b, c, 64, 64, 64, lda=64, ldb=64, ldc=64, trans_b=True, dtype=DTYPE_F8E4M3,
                    b_dtype=DTYPE_F8E4M3, c_dtype=DTYPE_F32)
        # A scale on a float operand means nothing: a bad argument.
        with pytest.raises(RlxError, match="a_scale"):
            cb.gemm(c, c, c, 8, 8, 8, lda=8, ldb=8, ldc=8, a_scale=c)
        # Outer-vector scales need both scales; a scale mode must be one the ABI knows.
        with pytest.raises(RlxError, match="outer-vector scales need both"):
            cb.gemm(c, c, c, 8, 8, 8, lda=8, ldb=8, ldc=8, scale_mode=shim.GEMM_SCALE_OUTER)
        with pytest.raises(RlxError, match="unknown scale_mode 7"):
            cb.gemm(c, c, c, 8, 8, 8, lda=8, ldb=8, ldc=8, scale_mode=7)
        # The same command buffer still encodes and runs a plain gemm.
        ones = np.ones((8, 8), np.float32)
        c.write(0, ones)
        cb.gemm(c, c, c, 8, 8, 8, lda=8, ldb=8, ldc=8, c_offset=8 * 8 * 4)
        cb.commit_wait()
    got = np.frombuffer(c.read(8 * 8 * 4, 8 * 8 * 4), np.float32)
    np.testing.assert_array_equal(got, np.full(64, 8.0, np.float32))
    # And an executable on the same device compiles and runs an FP8 x FP8 product (the kernel path).
    g, _ = _graph(16, 32, 32, bias=False, activation=None)
    xc, xs = fp8.quantize_array(np.random.default_rng(1).standard_normal((16, 32)), "f8e4m3", "channel")
    wc, ws = fp8.quantize_array(np.random.default_rng(2).standard_normal((32, 32)), "f8e4m3", "channel")
    # "host", not "cpu": the suite points "cpu" at --rlx-device (tests/conftest.py).
    exe = rlx.compile(g, device="host", params={"w": wc, "ws": ws})
    assert not any(k and k.startswith("fp8_gemm_epilogue") for k in kernels_of(exe))
    got = exe.run(x=xc, xs=xs.reshape(16, 1))["y"]
    want = scaled_values(xc, xs, (1, 32)) @ scaled_values(wc, ws, (1, 32)).T
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---- products on the device under test ------------------------------------------------------
def _check_product(monkeypatch, m, n, k, *, dtype="f32", w_granularity="channel", act="gelu", big=False,
                   device="cpu", x_granularity="row", bias=True):
    """The product through the FP8 gemm wherever the target has it and the
    shape is legal (the cost model's choice pinned to it: its pricing is
    tested above), else through the kernel path."""
    from rlx.tune.cost import CostModel

    monkeypatch.setattr(CostModel, "prefer_fp8_gemm", lambda self, *a, **kw: True)
    if big and device in ("cpu", "host", "metal"):
        pytest.skip("the large shapes run where the device has FP8 gemms (cuda, compute capability >= 8.9)")
    r = np.random.default_rng(m + 7 * n + 13 * k)
    x_gran = "channel" if x_granularity == "row" else "tensor"
    xc, xs = fp8.quantize_array(r.standard_normal((m, k)) * r.uniform(0.1, 3, (m, 1)), "f8e4m3", x_gran)
    wc, ws = fp8.quantize_array(r.standard_normal((n, k)) * r.uniform(0.1, 3, (n, 1)), "f8e4m3", w_granularity)
    b = r.standard_normal(n).astype(np.float32 if dtype == "f32" else np.float16)
    g, _ = _graph(m, n, k, dtype=dtype, w_granularity=w_granularity, activation=act, bias=bias,
                  x_granularity=x_granularity)
    exe = rlx.compile(g, params={"w": wc, "ws": ws, **({"b": b} if bias else {})})
    took = any(t.gemm is not None and t.gemm["dtype"] == DTYPE_F8E4M3 for t in exe.thunks)
    if big and not exe.target.gemm_fp8:
        pytest.skip("the large shapes run where the device has FP8 gemms (cuda, compute capability >= 8.9)")
    assert took == (exe.target.gemm_fp8 and fp8_gemm_shape_ok(m, n, k))
    # The direct forms have no epilogue (no bias or activation; per-tensor scales, or per-row x and
    # per-channel w scales where the device's gemm takes them as outer vectors); every other form has one.
    outer = x_granularity == "row" and w_granularity == "channel" and dtype in exe.target.gemm_fp8_outer
    direct = not bias and act is None and ((x_granularity == "tensor" and w_granularity == "tensor") or outer)
    assert any(kern and kern.startswith("fp8_gemm_epilogue") for kern in kernels_of(exe)) == (took and not direct)
    modes = {t.gemm["scale_mode"] for t in exe.thunks if t.gemm is not None and t.gemm["dtype"] == DTYPE_F8E4M3}
    assert modes == ({int(outer and direct)} if took else set())
    got = exe.run(x=xc, xs=xs.reshape(m, 1) if x_granularity == "row" else xs.reshape(1, 1))["y"].astype(np.float64)
    xv = scaled_values(xc, xs, (1, k) if x_granularity == "row" else (m, k))
    wv = scaled_values(wc, ws, (1, k) if w_granularity == "channel" else (n, k))
    pre = xv @ wv.T + (b.astype(np.float64) if bias else 0.0)
    size = np.abs(xv) @ np.abs(wv).T
    slack = 2e-4 if took else 1e-5
    if dtype == "f16":
        slack += 4e-3
    if act == "gelu":
        from scipy.special import erf

        want = 0.5 * pre * (1 + erf(pre / np.sqrt(2)))
    else:
        want = pre
    bound = 1.2 * (slack * size + 1e-6) + (4e-3 if dtype == "f16" else 0) * np.abs(want)
    excess = np.abs(got - want) - bound
    assert (excess <= 0).all(), (float(excess.max()), took)


@pytest.mark.parametrize("m,n,k,dtype,w_granularity", [
    (37, 48, 64, "f32", "channel"),       # odd m: legal (m is free)
    (129, 272, 160, "f16", "tensor"),
    (9, 16, 16, "f32", "channel"),        # the first m past the GEMV
    (37, 40, 72, "f32", "channel"),       # k = 72: not a multiple of 16, the kernel path everywhere
    (33, 50, 64, "f16", "channel"),       # n = 50: the kernel path everywhere
])
def test_fp8_x_fp8_product_on_the_device(monkeypatch, m, n, k, dtype, w_granularity):
    _check_product(monkeypatch, m, n, k, dtype=dtype, w_granularity=w_granularity)


# The two scale layouts the FP8 gemm takes without an epilogue: per tensor
# (torch._scaled_mm's tensorwise call) and x per row with w per channel (its
# rowwise call, cuBLASLt's outer-vector scales).
DIRECT_SCALES = [pytest.param("tensor", "tensor", id="tensorwise"), pytest.param("row", "channel", id="rowwise")]


@pytest.mark.parametrize("x_granularity,w_granularity", DIRECT_SCALES)
@pytest.mark.parametrize("m,n,k,dtype", [
    (37, 48, 64, "f32"),
    (129, 272, 160, "f16"),
    (9, 16, 16, "f16"),
    (33, 50, 64, "f32"),                  # n = 50: the kernel path everywhere
])
def test_fp8_x_fp8_direct_form_on_the_device(monkeypatch, m, n, k, dtype, x_granularity, w_granularity):
    """No bias, no activation: the scaled gemm alone where the device's FP8
    gemm takes these scales (per tensor: its scale pointers; per row and
    channel: outer-vector scales, where gemm_fp8_outer has the dtype), the
    gemm and the epilogue where it has FP8 gemms without them, the kernel
    path elsewhere; all against the float64 product."""
    _check_product(monkeypatch, m, n, k, dtype=dtype, w_granularity=w_granularity, x_granularity=x_granularity,
                   act=None, bias=False)


@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (4096, 1536, 384), (4096, 384, 1536), (128, 2048, 640),
                                   (128, 640, 2048)])
def test_fp8_x_fp8_large_products_through_the_fp8_gemm(request, monkeypatch, m, n, k):
    _check_product(monkeypatch, m, n, k, dtype="f16", act=None, big=True,
                   device=request.config.getoption("--rlx-device"))


@pytest.mark.parametrize("x_granularity,w_granularity", DIRECT_SCALES)
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (128, 2048, 640)])
def test_fp8_x_fp8_large_direct_form(request, monkeypatch, m, n, k, x_granularity, w_granularity):
    _check_product(monkeypatch, m, n, k, dtype="f16", act=None, big=True, w_granularity=w_granularity,
                   x_granularity=x_granularity, bias=False, device=request.config.getoption("--rlx-device"))
