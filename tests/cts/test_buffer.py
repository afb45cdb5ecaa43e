"""Buffers: alloc (zeroed), write / read, the host view, bounds."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from rlx.errors import RlxError
from rlx.runtime import shim

from .helpers import download


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
