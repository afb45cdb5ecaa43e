"""GEMM inside a command buffer: transposes, leading dimensions and offsets,
strided and two-level batches, mixed operand dtypes, the bias epilogue,
the same bits on a device opened again, bad descriptors."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.errors import RlxError, UnsupportedOpError
from rlx.runtime.shim import DTYPE_F16, DTYPE_F32, CommandBuffer, Device

from .helpers import NP_DTYPE, download, rng

GEMM_CASES = [
    # m, n, k, trans_a, trans_b, pad (extra leading-dim elements), alpha, beta
    (1, 1, 1, False, False, 0, 1.0, 0.0),
    (17, 23, 31, False, False, 0, 1.0, 0.0),
    (17, 23, 31, True, False, 3, 0.5, 0.0),
    (17, 23, 31, False, True, 5, 1.0, 1.0),
    (17, 23, 31, True, True, 1, -2.0, 0.25),
    (64, 96, 128, False, True, 0, 1.0, 0.0),
    (5, 7, 0, False, False, 2, 1.0, 0.5),
    # few rows against row-major weights (the decode / short-sentence shape)
    (1, 300, 384, False, True, 0, 1.0, 0.0),
    (9, 129, 37, False, True, 3, 0.5, 0.0),
    (16, 64, 16, False, True, 1, 1.0, 0.75),
    (3, 17, 1000, False, True, 0, -1.0, 1.0),
]


@pytest.mark.parametrize("dt", ["f32", "f16"])
@pytest.mark.parametrize("m,n,k,ta,tb,pad,alpha,beta", GEMM_CASES)
def test_gemm_matches_numpy(device, dt, m, n, k, ta, tb, pad, alpha, beta):
    np_dt = NP_DTYPE[dt]
    r = rng(m * n + k)
    a_rows, a_cols = (k, m) if ta else (m, k)
    b_rows, b_cols = (n, k) if tb else (k, n)
    lda, ldb, ldc = a_cols + pad, b_cols + pad, n + pad
    # Stored matrices with padded rows, placed at an offset inside their buffers.
    a_store = r.standard_normal((a_rows, lda)).astype(np_dt)
    b_store = r.standard_normal((b_rows, ldb)).astype(np_dt)
    c_store = r.standard_normal((m, ldc)).astype(np_dt)
    off = 3 * np.dtype(np_dt).itemsize * 4  # element-aligned, not 128-aligned
    a_buf, b_buf, c_buf = (device.alloc(off + x.nbytes + 64) for x in (a_store, b_store, c_store))
    a_buf.write(off, a_store)
    b_buf.write(off, b_store)
    c_buf.write(off, c_store)
    A = a_store[:, :a_cols].astype(np.float64)
    B = b_store[:, :b_cols].astype(np.float64)
    A, B = (A.T if ta else A), (B.T if tb else B)
    ref = alpha * (A @ B) + beta * c_store[:, :n].astype(np.float64)
    with CommandBuffer(device) as cb:
        cb.gemm(a_buf, b_buf, c_buf, m, n, k, lda=lda, ldb=ldb, ldc=ldc, trans_a=ta, trans_b=tb,
                dtype=DTYPE_F32 if dt == "f32" else DTYPE_F16, alpha=alpha, beta=beta,
                a_offset=off, b_offset=off, c_offset=off)
        cb.commit()
        cb.wait()
    got = download(c_buf, np_dt, m * ldc, offset=off).reshape(m, ldc)
    # f32: accumulation-order noise only. f16: inputs are exact in f16, the
    # accumulation is f32, so the error is the final f16 rounding (2^-11
    # relative) of results of size up to ~sqrt(k)*|alpha|: 1e-2 relative.
    tol = 1e-4 if dt == "f32" else 1e-2
    np.testing.assert_allclose(got[:, :n].astype(np.float64), ref, rtol=tol, atol=tol * max(1.0, np.sqrt(k)))
    np.testing.assert_array_equal(got[:, n:], c_store[:, n:])  # padding untouched


def test_gemm_bad_descriptors(device):
    a, b, c = device.alloc(4 * 16), device.alloc(4 * 16), device.alloc(4 * 16)
    good = dict(lda=4, ldb=4, ldc=4)
    bad = [
        dict(m=4, n=4, k=4, lda=3, ldb=4, ldc=4),             # lda < k
        dict(m=4, n=4, k=4, lda=4, ldb=4, ldc=3),             # ldc < n
        dict(m=5, n=4, k=4, **good),                           # A past the end
        dict(m=4, n=4, k=4, a_offset=4, **good),               # offset pushes A past the end
        dict(m=4, n=4, k=4, c_offset=2, **good),               # misaligned offset
        dict(m=-1, n=4, k=4, **good),
        dict(m=4, n=4, k=4, dtype=7, **good),
    ]
    with CommandBuffer(device) as cb:
        for kw in bad:
            with pytest.raises(RlxError):
                cb.gemm(a, b, c, **kw)
        with pytest.raises(RlxError):
            cb.gemm(None, b, c, 4, 4, 4, **good)
        cb.gemm(a, b, c, 4, 4, 4, **good)  # still usable; nothing bad was recorded
        cb.commit()
        cb.wait()


@pytest.mark.parametrize("dt", ["f32", "f16"])
@pytest.mark.parametrize("batch,stride_b_zero,tb", [(1, False, False), (3, False, True), (5, True, False),
                                                   (4, True, True)])
def test_strided_batched_gemm_matches_numpy(device, dt, batch, stride_b_zero, tb):
    """batch products at element strides; a B stride of 0 shares one B
    (grouped-query attention), and C entries may interleave (ldc > n)."""
    np_dt = NP_DTYPE[dt]
    r = rng(batch * 7 + int(tb))
    m, n, k = 5, 6, 7
    a = r.standard_normal((batch, m, k)).astype(np_dt)
    b_rows, b_cols = (n, k) if tb else (k, n)
    b = r.standard_normal((1 if stride_b_zero else batch, b_rows, b_cols)).astype(np_dt)
    # C entry i is columns [i*n, (i+1)*n) of one (m, batch*n) matrix: stride n, ldc batch*n.
    c = np.zeros((m, batch * n), np_dt)
    bufs = [device.alloc(x.nbytes + 64) for x in (a, b, c)]
    for buf, x in zip(bufs, (a, b, c)):
        buf.write(0, x)
    with CommandBuffer(device) as cb:
        cb.gemm(*bufs, m, n, k, lda=k, ldb=b_cols, ldc=batch * n, trans_b=tb,
                dtype=DTYPE_F32 if dt == "f32" else DTYPE_F16, batch=batch, stride_a=m * k,
                stride_b=0 if stride_b_zero else b_rows * b_cols, stride_c=n)
        cb.commit()
        cb.wait()
    got = download(bufs[2], np_dt, c.size).reshape(m, batch * n).astype(np.float64)
    for i in range(batch):
        bi = b[0 if stride_b_zero else i].astype(np.float64)
        want = a[i].astype(np.float64) @ (bi.T if tb else bi)
        tol = 1e-4 if dt == "f32" else 2e-2
        np.testing.assert_allclose(got[:, i * n:(i + 1) * n], want, rtol=tol, atol=tol)


def test_batched_gemm_bounds_are_checked_on_the_last_entry(device):
    a, b, c = (device.alloc(4 * 4 * 4) for _ in range(3))   # room for exactly one 4x4 f32 matrix each
    with CommandBuffer(device) as cb:
        with pytest.raises(RlxError, match="spans bytes"):
            cb.gemm(a, b, c, 4, 4, 4, lda=4, ldb=4, ldc=4, batch=2, stride_a=16, stride_b=0, stride_c=0)
        with pytest.raises(RlxError, match="batch"):
            cb.gemm(a, b, c, 4, 4, 4, lda=4, ldb=4, ldc=4, batch=-1)
        with pytest.raises(RlxError, match="outer"):
            cb.gemm(a, b, c, 4, 4, 4, lda=4, ldb=4, ldc=4, outer=-1)


@pytest.mark.parametrize("dt", ["f32", "f16"])
@pytest.mark.parametrize("batch,outer", [(1, 3), (4, 3), (3, 2)])
def test_two_level_batched_gemm_matches_numpy(device, dt, batch, outer):
    """Attention's (batch, head) grid over a [B, S, H, D] tensor: head h of
    sequence b starts at b*S*H*D + h*D with row stride H*D, which no single
    stride reaches; inner batch = heads (stride D), outer = sequences."""
    np_dt = NP_DTYPE[dt]
    r = rng(batch * 11 + outer)
    s, h, d = 5, batch, 3          # scores[b, h] = q[b, :, h] @ k[b, :, h]^T
    q = r.standard_normal((outer, s, h, d)).astype(np_dt)
    k = r.standard_normal((outer, s, h, d)).astype(np_dt)
    scores = np.zeros((outer, h, s, s), np_dt)
    bufs = [device.alloc(x.nbytes + 64) for x in (q, k, scores)]
    for buf, x in zip(bufs, (q, k, scores)):
        buf.write(0, x)
    with CommandBuffer(device) as cb:
        cb.gemm(*bufs, s, s, d, lda=h * d, ldb=h * d, ldc=s, trans_b=True,
                dtype=DTYPE_F32 if dt == "f32" else DTYPE_F16, batch=h, stride_a=d, stride_b=d, stride_c=s * s,
                outer=outer, outer_strides=(s * h * d, s * h * d, h * s * s))
        cb.commit()
        cb.wait()
    got = download(bufs[2], np_dt, scores.size).reshape(scores.shape).astype(np.float64)
    want = np.einsum("bshd,bthd->bhst", q.astype(np.float64), k.astype(np.float64))
    tol = 1e-5 if dt == "f32" else 2e-2
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_f16_gemm_with_f32_result_or_unsupported(device):
    """f16 A and B with an f32 C (attention scores kept wide) is optional:
    the shims that offer it must be exact to f32 accumulation, the others
    must refuse it by name, before anything runs."""
    r = rng(5)
    m, n, k = 7, 9, 33
    a = r.standard_normal((m, k)).astype(np.float16)
    b = r.standard_normal((k, n)).astype(np.float16)
    bufs = [device.alloc(x) for x in (a.nbytes, b.nbytes, m * n * 4)]
    bufs[0].write(0, a)
    bufs[1].write(0, b)
    with CommandBuffer(device) as cb:
        try:
            cb.gemm(*bufs, m, n, k, lda=k, ldb=n, ldc=n, dtype=DTYPE_F16, b_dtype=DTYPE_F16, c_dtype=DTYPE_F32)
        except UnsupportedOpError as e:
            assert device.shim.backend == "metal" and "f16 x f16 -> f32" in str(e)
            return
        cb.commit()
        cb.wait()
    got = download(bufs[2], np.float32, m * n).reshape(m, n)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-4)


def test_gemm_operand_type_mixes_are_checked(device):
    bufs = [device.alloc(256) for _ in range(3)]
    with CommandBuffer(device) as cb:
        with pytest.raises(RlxError, match="unknown dtype 7 for b"):
            cb.gemm(*bufs, 2, 2, 2, lda=2, ldb=2, ldc=2, b_dtype=7)
        with pytest.raises(UnsupportedOpError, match="f32 x f16 -> f32"):
            cb.gemm(*bufs, 2, 2, 2, lda=2, ldb=2, ldc=2, dtype=DTYPE_F32, b_dtype=DTYPE_F16)


@pytest.mark.parametrize("dt", ["f32", "f16"])
@pytest.mark.parametrize("m,n,k,tb", [(1, 7, 5, False), (16, 384, 384, True), (9, 33, 17, True), (130, 96, 64, False)])
def test_gemm_bias_epilogue_matches_numpy(device, dt, m, n, k, tb):
    """C = A @ op(B) + bias per column, where the device says its gemm takes
    a bias (rlx_device_info.gemm_bias); refused by name elsewhere. ldc > n so
    the bias must follow C's row stride, not its width."""
    np_dt = NP_DTYPE[dt]
    r = rng(m * 3 + n)
    a = r.standard_normal((m, k)).astype(np_dt)
    b = r.standard_normal((n, k) if tb else (k, n)).astype(np_dt)
    bias = r.standard_normal(n).astype(np_dt)
    ldc = n + 3
    c = np.full((m, ldc), 7.0, np_dt)
    bufs = [device.alloc(x.nbytes) for x in (a, b, c, bias)]
    for buf, x in zip(bufs, (a, b, c, bias)):
        buf.write(0, x)
    with CommandBuffer(device) as cb:
        try:
            cb.gemm(*bufs[:3], m, n, k, lda=k, ldb=k if tb else n, ldc=ldc, trans_b=tb,
                    dtype=DTYPE_F32 if dt == "f32" else DTYPE_F16, bias=bufs[3])
        except UnsupportedOpError as e:
            assert not device.info.gemm_bias and "bias" in str(e)
            return
        assert device.info.gemm_bias
        cb.commit()
        cb.wait()
    got = download(bufs[2], np_dt, c.size).reshape(m, ldc).astype(np.float64)
    want = a.astype(np.float64) @ (b.T if tb else b).astype(np.float64) + bias.astype(np.float64)
    tol = 1e-4 if dt == "f32" else 3e-2
    np.testing.assert_allclose(got[:, :n], want, rtol=tol, atol=tol)
    np.testing.assert_array_equal(got[:, n:], 7.0)       # the padding columns are not C's


