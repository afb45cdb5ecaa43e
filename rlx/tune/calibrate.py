"""Device calibration: a few seconds of probes that measure what the cost
model (rlx/tune/cost.py) needs, cached as JSON per device (DESIGN
section 4, "Calibration").

Everything here goes through the public runtime: graphs compiled with
``rlx.compile`` (for the run floor, and for thunks with real bindings and
params), their Programs' own per-thunk encoder (``Program.encode_one`` /
``record_one``, the code a run encodes with) and command buffers and ICBs
through the wrappers of ``rlx.runtime.shim``.
Nothing knows which backend it runs on, so the same probes calibrate the
CPU, CUDA and Metal.

Costs are measured INSIDE A REPLAYED SCHEDULE, as runs execute them: a
thunk is recorded N times into an indirect command buffer (the replay path
of every shim: a host command list, a CUDA graph, a Metal ICB) and its cost
is the slope between replaying 1 + N entries and 1 (``time_replayed``); a
gemm, which an ICB cannot hold, is encoded N times after a one-entry ICB,
which is how a replayed run's command list looks (the CUDA shim captures
such a list into one CUDA graph, so consecutive nodes overlap their launch
latency). Timing one launch at a time instead (``time_thunk``) over-predicts
replayed runs by the launch latency per node: +29% for a 6-layer BERT on
the H200 with PROBE_SET 1.

What is measured, and the cache: rlx/tune/calibration.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx import env
from rlx.atomic_file import write_atomic
from rlx.ir.graph import Graph
from rlx.lowering import DISPATCH, GEMM, Binding, Thunk, Work
from rlx.lowering.linear import linear_params
from rlx.runtime import devices, shim
from rlx.runtime.compiler import compile_graph, thunk_program
from rlx.runtime.views import Storage
from rlx.tune.calibration import (
    _MEMO,
    _MEMO_LOCK,
    BUSY_LOAD_PER_CORE,
    DEFAULT_BUDGET_S,
    FAMILIES,
    SMALL_M,
    Calibration,
    _log,
    _read_cache,
    _stale_reason,
    calibration_path,
    default_calibration,
    load_per_core,
)
from rlx.tune.cost import decision_model
from rlx.tune.work import FAMILY_UNITS, dispatch_overhead, family_of, group_count, thunk_bytes, thunk_work

_STATE = threading.local()


def calibrating() -> bool:
    """True while this thread runs probes. The probes compile graphs, so a
    compile hook asking for a calibration must not recurse into probing:
    it gets the defaults instead (see ``get_calibration``)."""
    return bool(getattr(_STATE, "active", False))


def get_calibration(device: Any, *, force: bool = False, budget_s: float | None = None,
                    progress: bool | None = None, measure_if_missing: bool = True) -> Calibration:
    """The device's calibration: from the cache when its stamps match, else
    measured (about ``budget_s`` seconds, DEFAULT_BUDGET_S by default) and
    cached. ``RLX_CALIBRATE=0`` returns DEFAULTS[backend] without probing.
    ``force`` re-measures. ``progress``: a bar on stderr (default: when
    stderr is a terminal). ``measure_if_missing=False`` returns the defaults
    instead of probing when nothing is cached."""
    if not env.calibrate_enabled() or calibrating():
        return default_calibration(device.backend, device)
    path = calibration_path(device)
    with _MEMO_LOCK:
        if not force:
            memo = _MEMO.get(path)
            if memo is not None and _stale_reason(memo, device) is None:
                return memo
            cached = _read_cache(path, device)
            if cached is not None:
                _MEMO[path] = cached
                return cached
            if not measure_if_missing:
                _log(f"{device.backend}: no calibration cached; using the defaults "
                     f"(`rlx calibrate --device {device.backend}` measures this device)")
                return default_calibration(device.backend, device)
        budget = DEFAULT_BUDGET_S if budget_s is None else budget_s
        # A first compile can pause for this; say why, once, even without a
        # terminal for the progress bar (logs of services, CI).
        print(f"rlx: measuring the {device.backend} device once for the cost model (about {budget:.0f} s; "
              f"cached in {path}; RLX_CALIBRATE=0 skips)", file=sys.stderr, flush=True)
        calib = measure(device, budget_s=budget, progress=progress)
        try:
            write_atomic(path, calib.to_json())
            _log(f"wrote {path}")
        except OSError as exc:
            warnings.warn(f"rlx: cannot write the calibration cache {path}: {exc}", RuntimeWarning, stacklevel=2)
        _MEMO[path] = calib
        return calib


# ---- timing helpers (also used by benchmarks/test_cost_accuracy.py) -------------------------
# A probe is (Program, thunk index): every probe encodes through the
# Program's own encoder (encode_one / record_one), the code a run uses.
Probe = tuple[Any, int]


def _probe(exe: Any, thunk: Any, bindings: Mapping[str, Any] | None = None) -> Probe:
    """Where ``thunk`` is encoded from: ``exe``'s own program when it is one
    of ``exe``'s thunks (bindings and params exactly as compile made them),
    else a one-thunk program over ``exe``'s buffers plus ``bindings``
    (binding name -> buffer, for a thunk built by hand)."""
    if bindings is None:
        for i, own in enumerate(exe.thunks):
            if own is thunk:
                return exe.program, i
    return thunk_program(exe, [thunk], bindings), 0


def _encode_one(cb: Any, probe: Probe, barrier: bool) -> None:
    """The probe's thunk appended to a ``shim.CommandBuffer``."""
    program, index = probe
    program.encode_one(cb.address, index, barrier=barrier)


