"""Shim conformance: every shim that loads here (host today; cuda and metal
later) must pass these, written against rlx.runtime.shim only."""

from __future__ import annotations

import ctypes
import os
import threading
import time

import numpy as np
import pytest

from rlx.errors import DeviceError, DeviceUnavailableError, KernelCompileError, RlxError, UnsupportedOpError
from rlx.runtime import params as P
from rlx.runtime import shim
from rlx.runtime.shim import DTYPE_F16, DTYPE_F32, PIPELINE_INDIRECT, CommandBuffer, Device, Icb, Queue


def _backend_params():
    params = []
    for name, st in shim.shim_status().items():
        usable = st["loaded"] and st["reason"] is None
        marks = () if usable else pytest.mark.skip(reason=f"{name} shim not usable here: {st['reason']}")
        params.append(pytest.param(name, id=name, marks=marks))
    return params


@pytest.fixture(params=_backend_params())
def backend(request) -> str:
    return request.param


@pytest.fixture
def device(backend) -> Device:
    return shim.open_device(backend, 0)


@pytest.fixture
def lib(device):
    return device.builtin_library()


# ---- helpers ---------------------------------------------------------------------
NP_DTYPE = {"f32": np.float32, "f16": np.float16}
ADD, MUL = 0, 1


def binary_params(n, op, *, shape=None, a_strides=None, b_strides=None, a_offset=0, b_offset=0) -> bytes:
    """shaders/binary.h BinaryParams: n, ndim, op, contiguous, a_offset, b_offset,
    pad0, pad1, shape[6], a_strides[6], b_strides[6] (all uint32)."""
    p = np.zeros(8 + 18, np.uint32)
    contiguous = shape is None
    shape = shape or (n,)
    p[:8] = [n, len(shape), op, int(contiguous), a_offset, b_offset, 0, 0]
    p[8:8 + len(shape)] = shape
    p[14:14 + len(shape)] = a_strides or (1,)
    p[20:20 + len(shape)] = b_strides or (1,)
    return p.tobytes()


def upload(device, array: np.ndarray, extra: int = 0):
    buf = device.alloc(array.nbytes + extra)
    buf.write(0, np.ascontiguousarray(array))
    return buf


def download(buf, dtype, count, offset=0) -> np.ndarray:
    return np.frombuffer(buf.read(offset, count * np.dtype(dtype).itemsize), dtype=dtype).copy()


def run_binary(device, lib, dt, a, b, n, params: bytes, groups, via_bytes=False):
    """out[:n] = binary(a, b) with params bound at binding 3 (a buffer, or set_bytes)."""
    da, db = upload(device, a), upload(device, b)
    out = device.alloc(n * np.dtype(NP_DTYPE[dt]).itemsize)
    pbuf = upload(device, np.frombuffer(params, np.uint8))
    with CommandBuffer(device) as cb:
        cb.set_pipeline(lib.pipeline(f"binary_{dt}"))
        cb.set_buffer(0, da)
        cb.set_buffer(1, db)
        cb.set_buffer(2, out)
        if via_bytes:
            cb.set_bytes(3, params)
        else:
            cb.set_buffer(3, pbuf)
        cb.dispatch((groups, 1, 1), (32, 1, 1))
        cb.commit()
        seconds = cb.wait()
    assert seconds >= 0.0
    return download(out, NP_DTYPE[dt], n)


def rng(seed=0):
    return np.random.default_rng(seed)


# ---- ABI and device --------------------------------------------------------------
def test_get_api_rejects_other_abi_versions(backend):
    lib = ctypes.CDLL(str(shim.library_path(backend)))
    lib.rlx_shim_get_api.restype = ctypes.c_void_p
    lib.rlx_shim_get_api.argtypes = [ctypes.c_uint32]
    assert lib.rlx_shim_get_api(999) is None
    assert lib.rlx_shim_get_api(0) is None
    assert lib.rlx_shim_get_api(shim.ABI_VERSION) == shim.load_shim(backend).api_address
    api = shim.load_shim(backend).api.contents
    assert api.abi_version == shim.ABI_VERSION
    assert api.struct_size >= ctypes.sizeof(shim.ShimApi)
    assert api.backend.decode() == backend


