"""The host device at worker counts other than this machine's core count.

Lowering reads the device's compute units (the host's worker threads) to
choose key splits for decode attention, split argmax, sort chunks and FFT
rows a group, and the shim runs groups on no pool at all with one thread.
CI's machine has 2 cores, so without this the other machines' choices (a
laptop with 8, a server with 64) would only ever run there. A child pytest
runs the suites whose plans depend on the count, at 1 thread and at 7 (odd,
and more than the cores here, so groups interleave differently); both ran
whole (tests/ops, tests/models, tests/lowering, tests/fuzz) at 1, 5 and 16
threads by hand (benchmarks/README.md, "CPU: worker counts")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlx.runtime import shim

from . import background_runs

ROOT = Path(__file__).resolve().parents[2]
THREAD_SENSITIVE_SUITES = ["tests/ops/test_attention.py", "tests/ops/test_reduce.py", "tests/ops/test_sort.py",
                           "tests/ops/test_topk.py", "tests/ops/test_fft.py", "tests/ops/test_state.py"]


def test_the_device_reports_its_workers_as_compute_units():
    """What makes the count reach lowering; a child that ignored RLX_NUM_THREADS would test nothing new."""
    code = "from rlx.runtime import shim; print(shim.open_device('host', 0).info.compute_units)"
    for threads in (1, 7):
        out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, RLX_NUM_THREADS=str(threads)),
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert int(out.stdout.split()[-1]) == threads
    assert shim.open_device("host", 0).info.compute_units >= 1


def _worker_count_run(threads: int):
    """`threads` with the mark of its child pytest, run beside the suite
    (tests/runtime/background_runs.py)."""
    env = dict(os.environ, RLX_NUM_THREADS=str(threads), RLX_CALIBRATE="0")
    argv = background_runs.child_pytest(*THREAD_SENSITIVE_SUITES)
    return pytest.param(threads, marks=background_runs.declare(f"threads-{threads}", argv, cwd=str(ROOT), env=env,
                                                               timeout=900))


@pytest.mark.parametrize("threads", [_worker_count_run(1), _worker_count_run(7)])
def test_thread_sensitive_suites_pass_at_other_worker_counts(threads):
    ran = background_runs.result(f"threads-{threads}")
    assert ran.returncode == 0, ran.output_tail()
    assert " passed" in ran.stdout.splitlines()[-1], ran.stdout[-500:]
