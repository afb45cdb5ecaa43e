"""The host shim (csrc/host_shim.cpp) beyond the ABI: its device options
(threads, the C++ compiler, the BLAS library) and its gemm without BLAS.
The ABI behaviour itself is the conformance suite tests/cts/, which runs on
the host everywhere."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from cts.helpers import USER_KERNEL, download, rng, upload

from rlx.errors import KernelCompileError, RlxError
from rlx.runtime.shim import CommandBuffer, Device


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


def test_a_slow_compile_says_so_on_stderr_and_a_quick_one_does_not(capsys):
    """notice_if_slow (the library compiles: NVRTC takes minutes on a
    machine's first use): a line once the body outlasts the delay, then its
    time when it ends; nothing for a body that ends first."""
    import time

    from rlx.runtime.shim import notice_if_slow

    with notice_if_slow("rlx: compiling test kernels", 0.05):
        time.sleep(0.3)
    err = capsys.readouterr().err
    assert "rlx: compiling test kernels ..." in err and "rlx: compiling test kernels: done in" in err
    with notice_if_slow("rlx: compiling test kernels", 5.0):
        pass
    assert capsys.readouterr().err == ""


def _huge_page_advised(address: int) -> bool | None:
    """Whether the mapping holding `address` carries MADV_HUGEPAGE (VmFlags
    "hg" in /proc/self/smaps); None where Linux has no transparent huge pages."""
    if not os.path.isdir("/sys/kernel/mm/transparent_hugepage"):
        return None
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=1)[0]
            if "-" in head and all(c in "0123456789abcdef-" for c in head):
                lo, hi = (int(v, 16) for v in head.split("-"))
                inside = lo <= address < hi
            elif inside and line.startswith("VmFlags:"):
                return "hg" in line.split()[1:]
    return None


@pytest.mark.parametrize("size", [(1 << 20) - 128, (1 << 20) + 1, (2 << 20) - 1, 2 << 20, (5 << 20) + 4097,
                                  (64 << 20) + 3])
def test_large_host_buffers_zero_whole_and_aligned(size):
    """Buffers from 1 MiB up come from mmap, and from 2 MiB up on a 2 MiB
    boundary with the slack around it unmapped again (csrc/host/device.inc.cpp,
    map_buffer: transparent huge pages for streamed weights). Every byte
    reads zero, the first and last bytes take writes, and freeing many of
    them leaves the process whole. The option is set here, whatever
    RLX_HOST_HUGE_PAGES says."""
    dev = Device.open("host", options_override={"huge_pages": "1"})
    try:
        for _ in range(3):
            buf = dev.alloc(size)
            if size >= 2 << 20 and sys.platform.startswith("linux"):
                assert buf.host_address % (2 << 20) == 0
                assert _huge_page_advised(buf.host_address) in (True, None)
            head = np.frombuffer(buf.read(0, 4096), np.uint8)
            tail = np.frombuffer(buf.read(size - 4096, 4096), np.uint8)
            assert not head.any() and not tail.any()
            buf.write(0, np.full(4096, 7, np.uint8))
            buf.write(size - 4096, np.full(4096, 9, np.uint8))
            assert np.frombuffer(buf.read(size - 4096, 4096), np.uint8).tolist() == [9] * 4096
            assert np.frombuffer(buf.read(0, 1), np.uint8)[0] == 7
            buf.free()
    finally:
        dev.close()


def test_huge_pages_option(monkeypatch):
    """huge_pages=0 (RLX_HOST_HUGE_PAGES=0) keeps 4 KiB pages: the mapping
    carries no huge-page advice, and large buffers are still zero and whole;
    a bad value is refused at open."""
    with pytest.raises(RlxError, match="huge_pages"):
        Device.open("host", options_override={"huge_pages": "yes"})
    monkeypatch.setenv("RLX_HOST_HUGE_PAGES", "0")
    dev = Device.open("host")
    try:
        size = (6 << 20) + 5
        buf = dev.alloc(size)
        assert _huge_page_advised(buf.host_address) in (False, None)
        assert not np.frombuffer(buf.read(size - 4096, 4096), np.uint8).any()
        buf.write(size - 8, np.arange(8, dtype=np.uint8))
        assert np.frombuffer(buf.read(size - 8, 8), np.uint8).tolist() == list(range(8))
        buf.free()
    finally:
        dev.close()