def test_shim_status_lists_every_backend():
    status = shim.shim_status()
    assert set(status) == {"host", "cuda", "metal"}
    for st in status.values():
        assert set(st) == {"loaded", "path", "reason"}
        assert st["loaded"] or st["reason"]


def test_device_info_is_sane(backend, device):
    info = device.info
    assert info.name and info.hardware_id
    assert info.max_buffer_length >= 1 << 26
    assert 1 <= info.max_threads_per_group <= 4096
    assert info.simd_width >= 1 and info.compute_units >= 1
    assert isinstance(info.unified_memory, bool) and isinstance(info.supports_f16, bool)
    assert set(info.as_dict()) >= {"name", "hardware_id", "max_buffer_length", "compute_units"}
    assert shim.load_shim(backend).api.contents.device_count() >= 1
    assert device.shim.unavailable_reason() is None
    fresh = Device.open(backend)  # a second open sees the same hardware
    try:
        assert fresh.info.hardware_id == info.hardware_id
    finally:
        fresh.close()
    assert shim.open_device(backend, 0) is device


def test_missing_device_index_is_unavailable(backend):
    count = shim.load_shim(backend).api.contents.device_count()
    with pytest.raises(DeviceUnavailableError):
        Device.open(backend, count + 5)


def test_unknown_backend_is_unavailable():
    with pytest.raises(DeviceUnavailableError, match="nosuch"):
        shim.load_shim("nosuch")


# ---- buffers -----------------------------------------------------------------------
def test_buffer_write_read_and_host_view(device):
    buf = device.alloc(1000)
    assert buf.size == 1000 and buf.address
    assert buf.read(0, 1000) == bytes(1000), "new buffers are zero-initialized"
    data = np.arange(250, dtype=np.float32)
    buf.write(0, data)
    buf.write(4, b"\x00\x00\x80\x3f")  # element 1 := 1.0
    expect = data.copy()
    expect[1] = 1.0
    np.testing.assert_array_equal(download(buf, np.float32, 250), expect)
    assert buf.read(996, 4) == np.float32(249).tobytes()
    if device.info.unified_memory:
        assert buf.host_address and buf.host_address % 128 == 0
        view = buf.numpy_view(np.float32, 8, 10)
        np.testing.assert_array_equal(view, expect[2:12])
        view[0] = -5.0
        assert download(buf, np.float32, 1, offset=8)[0] == -5.0
    buf.free()
    buf.free()  # idempotent
    big = device.alloc((3 << 20) + 4)  # large buffers too are zeroed and bounds-checked
    assert big.read(big.size - 64, 64) == bytes(64)
    big.write(big.size - 4, b"abcd")
    assert big.read(big.size - 8, 8) == bytes(4) + b"abcd"
    with pytest.raises(RlxError):
        big.read(big.size - 3, 4)
    big.free()


def test_buffer_bounds_errors(device):
    api = device.shim.api.contents
    buf = device.alloc(64)
    src = ctypes.create_string_buffer(128)
    assert api.buffer_size(buf.address) == 64
    assert api.buffer_write(buf.address, 0, ctypes.addressof(src), 64) == shim.OK
    assert api.buffer_write(buf.address, 1, ctypes.addressof(src), 64) == shim.ERR_ARG
    assert "64" in device.shim.last_error()
    assert api.buffer_write(buf.address, 65, ctypes.addressof(src), 0) == shim.ERR_ARG
    assert api.buffer_read(buf.address, 60, ctypes.addressof(src), 8) == shim.ERR_ARG
    assert api.buffer_read(buf.address, 2**64 - 1, ctypes.addressof(src), 2) == shim.ERR_ARG
    assert api.buffer_write(None, 0, ctypes.addressof(src), 1) == shim.ERR_ARG
    assert api.buffer_read(buf.address, 64, ctypes.addressof(src), 0) == shim.OK
    with pytest.raises(RlxError):
        buf.write(60, b"12345678")
    with pytest.raises(RlxError):
        buf.read(0, 65)
    with pytest.raises(RlxError):
        device.alloc(device.info.max_buffer_length + 1)
    buf.free()


