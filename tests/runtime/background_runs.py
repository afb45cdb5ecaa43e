"""Child processes behind a few tests of tests/runtime, run beside the suite.

Some tests each spend a minute or more of one core in a child process:
nvcc's PTX compiles of the kernel library, the kernel suites at a forced
instruction-set level or worker count. Most of the suite runs on one
thread, so when each test ran its child in turn, one of CI's two cores sat
idle for most of the run and CI paid those minutes on top.

A test module declares its runs at import (``declare`` returns the mark
that ties a run to its test). When collection ends, tests/conftest.py
queues the runs of the tests that were selected, in test order, and one
worker thread runs them one after another at the lowest CPU priority, so
they take what the rest of the suite leaves idle. A test then waits for its
own run's result (``result``); a run that was never queued (the test was
run some other way) runs in the foreground then.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import pytest

MARK = "background_run"


@dataclass(frozen=True)
class Run:
    """A declared child: ``argv`` is built when the run starts (it may write
    the files the child reads)."""

    argv: Callable[[], Sequence[str]]
    cwd: str | None
    env: dict[str, str] | None
    timeout: float


@dataclass
class Result:
    returncode: int | None   # None: killed at its timeout, or at the session's end
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    def output_tail(self) -> str:
        head = f"timed out after {self.seconds:.0f} s\n" if self.timed_out else ""
        return head + self.stdout[-4000:] + self.stderr[-2000:]


@dataclass
class _State:
    declared: dict[str, Run] = field(default_factory=dict)
    queued: set[str] = field(default_factory=set)
    done: dict[str, threading.Event] = field(default_factory=dict)
    results: dict[str, Result] = field(default_factory=dict)
    todo: queue.Queue = field(default_factory=queue.Queue)
    running: subprocess.Popen | None = None
    worker: threading.Thread | None = None
    stopping: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The timeline CI's summary prints (``timeline``): seconds since the
    # first run was queued that each run started, and its test's wait.
    origin: float | None = None
    started: dict[str, float] = field(default_factory=dict)
    waited: dict[str, float] = field(default_factory=dict)


_state = _State()


def declare(key: str, argv: Callable[[], Sequence[str]] | Sequence[str], *, cwd: str | None = None,
            env: dict[str, str] | None = None, timeout: float = 600) -> pytest.MarkDecorator:
    """Declare the run ``key`` and return the mark to put on its test."""
    build = argv if callable(argv) else (lambda: tuple(argv))
    _state.declared[key] = Run(build, cwd, env, timeout)
    return getattr(pytest.mark, MARK)(key)


def child_pytest(*args: str) -> list[str]:
    """The argv of a child pytest over ``args`` (suites, options) that stops
    at its first failure and writes no cache."""
    return [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *args]


def _execute(key: str, nice: bool) -> Result:
    run = _state.declared[key]
    start = time.monotonic()
    try:
        argv = list(run.argv())
        proc = subprocess.Popen(argv, cwd=run.cwd, env=run.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, preexec_fn=(lambda: os.nice(19)) if nice else None)
    except Exception as exc:   # the test reports it; the worker goes on with the next run
        return Result(None, "", f"could not start {key}: {exc!r}", time.monotonic() - start)
    with _state.lock:
        _state.running = proc
    try:
        stdout, stderr = proc.communicate(timeout=run.timeout)
        return Result(proc.returncode, stdout, stderr, time.monotonic() - start)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        return Result(None, stdout, stderr, time.monotonic() - start, timed_out=True)
    finally:
        with _state.lock:
            _state.running = None


def _work() -> None:
    while True:
        key = _state.todo.get()
        if key is None:
            return
        _state.started[key] = time.monotonic() - (_state.origin or time.monotonic())
        result = (Result(None, "", f"{key}: the session ended first", 0.0) if _state.stopping
                  else _execute(key, nice=True))
        _state.results[key] = result
        _state.done[key].set()


def start(keys: Iterable[str]) -> None:
    """Queue the declared runs ``keys`` (each once, in order) behind those
    already queued, and start the worker if it is not running."""
    if _state.origin is None:
        _state.origin = time.monotonic()
    for key in keys:
        if key in _state.declared and key not in _state.queued:
            _state.queued.add(key)
            _state.done[key] = threading.Event()
            _state.todo.put(key)
    if _state.queued and _state.worker is None:
        _state.worker = threading.Thread(target=_work, name="background-runs", daemon=True)
        _state.worker.start()


def start_for(items: Iterable[pytest.Item]) -> None:
    """Queue the runs that the selected test items are marked with."""
    start(mark.args[0] for item in items for mark in item.iter_markers(MARK))


def result(key: str) -> Result:
    """The run ``key``'s result: waited for if it is queued, else run now."""
    if key not in _state.queued:
        if key not in _state.results:
            _state.results[key] = _execute(key, nice=False)
        return _state.results[key]
    start = time.monotonic()
    _state.done[key].wait()
    _state.waited[key] = time.monotonic() - start
    return _state.results[key]


def timeline() -> list[str]:
    """A line per queued run: when it started (seconds after the queue
    was filled), how long it ran, and how long its test waited for it."""
    lines = []
    for key in sorted(_state.queued, key=lambda k: _state.started.get(k, float("inf"))):
        ran = _state.results.get(key)
        if key not in _state.started or ran is None:
            lines.append(f"{key}: not run")
            continue
        waited = f", its test waited {_state.waited[key]:.0f} s" if key in _state.waited else ""
        lines.append(f"{key}: started at +{_state.started[key]:.0f} s, ran {ran.seconds:.0f} s{waited}")
    return lines


def stop() -> None:
    """The session's end: drop what is still queued and kill the running child."""
    _state.stopping = True
    with _state.lock:
        if _state.running is not None and _state.running.poll() is None:
            _state.running.kill()
    if _state.worker is not None:
        _state.todo.put(None)
        _state.worker.join(timeout=30)
