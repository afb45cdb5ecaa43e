"""rlx._core directly: a ThunkTable's typed appends (checked before C),
named bindings resolved when a Program is made, dynamic-param patching
before each run in both the replayed and the re-encoded path, and the
per-thunk encoder (run_one / encode_one / record_one)."""

from __future__ import annotations

import numpy as np
import pytest
from rlx._core import ARENA, RESIDENT, Bindings, Program, ThunkTable

import rlx
from rlx.errors import InputError, RlxError, ScheduleError
from rlx.lowering.elementwise import binary_params
from rlx.runtime import shim

N = 16


def _program(dev, table, buffers, inputs=(), outputs=(), **kw):
    return Program(dev.shim.api_address, dev.address, table, {name: b.address for name, b in buffers.items()},
                   list(inputs), list(outputs), keepalive=buffers, **kw)


def _empty(dev, arena, inputs=(), outputs=(), **kw):
    """A program without thunks whose only binding is the arena."""
    return _program(dev, ThunkTable(Bindings((ARENA,))), {ARENA: arena}, inputs, outputs, **kw)


@pytest.fixture
def dev():
    return shim.open_device("host", 0)


@pytest.fixture
def binary(dev):
    return dev.builtin_library().pipeline("binary_f32", shim.PIPELINE_INDIRECT)


@pytest.mark.parametrize("declared", [None, "bytes", "by_value"],
                         ids=["params_in_arena", "params_declared", "params_by_value"])
@pytest.mark.parametrize("staged", [None, True])
@pytest.mark.parametrize("replay", [True, False])
def test_dynamic_value_is_patched_into_params_before_each_run(dev, binary, replay, staged, declared):
    """staged=True: inputs, patches and outputs travel in the command buffer
    (cmd_upload / cmd_download), the path a GPU without unified memory takes.
    declared: the table carries the dispatch's params bytes, so the patch
    reaches them too (a directly encoded dispatch passes them). "by_value":
    the table also says the pipeline takes them by value (a CUDA kernel: a
    recording would keep the value it was recorded with), so the dispatch
    is encoded every run instead of replayed; otherwise the replay reads
    the patched params region."""
    arena = dev.alloc(4096)
    x_off, y_off, p_off = 0, 1024, 2048
    params = binary_params(N, 0, True, 0, 0, (N,), (1,), (1,))
    arena.write(p_off, params)
    table = ThunkTable(Bindings((ARENA,)))
    table.append_dispatch(binary.address, [(ARENA, x_off), (ARENA, x_off), (ARENA, y_off), (ARENA, p_off)],
                          (1, 1, 1), (1, 1, 1), barrier=False, params=params if declared else None,
                          params_by_value=declared == "by_value")
    # Symbol 0 patches BinaryParams.n (the first field): the active extent.
    prog = _program(dev, table, {ARENA: arena}, [(x_off, 4 * N)], [(y_off, 4 * N)], patches=[(p_off, 0)],
                    n_dynamic=1, replay=replay, staged=staged)
    assert prog.staged_copies == bool(staged)
    x = np.arange(N, dtype=np.float32)
    y = np.zeros(N, np.float32)
    prog.set_dynamic(0, N)
    prog.run([x], [y])
    np.testing.assert_array_equal(y, 2 * x)
    prog.set_dynamic(0, 4)
    prog.run([np.ones(N, np.float32)], [y])
    np.testing.assert_array_equal(y[:4], 2.0)          # patched extent
    np.testing.assert_array_equal(y[4:], 2 * x[4:])    # untouched beyond it
    encoded_per_run = 1 if declared == "by_value" or not replay else 0
    assert prog.counters()["thunks_encoded"] == 2 * encoded_per_run
    with pytest.raises(Exception, match="out of range"):
        prog.set_dynamic(1, 3)


