"""Timing on the GPU for the H200 scripts: the median of CUDA-event times
around a call (the script's own folder is on sys.path when it runs)."""

from __future__ import annotations

import statistics
from collections.abc import Callable


def events_ms(fn: Callable[[], object], reps: int, warmup: int = 0) -> float:
    """Median milliseconds of ``fn()`` between two CUDA events, each rep
    synchronized on its end event, after ``warmup`` untimed calls."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
