"""Benchmarks run rlx and its peers in the same session and print the ratio
of their medians at the end (pytest-benchmark prints the raw table).

Run:  python -m pytest benchmarks --benchmark-enable
Track over time: add --benchmark-autosave, later --benchmark-compare."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import numpy as np
import pytest


def device_threads() -> int:
    """The worker count rlx's CPU device uses (RLX_NUM_THREADS or every core): the peers get as many."""
    return int(os.environ.get("RLX_NUM_THREADS") or os.cpu_count() or 1)


@pytest.fixture
def threaded_copy() -> Callable[[int], Callable[[], None]]:
    """threaded_copy(nbytes) -> a function copying nbytes between two
    buffers split over device_threads() threads (numpy releases the GIL in
    copyto): the memory-bandwidth peer of the GEMV benchmarks."""

    def make(nbytes: int) -> Callable[[], None]:
        src = np.ones(nbytes, np.uint8)
        dst = np.empty_like(src)
        bounds = np.linspace(0, src.size, device_threads() + 1).astype(np.int64)

        def copy() -> None:
            workers = [threading.Thread(target=np.copyto, args=(dst[a:b], src[a:b]))
                       for a, b in zip(bounds, bounds[1:])]
            for w in workers:
                w.start()
            for w in workers:
                w.join()

        return copy

    return make


_MEDIANS: dict[tuple[str, str], float] = {}
_SCALE: dict[str, tuple[float, str]] = {}


@pytest.fixture
def record():
    """record(case, who, benchmark, per=N, unit='op'): keep the median for
    the ratio table, optionally normalized per N items."""

    def _record(case: str, who: str, benchmark, per: int = 1, unit: str = "run") -> None:
        stats = getattr(benchmark, "stats", None)
        if stats is None or getattr(stats, "stats", None) is None:
            return  # --benchmark-disable: nothing measured
        _MEDIANS[(case, who)] = stats.stats.median / per
        _SCALE[case] = (per, unit)

    return _record


def pytest_terminal_summary(terminalreporter):
    cases = sorted({c for c, _ in _MEDIANS})
    if not cases:
        return
    tr = terminalreporter
    tr.section("rlx vs peers (median, same run)")
    for case in cases:
        per, unit = _SCALE[case]
        mine = sorted((who, t) for (c, who), t in _MEDIANS.items() if c == case and who.startswith("rlx"))
        peers = sorted((who, t) for (c, who), t in _MEDIANS.items() if c == case and not who.startswith("rlx"))
        line = [f"{who} {t * 1e6:.3f} us/{unit}" for who, t in mine]
        for who, t in peers:   # each rlx variant (rlx, rlx-bf16, ...) against each peer
            ratios = ", ".join(f"{mw}/{who} = {mt / t:.3f}x" for mw, mt in mine)
            line.append(f"{who} {t * 1e6:.3f} us/{unit}" + (f" ({ratios})" if ratios else ""))
        tr.write_line(f"{case}: " + "; ".join(line))