# ---- pipelines ---------------------------------------------------------------------
def test_builtin_pipeline_lookup(lib):
    p = lib.pipeline("binary_f32")
    assert p.address and p.name == "binary_f32"
    assert p.max_threads_per_group >= 1 and p.execution_width >= 1
    assert lib.pipeline("binary_f32") is p
    assert lib.pipeline("binary_f32", PIPELINE_INDIRECT).address
    with pytest.raises(UnsupportedOpError, match="no_such_kernel_f32"):
        lib.pipeline("no_such_kernel_f32")


# ---- dispatch ----------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["f32", "f16"])
@pytest.mark.parametrize("n", [1, 7, 33, 1023])
@pytest.mark.parametrize("groups", [1, 3, 64])
def test_binary_contiguous(device, lib, dt, n, groups):
    r = rng(n * 100 + groups)
    a = r.standard_normal(n).astype(NP_DTYPE[dt])
    b = r.standard_normal(n).astype(NP_DTYPE[dt])
    for op, ref in ((ADD, a + b), (MUL, a * b)):
        got = run_binary(device, lib, dt, a, b, n, binary_params(n, op), groups, via_bytes=(groups == 3))
        tol = 1e-6 if dt == "f32" else 2e-3
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_binary_broadcast_through_strides(device, lib, dt):
    r = rng(7)
    # a: (3, 1, 5) at element offset 2 of its buffer; b: (4, 5) read as (1, 4, 5).
    a_full = r.standard_normal(2 + 15).astype(NP_DTYPE[dt])
    b = r.standard_normal(20).astype(NP_DTYPE[dt])
    a = a_full[2:].reshape(3, 1, 5)
    ref = a + b.reshape(1, 4, 5)
    params = binary_params(60, ADD, shape=(3, 4, 5), a_strides=(5, 0, 1), b_strides=(0, 5, 1), a_offset=2)
    for groups in (1, 5, 64):
        got = run_binary(device, lib, dt, a_full, b, 60, params, groups)
        np.testing.assert_allclose(got.reshape(3, 4, 5), ref, rtol=2e-3, atol=2e-3)
    # a transposed view: out[i, j] = a[j, i] * b[i, j]
    at = r.standard_normal((6, 4)).astype(NP_DTYPE[dt])
    bt = r.standard_normal((4, 6)).astype(NP_DTYPE[dt])
    params = binary_params(24, MUL, shape=(4, 6), a_strides=(1, 4), b_strides=(6, 1))
    got = run_binary(device, lib, dt, at, bt, 24, params, 3)
    np.testing.assert_allclose(got.reshape(4, 6), at.T * bt, rtol=2e-3, atol=2e-3)


def test_dispatch_grid_in_three_dimensions(device, lib):
    # The kernel's range loop covers x only; the y and z groups redo the same
    # chunks, so the result must still be exact (idempotent writes).
    n = 100
    a, b = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    da, db, out = upload(device, a), upload(device, b), device.alloc(4 * n)
    with CommandBuffer(device) as cb:
        cb.set_pipeline(lib.pipeline("binary_f32"))
        for i, buf in enumerate((da, db, out)):
            cb.set_buffer(i, buf)
        cb.set_bytes(3, binary_params(n, ADD))
        cb.dispatch((4, 3, 2))
        cb.commit()
        cb.wait()
    np.testing.assert_array_equal(download(out, np.float32, n), a + 1)


