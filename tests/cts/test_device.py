"""Device: the ABI entry point (rlx_shim_get_api), shim status, device open and info."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from rlx.errors import DeviceUnavailableError, RlxError
from rlx.runtime import shim
from rlx.runtime.shim import Device


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


def test_closing_a_device_releases_what_it_made_first(backend):
    """close() frees the device's live buffers, command buffers and ICBs
    before the device (the ABI's order); dropping them afterwards frees
    nothing twice, and using them raises instead of crashing."""
    import gc

    from rlx.runtime.shim import CommandBuffer, Icb

    dev = Device.open(backend, 0)
    buf = dev.alloc(256)
    cb = CommandBuffer(dev)
    icb = Icb(dev, 4)
    dev.close()
    assert buf.address == 0 and cb.address == 0 and icb.address == 0
    with pytest.raises(RlxError):
        buf.write(0, np.zeros(4, np.float32))
    with pytest.raises(RlxError):
        dev.alloc(16)
    del buf, cb, icb
    gc.collect()
    dev.close()   # twice is a no-op
