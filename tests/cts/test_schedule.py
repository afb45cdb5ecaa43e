"""Schedules (rlx_shim.h rlx_schedule_desc): a whole command list made once by
the shim and executed inside command buffers; dispatch, gemm and ICB mixes,
patched params, bad descriptors, many executions, two threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from rlx.errors import RlxError, UnsupportedOpError
from rlx.runtime.shim import PIPELINE_INDIRECT, SCHEDULE_SERIAL, CommandBuffer, Icb, Schedule, gemm_desc

from .helpers import ADD, MUL, add_one_operands, binary_params, download, upload


def _run(device, schedule, times=1):
    with CommandBuffer(device) as cb:
        for _ in range(times):
            cb.execute_schedule(schedule)
        cb.commit()
        cb.wait()


def test_schedule_create_execute_free(device, lib):
    n = 100
    x0 = np.linspace(-1, 1, n).astype(np.float32)
    x, one, params = add_one_operands(device, x0)
    add = lib.pipeline("binary_f32", PIPELINE_INDIRECT)
    sched = Schedule(device, [("dispatch", add, [x, one, x, params], (1, 1, 1)),
                              ("dispatch", add, [x, one, x, params], (1, 1, 1), (1, 1, 1), True)])
    _run(device, sched)
    np.testing.assert_allclose(download(x, np.float32, n), x0 + 2, rtol=1e-6)
    _run(device, sched, times=2)   # twice in one command buffer
    np.testing.assert_allclose(download(x, np.float32, n), x0 + 6, rtol=1e-6)
    sched.free()
    sched.free()
    empty = Schedule(device, [])
    _run(device, empty)
    empty.free()


def test_schedule_mixes_dispatch_gemm_and_icb(device, lib):
    """x += 1 (dispatch), c = a @ x-as-matrix (gemm), c *= 2 (the caller's ICB)."""
    m, k, n = 8, 16, 4
    r = np.random.default_rng(3)
    a0 = r.standard_normal((m, k)).astype(np.float32)
    b0 = r.standard_normal((k, n)).astype(np.float32)
    a, b = upload(device, a0), upload(device, b0)
    one = upload(device, np.ones(k * n, np.float32))
    c = device.alloc(m * n * 4)
    two = upload(device, np.full(m * n, 2, np.float32))
    p_add = upload(device, np.frombuffer(binary_params(k * n, ADD), np.uint8))
    p_mul = upload(device, np.frombuffer(binary_params(m * n, MUL), np.uint8))
    add = lib.pipeline("binary_f32", PIPELINE_INDIRECT)
    icb = Icb(device, 1)
    icb.encode_dispatch(0, add, [c, two, c, p_mul], (1, 1, 1))
    sched = Schedule(device, [
        ("dispatch", add, [b, one, b, p_add], (1, 1, 1)),
        ("gemm", gemm_desc(a, b, c, m, n, k, lda=k, ldb=n, ldc=n), True),
        ("icb", icb, 0, 1, True),
    ])
    expect_b = b0
    for _ in range(3):
        _run(device, sched)
        expect_b = expect_b + 1
        np.testing.assert_allclose(download(c, np.float32, m * n).reshape(m, n), 2 * (a0 @ expect_b),
                                   rtol=1e-4, atol=1e-4)
    sched.free()
    icb.free()


def test_schedule_picks_up_patched_params(device, lib):
    """Buffers and offsets are fixed at creation; params bytes are read at
    each execution (on cuda: the graph's kernels read them from memory),
    except by a kernel that takes them by value (the pipeline's
    value_bindings), which keeps the bytes of the schedule's creation."""
    n = 1000
    x0 = np.linspace(-1, 1, n).astype(np.float32)
    x, two = upload(device, x0), upload(device, np.full(n, 2, np.float32))
    params = upload(device, np.frombuffer(binary_params(n, ADD), np.uint8))
    add = lib.pipeline("binary_f32", PIPELINE_INDIRECT)
    sched = Schedule(device, [("dispatch", add, [x, two, x, params], (4, 1, 1), (256, 1, 1)),
                              ("dispatch", add, [x, two, x, params], (4, 1, 1), (256, 1, 1), True)])
    expect = x0.copy()
    for op in (MUL, ADD, MUL):
        params.write(0, binary_params(n, op))
        runs_op = ADD if add.takes_by_value(3) else op
        for _ in range(3):
            _run(device, sched)
            expect = (expect + 4) if runs_op == ADD else (expect * 4)
    np.testing.assert_allclose(download(x, np.float32, n), expect, rtol=1e-6)
    sched.free()


def test_schedule_with_copies_in_the_command_buffer(device, lib):
    """Copies that travel with the command buffer run before and after the schedule."""
    n = 64
    x, one, params = add_one_operands(device, np.zeros(n, np.float32))
    add = lib.pipeline("binary_f32", PIPELINE_INDIRECT)
    sched = Schedule(device, [("dispatch", add, [x, one, x, params], (1, 1, 1))])
    x1 = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    with CommandBuffer(device) as cb:
        try:
            cb.upload(x, 0, x1)
            cb.download(x, 0, out)
        except UnsupportedOpError:   # optional in the ABI: a host-visible shim may refuse them (Metal)
            pytest.skip("this shim has no copies inside a command buffer")
        cb.execute_schedule(sched)
        cb.commit()
        cb.wait()
    np.testing.assert_allclose(out, x1 + 1)


def test_bad_schedules_are_refused(device, lib):
    buf = device.alloc(64)
    add = lib.pipeline("binary_f32", PIPELINE_INDIRECT)
    plain = lib.pipeline("binary_f32")
    icb = Icb(device, 2)
    bad = [
        [("dispatch", None, [buf], (1, 1, 1))],                       # no pipeline
        [("dispatch", add, [(buf, 65)], (1, 1, 1))],                  # offset past the end
        [("dispatch", add, [buf], (0, 1, 1))],                        # zero groups
        [("dispatch", add, [buf] * 13, (1, 1, 1))],                   # more than MAX_BINDINGS
        [("gemm", gemm_desc(buf, buf, buf, 64, 64, 64, lda=64, ldb=64, ldc=64))],   # past the buffers
        [("icb", icb, 1, 2)],                                         # range past the capacity
        [("icb", None, 0, 1)],
        [(7,)],                                                       # unknown op
        [("dispatch", plain, [buf], (1, 1, 1))],                      # not made for ICBs
    ]
    for commands in bad:
        with pytest.raises(RlxError):
            Schedule(device, commands)
    with pytest.raises(RlxError):
        Schedule(device, [], flags=2)                                 # an unknown flag (1 is SCHEDULE_SERIAL)
    with pytest.raises(RlxError):
        Schedule(device, [], n_commands=3)                            # commands NULL
    api = device.shim.api.contents
    assert api.schedule_create(device.address, None, None) != 0
    with CommandBuffer(device) as cb, pytest.raises(RlxError):
        cb.execute_schedule(None)
    api.schedule_free(None)
    # The device still works.
    x, one, params = add_one_operands(device, np.zeros(4, np.float32))
    _run(device, Schedule(device, [("dispatch", add, [x, one, x, params], (1, 1, 1))]))
    assert download(x, np.float32, 4)[0] == 1.0
    icb.free()


def test_a_serial_schedule_computes_what_the_plain_one_does(device, lib):
    """RLX_SCHEDULE_SERIAL (no launch overlap: cuda without PDL; host and
    Metal have none and change nothing) over a dependent chain: the same
    results as the plain schedule, run after run."""
    n, steps = 300, 12
    x0 = np.linspace(-2, 2, n).astype(np.float32)
    results = []
    for flags in (0, SCHEDULE_SERIAL):
        x, one, params = add_one_operands(device, x0)
        add = lib.pipeline("binary_f32", PIPELINE_INDIRECT)
        sched = Schedule(device, [("dispatch", add, [x, one, x, params], (2, 1, 1), (256, 1, 1), i > 0)
                                  for i in range(steps)], flags=flags)
        _run(device, sched, times=3)
        results.append(download(x, np.float32, n))
        sched.free()
    np.testing.assert_allclose(results[0], x0 + 3 * steps, rtol=1e-6)
    np.testing.assert_array_equal(results[1], results[0])


def test_schedule_executed_many_times(device, lib):
    n = 256
    x, one, params = add_one_operands(device, np.zeros(n, np.float32))
    add = lib.pipeline("binary_f32", PIPELINE_INDIRECT)
    sched = Schedule(device, [("dispatch", add, [x, one, x, params], (1, 1, 1), (256, 1, 1), i > 0)
                              for i in range(4)])
    for _ in range(50):
        _run(device, sched)
    np.testing.assert_allclose(download(x, np.float32, n), np.full(n, 200, np.float32))


def test_two_schedules_on_two_threads(device, lib):
    n, runs = 512, 40
    add = lib.pipeline("binary_f32", PIPELINE_INDIRECT)
    operands = [add_one_operands(device, np.zeros(n, np.float32)) for _ in range(2)]
    scheds = [Schedule(device, [("dispatch", add, [x, one, x, p], (2, 1, 1), (256, 1, 1))]) for x, one, p in operands]
    errors = []

    def work(s):
        try:
            for _ in range(runs):
                _run(device, s)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in scheds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for x, _, _ in operands:
        np.testing.assert_allclose(download(x, np.float32, n), np.full(n, runs, np.float32))
