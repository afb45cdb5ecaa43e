"""Shared fixtures: random data, the device under test and the reference
comparison with stated tolerances.

The kernel and pipeline suites run on the CPU by default. The same suites
run on another device, and at a forced threads-per-group, with
    pytest --rlx-device cuda --rlx-group-size 32
(group size N caps every dispatch's threads per group at N; kernels must be
correct for any size, DESIGN section 3).

Tolerances: f32 kernels accumulate in f32 like the numpy reference, so they
agree to rounding (rtol 1e-5, atol 1e-5; reductions over up to ~4k terms in
a different order). f16 kernels read f16, compute in f32 and round once on
store, as the reference does; results differ by at most an f16 rounding of
intermediate values (one ulp is ~1e-3 relative): rtol 2e-3, atol 2e-3.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import rlx

TOL = {"f32": dict(rtol=1e-5, atol=1e-5), "f16": dict(rtol=2e-3, atol=2e-3)}


def pytest_addoption(parser):
    parser.addoption("--rlx-device", default="cpu", help="device the kernel suites compile for (cpu, cuda, metal)")
    parser.addoption("--rlx-group-size", type=int, default=0,
                     help="cap threads per group at N on every dispatch (0: the device's own choice)")
    # tests/fuzz/test_fuzz.py (the differential fuzzer against PyTorch); it runs on
    # --rlx-device / --rlx-group-size like every other suite.
    parser.addoption("--fuzz-runs", type=int, default=0,
                     help="fuzz: N cases of each kind (ops, special-value ops, random graphs, model graphs, "
                          "splat frames, stft / istft, log-mel, LLM models, BERT embedders) from --fuzz-seed on "
                          "(0: the short fixed-seed CI run)")
    parser.addoption("--fuzz-seed", type=int, default=0, help="fuzz: first seed of a --fuzz-runs run")
    parser.addoption("--fuzz-options", type=int, default=3,
                     help="fuzz: random compile-option sets per graph besides the fixed five "
                          "(0: every combination of passes x pin_outputs x replay x precision)")


def _loaded(module: str):
    """``module`` if a collected test module imported it, else None (the
    session hooks below act only for suites that were collected)."""
    import sys

    return sys.modules.get(module)


def pytest_configure(config):
    config.addinivalue_line("markers", "background_run(key): the test reads the result of a child process "
                                       "run beside the suite (tests/runtime/background_runs.py)")


def pytest_collection_finish(session):
    """Start the child processes of the selected tests that run beside the
    suite (tests/runtime/background_runs.py says why)."""
    runs = _loaded("runtime.background_runs")
    if runs is not None:
        runs.start_for(session.items)


def pytest_terminal_summary(terminalreporter):
    """When each child run beside the suite started and ran, and how long
    its test waited (what CI's time depends on)."""
    runs = _loaded("runtime.background_runs")
    lines = runs.timeline() if runs is not None else []
    if lines:
        terminalreporter.section("runs beside the suite")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session):
    runs = _loaded("runtime.background_runs")
    if runs is not None:
        runs.stop()
    ptx = _loaded("runtime.ptx_runs")
    if ptx is not None:
        ptx.remove_files()


_DEVICE = {"name": "cpu"}


@pytest.fixture(autouse=True)
def _no_calibration_probes(monkeypatch, request):
    """Compiles in the suites use the documented default calibration, so no
    test waits on (or depends on) seconds of probing; the calibration tests
    turn probing back on themselves."""
    if "test_calibration" not in request.node.nodeid:
        monkeypatch.setenv("RLX_CALIBRATE", "0")


@pytest.fixture(autouse=True)
def _device_under_test(request, monkeypatch):
    """Point rlx.compile's default device (and group size) at the option's."""
    name = request.config.getoption("--rlx-device")
    size = request.config.getoption("--rlx-group-size")
    _DEVICE["name"] = name
    if name != "cpu" or size:
        from rlx.runtime import devices

        real = devices.open_device

        def open_for_test(requested):
            dev, target = real(name if requested in (None, "cpu") else requested)
            if size:
                target = dataclasses.replace(target, max_threads_per_group=size)
            return dev, target

        monkeypatch.setattr(devices, "open_device", open_for_test)
    yield


def drop_capabilities(monkeypatch, *names: str) -> None:
    """The device under test's target without the named capabilities (a
    fusion's opt-out), for the rest of the test."""
    from rlx.runtime import devices

    real = devices.open_device

    def opened(name):
        dev, target = real(name)
        return dev, dataclasses.replace(target, capabilities=target.capabilities - set(names))

    monkeypatch.setattr(devices, "open_device", opened)


def assert_matches_reference(graph, inputs, params=None, device=None, tol=None, **compile_kw):
    exe = rlx.compile(graph, device=device, params=params, **compile_kw)
    got = exe.run(inputs)
    want = rlx.run_reference(graph, inputs, params)
    assert set(got) == set(want)
    for name in want:
        dtype = str(want[name].dtype)
        key = "f16" if dtype == "float16" else "f32"
        t = tol or TOL[key]
        assert got[name].dtype == want[name].dtype, name
        assert got[name].shape == want[name].shape, name
        np.testing.assert_allclose(got[name].astype(np.float64), want[name].astype(np.float64),
                                   err_msg=f"output {name}", **t)
    return exe, got


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def run_on_threads(work, n: int) -> None:
    """Runs work(i) for i in range(n) on n threads at once; any exception a
    thread raised fails the calling test (threads swallow them otherwise)."""
    import threading

    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def in_ci() -> bool:
    """Whether this is a CI run (CI=true): a test whose tool is missing fails
    there instead of skipping, so a green CI never hides an unchecked part."""
    import os

    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