# ---- gemm --------------------------------------------------------------------------
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


# ---- command buffers ---------------------------------------------------------------
def _encode_increments(cb, lib, x, one, pbuf, count):
    cb.set_pipeline(lib.pipeline("binary_f32"))
    cb.set_buffer(0, x)
    cb.set_buffer(1, one)
    cb.set_buffer(2, x)
    cb.set_buffer(3, pbuf)
    for _ in range(count):
        cb.dispatch((4, 1, 1))
        cb.barrier()


def test_async_commit_then_wait(device, lib):
    n = 4096
    x = upload(device, np.zeros(n, np.float32))
    one = upload(device, np.ones(n, np.float32))
    pbuf = upload(device, np.frombuffer(binary_params(n, ADD), np.uint8))
    cb = CommandBuffer(device)
    _encode_increments(cb, lib, x, one, pbuf, 100)
    cb.commit()
    time.sleep(0.01)  # commit returned; execution proceeds without us
    seconds = cb.wait()
    assert 0.0 <= seconds < 10.0
    assert cb.wait() == seconds  # waiting again is harmless
    cb.release()
    np.testing.assert_array_equal(download(x, np.float32, n), np.full(n, 100, np.float32))
    # Commit order is execution order, and release waits for a committed buffer.
    cbs = [CommandBuffer(device) for _ in range(3)]
    for c in cbs:
        _encode_increments(c, lib, x, one, pbuf, 10)
        c.commit()
    cbs[2].wait()
    for c in cbs:
        c.release()
    np.testing.assert_array_equal(download(x, np.float32, n), np.full(n, 130, np.float32))


def test_two_threads_two_command_buffers(device, lib):
    errors: list[BaseException] = []

    def worker(seed):
        try:
            n = 777 + seed
            r = rng(seed)
            x = r.standard_normal(n).astype(np.float32)
            one = np.ones(n, np.float32)
            dx, d1 = upload(device, x), upload(device, one)
            pbuf = upload(device, np.frombuffer(binary_params(n, ADD), np.uint8))
            for _ in range(20):
                with CommandBuffer(device) as cb:
                    _encode_increments(cb, lib, dx, d1, pbuf, 5)
                    cb.commit()
                    cb.wait()
            np.testing.assert_allclose(download(dx, np.float32, n), x + 100, rtol=1e-5)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# ---- indirect command buffers ------------------------------------------------------
def test_icb_record_and_replay(device, lib):
    n = 100
    x0 = np.linspace(-1, 1, n).astype(np.float32)
    x = upload(device, x0)
    one = upload(device, np.ones(n, np.float32))
    two = upload(device, np.full(n, 2, np.float32))
    # Both params structs in one buffer, bound at different offsets (128-aligned).
    params = device.alloc(256)
    params.write(0, binary_params(n, ADD))
    params.write(128, binary_params(n, MUL))
    add = lib.pipeline("binary_f32", PIPELINE_INDIRECT)
    icb = Icb(device, 4)
    icb.encode_dispatch(0, add, [x, one, x, (params, 0)], (3, 1, 1))
    icb.encode_dispatch(1, add, [x, two, x, (params, 128)], (1, 1, 1), barrier_before=True)
    with CommandBuffer(device) as cb:
        cb.execute_icb(icb, 0, 2)
        cb.barrier()
        cb.execute_icb(icb, 0, 2)  # replay: x = ((x + 1) * 2 + 1) * 2
        cb.commit()
        cb.wait()
    expect = ((x0 + 1) * 2 + 1) * 2
    np.testing.assert_allclose(download(x, np.float32, n), expect, rtol=1e-6)
    with CommandBuffer(device) as cb:
        cb.execute_icb(icb, 1, 1)  # range replay: only the multiply
        cb.execute_icb(icb, 0, 0)  # empty range: nothing
        cb.commit()
        cb.wait()
    np.testing.assert_allclose(download(x, np.float32, n), expect * 2, rtol=1e-6)
    # Re-encoding an entry changes later replays.
    icb.encode_dispatch(1, add, [x, one, x, (params, 0)], (2, 1, 1))
    with CommandBuffer(device) as cb:
        cb.execute_icb(icb, 1, 1)
        cb.commit()
        cb.wait()
    np.testing.assert_allclose(download(x, np.float32, n), expect * 2 + 1, rtol=1e-6)
    icb.free()
    icb.free()