@pytest.mark.parametrize("replay", [True, False])
def test_directly_encoded_dispatch_passes_its_declared_params_bytes(dev, binary, replay):
    """Encoded directly, a dispatch's params travel as the table's bytes
    (cmd_set_bytes), which is how a CUDA kernel gets them by value; a
    recorded one binds the params region. Here the two disagree on purpose
    (the region says 4 elements, the bytes 16), so each path shows which
    it read."""
    arena = dev.alloc(4096)
    x_off, y_off, p_off = 0, 1024, 2048
    arena.write(p_off, binary_params(4, 0, True, 0, 0, (4,), (1,), (1,)))
    table = ThunkTable(Bindings((ARENA,)))
    table.append_dispatch(binary.address, [(ARENA, x_off), (ARENA, x_off), (ARENA, y_off), (ARENA, p_off)],
                          (1, 1, 1), (1, 1, 1), params=binary_params(N, 0, True, 0, 0, (N,), (1,), (1,)))
    prog = _program(dev, table, {ARENA: arena}, [(x_off, 4 * N)], [(y_off, 4 * N)], replay=replay)
    x = np.arange(1, N + 1, dtype=np.float32)
    y = np.zeros(N, np.float32)
    prog.run([x], [y])
    extent = 4 if replay else N
    np.testing.assert_array_equal(y[:extent], 2 * x[:extent])
    np.testing.assert_array_equal(y[extent:], 0.0)


def test_patched_dispatches_leave_the_replayed_segments():
    """direct_where_patched: each patched dispatch becomes a direct segment
    (neighbours merged), the rest of its replay range stays recorded, and
    gemm and direct segments pass through."""
    from rlx._core import direct_where_patched

    from rlx.opt.segments import DIRECT, GEMM, REPLAY

    plan = [(REPLAY, 0, 5), (GEMM, 5, 1), (REPLAY, 6, 2), (DIRECT, 8, 1)]
    assert direct_where_patched(plan, frozenset()) == plan
    assert direct_where_patched(plan, {1, 2, 7}) == [
        (REPLAY, 0, 1), (DIRECT, 1, 2), (REPLAY, 3, 2), (GEMM, 5, 1), (REPLAY, 6, 1), (DIRECT, 7, 1),
        (DIRECT, 8, 1)]
    assert direct_where_patched([(REPLAY, 0, 3)], {0, 1, 2}) == [(DIRECT, 0, 3)]


def test_staged_copies_can_be_switched_between_runs(dev):
    """An empty schedule whose output is its input's bytes: both copy paths
    must carry the data, whichever the program uses from run to run."""
    arena = dev.alloc(256)
    prog = _empty(dev, arena, [(32, 16)], [(32, 16)], staged=True)
    for staged, value in ((True, 1.0), (False, 2.0), (True, 3.0)):
        prog.staged_copies = staged
        assert prog.staged_copies == staged
        out = np.zeros(4, np.float32)
        prog.run([np.full(4, value, np.float32)], [out])
        np.testing.assert_array_equal(out, value)


def test_program_rejects_wrong_io_sizes(dev):
    arena = dev.alloc(256)
    prog = _empty(dev, arena, [(0, 16)], [(64, 16)])
    with pytest.raises(InputError, match="bytes, expected 16"):
        prog.run([np.zeros(3, np.float32)], [np.zeros(4, np.float32)])
    with pytest.raises(InputError, match="expected 1 inputs"):
        prog.run([], [np.zeros(4, np.float32)])
    out = np.zeros(4, np.float32)
    prog.run([np.arange(4, dtype=np.float32)], [out])   # no thunks: still a valid (empty) run


def _mixed_table(binary, w_binding: str = ARENA) -> tuple[ThunkTable, dict]:
    """y = x + x (dispatch), z = y @ w (gemm, w in ``w_binding``), out = z * z (dispatch)."""
    off = {"x": 0, "y": 512, "z": 1024, "w": 1536, "out": 3072, "p": 6144}
    table = ThunkTable(Bindings((ARENA, RESIDENT)))
    table.append_dispatch(binary.address, [(ARENA, off["x"]), (ARENA, off["x"]), (ARENA, off["y"]),
                                           (ARENA, off["p"])], (1, 1, 1), (1, 1, 1))
    table.append_gemm(a=(ARENA, off["y"]), b=(w_binding, off["w"]), c=(ARENA, off["z"]), m=1, n=N, k=N,
                      lda=N, ldb=N, ldc=N, barrier=True)
    table.append_dispatch(binary.address, [(ARENA, off["z"]), (ARENA, off["z"]), (ARENA, off["out"]),
                                           (ARENA, off["p"] + 256)], (1, 1, 1), (1, 1, 1), barrier=True)
    return table, off