@pytest.mark.parametrize("bias", [True, False])
def test_gemm_gives_the_same_bits_on_a_device_opened_again(backend, bias):
    """A device that tunes its gemms (CUDA's cuBLASLt plans, split-K picks
    included) keeps its picks for the process: a second device computes the
    same small-m product bit for bit, with and without a bias."""
    m, n, k = 128, 384, 1536
    r = rng(5)
    a = r.standard_normal((m, k)).astype(np.float32)
    b = r.standard_normal((k, n)).astype(np.float32)
    bias_v = r.standard_normal(n).astype(np.float32)
    results = []
    for _ in range(2):
        dev = Device.open(backend, 0)
        # cuda without cuBLASLt (a run-time fact; metal's is in backends.py). The
        # refusal is test_gemm_bias_epilogue_matches_numpy's.
        if bias and not dev.info.gemm_bias:
            dev.close()
            pytest.skip(f"{backend}: no bias epilogue")
        bufs = [dev.alloc(x.nbytes) for x in (a, b, np.empty((m, n), np.float32), bias_v)]
        for buf, x in zip(bufs, (a, b, None, bias_v)):
            if x is not None:
                buf.write(0, x)
        with CommandBuffer(dev) as cb:
            cb.gemm(*bufs[:3], m, n, k, lda=k, ldb=n, ldc=n, bias=bufs[3] if bias else None)
            cb.commit()
            cb.wait()
        results.append(download(bufs[2], np.float32, m * n))
        del bufs
        dev.close()
    np.testing.assert_array_equal(results[0], results[1])
    want = a.astype(np.float64) @ b.astype(np.float64) + (bias_v if bias else 0)
    np.testing.assert_allclose(results[0].reshape(m, n), want, rtol=1e-4, atol=1e-3)


def test_gemm_bias_range_is_checked(device):
    if not device.info.gemm_bias:   # cuda without cuBLASLt (run time; metal's is in backends.py)
        pytest.skip(f"{device.shim.backend}: no bias epilogue (test_gemm_bias_epilogue_matches_numpy checks refusal)")
    a, b, c = (device.alloc(4 * 4 * 4) for _ in range(3))
    small = device.alloc(8)
    with CommandBuffer(device) as cb:
        with pytest.raises(RlxError, match="bias spans bytes"):
            cb.gemm(a, b, c, 4, 4, 4, lda=4, ldb=4, ldc=4, bias=small)
