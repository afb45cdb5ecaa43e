"""Copies inside a command buffer: cmd_upload and cmd_download."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.errors import RlxError
from rlx.lowering.elementwise import binary_params
from rlx.runtime.shim import PIPELINE_INDIRECT, CommandBuffer


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
    params.write(0, binary_params(n, 0, True, 0, 0, (n,), (1,), (1,)))
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