def _mixed_buffers(dev, w, w_binding: str = ARENA) -> dict:
    arena, resident = dev.alloc(8192), dev.alloc(4096)
    arena.write(6144, binary_params(N, 0, True, 0, 0, (N,), (1,), (1,)))            # add
    arena.write(6144 + 256, binary_params(N, 1, True, 0, 0, (N,), (1,), (1,)))      # mul
    (arena if w_binding == ARENA else resident).write(1536, w)
    return {ARENA: arena, RESIDENT: resident}


def test_explicit_segment_plan_with_direct_and_gemm_segments(dev, binary):
    """A plan mixing a recorded range, a gemm and a range encoded directly
    every run (what host fallbacks and per-run shapes get) runs correctly,
    and a plan that does not cover the thunks in order is refused."""
    from rlx.opt.segments import DIRECT, GEMM, REPLAY

    w = np.arange(N * N, dtype=np.float32).reshape(N, N) / 100
    table, off = _mixed_table(binary)
    buffers = _mixed_buffers(dev, w)
    x = np.linspace(-1, 1, N).astype(np.float32)
    want = ((x + x) @ w) ** 2
    plan = [(REPLAY, 0, 1), (GEMM, 1, 1), (DIRECT, 2, 1)]
    prog = _program(dev, table, buffers, [(off["x"], 4 * N)], [(off["out"], 4 * N)], replay=True, segments=plan)
    assert prog.segment_count == 3
    for _ in range(2):
        out = np.zeros(N, np.float32)
        prog.run([x], [out])
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ScheduleError, match="cover"):
        _program(dev, table, buffers, replay=True, segments=[(REPLAY, 0, 1), (DIRECT, 2, 1)])
    with pytest.raises(ScheduleError, match="gemm segment"):
        _program(dev, table, buffers, replay=True, segments=[(GEMM, 0, 1), (GEMM, 1, 1), (DIRECT, 2, 1)])


def test_bindings_resolve_by_name_when_the_program_is_made(dev, binary):
    """One table, two sets of buffers: the gemm's B names "resident", so the
    weights come from whichever buffer the Program binds to that name."""
    table, off = _mixed_table(binary, RESIDENT)
    x = np.linspace(-1, 1, N).astype(np.float32)
    for scale in (1.0, 3.0):
        w = np.eye(N, dtype=np.float32) * scale
        prog = _program(dev, table, _mixed_buffers(dev, w, RESIDENT), [(off["x"], 4 * N)], [(off["out"], 4 * N)])
        out = np.zeros(N, np.float32)
        prog.run([x], [out])
        np.testing.assert_allclose(out, ((x + x) * scale) ** 2, rtol=1e-6)
    buffers = _mixed_buffers(dev, np.eye(N, dtype=np.float32))
    with pytest.raises(ScheduleError, match=r"no buffer for binding\(s\) \['resident'\]"):
        _program(dev, table, {ARENA: buffers[ARENA]})
    with pytest.raises(ScheduleError, match="unknown binding"):
        _program(dev, table, {**buffers, "state": buffers[ARENA]})
    with pytest.raises(ScheduleError, match="need 'arena'"):
        _program(dev, ThunkTable(Bindings((RESIDENT,))), {RESIDENT: buffers[RESIDENT]})