def test_unencoded_icb_entry_fails_at_wait_and_device_survives(device, lib):
    n = 16
    x = upload(device, np.zeros(n, np.float32))
    one = upload(device, np.ones(n, np.float32))
    params = upload(device, np.frombuffer(binary_params(n, ADD), np.uint8))
    icb = Icb(device, 3)
    icb.encode_dispatch(0, lib.pipeline("binary_f32", PIPELINE_INDIRECT), [x, one, x, params], (1, 1, 1))
    cb = CommandBuffer(device)
    cb.execute_icb(icb, 0, 3)
    with pytest.raises(DeviceError):
        cb.commit()
        cb.wait()
    cb.release()
    # The device still works, and so does the ICB's encoded range.
    with CommandBuffer(device) as cb:
        cb.execute_icb(icb, 0, 1)
        cb.commit()
        cb.wait()
    assert download(x, np.float32, n)[0] in (1.0, 2.0)  # entry 0 may or may not have run before the error
    icb.free()


def test_icb_bad_arguments(device, lib):
    buf = device.alloc(64)
    icb = Icb(device, 2)
    pipe = lib.pipeline("binary_f32", PIPELINE_INDIRECT)
    with pytest.raises(RlxError):
        icb.encode_dispatch(2, pipe, [buf], (1, 1, 1))       # index >= capacity
    with pytest.raises(RlxError):
        icb.encode_dispatch(0, None, [buf], (1, 1, 1))       # no pipeline
    with pytest.raises(RlxError):
        icb.encode_dispatch(0, pipe, [(buf, 65)], (1, 1, 1))  # offset past the end
    with pytest.raises(RlxError):
        icb.encode_dispatch(0, pipe, [buf], (0, 1, 1))       # zero groups
    with pytest.raises(RlxError):
        icb.encode_dispatch(0, pipe, [buf] * 13, (1, 1, 1))  # more than MAX_BINDINGS
    with CommandBuffer(device) as cb:
        with pytest.raises(RlxError):
            cb.execute_icb(icb, 1, 2)                        # range past the capacity
        with pytest.raises(RlxError):
            cb.execute_icb(None, 0, 1)
    icb.free()
    with pytest.raises(RlxError):
        Icb(device, 0)