def _record_chain(icb: Any, probe: Probe, count: int) -> None:
    """Entries 0..count-1 of a ``shim.Icb``: the probe's dispatch, each after
    a barrier but the first (a dependent chain, like a real schedule)."""
    program, index = probe
    for i in range(count):
        program.record_one(icb.address, i, index, barrier=i > 0)


def _run_encoded(device: Any, encode: Callable[[Any], None]) -> float:
    """Seconds for one committed command buffer: the device's own timing
    when the shim reports it, else wall time of commit + wait."""

    with shim.CommandBuffer(device) as cb:
        encode(cb)
        t0 = time.perf_counter()
        cb.commit()
        device_s = cb.wait()
        wall = time.perf_counter() - t0
    return device_s if device_s > 0 else wall


def time_thunk(exe: Any, thunk: Any, *, repeats: int = 8, samples: int = 5, budget_s: float | None = None,
               bindings: Mapping[str, Any] | None = None) -> float:
    """Seconds per execution of one thunk of ``exe``, encoded ``repeats``
    times with a barrier between (a dependent chain, like a real schedule)
    into one command buffer; the minimum over ``samples`` buffers (or over
    as many as fit in ``budget_s``), so other load on the machine counts
    as little as possible. ``bindings``: as for ``_probe``."""
    probe = _probe(exe, thunk, bindings)

    def encode(cb: Any) -> None:
        for i in range(repeats):
            _encode_one(cb, probe, barrier=i > 0)

    return _sample(lambda: _run_encoded(exe.device, encode), samples, budget_s) / repeats

# A one-entry ICB per device: gemm lists start with it so they look like a
# replayed run's command list (ICB ranges with gemms between them).
_ANCHORS: dict[int, tuple[Any, Any, Any]] = {}


def _anchor(device: Any) -> Any:
    entry = _ANCHORS.get(id(device))
    if entry is None or entry[0] is not device:

        g = _chain(1, (16,), "add")
        exe = _compile(g, device, _params_for(g))
        icb = shim.Icb(device, 1)
        _record_chain(icb, (exe.program, 0), 1)
        entry = _ANCHORS[id(device)] = (device, exe, icb)
    return entry[2]

REPLAY_TARGET_S = 2e-4    # auto repeats: the long replay should take about this long

LONG_NODE_S = 1e-3        # a replay of one node this long: its mean, not the slope


def time_replayed(exe: Any, thunk: Any, *, repeats: int | None = None, samples: int = 4,
                  budget_s: float | None = None, bindings: Mapping[str, Any] | None = None) -> float:
    """Seconds one execution of ``thunk`` adds to a REPLAYED schedule: the
    slope between a command buffer replaying it 1 + ``repeats`` times and
    one replaying it once. A dispatch is recorded into an ICB and replayed
    with ``execute_icb``; a gemm (which an ICB cannot hold) is encoded after
    a one-entry ICB, as gemm segments sit between replay ranges. Each list
    is committed twice before timing (the CUDA shim captures a replayed
    list into a CUDA graph the second time it sees it), then the minimum
    over ``samples`` commits (or ``budget_s``) of each length is taken. The
    run floor, the commit and the graph launch cancel in the slope; what is
    left is the node's cost inside the graph, launch overlap included.
    ``repeats=None``: as many (2 to 64) as make the long replay take about
    REPLAY_TARGET_S, from a first replay of one (so a node of a few
    microseconds is timed over tens of them, above the launch jitter).
    Every entry is encoded by the Program's encoder (``_probe``;
    ``bindings`` as there)."""

    device = exe.device
    probe = _probe(exe, thunk, bindings)
    if repeats is None:
        once = _one_replay(device, thunk, probe)
        repeats = int(min(64, max(2, round(REPLAY_TARGET_S / max(once, 1e-9)))))
    short, long = 1, 1 + max(1, int(repeats))
    icb = None
    if thunk.kind == GEMM:
        anchor = _anchor(device)

        def encoder(count: int) -> Callable[[Any], None]:
            def encode(cb: Any) -> None:
                cb.execute_icb(anchor, 0, 1)
                for _ in range(count):
                    _encode_one(cb, probe, barrier=True)
            return encode
    else:
        icb = shim.Icb(device, long)
        _record_chain(icb, probe, long)

        def encoder(count: int) -> Callable[[Any], None]:
            def encode(cb: Any) -> None:
                cb.execute_icb(icb, 0, count)
            return encode
    try:
        times = []
        for count in (short, long):
            encode = encoder(count)
            for _ in range(2):      # warm caches; the second commit is the one a CUDA graph is captured from
                _run_encoded(device, encode)
            share = None if budget_s is None else budget_s / 2
            times.append(_sample(lambda encode=encode: _run_encoded(device, encode), samples, share))
    finally:
        if icb is not None:
            icb.free()
    if times[0] >= LONG_NODE_S:
        # A node this long dwarfs the list's launch (microseconds): the long
        # replay's mean is the lower-variance estimate (a difference of two
        # minimums doubles the noise of a loaded machine).
        return times[1] / long
    slope = (times[1] - times[0]) / (long - short)
    # Noise can make the difference tiny or negative for very cheap nodes;
    # never report less than a twentieth of the long replay's mean per node.
    return max(slope, times[1] / long / 20.0, 1e-10)