def test_table_reads_back_what_was_appended(binary):
    bindings = Bindings((ARENA, RESIDENT))
    assert bindings.add("shared params 0") == 2 and bindings.index(RESIDENT) == 1 and len(bindings) == 3
    table = ThunkTable(bindings)
    assert table.append_dispatch(binary.address, [(ARENA, 64), ("shared params 0", 8)], (2, 1, 1), (32, 1, 1),
                                 barrier=True) == 0
    assert table.append_gemm(a=(ARENA, 0), b=(RESIDENT, 128), c=(ARENA, 256), m=3, n=4, k=5, lda=5, ldb=5, ldc=4,
                             trans_b=True, dtype=1, c_dtype=0, batch=2, stride_a=15, stride_b=20, stride_c=12,
                             outer=3, outer_stride_a=30, outer_stride_b=40, outer_stride_c=24, alpha=0.5,
                             bias=(RESIDENT, 512)) == 1
    assert len(table) == 2
    d = table.entry(0)
    assert d == {"kind": "dispatch", "barrier": True, "pipeline": binary.address,
                 "bindings": [(ARENA, 64), ("shared params 0", 8)], "groups": (2, 1, 1), "threads": (32, 1, 1),
                 "params": None, "params_by_value": False}
    g = table.entry(1)
    assert (g["a"], g["b"], g["c"], g["bias"]) == ((ARENA, 0), (RESIDENT, 128), (ARENA, 256), (RESIDENT, 512))
    assert (g["m"], g["n"], g["k"], g["trans_a"], g["trans_b"], g["alpha"], g["beta"]) == (3, 4, 5, False, True,
                                                                                         0.5, 0.0)
    assert (g["dtype"], g["b_dtype"], g["c_dtype"]) == (1, 1, 0)      # B's dtype defaults to A's
    assert (g["batch"], g["outer"], g["outer_stride_c"], g["barrier"]) == (2, 3, 24, False)
    assert (g["a_scale"], g["b_scale"]) == (None, None)                 # no FP8 scales
    # An FP8 gemm's per-tensor scales: each its own binding and offset, either alone.
    assert table.append_gemm(a=(ARENA, 0), b=(RESIDENT, 128), c=(ARENA, 256), m=32, n=16, k=16, lda=16, ldb=16,
                             ldc=16, trans_b=True, dtype=3, c_dtype=1, a_scale=(ARENA, 1024),
                             b_scale=(RESIDENT, 4)) == 2
    assert table.append_gemm(**_GEMM, b_scale=(ARENA, 8)) == 3
    g = table.entry(2)
    assert (g["a_scale"], g["b_scale"], g["bias"]) == ((ARENA, 1024), (RESIDENT, 4), None)
    assert (table.entry(3)["a_scale"], table.entry(3)["b_scale"]) == (None, (ARENA, 8))
    assert (g["scale_mode"], table.entry(3)["scale_mode"]) == (0, 0)
    # Outer-vector scales (m and n f32): the mode travels with the gemm.
    assert table.append_gemm(**_GEMM, a_scale=(ARENA, 16), b_scale=(RESIDENT, 32), scale_mode=1) == 4
    assert table.entry(4)["scale_mode"] == 1
    with pytest.raises(ScheduleError, match="5 thunks"):
        table.entry(5)
    # Declared params bytes read back as given, each dispatch its own.
    assert table.append_dispatch(binary.address, [(ARENA, 0)], (1, 1, 1), (1, 1, 1), params=b"\x01\x02\x03") == 5
    assert table.append_dispatch(binary.address, [(ARENA, 0)], (1, 1, 1), (1, 1, 1),
                                 params=bytearray(range(40))) == 6
    assert table.entry(5)["params"] == b"\x01\x02\x03" and table.entry(6)["params"] == bytes(range(40))
    assert not table.entry(5)["params_by_value"]
    assert table.append_dispatch(binary.address, [(ARENA, 0)], (1, 1, 1), (1, 1, 1), params=b"\x01" * 16,
                                 params_by_value=True) == 7
    assert table.entry(7)["params_by_value"] and not table.entry(0)["params_by_value"]


_DISPATCH = {"bindings": [(ARENA, 0)], "groups": (1, 1, 1), "threads": (1, 1, 1)}
_GEMM = {"a": (ARENA, 0), "b": (ARENA, 0), "c": (ARENA, 0), "m": 1, "n": 1, "k": 1, "lda": 1, "ldb": 1, "ldc": 1}


