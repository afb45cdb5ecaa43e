"""Launch exploration (RLX_CUDA_PDL=auto): a program that times each of its
schedules with and without launch overlap over its first runs and keeps
the faster (rlx/_core.pyx Program.launch_mode). Only CUDA overlaps
launches, so rlx.compile explores there alone; these tests force it on the
host shim (whose serial schedules are the same command lists) to check
the bookkeeping and that every run, in either form, computes the same."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx import env
from rlx.errors import ConfigError
from rlx.runtime import compiler


def _chain(n: int = 64, steps: int = 6) -> rlx.Graph:
    g = rlx.Graph()
    x = g.input("x", (3, n))
    y = x
    for i in range(steps):   # dependent elementwise steps, a gemm between: several schedules
        y = g.tanh(g.add(y, x)) if i != steps // 2 else g.matmul(y, g.param("w", (n, n)))
    g.set_outputs(y=y)
    return g


def _compile(explore: bool, monkeypatch, rng):
    monkeypatch.setattr(compiler, "explores_launch", lambda dev: explore)
    w = (rng.standard_normal((64, 64)) * 0.1).astype(np.float32)
    return rlx.compile(_chain(), params={"w": w}, device="cpu")


def test_exploring_programs_compute_what_plain_ones_do_and_settle(monkeypatch, rng):
    plain = _compile(False, monkeypatch, rng)
    rng = np.random.default_rng(1234)
    explored = _compile(True, monkeypatch, rng)
    assert plain.program.launch_mode == "overlapped"
    assert explored.program.replaying   # the host shim records schedules: there is something to explore
    assert explored.program.launch_mode == "exploring"
    forms = explored.program.launch_forms
    assert forms >= 2 and forms % 2 == 0   # every schedule and its serial form
    x = rng.standard_normal((3, 64)).astype(np.float32)
    want = plain.run(x=x)["y"]
    for i in range(2 + 2 * 8):   # LAUNCH_WARMUP_RUNS + 2 x LAUNCH_TRIALS_EACH (rlx/_core.pyx)
        assert explored.program.launch_mode == "exploring", i
        np.testing.assert_array_equal(explored.run(x=x)["y"], want)
    assert explored.program.launch_mode in ("overlapped", "serial")
    times = explored.program.launch_times
    assert times["trials"] == 18 and np.isfinite(times["overlapped"]) and np.isfinite(times["serial"])
    # The choice follows the rule: serial only when 2% faster.
    assert (explored.program.launch_mode == "serial") == (times["serial"] < 0.98 * times["overlapped"])
    assert explored.program.launch_forms == forms // 2   # the losing forms freed
    for _ in range(3):   # settled: runs go on in the chosen form
        np.testing.assert_array_equal(explored.run(x=x)["y"], want)
    assert explored.program.launch_times["trials"] == 18


@pytest.mark.parametrize("mode", ["serial", "overlapped"])
def test_a_pinned_mode_ends_the_exploration_and_frees_the_other_form(monkeypatch, rng, mode):
    """pin_launch_mode: the program runs the pinned form from then on,
    computing what a plain one does, with one form a step left; a settled
    or plain program refuses a pin, and so does an unknown mode."""
    plain = _compile(False, monkeypatch, rng)
    explored = _compile(True, monkeypatch, np.random.default_rng(1234))
    x = np.random.default_rng(5).standard_normal((3, 64)).astype(np.float32)
    explored.run(x=x)   # one run while exploring, then the pin
    forms = explored.program.launch_forms
    with pytest.raises(ConfigError, match="mode must be"):
        explored.program.pin_launch_mode("fast")
    explored.program.pin_launch_mode(mode)
    assert explored.program.launch_mode == mode
    assert explored.program.launch_forms == forms // 2
    for _ in range(3):
        np.testing.assert_array_equal(explored.run(x=x)["y"], plain.run(x=x)["y"])
    assert explored.program.launch_times["trials"] == 1   # no more timing
    with pytest.raises(ConfigError, match="already"):
        explored.program.pin_launch_mode("overlapped")
    with pytest.raises(ConfigError, match="already 'overlapped'"):
        plain.program.pin_launch_mode("serial")


def test_a_failed_run_is_not_timed(monkeypatch, rng):
    """A run that raises before the device ran (bad input) leaves the
    exploration where it was; the executable runs on."""
    exe = _compile(True, monkeypatch, rng)
    assert exe.program.replaying
    with pytest.raises(rlx.RlxError):
        exe.run(x=np.zeros((2, 64), np.float32))
    assert exe.program.launch_times["trials"] == 0
    exe.run(x=np.zeros((3, 64), np.float32))
    assert exe.program.launch_times["trials"] == 1


def test_rlx_cuda_pdl_takes_auto(monkeypatch):
    monkeypatch.delenv("RLX_CUDA_PDL", raising=False)   # the default: auto
    assert env.cuda_pdl() and env.cuda_pdl_auto()
    monkeypatch.setenv("RLX_CUDA_PDL", "auto")
    assert env.cuda_pdl() and env.cuda_pdl_auto()
    monkeypatch.setenv("RLX_CUDA_PDL", "0")
    assert not env.cuda_pdl() and not env.cuda_pdl_auto()
    monkeypatch.setenv("RLX_CUDA_PDL", "1")
    assert env.cuda_pdl() and not env.cuda_pdl_auto()
    monkeypatch.setenv("RLX_CUDA_PDL", "sometimes")
    with pytest.raises(ConfigError):
        env.cuda_pdl()


def test_only_cuda_programs_explore(monkeypatch):
    class Dev:
        class shim:
            backend = "host"

    monkeypatch.setenv("RLX_CUDA_PDL", "auto")
    assert not compiler.explores_launch(Dev)
    Dev.shim.backend = "cuda"
    assert compiler.explores_launch(Dev)
    monkeypatch.setenv("RLX_CUDA_PDL", "1")
    assert not compiler.explores_launch(Dev)
