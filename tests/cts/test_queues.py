"""Queues: command buffers on queues of their own, ordered per queue."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from rlx.errors import RlxError
from rlx.runtime.shim import CommandBuffer, Device, Queue

from .helpers import add_one_operands, download, upload


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
    x, one, params = add_one_operands(dev, np.zeros(n, np.float32))
    y = upload(dev, np.full(n, 5.0, np.float32))
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
