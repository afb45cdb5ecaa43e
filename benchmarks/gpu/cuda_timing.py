"""Timing on the GPU for the H200 scripts (the script's own folder is on
sys.path when it runs): the median of CUDA-event times around a call, a
PyTorch CUDA graph of a call, the kernels' own durations as CUPTI records
them (torch.profiler), and an rlx executable replayed with no copies."""

from __future__ import annotations

import statistics
from collections.abc import Callable


def back_to_back_ms(fn: Callable[[], object], reps: int = 200, warmup: int = 5) -> float:
    """Mean milliseconds of ``fn()`` over ``reps`` calls queued back to back
    between two CUDA events: a kernel's own time once it runs well past the
    launch cost (no synchronization between calls)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


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


def graph_of(fn: Callable[[], object]):
    """A torch.cuda.CUDAGraph of fn(), warmed on a side stream first."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def kernel_table(fn: Callable[[], object], runs: int = 20, skip_memcpy: bool = False, top: int = 16) -> dict:
    """Per-run GPU time and count of each kernel name (CUPTI, through
    torch.profiler, which sees rlx's driver-API launches too) while fn runs
    ``runs`` times; ``skip_memcpy`` leaves copies out."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn()
        torch.cuda.synchronize()
    table: dict[str, list[float]] = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and not (skip_memcpy and "memcpy" in ev.name.lower()):
            entry = table.setdefault(ev.name[:90], [0.0, 0])
            entry[0] += ev.device_time_total / runs
            entry[1] += 1 / runs
    rows = sorted(((name, round(us, 2), round(n, 2)) for name, (us, n) in table.items()), key=lambda r: -r[1])
    return {"kernel_us_per_run": round(sum(r[1] for r in rows), 2),
            "kernels_per_run": round(sum(r[2] for r in rows), 2), "by_kernel": rows[:top]}


def bare_replay(exe):
    """A Program of the executable's thunks over its own arena, replayed
    with no input or output copies (as a PyTorch graph replay)."""
    from rlx._core import Program

    return Program(exe.device.shim.api_address, exe.device.address, exe.thunk_table,
                   {name: buf.address for name, buf in exe.bindings.items()}, [], [], replay=True, keepalive=exe)


def replay_ms(bare, reps: int = 50) -> float:
    """Median device milliseconds of bare.run (the shim's events) after 10 runs."""
    for _ in range(10):
        bare.run([], [])
    times = []
    for _ in range(reps):
        bare.run([], [])
        times.append(bare.last_device_seconds)
    return statistics.median(times) * 1e3
