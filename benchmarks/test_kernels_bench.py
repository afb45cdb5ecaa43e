"""Host kernels at BERT and decoder shapes against numpy and PyTorch CPU
(same run; the ratio table prints at the end)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

SOFTMAX_SHAPES = {"bert-12x128x128": (12, 128, 128), "decoder-8x1x4096": (8, 1, 4096)}
NORM_SHAPES = {"bert-128x384": (128, 384), "decoder-1x2048": (1, 2048)}


def _softmax_exe(shape):
    g = rlx.Graph()
    g.set_outputs(y=g.softmax(g.input("x", shape)))
    return rlx.compile(g)


def _layernorm_exe(shape):
    g = rlx.Graph()
    x = g.input("x", shape)
    g.set_outputs(y=g.layernorm(x, g.param("w", shape[-1:]), g.param("b", shape[-1:])))
    d = shape[-1]
    return rlx.compile(g, params={"w": np.ones(d, np.float32), "b": np.zeros(d, np.float32)})


@pytest.mark.parametrize("case", list(SOFTMAX_SHAPES))
@pytest.mark.parametrize("who", ["rlx", "numpy", "torch"])
def test_softmax(benchmark, record, case, who):
    shape = SOFTMAX_SHAPES[case]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    if who == "rlx":
        exe = _softmax_exe(shape)
        benchmark(exe.run, x=x)
    elif who == "numpy":
        def np_softmax():
            e = np.exp(x - x.max(-1, keepdims=True))
            return e / e.sum(-1, keepdims=True)
        benchmark(np_softmax)
    else:
        torch = pytest.importorskip("torch", reason="PyTorch not installed: peer skipped")
        t = torch.from_numpy(x)
        benchmark(torch.softmax, t, -1)
    record(f"softmax {case}", who, benchmark)


@pytest.mark.parametrize("case", list(NORM_SHAPES))
@pytest.mark.parametrize("who", ["rlx", "numpy", "torch"])
def test_layernorm(benchmark, record, case, who):
    shape = NORM_SHAPES[case]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    w, b = np.ones(shape[-1], np.float32), np.zeros(shape[-1], np.float32)
    if who == "rlx":
        exe = _layernorm_exe(shape)
        benchmark(exe.run, x=x)
    elif who == "numpy":
        def np_ln():
            m = x.mean(-1, keepdims=True)
            v = ((x - m) ** 2).mean(-1, keepdims=True)
            return (x - m) / np.sqrt(v + 1e-5) * w + b
        benchmark(np_ln)
    else:
        torch = pytest.importorskip("torch", reason="PyTorch not installed: peer skipped")
        t, tw, tb = (torch.from_numpy(a) for a in (x, w, b))
        benchmark(torch.nn.functional.layer_norm, t, (shape[-1],), tw, tb)
    record(f"layernorm {case}", who, benchmark)


# Few rows against row-major weights (the small-M gemm of csrc/host_small_m.h),
# at every instruction-set level this CPU has (RLX_HOST_ISA's values), against
# numpy's matmul (its BLAS) and PyTorch on the same product.
SMALL_M_SHAPES = {"9x384x1536": (9, 384, 1536), "9x1536x384": (9, 1536, 384), "1x4096x4096": (1, 4096, 4096)}


def _small_m_device(level: str):
    from rlx.runtime.shim import Device

    try:
        dev = Device("host", 0, options_override={"isa": level})
    except rlx.RlxError:
        pytest.skip(f"{level} is not a level of this machine")
    marks = {"avx512": "[AVX-512 small-M]", "avx2": "[AVX2 small-M]", "neon": "[NEON small-M]"}
    if marks[level] not in dev.info.name:
        pytest.skip(f"no {level} small-M kernel on this CPU")
    return dev


@pytest.mark.parametrize("case", list(SMALL_M_SHAPES))
@pytest.mark.parametrize("who", ["rlx-avx512", "rlx-avx2", "rlx-neon", "numpy", "torch"])
def test_small_m_gemm(benchmark, record, case, who):
    from rlx.runtime.shim import CommandBuffer

    m, n, k = SMALL_M_SHAPES[case]
    r = np.random.default_rng(0)
    a, w = r.standard_normal((m, k)).astype(np.float32), r.standard_normal((n, k)).astype(np.float32)
    if who.startswith("rlx"):
        dev = _small_m_device(who.split("-")[1])
        bufs = [dev.alloc(x.nbytes) for x in (a, w)] + [dev.alloc(m * n * 4)]
        bufs[0].write(0, a)
        bufs[1].write(0, w)

        def gemm():
            with CommandBuffer(dev) as cb:
                cb.gemm(*bufs, m, n, k, lda=k, ldb=k, ldc=n, trans_b=True)
                cb.commit_wait()

        benchmark(gemm)
        got = np.frombuffer(bufs[2].read(0, m * n * 4), np.float32).reshape(m, n)
        np.testing.assert_allclose(got, a @ w.T, rtol=1e-3, atol=1e-3 * np.sqrt(k))
    elif who == "numpy":
        benchmark(np.matmul, a, w.T)
    else:
        torch = pytest.importorskip("torch", reason="PyTorch not installed: peer skipped")
        ta, tw = torch.from_numpy(a), torch.from_numpy(w)
        benchmark(torch.nn.functional.linear, ta, tw)
    record(f"small-M gemm {case}", who, benchmark)


CHAIN_SIZES = {"1M": (1 << 20,), "bert-8x128x384": (8, 128, 384)}


def _chain_graph(shape):
    """A dB conversion and a power spectrum's shape of work: 10 log10(max(a *
    a + b * b, 1e-10)), five elementwise ops (fused: one ew_chain pass)."""
    g = rlx.Graph()
    a, b = g.input("a", shape), g.input("b", shape)
    s = g.add(g.mul(a, a), g.mul(b, b))
    g.set_outputs(y=g.scale_shift(g.log(g.maximum(s, g.constant(np.float32(1e-10)))), scale=10 / np.log(10)))
    return g


@pytest.mark.parametrize("case", list(CHAIN_SIZES))
@pytest.mark.parametrize("who", ["rlx", "rlx-unfused", "numpy", "torch"])
def test_elementwise_chain(benchmark, record, case, who):
    shape = CHAIN_SIZES[case]
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    if who.startswith("rlx"):
        exe = rlx.compile(_chain_graph(shape), passes={"fusion": who == "rlx"})
        benchmark(exe.run, a=a, b=b)
    elif who == "numpy":
        benchmark(lambda: np.float32(10 / np.log(10)) * np.log(np.maximum(a * a + b * b, np.float32(1e-10))))
    else:
        torch = pytest.importorskip("torch", reason="PyTorch not installed: peer skipped")
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        benchmark(lambda: 10 * torch.log10(torch.clamp(ta * ta + tb * tb, min=1e-10)))
    record(f"chain {case}", who, benchmark)