@pytest.mark.parametrize("change, message", [
    ({"pipeline": "binary_f32"}, "pipeline .* must be an integer"),
    ({"pipeline": 0}, "pipeline .* must be >= 1"),
    ({"bindings": [(ARENA, 0)] * 13}, "13 bindings, at most 12"),
    ({"bindings": [("params", 0)]}, "unknown binding 'params': this table binds arena, resident"),
    ({"bindings": [(0, 0)]}, "unknown binding 0"),
    ({"bindings": [(ARENA, -8)]}, "binding 0 offset must be >= 0, got -8"),
    ({"bindings": [(ARENA, 1.5)]}, "binding 0 offset must be an integer"),
    ({"bindings": [ARENA]}, r"must be a \(binding name, byte offset\) pair"),
    ({"bindings": ARENA}, "bindings must be a list"),
    ({"groups": (0, 1, 1)}, r"groups\[0\] must be >= 1"),
    ({"groups": (1, 1)}, "groups must be 3 integers"),
    ({"threads": (1, -1, 1)}, r"threads\[1\] must be >= 1"),
    ({"threads": (2 ** 32, 1, 1)}, r"threads\[0\] must be <= 4294967295"),
    ({"barrier": "yes"}, "barrier must be a bool"),
    ({"params": "n=16"}, "params must be bytes"),
    ({"params": b""}, "params must be 1 to 4096 bytes, got 0"),
    ({"params": bytes(4097)}, "params must be 1 to 4096 bytes, got 4097"),
    ({"params": b"abcd", "bindings": []}, "it has no bindings"),
    ({"params_by_value": True}, "params_by_value needs the params bytes"),
    ({"params": b"abcd", "params_by_value": 2}, "params_by_value must be a bool"),
])
def test_bad_dispatch_appends_raise_before_c(binary, change, message):
    table = ThunkTable()
    kw = {"pipeline": binary.address, **_DISPATCH, **change}
    with pytest.raises(ScheduleError, match=message):
        table.append_dispatch(**kw)
    assert len(table) == 0          # nothing half-written
    assert issubclass(ScheduleError, RlxError) and rlx.ScheduleError is ScheduleError


@pytest.mark.parametrize("change, message", [
    ({"m": -1}, "m must be >= 0, got -1"),
    ({"ldc": 2.0}, "ldc must be an integer"),
    ({"batch": -2}, "batch must be >= 0"),
    ({"a_scale": ("scales", 0)}, "a_scale: unknown binding 'scales'"),
    ({"b_scale": (ARENA, -4)}, "b_scale.* offset must be >= 0"),
    ({"outer_stride_b": -1}, "outer_stride_b must be >= 0"),
    ({"a": ("weights", 0)}, "a: unknown binding 'weights'"),
    ({"bias": (RESIDENT, -4)}, "bias offset must be >= 0"),
    ({"dtype": 7}, "dtype must be <= 4"),
    ({"c_dtype": "f32"}, "c_dtype must be an integer"),
    ({"alpha": "1"}, "alpha must be a real number"),
    ({"trans_b": 2}, "trans_b must be a bool"),
    ({"scale_mode": 2}, "scale_mode .* must be <= 1"),
    ({"scale_mode": 1, "a_scale": (ARENA, 0)}, "outer-vector scales .* need a_scale and b_scale"),
])
def test_bad_gemm_appends_raise_before_c(change, message):
    table = ThunkTable()
    with pytest.raises(ScheduleError, match=message):
        table.append_gemm(**{**_GEMM, **change})
    assert len(table) == 0


def test_gemm_fields_are_keywords_only():
    table = ThunkTable()
    with pytest.raises(TypeError):
        table.append_gemm((ARENA, 0), (ARENA, 0), (ARENA, 0), 1, 1, 1, 1, 1, 1)
    with pytest.raises(TypeError, match="k"):
        table.append_gemm(**{key: v for key, v in _GEMM.items() if key != "k"})


