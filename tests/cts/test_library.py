"""Libraries and pipelines: the built-in library, user kernel source compiled
(with its errors and its disk cache), pipelines by name."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from rlx.errors import KernelCompileError, UnsupportedOpError
from rlx.runtime.shim import PIPELINE_INDIRECT, CommandBuffer, Device

from .helpers import USER_KERNEL, download, upload


def test_builtin_pipeline_lookup(lib):
    p = lib.pipeline("binary_f32")
    assert p.address and p.name == "binary_f32"
    assert p.max_threads_per_group >= 1 and p.execution_width >= 1
    assert lib.pipeline("binary_f32") is p
    assert lib.pipeline("binary_f32", PIPELINE_INDIRECT).address
    with pytest.raises(UnsupportedOpError, match="no_such_kernel_f32"):
        lib.pipeline("no_such_kernel_f32")


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
