"""Executable behaviour: repeated and concurrent runs, runs after failures,
and every bad input raising the right RlxError subclass."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_on_threads

import rlx
from rlx.errors import (
    DTypeError,
    GraphError,
    InputError,
    KernelCompileError,
    ParameterError,
    RlxError,
    ShapeError,
    UnsupportedOpError,
)


def _mlp(hidden=32):
    g = rlx.Graph()
    x = g.input("x", (5, 16))
    w = g.param("w", (16, hidden))
    b = g.param("b", (hidden,))
    g.set_outputs(y=g.softmax(g.gelu(g.add(g.matmul(x, w), b))))
    return g


def _params(rng, hidden=32):
    return {"w": rng.standard_normal((16, hidden), np.float32), "b": rng.standard_normal(hidden, np.float32)}


def test_runs_repeatedly_with_resident_params(rng):
    g = _mlp()
    params = _params(rng)
    exe = rlx.compile(g, params=params)
    for _ in range(5):
        x = rng.standard_normal((5, 16), np.float32)
        np.testing.assert_allclose(exe.run(x=x)["y"], rlx.run_reference(g, {"x": x}, params)["y"], rtol=1e-5, atol=1e-6)
    new = _params(rng)
    exe.set_params(new)
    x = rng.standard_normal((5, 16), np.float32)
    np.testing.assert_allclose(exe.run(x=x)["y"], rlx.run_reference(g, {"x": x}, new)["y"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("replay", [True, False])
def test_replay_and_reencode_agree(rng, replay):
    g = _mlp()
    params = _params(rng)
    exe = rlx.compile(g, params=params, replay=replay)
    assert exe.program.replaying is replay
    x = rng.standard_normal((5, 16), np.float32)
    np.testing.assert_allclose(exe.run(x=x)["y"], rlx.run_reference(g, {"x": x}, params)["y"], rtol=1e-5, atol=1e-6)


def test_two_executables_on_two_threads(rng):
    graphs = [_mlp(32), _mlp(64)]
    params = [_params(rng, 32), _params(rng, 64)]
    exes = [rlx.compile(g, params=p) for g, p in zip(graphs, params)]
    exes.append(exes[0])  # the same executable from a third thread too
    def worker(i):
        local = np.random.default_rng(i)
        exe, g, p = exes[i], graphs[i % 2], params[i % 2]
        for _ in range(50):
            x = local.standard_normal((5, 16), np.float32)
            np.testing.assert_allclose(exe.run(x=x)["y"], rlx.run_reference(g, {"x": x}, p)["y"],
                                       rtol=1e-5, atol=1e-6)

    run_on_threads(worker, 3)


def test_bad_inputs_name_the_problem_and_leave_the_executable_usable(rng):
    exe = rlx.compile(_mlp(), params=_params(rng))
    x = rng.standard_normal((5, 16), np.float32)
    with pytest.raises(InputError, match="unknown input.*'z'"):
        exe.run(x=x, z=x)
    with pytest.raises(InputError, match="missing input.*'x'"):
        exe.run({})
    with pytest.raises(InputError, match=r"shape \(4, 16\), expected \(5, 16\)"):
        exe.run(x=x[:4])
    with pytest.raises(InputError, match="dtype float64, expected f32"):
        exe.run(x=x.astype(np.float64))
    assert exe.run(x=x)["y"].shape == (5, 32)
    # Non-contiguous input is accepted (copied densely).
    xt = np.ascontiguousarray(x.T).T
    np.testing.assert_array_equal(exe.run(x=xt)["y"], exe.run(x=x)["y"])


def test_gather_index_out_of_range_is_an_input_error(rng):
    g = rlx.Graph()
    g.set_outputs(y=g.gather(g.param("t", (10, 4)), g.input("i", (3,), "i32")))
    exe = rlx.compile(g, params={"t": np.zeros((10, 4), np.float32)})
    with pytest.raises(InputError, match="index out of range"):
        exe.run(i=np.array([0, 10, 2], np.int32))
    exe.run(i=np.array([0, 9, 2], np.int32))


def test_parameter_errors(rng):
    g = _mlp()
    with pytest.raises(ParameterError, match="missing value for parameter.*'b'"):
        rlx.compile(g, params={"w": np.zeros((16, 32), np.float32)})
    with pytest.raises(ParameterError, match="unknown parameter"):
        rlx.compile(g, params={**_params(rng), "nope": np.zeros(1)})
    with pytest.raises(ParameterError, match="parameter 'w': shape"):
        rlx.compile(g, params={"w": np.zeros((16, 31), np.float32), "b": np.zeros(32, np.float32)})
    exe = rlx.compile(g, params=_params(rng))
    with pytest.raises(ParameterError, match="dtype int32"):
        exe.set_params(b=np.zeros(32, np.int32))


def test_graph_errors():
    g = rlx.Graph()
    x = g.input("x", (3,))
    with pytest.raises(GraphError):
        g.input("x", (3,))
    y = g.add(x, x)
    z = g.add(y, x)
    g.set_outputs(z=z)
    y.inputs = (z, x)  # make a cycle by mutation
    with pytest.raises(GraphError, match="cycle"):
        rlx.compile(g)
    with pytest.raises(ShapeError):
        g2 = rlx.Graph()
        g2.add(g2.input("a", (3,)), g2.input("b", (4,)))
    with pytest.raises(DTypeError):
        rlx.Graph().input("a", (3,), "complex128")   # c64 exists (the FFT family); no f64 pairs
    with pytest.raises(GraphError):
        rlx.compile(rlx.Graph())  # no outputs


def test_unsupported_op_raises_before_running():
    from rlx.ir.op import OpDef, TensorType, register_op

    register_op(OpDef("test_only_identity", 1, lambda ts, attrs: TensorType(ts[0].shape, ts[0].dtype)))
    g = rlx.Graph()
    g.set_outputs(y=g.op("test_only_identity", [g.input("x", (2,))]))
    with pytest.raises(UnsupportedOpError, match="test_only_identity.*no lowering on the (host|cuda|metal) device"):
        rlx.compile(g)


def test_kernel_source_that_does_not_compile():
    from rlx.runtime import shim

    dev = shim.open_device("host", 0)
    with pytest.raises(KernelCompileError, match="undeclared|not declared|error"):
        dev.compile_library("RLX_KERNEL broken(RLX_PARAMS(Nope, p, 0) RLX_IDS) { this is not c++; }")


def test_unknown_device_and_bad_env(monkeypatch):
    with pytest.raises(RlxError, match="unknown device"):
        rlx.compile(_mlp(), device="tpu")
    monkeypatch.setenv("RLX_REPLAY", "maybe")
    with pytest.raises(rlx.ConfigError):
        rlx.compile(_mlp(), params=_params(np.random.default_rng(0)))


def test_failed_device_run_reports_and_program_survives(rng):
    """A run that fails inside the shim (an invalid gemm) raises, releases
    the program's lock, and fails again cleanly; other executables and the
    device stay usable. Replayed, the same gemm is refused when the schedule
    is made."""
    from rlx._core import ARENA, Bindings, Program, ThunkTable

    from rlx.runtime import shim

    dev = shim.open_device("host", 0)
    arena = dev.alloc(1024)
    table = ThunkTable(Bindings((ARENA,)))
    table.append_gemm(a=(ARENA, 0), b=(ARENA, 0), c=(ARENA, 0), m=64, n=64, k=64, lda=64, ldb=64,
                      ldc=64)   # 48 KiB past 1 KiB
    with pytest.raises(RlxError, match="making the schedule"):
        Program(dev.shim.api_address, dev.address, table, {ARENA: arena.address}, [], [], replay=True,
                keepalive=arena)
    prog = Program(dev.shim.api_address, dev.address, table, {ARENA: arena.address}, [], [], replay=False,
                   keepalive=arena)
    for _ in range(2):
        with pytest.raises(RlxError, match="run failed"):
            prog.run([], [])
    exe = rlx.compile(_mlp(), params=_params(rng))
    assert exe.run(x=np.ones((5, 16), np.float32))["y"].shape == (5, 32)


def test_executables_share_resident_params(rng):
    """Shape buckets of one model read one copy of the weights."""
    def graph(rows):
        g = rlx.Graph()
        x = g.input("x", (rows, 16))
        g.set_outputs(y=g.add(g.matmul(x, g.param("w", (16, 32))), g.param("b", (32,))))
        return g

    params = _params(rng)
    first = rlx.compile(graph(5), params=params)
    second = rlx.compile(graph(9), share_params_with=first)    # no params needed
    assert second.stats.resident_bytes < first.stats.resident_bytes
    x = rng.standard_normal((9, 16)).astype(np.float32)
    np.testing.assert_allclose(second.run(x=x)["y"], x @ params["w"] + params["b"], rtol=1e-5, atol=1e-5)
    new = _params(rng)
    first.set_params(new)                                      # one copy: both see it
    np.testing.assert_allclose(second.run(x=x)["y"], x @ new["w"] + new["b"], rtol=1e-5, atol=1e-5)
    g3 = rlx.Graph()
    g3.set_outputs(y=g3.add(g3.input("x", (2, 31)), g3.param("b", (31,))))   # same name, other shape
    with pytest.raises(ParameterError, match="missing value for parameter.*'b'"):
        rlx.compile(g3, share_params_with=first)