def test_bad_binding_tables_raise():
    with pytest.raises(ScheduleError, match="declared twice"):
        Bindings((ARENA, ARENA))
    with pytest.raises(ScheduleError, match="non-empty string"):
        Bindings((ARENA, ""))
    with pytest.raises(ScheduleError, match="at most 16"):
        Bindings([ARENA] + [f"b{i}" for i in range(16)])
    with pytest.raises(ScheduleError, match="sequence of names"):
        Bindings(ARENA)


def test_run_one_gives_what_a_full_run_gives(dev, binary):
    """Running a chain's thunks one by one with run_one leaves the arena as
    one full run does (the same encoder, the same buffers)."""
    table, off = _mixed_table(binary)
    w = np.arange(N * N, dtype=np.float32).reshape(N, N) / 100
    x = np.linspace(-1, 1, N).astype(np.float32)
    full_buffers, one_buffers = _mixed_buffers(dev, w), _mixed_buffers(dev, w)
    full = _program(dev, table, full_buffers, [(off["x"], 4 * N)], [(off["out"], 4 * N)])
    want = np.zeros(N, np.float32)
    full.run([x], [want])
    one = _program(dev, table, one_buffers, [], [])
    one_buffers[ARENA].write(off["x"], x)
    for i in range(one.thunk_count):
        assert one.run_one(i) >= 0.0
    got = one_buffers[ARENA].read(off["out"], 4 * N)
    np.testing.assert_array_equal(np.frombuffer(got, np.float32), want)
    np.testing.assert_allclose(want, ((x + x) @ w) ** 2, rtol=1e-5, atol=1e-6)
    with pytest.raises(ScheduleError, match="3 thunks"):
        one.run_one(3)
    with pytest.raises(ScheduleError, match="must be >= 0"):
        one.run_one(-1)


def test_encode_one_and_record_one_build_timed_lists(dev, binary):
    """What calibration does: thunks encoded one at a time into a command
    buffer, and a dispatch recorded into an ICB and replayed, through the
    Program's encoder; a gemm cannot go into an ICB."""
    table, off = _mixed_table(binary)
    w = np.eye(N, dtype=np.float32)
    x = np.linspace(-1, 1, N).astype(np.float32)
    buffers = _mixed_buffers(dev, w)
    buffers[ARENA].write(off["x"], x)
    prog = _program(dev, table, buffers)
    with shim.CommandBuffer(dev) as cb:
        for i in range(3):
            prog.encode_one(cb.address, i, barrier=i > 0)
        cb.commit()
        cb.wait()
    np.testing.assert_allclose(np.frombuffer(buffers[ARENA].read(off["out"], 4 * N), np.float32), (2 * x) ** 2,
                               rtol=1e-6)
    buffers[ARENA].write(off["y"], np.zeros(N, np.float32))
    icb = shim.Icb(dev, 2)
    try:
        prog.record_one(icb.address, 0, 0, barrier=False)
        prog.record_one(icb.address, 1, 0, barrier=True)
        with pytest.raises(ScheduleError, match="gemm"):
            prog.record_one(icb.address, 1, 1)
        with shim.CommandBuffer(dev) as cb:
            cb.execute_icb(icb, 0, 2)
            cb.commit()
            cb.wait()
    finally:
        icb.free()
    np.testing.assert_array_equal(np.frombuffer(buffers[ARENA].read(off["y"], 4 * N), np.float32), 2 * x)
    with pytest.raises(ScheduleError, match="address is 0"):
        prog.encode_one(0, 0)


def test_program_runs_on_a_queue_of_its_own(dev):
    """Where the shim has queues (the host always), each program takes one,
    so programs run from different threads do not share one ordering."""
    arena = dev.alloc(256)
    progs = [_empty(dev, arena, [(32, 16)], [(32, 16)], staged=True) for _ in range(2)]
    for prog, value in zip(progs, (1.0, 2.0)):
        assert prog.own_queue
        out = np.zeros(4, np.float32)
        prog.run([np.full(4, value, np.float32)], [out])
        np.testing.assert_array_equal(out, value)