def _one_replay(device: Any, thunk: Any, probe: Probe) -> float:
    """Seconds of a replayed list holding the thunk once (an upper bound of
    its cost: the list's launch is included)."""

    if thunk.kind == GEMM:
        anchor = _anchor(device)

        def encode(cb: Any) -> None:
            cb.execute_icb(anchor, 0, 1)
            _encode_one(cb, probe, barrier=True)
        return min(_run_encoded(device, encode) for _ in range(3))
    icb = shim.Icb(device, 1)
    try:
        _record_chain(icb, probe, 1)
        return min(_run_encoded(device, lambda cb: cb.execute_icb(icb, 0, 1)) for _ in range(3))
    finally:
        icb.free()


def _sample(fn: Callable[[], float], samples: int, budget_s: float | None) -> float:
    """min over calls of fn(): at least 2 calls (the first warms caches),
    then until ``samples`` calls or ``budget_s`` seconds are spent."""
    start = time.perf_counter()
    best = float("inf")
    n = 0
    while True:
        best = min(best, fn())
        n += 1
        spent = time.perf_counter() - start
        if n >= 2 and (n >= samples if budget_s is None else (spent >= budget_s or n >= 200)):
            return best


def time_run(exe: Any, feed: dict[str, np.ndarray], *, samples: int = 5, budget_s: float | None = None) -> float:
    """Seconds of one whole ``exe.run`` (min over samples)."""
    def once() -> float:
        t0 = time.perf_counter()
        exe.run(feed)
        return time.perf_counter() - t0

    return _sample(once, samples, budget_s)


def random_feed(graph: Any, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(tuple(node.shape)).astype(node.dtype.numpy) if node.dtype.is_float
            else np.zeros(tuple(node.shape), node.dtype.numpy) for name, node in graph.inputs.items()}


# ---- probes --------------------------------------------------------------------------------
@dataclass
class _Sizes:
    rows: int            # activations [rows, hidden]
    hidden: int
    heads: int
    head_dim: int
    gemm_large_m: tuple[tuple[int, int, int], ...]    # (m, n, k) points of each gemm class
    gemm_small_m: tuple[tuple[int, int, int], ...]
    mem_bytes: int
    transfer_bytes: int
    row_shapes: tuple[tuple[int, int], ...] = ()      # (n, k) weights of the small-M decision probes


def _sizes(backend: str, budget_s: float) -> _Sizes:
    small_budget = budget_s < 1.5
    if backend == "host":
        # Transformer-layer sizes of a small encoder: what the host runs.
        # Gemm points: a tiny one that is all call overhead, then sizes that
        # straddle the host's one-BLAS-thread threshold (m*n*k = 2**22) and
        # cover attention's per-head gemms and the projections.
        return _Sizes(128, 384, 6, 64,
                      ((9, 16, 16), (16, 64, 64), (128, 128, 64), (128, 256, 96), (128, 384, 96), (128, 384, 384),
                       (128, 1536, 384)),
                      # Small-M weights that stay in cache (<= 2 MB in f32), like the row
                      # kernel's probes: the decision compares both paths on hot operands
                      # (streaming weights from memory costs both alike, and the run
                      # model adds it: cold_seconds). Weights of 4-8 MB measured the
                      # cache's bandwidth and put small-M gemms 3x too slow.
                      ((1, 512, 512), (4, 512, 512), (8, 1024, 512)),
                      (16 if small_budget else 64) << 20, 1 << 20,
                      ((384, 384), (1024, 512)))
    # GPUs: big enough that launch latency does not hide the throughput.
    return _Sizes(4096, 1024, 16, 64,
                  ((9, 64, 64), (16, 256, 256), (128, 384, 384), (128, 1536, 384), (256, 1024, 1024),
                   (1024, 4096, 1024), (4096, 4096, 4096)),
                  ((1, 4096, 4096), (4, 8192, 8192), (8, 16384, 8192)), 256 << 20, 1 << 20,
                  ((384, 384), (1536, 384), (1024, 1024), (4096, 4096)))