# ---- bad arguments -----------------------------------------------------------------
def test_bad_encoding_arguments_raise_and_do_not_record(device, lib):
    n = 8
    x = upload(device, np.zeros(n, np.float32))
    one = upload(device, np.ones(n, np.float32))
    cb = CommandBuffer(device)
    with pytest.raises(RlxError):
        cb.dispatch((1, 1, 1))                      # no pipeline set yet
    with pytest.raises(RlxError):
        cb.set_pipeline(None)
    cb.set_pipeline(lib.pipeline("binary_f32"))
    with pytest.raises(RlxError, match="99"):
        cb.set_buffer(99, x)                        # binding index out of range
    with pytest.raises(RlxError):
        cb.set_buffer(shim.MAX_BINDINGS, x)
    with pytest.raises(RlxError):
        cb.set_buffer(0, x, 4 * n + 1)              # offset past the end
    with pytest.raises(RlxError):
        cb.set_buffer(0, None)
    with pytest.raises(RlxError):
        cb.set_bytes(3, bytes(4097))                # over the 4096-byte limit
    with pytest.raises(RlxError):
        cb.set_bytes(99, bytes(8))
    with pytest.raises(RlxError):
        cb.dispatch((0, 1, 1))                      # zero groups
    with pytest.raises(RlxError):
        cb.dispatch((1, 0, 1))
    with pytest.raises(RlxError):
        cb.dispatch((1, 1, 1), (2048, 1, 1))        # too many threads per group
    with pytest.raises(RlxError):
        cb.wait()                                   # wait before commit
    cb.set_buffer(0, x, 4 * n)                      # offset == size is a legal (empty) binding
    cb.set_buffer(0, x)
    cb.set_buffer(1, one)
    cb.set_buffer(2, x)
    cb.set_bytes(3, binary_params(n, ADD))
    cb.dispatch((2, 1, 1))
    cb.commit()
    with pytest.raises(RlxError):
        cb.commit()                                 # commit twice
    with pytest.raises(RlxError):
        cb.dispatch((1, 1, 1))                      # encode after commit
    cb.wait()
    cb.release()
    np.testing.assert_array_equal(download(x, np.float32, n), np.ones(n, np.float32))  # exactly one add ran


def test_null_handles_are_arg_errors(device):
    api = device.shim.api.contents
    out = ctypes.c_void_p()
    assert api.cmd_commit(None) == shim.ERR_ARG
    assert api.cmd_wait(None, None) == shim.ERR_ARG
    assert api.cmd_begin(None, ctypes.byref(out)) == shim.ERR_ARG
    assert api.buffer_alloc(None, 16, ctypes.byref(out)) == shim.ERR_ARG
    assert api.library_compile(None, None, None, ctypes.byref(out)) == shim.ERR_ARG
    assert api.icb_create(None, 1, ctypes.byref(out)) == shim.ERR_ARG
    assert api.device_info(None, None) == shim.ERR_ARG
    assert device.shim.last_error()
    api.buffer_free(None)
    api.cmd_release(None)
    api.icb_free(None)
    api.library_free(None)
    api.pipeline_free(None)


# ---- user kernels ------------------------------------------------------------------
USER_KERNEL = """
struct ScaleParams { uint n; float scale; float bias; uint pad; };

template <typename T>
RLX_KERNEL scale_bias(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE T *, y, 1),
                      RLX_PARAMS(ScaleParams, p, 2) RLX_IDS) {
    RLX_FOR_RANGE(i, p->n) {
        y[i] = rlx_from_float<T>(rlx_to_float(x[i]) * p->scale + p->bias);
    }
}
RLX_INSTANTIATE(scale_bias, float, scale_bias_f32)
RLX_INSTANTIATE(scale_bias, half, scale_bias_f16)
"""


def _cache_files(root) -> dict[str, int]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            path = os.path.join(dirpath, f)
            out[path] = os.stat(path).st_mtime_ns
    return out


@pytest.fixture
def fresh_device(backend, tmp_path, monkeypatch):
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "cache"))
    dev = Device.open(backend)
    yield dev
    dev.close()


def test_user_kernel_compiles_and_runs(fresh_device):
    dev = fresh_device
    lib = dev.compile_library(USER_KERNEL)
    n = 1001
    x = np.linspace(-3, 3, n).astype(np.float32)
    dx, dy = upload(dev, x), dev.alloc(4 * n)
    params = np.array([n, 0, 0, 0], np.uint32)
    params[1:3] = np.array([2.5, -1.0], np.float32).view(np.uint32)
    with CommandBuffer(dev) as cb:
        cb.set_pipeline(lib.pipeline("scale_bias_f32"))
        cb.set_buffer(0, dx)
        cb.set_buffer(1, dy)
        cb.set_bytes(2, params.tobytes())
        cb.dispatch((7, 1, 1), (64, 1, 1))
        cb.commit()
        cb.wait()
    np.testing.assert_allclose(download(dy, np.float32, n), x * 2.5 - 1.0, rtol=1e-6, atol=1e-6)
    assert lib.pipeline("scale_bias_f16").address
    with pytest.raises(UnsupportedOpError, match="scale_bias_f64"):
        lib.pipeline("scale_bias_f64")
    for b in (dx, dy):
        b.free()


