"""Wrapped buffers (buffer_wrap / buffer_rebind): the caller's memory as a
buffer, moved between runs. The host shim has them; the GPU shims answer
RLX_ERR_UNSUPPORTED. Recorded ICB entries and schedules must follow a
rebind (they read a wrapped buffer's address when they run)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from rlx.errors import DeviceError
from rlx.runtime import shim
from rlx.runtime.shim import PIPELINE_INDIRECT, CommandBuffer, Icb

from .helpers import ADD, binary_params, upload


def _need_wrap(device):
    if not device.can_wrap:
        api = device.shim.api.contents
        handle = ctypes.c_void_p()
        assert api.buffer_wrap(device.address, None, 0, ctypes.byref(handle)) == shim.ERR_UNSUPPORTED
        assert not handle.value
        assert api.buffer_rebind(None, None) == shim.ERR_UNSUPPORTED
        with pytest.raises(DeviceError, match="cannot wrap"):
            device.wrap(0, 16)
        pytest.skip(f"{device.backend}: buffers are device memory (checked: both entries refuse)")


def _add_one(device, lib, n):
    one = upload(device, np.ones(n, np.float32))
    params = upload(device, np.frombuffer(binary_params(n, ADD), np.uint8))
    return lib.pipeline("binary_f32", PIPELINE_INDIRECT), one, params


def test_wrapped_buffer_reads_and_writes_the_callers_memory(device, lib):
    _need_wrap(device)
    n = 37
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 10, np.float32)
    add, one, params = _add_one(device, lib, n)
    x = device.wrap(a.ctypes.data, a.nbytes)
    assert x.host_address == a.ctypes.data
    icb = Icb(device, 1)
    icb.encode_dispatch(0, add, [x, one, x, params], (1, 1, 1))
    with CommandBuffer(device) as cb:   # direct: the address when encoded
        cb.set_pipeline(add)
        for i, buf in enumerate((x, one, x, params)):
            cb.set_buffer(i, buf)
        cb.dispatch((1, 1, 1))
        cb.commit_wait()
    np.testing.assert_array_equal(a, np.arange(n) + 1)
    with CommandBuffer(device) as cb:   # the recorded entry: a's memory
        cb.execute_icb(icb, 0, 1)
        cb.commit_wait()
    np.testing.assert_array_equal(a, np.arange(n) + 2)
    x.rebind(b.ctypes.data)
    with CommandBuffer(device) as cb:   # the same entry, after the rebind: b's memory
        cb.execute_icb(icb, 0, 1)
        cb.commit_wait()
    np.testing.assert_array_equal(b, 11)
    np.testing.assert_array_equal(a, np.arange(n) + 2)
    x.free()   # leaves the caller's memory alone
    a[:] = 3
    np.testing.assert_array_equal(a, 3)


def test_wrapped_buffer_in_a_schedule_follows_rebinds(device, lib):
    _need_wrap(device)
    n = 64
    arrays = [np.full(n, float(i), np.float32) for i in range(3)]
    add, one, params = _add_one(device, lib, n)
    x = device.wrap(arrays[0].ctypes.data, arrays[0].nbytes)
    sched = shim.Schedule(device, [("dispatch", add, [x, one, x, params], (1, 1, 1))])
    for i, arr in enumerate(arrays):
        x.rebind(arr.ctypes.data)
        with CommandBuffer(device) as cb:
            cb.execute_schedule(sched)
            cb.commit_wait()
        np.testing.assert_array_equal(arr, i + 1)


def test_rebind_errors(device):
    _need_wrap(device)
    api = device.shim.api.contents
    own = device.alloc(64)
    assert api.buffer_rebind(own.address, own.host_address) == shim.ERR_ARG, "only wrapped buffers move"
    assert "buffer_wrap" in device.shim.last_error()
    a = np.zeros(16, np.float32)
    x = device.wrap(a.ctypes.data, a.nbytes)
    assert api.buffer_rebind(x.address, None) == shim.ERR_ARG
    assert api.buffer_rebind(None, a.ctypes.data) == shim.ERR_ARG
    handle = ctypes.c_void_p()
    assert api.buffer_wrap(device.address, None, 16, ctypes.byref(handle)) == shim.ERR_ARG
    assert api.buffer_wrap(None, a.ctypes.data, 16, ctypes.byref(handle)) == shim.ERR_ARG
    x.write(0, np.ones(16, np.float32))   # the ordinary copies work on wrapped buffers too
    np.testing.assert_array_equal(a, 1)