class _Progress:
    def __init__(self, total: float, label: str, enabled: bool):
        self.total, self.done, self.label, self.enabled = total, 0.0, label, enabled

    def step(self, weight: float, what: str) -> None:
        self.done += weight
        if self.enabled:
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(frac * 24)
            sys.stderr.write(f"\r{self.label} [{bar:<24}] {frac * 100:3.0f}% {what:<28}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def measure(device: Any, *, budget_s: float = DEFAULT_BUDGET_S, progress: bool | None = None) -> Calibration:
    """Run every probe on ``device`` (about ``budget_s`` seconds). A probe
    that fails keeps the backend's default for its numbers and says so in
    the log, so calibration never makes compile fail."""
    if progress is None:
        progress = bool(getattr(sys.stderr, "isatty", lambda: False)())
    calib = default_calibration(device.backend, device)
    calib.source = "measured"
    # The row kernel's pass height is a constant of shaders/linear.h
    # (RLX_ROWS_PER_PASS: 16 on the CPU, 8 on GPUs).
    calib.row_pass_rows = 16 if device.backend == "host" else 8
    calib.created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    sizes = _sizes(device.backend, budget_s)
    probes: list[tuple[str, float, Callable[[Calibration, _Sizes, float, Any], None]]] = [
        ("run floor", 0.05, _probe_sync),
        ("dispatch overhead", 0.10, _probe_dispatch),
        ("replay ranges", 0.04, _probe_segments),
        ("memory bandwidth", 0.08, _probe_memory),
        ("transfers", 0.05, _probe_transfer),
        ("gemm f32", 0.30, lambda c, s, b, d: _probe_gemm(c, s, b, d, "f32")),
        ("gemm f16", 0.22, lambda c, s, b, d: _probe_gemm(c, s, b, d, "f16")),
        ("kernel families", 0.35, _probe_families),
    ]
    total = sum(w for _, w, _ in probes)
    load_before = load_per_core()
    bar = _Progress(total, f"rlx calibrate {device.backend}", progress)
    start = time.perf_counter()
    _STATE.active = True
    try:
        for name, weight, probe in probes:
            bar.step(0.0, name)
            t0 = time.perf_counter()
            try:
                probe(calib, sizes, budget_s * weight / total, device)
            except Exception as exc:  # noqa: BLE001 - a failed probe keeps its defaults
                calib.log.append(f"{name}: failed ({type(exc).__name__}: {exc}); kept the defaults")
            calib.log.append(f"{name}: {time.perf_counter() - t0:.2f} s")
            bar.step(weight, name)
    finally:
        _STATE.active = False
        bar.close()
    calib.probe_seconds = time.perf_counter() - start
    calib.load_per_core = max(load_before, load_per_core())
    if device.backend == "host" and calib.load_per_core >= BUSY_LOAD_PER_CORE:
        print(f"rlx: the machine was busy while calibrating (load {calib.load_per_core:.1f} per core): the "
              "cost model may choose slower kernels until it is re-measured, which happens by itself once "
              "the machine is quiet (or run `rlx calibrate --force` then)", file=sys.stderr, flush=True)
    for line in calib.summary():
        _log(line)
    for line in calib.log:
        _log(line)
    return calib


def _compile(graph: Any, device: Any, params: dict[str, np.ndarray] | None = None) -> Any:
    """A probe's executable: compiled as rlx.compile would, deciding with the
    model of the backend's documented defaults (the calibration being
    measured does not exist yet)."""
    name = {"host": "cpu"}.get(device.backend, device.backend)
    if device.index:
        name += f":{device.index}"
    dev, target = devices.open_device(name)
    return compile_graph(graph, dev, target, decision_model(target.backend), params or {})


def _params_for(graph: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Random params; block-format ones quantized from random values (valid
    blocks: no NaN scales to slow a probe down)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, node in graph.params.items():
        values = rng.standard_normal(tuple(node.shape)) / np.sqrt(max(node.shape[0], 1))
        if node.dtype.quantized:
            from gguf import GGMLQuantizationType
            from gguf.quants import quantize

            out[name] = quantize(values.astype(np.float32), GGMLQuantizationType[node.dtype.name.upper()])
        else:
            out[name] = values.astype(node.dtype.numpy)
    return out


def _empty_graph() -> Any:

    g = Graph()
    x = g.input("x", (1,))
    g.set_outputs(y=x)
    return g


def _probe_sync(calib: Calibration, sizes: _Sizes, budget: float, device: Any) -> None:
    g = _empty_graph()
    exe = _compile(g, device)
    calib.sync_s = time_run(exe, random_feed(g), budget_s=budget)
    calib.log.append(f"run floor: {exe.stats.thunks}-thunk graph, {calib.sync_s * 1e6:.2f} us per run")


def _chain(n: int, shape: tuple[int, ...], op: str) -> Any:

    g = Graph()
    x = g.input("x", shape)
    b = g.param("b", shape) if op == "add" else None
    y = x
    for _ in range(n):
        y = g.add(y, b) if op == "add" else g.softmax(y)
    g.set_outputs(y=y)
    return g


def _per_node(device: Any, shape: tuple[int, ...], op: str, budget: float) -> tuple[float, int]:
    """Per-node seconds of a replayed ICB of one tiny dispatch: the slope of
    ``long`` entries over one (the commit, wait and graph launch cancel)."""
    # Many entries: a one-group dispatch costs tens of nanoseconds on the
    # host, so the difference must span hundreds of them to rise above noise.
    g = _chain(1, shape, op)
    exe = _compile(g, device, _params_for(g))
    thunk = exe.thunks[0]
    per = time_replayed(exe, thunk, repeats=512, samples=5, budget_s=budget)
    return per, group_count(thunk)


def _probe_dispatch(calib: Calibration, sizes: _Sizes, budget: float, device: Any) -> None:
    calib.dispatch_s, g1 = _per_node(device, (16,), "add", budget * 0.4)
    rows = max(2, 2 * calib.parallel_units)
    calib.dispatch_parallel_s, g2 = _per_node(device, (rows, 4), "softmax", budget * 0.6)
    calib.log.append(f"dispatch: {calib.dispatch_s * 1e6:.3f} us per {g1}-group node, "
                     f"{calib.dispatch_parallel_s * 1e6:.3f} us per {g2}-group node "
                     f"(replayed ICB, slope of 513 entries over 1)")


def _probe_segments(calib: Calibration, sizes: _Sizes, budget: float, device: Any) -> None:
    """The cost of a replay range beyond its dispatches: a run's list is ICB
    ranges with gemms between them, and each range is a unit of its own
    (a child graph on CUDA, an executeCommandsInBuffer on Metal). Slope of
    a list of 1 + N one-entry ranges over one, less one dispatch."""
    anchor = _anchor(device)
    long = 64

    def encoder(count: int) -> Callable[[Any], None]:
        def encode(cb: Any) -> None:
            for i in range(count):
                if i:
                    cb.barrier()
                cb.execute_icb(anchor, 0, 1)
        return encode

    times = []
    for count in (1, long):
        encode = encoder(count)
        for _ in range(2):
            _run_encoded(device, encode)
        times.append(_sample(lambda encode=encode: _run_encoded(device, encode), 5, budget / 2))
    per_range = max((times[1] - times[0]) / (long - 1), 0.0)
    calib.segment_s = max(per_range - calib.dispatch_s, 0.0)
    calib.log.append(f"segments: {per_range * 1e6:.3f} us per one-entry replay range (slope of {long} over 1), "
                     f"{calib.segment_s * 1e6:.3f} us beyond its dispatch")


def _work_seconds(calib: Calibration, thunk: Any, per_rep: float) -> float:
    """A probe's per-execution time less the dispatch overhead the cost model
    adds back separately; never below a fifth of what was measured (noise)."""

    return max(per_rep - dispatch_overhead(calib, thunk), 0.2 * per_rep)


def _probe_memory(calib: Calibration, sizes: _Sizes, budget: float, device: Any) -> None:
    """Streaming bandwidth from a large contiguous add (two reads, one write):
    the copy kernel is the generic strided one, slower than memory on a CPU."""

    g = Graph()
    n = sizes.mem_bytes // 12
    x, y = g.input("x", (n,)), g.input("y", (n,))
    g.set_outputs(z=g.add(x, y))
    exe = _compile(g, device)
    thunk = exe.thunks[0]
    per = time_replayed(exe, thunk, repeats=2, samples=5, budget_s=budget)
    calib.mem_bw = thunk_bytes(thunk) / _work_seconds(calib, thunk, per)
    calib.log.append(f"memory: add over {sizes.mem_bytes >> 20} MiB in {per * 1e3:.3f} ms: "
                     f"{calib.mem_bw / 1e9:.1f} GB/s (read + write)")


def _io_graph(n: int, output_all: bool) -> Any:
    """A graph with no thunk: input x of n floats, output x itself (n floats
    copied out) or its first element (4 bytes out): a dense view needs no
    copy kernel, so a run is its floor plus the copies in and out."""

    g = Graph()
    x = g.input("x", (n,))
    g.set_outputs(y=x if output_all else g.narrow(x, 0, 0, 1))
    return g


def _probe_transfer(calib: Calibration, sizes: _Sizes, budget: float, device: Any) -> None:
    """Input and output copies as the run path makes them (a synchronous
    write per input and read per output, or copies staged inside the run's
    command buffer: whatever the core does on this device): whole runs of
    thunk-less graphs with n floats in and 1 or n out, less the empty run."""
    n = max(1, sizes.transfer_bytes // 4)
    times = []
    for graph in (_empty_graph(), _io_graph(n, False), _io_graph(n, True)):
        exe = _compile(graph, device)
        if exe.stats.thunks:
            raise RuntimeError(f"the transfer probe's graph has {exe.stats.thunks} thunks, expected none")
        times.append(time_run(exe, random_feed(graph), samples=7, budget_s=budget / 3))
    empty, t_in, t_both = times
    nbytes = 4 * n
    into, out = t_in - empty, t_both - t_in
    if into <= 0 or out <= 0:
        raise RuntimeError(f"runs of {nbytes} bytes in/out were not slower than an empty run "
                           f"({empty * 1e6:.1f}, {t_in * 1e6:.1f}, {t_both * 1e6:.1f} us)")
    calib.h2d_bw, calib.d2h_bw = nbytes / into, nbytes / out
    calib.log.append(f"transfers (run path): {nbytes >> 10} KiB in {into * 1e6:.1f} us "
                     f"({calib.h2d_bw / 1e9:.1f} GB/s), out {out * 1e6:.1f} us ({calib.d2h_bw / 1e9:.1f} GB/s)")


def _matmul_exe(device: Any, m: int, n: int, k: int, dtype: str, transpose_b: bool = False) -> Any:
    """A compiled x @ w: with a bias where the shim's gemm adds one itself
    (rlx_device_info.gemm_bias), as linears run there."""

    for with_bias in ((True, False) if getattr(device.info, "gemm_bias", False) else (False,)):
        g = Graph()
        x = g.input("x", (m, k), dtype)
        w = g.param("w", (n, k) if transpose_b else (k, n), dtype)
        if with_bias:
            g.set_outputs(y=g.linear(x, w, g.param("b", (n,), dtype), transpose_b=transpose_b))
        else:
            g.set_outputs(y=g.matmul(x, w, transpose_b=transpose_b))
        # Weights of a cheap repeating pattern (speed does not depend on the
        # values; random normals of the largest GPU shapes take seconds).
        pattern = ((np.arange(n * k, dtype=np.int64) % 17) - 8).astype(np.float32) * (0.25 / np.sqrt(k))
        params = {"w": pattern.reshape(g.params["w"].shape).astype(g.params["w"].dtype.numpy)}
        if with_bias:
            params["b"] = np.full((n,), 0.01, g.params["b"].dtype.numpy)
        exe = _compile(g, device, params)
        thunks = exe.thunks
        # A linear must be exactly one gemm (the lowering may pick the row
        # kernel at small M, or need an epilogue): else the plain matmul.
        if not with_bias or (len(thunks) == 1 and thunks[0].kind == GEMM):
            return exe
    return exe


def _fit_call(points: list[tuple[float, float]]) -> float:
    """The fixed cost of t = call + flops / rate, from the two smallest
    problems (no more than half the smallest time)."""
    (f1, t1), (f2, t2) = sorted(points)[:2]
    rate = (f2 - f1) / (t2 - t1) if t2 > t1 else f2 / t2
    return min(max(t1 - f1 / rate, 0.0), 0.5 * t1)


def _probe_gemm(calib: Calibration, sizes: _Sizes, budget: float, device: Any, dtype: str) -> None:
    """Gemm seconds inside a replayed list at several sizes per shape class.
    BLAS throughput is far from flat in the problem size (threading
    thresholds, cache blocking, tile underfill), so the model interpolates
    a curve of throughput over flops instead of one number; the call
    overhead comes from the two smallest large-M points. Then the small-M
    shape classes of the row-kernel decision (``_probe_small_m``)."""

    def gemm_time(m: int, n: int, k: int, share: float) -> float:
        exe = _matmul_exe(device, m, n, k, dtype)
        thunk = next(t for t in exe.thunks if t.kind == GEMM)
        return time_replayed(exe, thunk, samples=4, budget_s=share)

    shapes = {"large_m": sizes.gemm_large_m, "small_m": sizes.gemm_small_m}
    share = budget * 0.5 / sum(len(v) for v in shapes.values())
    times = {cls: [(2.0 * m * n * k, gemm_time(m, n, k, share)) for m, n, k in pts] for cls, pts in shapes.items()}
    call = _fit_call(times["large_m"])
    if dtype == "f32":
        calib.gemm_call_s = call
    for cls, pts in times.items():
        calib.gemm_curves[f"{dtype}_{cls}"] = sorted([f, f / max(t - call, 0.2 * t)] for f, t in pts)
        calib.log.append(f"gemm {dtype} {cls}: " + ", ".join(
            f"{s} {t * 1e6:.1f} us" for s, (_, t) in zip(shapes[cls], pts)) +
            (f"; {call * 1e6:.2f} us per call (replayed)" if cls == "large_m" else ""))
    _probe_small_m(calib, sizes, budget * 0.5, device, dtype, calib.gemm_call_s if dtype == "f16" else call)
    for cls in ("small_m", "large_m"):
        key = f"{dtype}_{cls}"
        calib.gemm_curves[key] = _merge_curve(calib.gemm_curves.get(key, []))
        calib.gemm_flops[key] = max(r for _, r in calib.gemm_curves[key])
        calib.log.append(f"gemm {key}: peak {calib.gemm_flops[key] / 1e9:.1f} GFLOP/s")


def _merge_curve(points: list) -> list:
    """Sorted [x, y] points, equal x averaged (the small-M probe can meet a
    curve point)."""
    merged: dict[float, list[float]] = {}
    for x, y in points:
        merged.setdefault(float(x), []).append(float(y))
    return [[x, sum(ys) / len(ys)] for x, ys in sorted(merged.items())]


def _probe_small_m(calib: Calibration, sizes: _Sizes, budget: float, device: Any, dtype: str,
                   call: float) -> None:
    """The gemm-or-row-kernel decision's inputs, on the decision's own shape
    classes: for each weight size (sizes.row_shapes) and layout, the gemm at
    M = 1, one pass and two passes of the row kernel (added to the gemm
    curves), and matmul_rows for one pass and, for weights [N, K], the
    mat-vec path of M = 1 (row_kernel_curves), all inside a replay."""

    p = calib.row_pass_rows
    # Measured curves replace the defaults' (never mix their points).
    for key in [k for k in calib.row_kernel_curves if k.split(":")[0] in (dtype, dtype + "_tb")]:
        del calib.row_kernel_curves[key]
    seen: set[str] = set()
    start = time.perf_counter()
    jobs = [(n, k, tb) for n, k in sizes.row_shapes for tb in (True, False)]
    for i, (n, k, tb) in enumerate(jobs):
        left = budget - (time.perf_counter() - start)
        if i >= 2 and left <= 0:       # keep the smallest shapes of both layouts whatever the budget
            calib.log.append(f"small-M probes: budget spent, skipped {len(jobs) - i} of {len(jobs)} shapes")
            break
        share = max(left, 0.0) / (len(jobs) - i)
        exe = _matmul_exe(device, ROW_PASSES_PROBED * p, n, k, dtype, tb)
        gemm = next(t for t in exe.thunks if t.kind == GEMM)
        gemm_pts = []
        for m in (1, p, 2 * p):
            thunk = dataclasses.replace(gemm, gemm={**gemm.gemm, "m": m})
            t = time_replayed(exe, thunk, samples=4, budget_s=share * 0.1)
            f = 2.0 * m * n * k
            calib.gemm_curves.setdefault(f"{dtype}_{'small_m' if m <= SMALL_M else 'large_m'}", []).append(
                [f, f / max(t - call, 0.2 * t)])
            gemm_pts.append(f"M={m} {t * 1e6:.1f} us")
        rows = []
        for m in ((1, p, ROW_PASSES_PROBED * p) if tb else (p, ROW_PASSES_PROBED * p)):
            per = _time_row_kernel(calib, exe, gemm, m, n, k, dtype, share * 0.35)
            if m > p:      # the per-pass time of many passes (A no longer in the first cache level)
                per /= ROW_PASSES_PROBED
            key = f"{dtype}{'_tb' if tb else ''}:{'m1' if m == 1 else 'pass' if m == p else 'passes'}"
            calib.row_kernel_curves.setdefault(key, []).append([float(n * k), n * k / per])
            calib.row_kernel_curves[key].sort()
            rows.append(f"M={m} {per * 1e6:.1f} us" + (" a pass" if m > p else ""))
            if m == p:      # the variant's peak one-pass throughput, in flops of p rows
                variant = dtype + ("_tb" if tb else "")
                rate = 2.0 * p * n * k / per
                calib.row_kernel_flops[variant] = max(rate, calib.row_kernel_flops[variant]) if variant in seen \
                    else rate
                seen.add(variant)
        calib.log.append(f"small-M {dtype} {'[N, K]' if tb else '[K, N]'} weights ({n}, {k}): gemm "
                         + ", ".join(gemm_pts) + "; matmul_rows " + ", ".join(rows) + " (work, replayed)")


# matmul_rows is also timed over this many passes: each pass re-reads its
# rows of A for every output column, so once A outgrows the first cache
# level a pass costs more than the one-pass probe says (on a 2-core Xeon,
# 64 passes of a 384 x 384 linear ran at twice 64 one-pass times).
ROW_PASSES_PROBED = 8

PROBE_PARAMS = "probe params"   # the binding of a hand-built probe's params buffer


def _time_row_kernel(calib: Calibration, exe: Any, gemm: Any, m: int, n: int, k: int, dtype: str,
                     budget: float) -> float:
    """Work seconds of matmul_rows on the gemm's own operands (node overhead
    removed): the lowering's choice between the two is exactly what this
    calibrates, so the probe builds the row-kernel thunk by hand (the
    compiled graph took the gemm path)."""

    g = gemm.gemm
    trans_b = bool(g["trans_b"])
    params = linear_params(m, n, k, g["a"].offset // (2 if dtype == "f16" else 4), trans_b, False, 0)
    # The kernel reads x at an element offset from its binding, so bind x's
    # storage at its start; params go in a small buffer of their own (binding PROBE_PARAMS).
    pbuf = exe.device.alloc(256)
    try:
        pbuf.write(0, params)
        pstore = Storage("params", len(params), slot=PROBE_PARAMS)
        pstore.offset = 0
        groups, threads = exe.target.row_grid(n, k)   # as rlx/lowering/linear.py: one group per output column
        thunk = Thunk(DISPATCH, "matmul_rows probe", kernel=f"matmul_rows_{dtype}",
                      bindings=[Binding(g["a"].storage), g["b"], g["b"], g["c"], Binding(pstore)],
                      params=params, groups=groups, threads=threads,
                      work=Work("matmul_rows", 2.0 * m * n * k, (m, n, k), bool(trans_b)))
        isz = 2 if dtype == "f16" else 4
        thunk.reads = [(g["a"].storage, 0, m * k * isz), (g["b"].storage, 0, n * k * isz)]
        thunk.writes = [(g["c"].storage, 0, m * n * isz)]
        per = time_replayed(exe, thunk, samples=4, budget_s=budget, bindings={PROBE_PARAMS: pbuf})
    finally:
        pbuf.free()
    return _work_seconds(calib, thunk, per)


def _family_graph(sizes: _Sizes) -> Any:
    """One graph with a thunk of every family at transformer-layer sizes."""

    g = Graph()
    r, h, nh, hd = sizes.rows, sizes.hidden, sizes.heads, sizes.head_dim
    x, y = g.input("x", (r, h)), g.input("y", (r, h))
    q, k, v = (g.input(n, (1, r, nh, hd)) for n in ("q", "k", "v"))
    s = g.input("s", (nh * r, min(r, 1024)))
    outs = {
        "elementwise": g.add(x, y),
        "unary": g.gelu(x),
        "copy": g.copy(x),
        "epilogue": g.linear(x, g.param("w", (h, h)), g.param("b", (h,))),
        "epilogue_act": g.linear(x, g.param("w2", (h, h)), g.param("b2", (h,)), activation="gelu"),
        "softmax": g.softmax(s),
        "masked_softmax": g.masked_softmax(s, g.input("mask", (1, min(r, 1024))), scale=0.125),
        "norm": g.add_layernorm(x, y, g.param("ln.w", (h,)), g.param("ln.b", (h,))),
        # Causal, so every backend runs the fused kernel (the CPU runs long
        # non-causal attention as per-head gemms, which the gemm probe covers).
        "attention": g.attention(q, k, v, causal=True, scale=1.0 / np.sqrt(hd)),
        # The quantized weight's paths (Q8_0: blocks of 32, any hidden size
        # here is a multiple), a decode step's projection to 4h.
        "quant_gemv": g.linear(g.input("x1", (1, h)), g.param("wq1", (4 * h, h), "q8_0")),
        "quant_gemv_m8": g.linear(g.input("x8", (8, h)), g.param("wq8", (4 * h, h), "q8_0")),
        "dequantize": g.dequantize(g.param("wqd", (4 * h, h), "q8_0")),
        # The FFT's two paths: rows of 1024 in group memory (fft_shared), and
        # 3 * 4096 points, which only Stockham passes cover (fft_stage).
        "fft_shared": g.fft(g.input("zf", (256, 1024), "c64")),
        "fft_stage": g.fft(g.input("zs", (8, 3 * 4096), "c64")),
    }
    g.set_outputs(**outs)
    return g


def _probe_families(calib: Calibration, sizes: _Sizes, budget: float, device: Any) -> None:

    g = _family_graph(sizes)
    exe = _compile(g, device, _params_for(g))
    targets = [t for t in exe.thunks if family_of(t) in FAMILIES]
    totals: dict[str, list[float]] = {}
    for thunk in targets:
        fam = family_of(thunk)
        per = time_replayed(exe, thunk, samples=4, budget_s=budget / max(len(targets), 1))
        work = thunk_work(thunk)
        acc = totals.setdefault(fam, [0.0, 0.0])
        acc[0] += work
        acc[1] += _work_seconds(calib, thunk, per)
        calib.log.append(f"{fam}: {thunk.kernel} {per * 1e6:.1f} us for {work:.3g} {FAMILY_UNITS[fam]}")
    for fam, (work, seconds) in totals.items():
        calib.family_rates[fam] = work / seconds
    missing = [f for f in FAMILIES if f not in totals]
    if missing:
        calib.log.append(f"families this device's lowering did not emit (defaults kept): {', '.join(missing)}")


# ---- CLI ---------------------------------------------------------------------------------
def add_calibrate_parser(subparsers: Any) -> argparse.ArgumentParser:
    """``rlx calibrate [--device D] [--force] [--json] [--budget S]``."""
    p = subparsers.add_parser("calibrate", help="measure (or show the cached) calibration of a device",
                              description="Measure the device's dispatch, sync, bandwidth, gemm and kernel "
                                          "throughput for the cost model, or show the cached numbers.")
    p.add_argument("--device", default=None, help="cpu, cuda[:N] or metal (default: $RLX_DEVICE or cpu)")
    p.add_argument("--force", action="store_true", help="re-measure even when the cache is valid")
    p.add_argument("--json", action="store_true", help="print the calibration as JSON")
    p.add_argument("--budget", type=float, default=None, help=f"seconds of probes (default {DEFAULT_BUDGET_S})")
    p.set_defaults(fn=cmd_calibrate)
    return p


def cmd_calibrate(args: argparse.Namespace) -> int:

    device, _ = devices.open_device(args.device)
    calib = get_calibration(device, force=bool(args.force), budget_s=getattr(args, "budget", None),
                            progress=None if not args.json else False)
    if args.json:
        print(calib.to_json())
        return 0
    print("\n".join(calib.summary()))
    print(f"cache: {calibration_path(device)}" if calib.source == "measured" else
          "RLX_CALIBRATE=0: documented defaults, nothing measured or cached")
    for line in calib.log:
        print(f"  {line}")
    return 0
