"""Benchmarks run rlx and its peers in the same session and print the ratio
of their medians at the end (pytest-benchmark prints the raw table).

Run:  python -m pytest benchmarks --benchmark-enable
Track over time: add --benchmark-autosave, later --benchmark-compare."""

from __future__ import annotations

import pytest

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