def test_user_kernel_compile_error_carries_compiler_output(fresh_device):
    bad = USER_KERNEL + "\nRLX_KERNEL broken() { rlx_undeclared_identifier_xyz = 1; }\n"
    with pytest.raises(KernelCompileError, match="rlx_undeclared_identifier_xyz"):
        fresh_device.compile_library(bad)


def test_user_kernel_disk_cache(backend, fresh_device, tmp_path):
    fresh_device.compile_library(USER_KERNEL, None)
    first = _cache_files(tmp_path / "cache")
    if backend == "metal":
        pytest.skip("metal compiles source in memory (no disk cache)")
    assert first, "a compiled kernel library is cached on disk"
    other = Device.open(backend)  # a new device (as in a new process) reuses the file
    try:
        t0 = time.perf_counter()
        other.compile_library(USER_KERNEL, None).pipeline("scale_bias_f32")
        elapsed = time.perf_counter() - t0
        assert _cache_files(tmp_path / "cache") == first, "the second compile wrote nothing"
        assert elapsed < 0.25, f"cache hit took {elapsed:.3f}s"
        other.compile_library(USER_KERNEL, "-DRLX_TEST_OPTION=1")  # other options: another entry
        assert len(_cache_files(tmp_path / "cache")) > len(first)
    finally:
        other.close()


# ---- host-only behaviour -----------------------------------------------------------
def test_host_options(tmp_path, monkeypatch):
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    with pytest.raises(RlxError, match="bogus"):
        Device.open("host", options_override={"bogus": "1"})
    with pytest.raises(RlxError, match="threads"):
        Device.open("host", options_override={"threads": "0"})
    with pytest.raises(RlxError, match="blas"):
        Device.open("host", options_override={"blas": str(tmp_path / "libnothere.so")})
    dev = Device.open("host", options_override={"cxx": str(tmp_path / "no-such-c++"), "threads": "3"})
    try:
        assert dev.info.compute_units == 3
        with pytest.raises(KernelCompileError, match="no C\\+\\+ compiler"):
            dev.compile_library(USER_KERNEL)
    finally:
        dev.close()


def test_host_gemm_without_blas(tmp_path, monkeypatch):
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    dev = Device.open("host", options_override={"blas": ""})
    try:
        assert "[no BLAS]" in dev.info.name
        r = rng(3)
        a = r.standard_normal((300, 70)).astype(np.float32)
        b = r.standard_normal((300, 260)).astype(np.float32)
        da, db, dc = upload(dev, a), upload(dev, b), dev.alloc(70 * 260 * 4)
        with CommandBuffer(dev) as cb:
            cb.gemm(da, db, dc, 70, 260, 300, lda=70, ldb=260, ldc=260, trans_a=True)
            cb.commit()
            cb.wait()
        np.testing.assert_allclose(download(dc, np.float32, 70 * 260).reshape(70, 260), a.T @ b,
                                   rtol=1e-4, atol=1e-3)
        for buf in (da, db, dc):
            buf.free()
    finally:
        dev.close()


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


