"""Command buffers: set pipeline / buffer / bytes, dispatch over 1-3D grids,
barriers, asynchronous commit and wait, two threads, and the errors of bad
arguments and NULL handles."""

from __future__ import annotations

import ctypes
import time

import numpy as np
import pytest
from conftest import run_on_threads

from rlx.errors import RlxError
from rlx.runtime import shim
from rlx.runtime.shim import CommandBuffer

from .helpers import ADD, MUL, NP_DTYPE, add_one_operands, binary_params, download, rng, upload


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
    x, one, pbuf = add_one_operands(device, np.zeros(n, np.float32))
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


def test_commit_wait_runs_after_what_was_committed_before(device, lib):
    """cmd_commit_wait is commit then wait in one call: it runs after every
    buffer committed before it (which it may run itself), reports the device
    time, and the buffer counts as committed afterwards."""
    n = 4096
    x, one, pbuf = add_one_operands(device, np.zeros(n, np.float32))
    earlier = [CommandBuffer(device) for _ in range(3)]
    for c in earlier:
        _encode_increments(c, lib, x, one, pbuf, 7)
        c.commit()
    last = CommandBuffer(device)
    _encode_increments(last, lib, x, one, pbuf, 1)
    seconds = last.commit_wait()
    assert 0.0 <= seconds < 10.0
    np.testing.assert_array_equal(download(x, np.float32, n), np.full(n, 22, np.float32))
    assert last.wait() == seconds  # waiting again is harmless
    with pytest.raises(RlxError, match="already committed"):
        last.commit_wait()
    for c in [*earlier, last]:
        c.release()
    # An empty buffer, and one on its own in a fresh queue position.
    with CommandBuffer(device) as cb:
        cb.commit_wait()
    api = device.shim.api.contents
    assert api.cmd_commit_wait(None, None) != 0


def test_commit_wait_from_two_threads(device, lib):
    def worker(seed):
        n = 513 + seed
        x = rng(seed).standard_normal(n).astype(np.float32)
        dx, d1, pbuf = add_one_operands(device, x)
        for _ in range(30):
            with CommandBuffer(device) as cb:
                _encode_increments(cb, lib, dx, d1, pbuf, 3)
                cb.commit_wait()
        np.testing.assert_allclose(download(dx, np.float32, n), x + 90, rtol=1e-5)

    run_on_threads(worker, 2)


def test_two_threads_two_command_buffers(device, lib):
    def worker(seed):
        n = 777 + seed
        r = rng(seed)
        x = r.standard_normal(n).astype(np.float32)
        dx, d1, pbuf = add_one_operands(device, x)
        for _ in range(20):
            with CommandBuffer(device) as cb:
                _encode_increments(cb, lib, dx, d1, pbuf, 5)
                cb.commit()
                cb.wait()
        np.testing.assert_allclose(download(dx, np.float32, n), x + 100, rtol=1e-5)

    run_on_threads(worker, 2)


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
