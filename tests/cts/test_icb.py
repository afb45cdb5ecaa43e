"""Indirect command buffers: commands recorded once and replayed (whole,
by range, re-encoded), their errors."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.errors import DeviceError, RlxError
from rlx.runtime.shim import PIPELINE_INDIRECT, CommandBuffer, Icb

from .helpers import ADD, MUL, add_one_operands, binary_params, download, upload


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
    x, one, params = add_one_operands(device, np.zeros(n, np.float32))
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
    # The same error through commit-and-wait in one call.
    cb = CommandBuffer(device)
    cb.execute_icb(icb, 0, 3)
    with pytest.raises(DeviceError, match="never encoded"):
        cb.commit_wait()
    cb.release()
    with CommandBuffer(device) as cb:
        cb.execute_icb(icb, 0, 1)
        cb.commit_wait()
    assert download(x, np.float32, n)[0] in (2.0, 3.0, 4.0)
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


def test_icb_replay_picks_up_patched_params(device, lib):
    """An ICB range is recorded once (on cuda: a CUDA graph built once). A
    kernel that reads its params through the bound buffer sees rewritten
    params bytes at the next replay; one that takes them by value (the
    pipeline's value_bindings) keeps the bytes the buffer held when the
    entry was encoded (csrc/rlx_shim.h)."""
    n = 1000
    x0 = np.linspace(-1, 1, n).astype(np.float32)
    x, two = upload(device, x0), upload(device, np.full(n, 2, np.float32))
    params = upload(device, np.frombuffer(binary_params(n, ADD), np.uint8))
    icb = Icb(device, 2)
    add = lib.pipeline("binary_f32", PIPELINE_INDIRECT)
    assert add.value_bindings in (0, 1 << 3)     # only the params struct may travel by value
    icb.encode_dispatch(0, add, [x, two, x, params], (4, 1, 1), (256, 1, 1))
    icb.encode_dispatch(1, add, [x, two, x, params], (4, 1, 1), (256, 1, 1), barrier_before=True)
    expect = x0.copy()
    for op in (MUL, ADD, MUL):
        params.write(0, binary_params(n, op))
        runs_op = ADD if add.takes_by_value(3) else op
        for _ in range(3):
            with CommandBuffer(device) as cb:
                cb.execute_icb(icb, 0, 2)
                cb.commit()
                assert cb.wait() > 0.0
            expect = (expect + 2 + 2) if runs_op == ADD else (expect * 4)
    np.testing.assert_allclose(download(x, np.float32, n), expect, rtol=1e-6)
    icb.free()
