"""rlx._core.Program directly: dynamic-param patching before each run, in
both the replayed and the re-encoded path."""

from __future__ import annotations

import numpy as np
import pytest
from rlx._core import Program

from rlx.lowering.elementwise import binary_params
from rlx.runtime import shim


@pytest.mark.parametrize("staged", [None, True])
@pytest.mark.parametrize("replay", [True, False])
def test_dynamic_value_is_patched_into_params_before_each_run(replay, staged):
    """staged=True: inputs, patches and outputs travel in the command buffer
    (cmd_upload / cmd_download), the path a GPU without unified memory takes."""
    dev = shim.open_device("host", 0)
    arena = dev.alloc(4096)
    x_off, y_off, p_off = 0, 1024, 2048
    n = 16
    arena.write(p_off, binary_params(n, 0, True, 0, 0, (n,), (1,), (1,)))
    pipe = dev.builtin_library().pipeline("binary_f32", shim.PIPELINE_INDIRECT)
    thunk = (0, False, pipe.address, ((0, x_off), (0, x_off), (0, y_off), (0, p_off)), (1, 1, 1), (1, 1, 1))
    # Symbol 0 patches BinaryParams.n (the first field): the active extent.
    prog = Program(dev.shim.api_address, dev.address, [arena.address], [thunk], [(x_off, 4 * n)],
                   [(y_off, 4 * n)], patches=[(p_off, 0)], n_dynamic=1, replay=replay, keepalive=arena,
                   staged=staged)
    assert prog.staged_copies == bool(staged)
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    prog.set_dynamic(0, n)
    prog.run([x], [y])
    np.testing.assert_array_equal(y, 2 * x)
    prog.set_dynamic(0, 4)
    prog.run([np.ones(n, np.float32)], [y])
    np.testing.assert_array_equal(y[:4], 2.0)          # patched extent
    np.testing.assert_array_equal(y[4:], 2 * x[4:])    # untouched beyond it
    with pytest.raises(Exception, match="out of range"):
        prog.set_dynamic(1, 3)


def test_staged_copies_can_be_switched_between_runs():
    """An empty schedule whose output is its input's bytes: both copy paths
    must carry the data, whichever the program uses from run to run."""
    dev = shim.open_device("host", 0)
    arena = dev.alloc(256)
    prog = Program(dev.shim.api_address, dev.address, [arena.address], [], [(32, 16)], [(32, 16)], keepalive=arena,
                   staged=True)
    for staged, value in ((True, 1.0), (False, 2.0), (True, 3.0)):
        prog.staged_copies = staged
        assert prog.staged_copies == staged
        out = np.zeros(4, np.float32)
        prog.run([np.full(4, value, np.float32)], [out])
        np.testing.assert_array_equal(out, value)


def test_program_rejects_wrong_io_sizes():
    from rlx.errors import InputError

    dev = shim.open_device("host", 0)
    arena = dev.alloc(256)
    prog = Program(dev.shim.api_address, dev.address, [arena.address], [], [(0, 16)], [(64, 16)], keepalive=arena)
    with pytest.raises(InputError, match="bytes, expected 16"):
        prog.run([np.zeros(3, np.float32)], [np.zeros(4, np.float32)])
    with pytest.raises(InputError, match="expected 1 inputs"):
        prog.run([], [np.zeros(4, np.float32)])
    out = np.zeros(4, np.float32)
    prog.run([np.arange(4, dtype=np.float32)], [out])   # no thunks: still a valid (empty) run


def test_explicit_segment_plan_with_direct_and_gemm_segments():
    """A plan mixing a recorded range, a gemm and a range encoded directly
    every run (what host fallbacks and per-run shapes get) runs correctly,
    and a plan that does not cover the thunks in order is refused."""
    from rlx.errors import RlxError
    from rlx.opt.segments import DIRECT, GEMM, REPLAY

    dev = shim.open_device("host", 0)
    arena = dev.alloc(8192)
    n = 16
    x_off, y_off, z_off, w_off, out_off, p_off = 0, 512, 1024, 1536, 3072, 6144
    pipe = dev.builtin_library().pipeline("binary_f32", shim.PIPELINE_INDIRECT)
    arena.write(p_off, binary_params(n, 0, True, 0, 0, (n,), (1,), (1,)))            # add
    arena.write(p_off + 256, binary_params(n, 1, True, 0, 0, (n,), (1,), (1,)))      # mul
    w = np.arange(n * n, dtype=np.float32).reshape(n, n) / 100
    arena.write(w_off, w)
    thunks = [
        (0, False, pipe.address, ((0, x_off), (0, x_off), (0, y_off), (0, p_off)), (1, 1, 1), (1, 1, 1)),  # y = x+x
        (1, True, (0, y_off), (0, w_off), (0, z_off), 1, n, n, n, n, n, 0, 0, 0, 1.0, 0.0),              # z = y @ w
        (0, True, pipe.address, ((0, z_off), (0, z_off), (0, out_off), (0, p_off + 256)), (1, 1, 1), (1, 1, 1)),
    ]
    x = np.linspace(-1, 1, n).astype(np.float32)
    want = ((x + x) @ w) ** 2
    plan = [(REPLAY, 0, 1), (GEMM, 1, 1), (DIRECT, 2, 1)]
    prog = Program(dev.shim.api_address, dev.address, [arena.address], thunks, [(x_off, 4 * n)],
                   [(out_off, 4 * n)], replay=True, segments=plan, keepalive=arena)
    assert prog.segment_count == 3
    for _ in range(2):
        out = np.zeros(n, np.float32)
        prog.run([x], [out])
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(RlxError, match="cover"):
        Program(dev.shim.api_address, dev.address, [arena.address], thunks, [], [], replay=True,
                segments=[(REPLAY, 0, 1), (DIRECT, 2, 1)], keepalive=arena)
    with pytest.raises(RlxError, match="gemm segment"):
        Program(dev.shim.api_address, dev.address, [arena.address], thunks, [], [], replay=True,
                segments=[(GEMM, 0, 1), (GEMM, 1, 1), (DIRECT, 2, 1)], keepalive=arena)


def test_program_runs_on_a_queue_of_its_own():
    """Where the shim has queues (the host always), each program takes one,
    so programs run from different threads do not share one ordering."""
    dev = shim.open_device("host", 0)
    arena = dev.alloc(256)
    progs = [Program(dev.shim.api_address, dev.address, [arena.address], [], [(32, 16)], [(32, 16)],
                     keepalive=arena, staged=True) for _ in range(2)]
    for prog, value in zip(progs, (1.0, 2.0)):
        assert prog.own_queue
        out = np.zeros(4, np.float32)
        prog.run([np.full(4, value, np.float32)], [out])
        np.testing.assert_array_equal(out, value)