def test_upload_and_download_travel_with_the_command_buffer(device, lib):
    """cmd_upload's bytes are taken at the call and land before the commands
    run; cmd_download's land in the destination by the time wait returns.
    Shims with host-visible memory may decline both by name."""
    n = 37
    x = np.arange(n, dtype=np.float32)
    buf = device.alloc(4096)
    out = np.zeros(n, np.float32)
    pipe = lib.pipeline("binary_f32", PIPELINE_INDIRECT)
    params = device.alloc(256)
    params.write(0, P.binary(n, 0, True, 0, 0, (n,), (1,), (1,)))
    with CommandBuffer(device) as cb:
        try:
            cb.upload(buf, 0, x)
        except RlxError as e:
            assert device.shim.backend == "metal" and "host-visible" in str(e)
            return
        x[:] = -1.0                              # taken at the call: this change is not uploaded
        cb.set_pipeline(pipe)
        for i, b in enumerate((buf, buf, buf, params)):
            cb.set_buffer(i, b, 0)
        cb.dispatch((1, 1, 1), (32, 1, 1))
        cb.download(buf, 0, out)
        with pytest.raises(RlxError, match="outside"):
            cb.download(buf, 4090, out)
        cb.commit()
        cb.wait()
    np.testing.assert_array_equal(out, 2 * np.arange(n, dtype=np.float32))


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
        if bias and not dev.info.gemm_bias:   # refusal is test_gemm_bias_epilogue_matches_numpy's
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
    if not device.info.gemm_bias:
        pytest.skip(f"{device.shim.backend}: no bias epilogue (test_gemm_bias_epilogue_matches_numpy checks refusal)")
    a, b, c = (device.alloc(4 * 4 * 4) for _ in range(3))
    small = device.alloc(8)
    with CommandBuffer(device) as cb:
        with pytest.raises(RlxError, match="bias spans bytes"):
            cb.gemm(a, b, c, 4, 4, 4, lda=4, ldb=4, ldc=4, bias=small)


# ---- queues ------------------------------------------------------------------------
@pytest.fixture
def queued_device(backend):
    """The device with queues switched on where that is an option (CUDA's
    queues=1, RLX_CUDA_QUEUES); the host always has them."""
    dev = Device.open(backend, 0, {"queues": "1"} if backend == "cuda" else None)
    yield dev
    dev.close()


def test_queues_order_their_own_buffers_and_run_beside_others(queued_device):
    """Two command buffers on one queue, committed before either is waited
    on: the second reads what the first wrote (commit order). A third queue
    works on its own buffers meanwhile, and the device's queue still works."""
    dev = queued_device
    if dev.backend == "metal":
        with pytest.raises(RlxError, match="queue"):
            Queue(dev)
        return
    if dev.backend == "cuda":   # off unless asked for (RLX_CUDA_QUEUES)
        with pytest.raises(RlxError, match="queues are off"):
            Queue(Device.open("cuda", 0, {"queues": "0"}))
    lib = dev.builtin_library()
    n = 1000
    ones = np.ones(n, np.float32)
    x, one = upload(dev, np.zeros(n, np.float32)), upload(dev, ones)
    y = upload(dev, np.full(n, 5.0, np.float32))
    params = upload(dev, np.frombuffer(binary_params(n, ADD), np.uint8))
    q1, q2 = Queue(dev), Queue(dev)

    def add_one(queue, buf):   # buf += 1, committed, not waited
        cb = CommandBuffer(dev, queue)
        cb.set_pipeline(lib.pipeline("binary_f32"))
        for i, b in enumerate((buf, one, buf, params)):
            cb.set_buffer(i, b)
        cb.dispatch(((n + 31) // 32, 1, 1), (32, 1, 1))
        cb.commit()
        return cb

    pending = [add_one(q1, x) for _ in range(3)] + [add_one(q2, y)] + [add_one(None, y)]
    for cb in pending:
        cb.wait()
        cb.release()
    np.testing.assert_array_equal(download(x, np.float32, n), 3.0)
    np.testing.assert_array_equal(download(y, np.float32, n), 7.0)
    q1.free()
    q2.free()


def test_cmd_begin_on_rejects_null(queued_device):
    api = queued_device.shim.api.contents
    handle = ctypes.c_void_p()
    assert api.cmd_begin_on(None, ctypes.byref(handle)) != 0
    assert api.queue_create(None, ctypes.byref(handle)) != 0
