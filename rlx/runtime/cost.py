"""The cost model: predicted seconds for thunks, whole runs and per-shape
lowering choices, from a device's calibration (rlx/runtime/calibrate.py).

- A dispatch costs its per-thunk overhead (one-group or spread over the
  device's units, as measured in replayed chains) plus its work over its
  family's measured rate. Work is bytes moved (the thunk's read and write
  byte ranges) for every family but attention and matmul_rows, which count
  flops. A dispatch with fewer groups than the device has units runs at
  that fraction of the rate, and one that streams more bytes than the
  caches hold is held to the memory bandwidth.
- Every cost is what the thunk adds to a REPLAYED schedule (the
  calibration times thunks inside replayed ICBs, and gemms inside replayed
  command lists: one CUDA graph on CUDA, where consecutive nodes overlap
  their launch latency), not what one launch at a time costs.
- A gemm costs the call overhead (in a replayed list) plus 2*m*n*k over the
  throughput of its shape class (M <= 8 or larger, f32 or f16) at its size.
- matmul_rows costs one pass over the weights per ``row_pass_rows`` rows
  (the mat-vec path for M = 1 with weights [N, K]), at the replayed
  weight-elements-per-second measured for that weight size.
- A run costs the sync floor (an empty run), every thunk, the weights
  streamed from memory when the run's bytes exceed the cache, the copies
  of inputs in and outputs out at the measured transfer bandwidths, and a
  measured cost per replay range (runs of dispatches between gemms).
- ``prefer_row_kernel`` replaces the fixed gemm-or-row-kernel thresholds on
  every backend: gemm (+ bias/activation epilogue) versus matmul_rows,
  predicted from calibrated numbers; ``decision_model`` is the model of the
  backend's documented defaults, for compiles that have no calibration
  (the probes' own compiles).
- ``pick_best_device`` lowers the graph for every candidate device (no
  allocation: lowering is pure Python over a Target) and picks the fastest
  predicted run.
"""

from __future__ import annotations

import math
import struct
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlx import env
from rlx.errors import RlxError
from rlx.runtime.calibrate import DEFAULTS, SMALL_M, Calibration, calibrating, get_calibration

# Work unit of each family's rate in Calibration.family_rates: "B" = bytes
# read + written, "flop" = floating-point operations.
FAMILY_UNITS: dict[str, str] = {
    "elementwise": "B", "unary": "B", "copy": "B", "epilogue": "B", "epilogue_act": "B", "softmax": "B",
    "softmax_masked": "B", "norm": "B",
    "attention": "flop", "matmul_rows": "flop", "gemm": "flop",
}

# Kernel name (without its dtype suffixes) -> family. Kernels that were not
# probed map to the probed family they resemble most.
_KERNEL_FAMILY = {
    "binary": "elementwise",
    "unary": "unary", "glu": "unary", "rope": "unary",
    "copy": "copy", "gather": "copy",
    "bias_act": "epilogue",
    "softmax": "softmax", "softmax_masked": "softmax_masked", "reduce": "softmax", "argmax": "softmax",
    "layernorm": "norm", "rmsnorm": "norm", "add_layernorm": "norm", "add_rmsnorm": "norm",
    "attention": "attention",
    "matmul_rows": "matmul_rows",
}

# Bytes a dispatch may touch and still be served from cache at the probed
# rate; beyond it the memory bandwidth bounds it. Not measured: the order of
# a last-level cache (CPU) or L2 (GPU) of each backend.
CACHE_BYTES = {"host": 8 << 20, "cuda": 48 << 20, "metal": 16 << 20}

# The row kernel must be predicted this much faster than gemm (+ epilogue)
# to be chosen: replayed probes of one shape scatter by 10-20% on a loaded
# machine, and within that the gemm, the general path, is the safer pick
# (measured on a 2-core host: a predicted near-tie at M = 1, weights [N, K],
# ran 1.5x slower on the row kernel in a whole run).
ROW_KERNEL_MARGIN = 0.9

_TRANSCENDENTAL_ACTS = frozenset({1, 2, 3})   # gelu, gelu_tanh, silu (rlx.runtime.params.ACTIVATIONS)
_GEMM, _DISPATCH = 1, 0   # rlx.runtime.lowering.GEMM / DISPATCH (not imported: lowering imports us lazily)
_RESIDENT = 1             # rlx.runtime.views.RESIDENT: the params/constants buffer


def _base_kernel(name: str) -> str:
    parts = name.split("_")
    while parts and parts[-1] in ("f32", "f16"):
        parts.pop()
    return "_".join(parts)


def family_of(thunk: Any) -> str:
    """The kernel family of a thunk: gemm, matmul_rows, or a key of
    Calibration.family_rates."""
    if thunk.kind == _GEMM:
        return "gemm"
    if thunk.source is not None:
        return "elementwise"   # user kernels: most are elementwise
    family = _KERNEL_FAMILY.get(_base_kernel(thunk.kernel or ""), "elementwise")
    if family == "epilogue" and thunk.params and len(thunk.params) >= 28:
        # bias_act's activation (LinearParams.act): erf/exp ones cost far
        # more per byte than a bias add or relu.
        act = struct.unpack_from("<I", thunk.params, 24)[0]
        if act in _TRANSCENDENTAL_ACTS:
            return "epilogue_act"
    return family


def _dtype_of(thunk: Any) -> str:
    if thunk.kind == _GEMM:
        return "f16" if thunk.gemm["dtype"] == 1 else "f32"
    return "f16" if (thunk.kernel or "").endswith("f16") else "f32"


def thunk_bytes(thunk: Any) -> int:
    """Bytes the thunk reads and writes (its hazard ranges)."""
    return sum(max(end - start, 0) for _, start, end in list(thunk.reads) + list(thunk.writes))


def _groups(thunk: Any) -> int:
    g = thunk.groups
    return max(1, int(g[0]) * int(g[1]) * int(g[2]))


def thunk_flops(thunk: Any) -> float:
    """Flops of a gemm, matmul_rows or attention thunk (0 for the others)."""
    if thunk.kind == _GEMM:
        g = thunk.gemm
        return 2.0 * g["m"] * g["n"] * g["k"] * g.get("batch", 1) * g.get("outer", 1)
    base = _base_kernel(thunk.kernel or "")
    if base == "matmul_rows" and thunk.params and len(thunk.params) >= 12:
        m, n, k = struct.unpack_from("<3I", thunk.params)
        return 2.0 * m * n * k
    if base == "attention" and thunk.params and len(thunk.params) >= 36:
        rows, tq, tk, _hq, _group, d, dv, flags, window = struct.unpack_from("<9I", thunk.params)
        keys = float(tk)
        if flags & 2:       # causal: query i sees tk - tq + i + 1 keys
            keys = tk - tq + (tq + 1) / 2.0
        if window:
            keys = min(keys, float(window))
        # Q.K^T and P.V, plus a few flops per score for scale/mask/softmax.
        return rows * max(keys, 1.0) * (2.0 * d + 2.0 * dv + 5.0)
    return 0.0


def thunk_work(thunk: Any) -> float:
    """Work in the unit of the thunk's family (FAMILY_UNITS)."""
    return thunk_flops(thunk) if FAMILY_UNITS.get(family_of(thunk)) == "flop" else float(thunk_bytes(thunk))


def dispatch_overhead(calib: Calibration, thunk: Any) -> float:
    """Fixed seconds of a thunk: a gemm call, or a one-group / spread dispatch."""
    if thunk.kind == _GEMM:
        return calib.gemm_call_s
    return calib.dispatch_s if _groups(thunk) == 1 else calib.dispatch_parallel_s


def _interpolate(curve: Sequence[Sequence[float]], x: float) -> float:
    """y at x on a piecewise-linear log-log curve [[x, y], ...], flat outside."""
    if x <= curve[0][0]:
        return float(curve[0][1])
    for (x0, y0), (x1, y1) in zip(curve, curve[1:]):
        if x <= x1:
            t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0)) if x1 > x0 else 1.0
            return float(math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0))))
    return float(curve[-1][1])


def _rate(table: Mapping[str, float], key: str, fallback: Mapping[str, float]) -> float:
    value = table.get(key) or fallback.get(key)
    return float(value) if value else 1e9


class CostModel:
    """Predictions from one Calibration."""

    def __init__(self, calibration: Calibration):
        self.calibration = calibration
        self._defaults = DEFAULTS.get(calibration.backend, DEFAULTS["host"])
        self._decisions: dict[tuple, str] = {}
        self._lock = threading.Lock()

    # ---- pieces ----------------------------------------------------------------
    def _occupancy(self, groups: int) -> float:
        return min(1.0, groups / max(1, self.calibration.parallel_units))

    def gemm_seconds(self, m: int, n: int, k: int, dtype_name: str = "f32", batch: int = 1) -> float:
        """Call overhead + flops over the class's throughput at this size:
        interpolated in log-log between the measured points (BLAS speed
        grows with the problem: threads, blocking), flat beyond them. A
        strided batch counts as one problem of all its flops (the shims
        spread its entries over the device like one big gemm's tiles)."""
        c = self.calibration
        key = f"{'f16' if dtype_name == 'f16' else 'f32'}_{'small_m' if m <= SMALL_M else 'large_m'}"
        flops = 2.0 * m * n * k * max(1, batch)
        curve = c.gemm_curves.get(key)
        rate = _interpolate(curve, flops) if curve else _rate(c.gemm_flops, key, self._defaults.gemm_flops)
        return c.gemm_call_s + flops / rate

    def row_kernel_seconds(self, m: int, n: int, k: int, dtype_name: str = "f32", transpose_b: bool = False
                           ) -> float:
        """matmul_rows: one group per output column (Target.row_grid(n, k)),
        each streaming its weights once per pass of ``row_pass_rows`` rows of
        A (M = 1 with weights [N, K]: the mat-vec path). With the calibrated
        curves, passes * n*k weight elements at the replayed rate measured
        for that weight size (occupancy and latency floors included); without
        them, the flops of whole passes (2*n*k per row of each pass; 2*n*k
        for the mat-vec) at the variant's flat rate, scaled by occupancy."""
        c = self.calibration
        groups = n
        key = ("f16" if dtype_name == "f16" else "f32") + ("_tb" if transpose_b else "")
        overhead = c.dispatch_s if groups == 1 else c.dispatch_parallel_s
        weights = float(n) * float(k)
        matvec = m == 1 and transpose_b
        rows_per_pass = max(1, int(c.row_pass_rows))
        passes = max(1, -(-int(m) // rows_per_pass))
        m1 = c.row_kernel_curves.get(key + ":m1") if matvec else None
        one_pass = c.row_kernel_curves.get(key + ":pass")
        if m1:
            return overhead + weights / _interpolate(m1, weights)
        if one_pass and not matvec:
            return overhead + passes * weights / _interpolate(one_pass, weights)
        rate = _rate(c.row_kernel_flops, key, self._defaults.row_kernel_flops)
        rows = 1 if matvec else passes * rows_per_pass
        return overhead + 2.0 * rows * weights / (rate * self._occupancy(groups))

    def epilogue_seconds(self, m: int, n: int, dtype_name: str = "f32", activation: bool = False) -> float:
        """bias_act over the gemm's output: one group per row, reads and
        writes m*n plus the bias."""
        c = self.calibration
        isz = 2 if dtype_name == "f16" else 4
        nbytes = (2 * m * n + n) * isz
        overhead = c.dispatch_s if m == 1 else c.dispatch_parallel_s
        rate = self._family_rate("epilogue_act" if activation else "epilogue")
        return overhead + nbytes / (rate * self._occupancy(m))

    def _family_rate(self, family: str) -> float:
        return _rate(self.calibration.family_rates, family, self._defaults.family_rates)

    def thunk_seconds(self, thunk: Any) -> float:
        c = self.calibration
        if thunk.kind == _GEMM:
            g = thunk.gemm
            return self.gemm_seconds(g["m"], g["n"], g["k"], _dtype_of(thunk), g.get("batch", 1) * g.get("outer", 1))
        family = family_of(thunk)
        groups = _groups(thunk)
        overhead = c.dispatch_s if groups == 1 else c.dispatch_parallel_s
        params = thunk.params or b""
        if family == "matmul_rows" and len(params) >= 20:
            m, n, k, _offset, transpose_b = struct.unpack_from("<5I", params)   # LinearParams
            return self.row_kernel_seconds(m, n, k, _dtype_of(thunk), bool(transpose_b))
        if family == "matmul_rows":
            rate = _rate(c.row_kernel_flops, _dtype_of(thunk), self._defaults.row_kernel_flops)
        else:
            rate = self._family_rate(family)
        work = thunk_work(thunk)
        seconds = work / (rate * self._occupancy(groups))
        nbytes = thunk_bytes(thunk)
        if nbytes > CACHE_BYTES.get(c.backend, 8 << 20):
            seconds = max(seconds, nbytes / max(c.mem_bw, 1.0))
        return overhead + seconds

    def transfer_seconds(self, transfer_bytes: int | tuple[int, int]) -> float:
        """Inputs in and outputs out: (in_bytes, out_bytes), or one total
        split evenly. On unified-memory devices these are the run path's
        host memcpys, at the measured (memcpy) speed."""
        c = self.calibration
        if isinstance(transfer_bytes, tuple):
            to_dev, from_dev = transfer_bytes
        else:
            to_dev = from_dev = transfer_bytes / 2
        return to_dev / max(c.h2d_bw, 1.0) + from_dev / max(c.d2h_bw, 1.0)

    def cold_seconds(self, thunks: Sequence[Any]) -> float:
        """Reading weights from memory. Kernel rates are probed with operands
        hot in cache; in a whole run whose bytes exceed the cache, every
        resident operand (params, constants) is evicted before its next
        use, and that streaming does not overlap the kernels' work (measured
        on the host: BERT runs exceed their thunks' sum by weights / mem_bw)."""
        c = self.calibration
        sizes: dict[int, int] = {}
        resident = 0
        for t in thunks:
            for storage, _, _ in list(t.reads) + list(t.writes):
                sizes[id(storage)] = storage.nbytes
            resident += sum(max(end - start, 0) for storage, start, end in t.reads if storage.slot == _RESIDENT)
        if sum(sizes.values()) <= CACHE_BYTES.get(c.backend, 8 << 20):
            return 0.0
        return resident / max(c.mem_bw, 1.0)

    @staticmethod
    def replay_ranges(thunks: Sequence[Any]) -> int:
        """Replay ranges of a run's list: maximal runs of dispatches between
        gemms (the segmenter's plan, rlx/opt/segments.py)."""
        ranges, inside = 0, False
        for t in thunks:
            if t.kind == _GEMM:
                inside = False
            elif not inside:
                ranges, inside = ranges + 1, True
        return ranges

    def run_overhead_seconds(self, thunks: Sequence[Any], transfer_bytes: int | tuple[int, int] = 0) -> float:
        """A run's cost beyond its thunks: sync floor, input/output
        transfers, weights streamed from memory, and the replay ranges."""
        thunks = list(thunks)
        return (self.calibration.sync_s + self.transfer_seconds(transfer_bytes) + self.cold_seconds(thunks)
                + self.calibration.segment_s * self.replay_ranges(thunks))

    def graph_seconds(self, thunks: Iterable[Any], transfer_bytes: int | tuple[int, int] = 0) -> float:
        """One whole run: sync floor + every thunk + weights streamed from
        memory + input/output transfers + a cost per replay range."""
        thunks = list(thunks)
        return sum(self.thunk_seconds(t) for t in thunks) + self.run_overhead_seconds(thunks, transfer_bytes)

    def breakdown(self, thunks: Iterable[Any]) -> dict[str, float]:
        """Predicted seconds per family (for reports and the accuracy benchmark)."""
        out: dict[str, float] = {}
        for t in thunks:
            fam = family_of(t)
            out[fam] = out.get(fam, 0.0) + self.thunk_seconds(t)
        return out

    # ---- decisions -----------------------------------------------------------------
    def prefer_row_kernel(self, m: int, n: int, k: int, dtype_name: str = "f32", *, epilogue: bool = True,
                          activation: bool = False, transpose_b: bool = False) -> bool:
        """True when matmul_rows (bias and activation fused) is predicted
        faster than the shim's gemm plus, with ``epilogue`` (a bias or an
        activation to apply), its bias_act dispatch, by more than the
        calibration's noise (ROW_KERNEL_MARGIN). ``activation``: the
        epilogue has an erf/exp activation; ``transpose_b``: weights [N, K]."""
        row = self.row_kernel_seconds(m, n, k, dtype_name, transpose_b)
        gemm = self.gemm_seconds(m, n, k, dtype_name)
        if epilogue:
            gemm += self.epilogue_seconds(m, n, dtype_name, activation)
        choice = row < ROW_KERNEL_MARGIN * gemm
        key = ("linear", m, n, k, dtype_name, epilogue, activation, transpose_b)
        with self._lock:
            if key not in self._decisions:
                self._decisions[key] = (
                    f"linear {m}x{n}x{k} {dtype_name}: {'matmul_rows' if choice else 'gemm'} "
                    f"(row kernel {row * 1e6:.2f} us vs gemm{' + epilogue' if epilogue else ''} {gemm * 1e6:.2f} us)")
        return choice

    def note(self, key: tuple, line: str) -> None:
        with self._lock:
            self._decisions[key] = line

    def describe_decisions(self) -> list[str]:
        """What the model decided so far, one line each (RLX_VERBOSE)."""
        c = self.calibration
        with self._lock:
            lines = list(self._decisions.values())
        return [f"cost model: {c.backend} {c.hardware_id} ({c.source} calibration)"] + [f"  {x}" for x in lines]


# ---- per-device models ---------------------------------------------------------------
_MODELS: dict[tuple[str, str, str, str], CostModel] = {}
_MODELS_LOCK = threading.Lock()


def cost_model_for(device: Any) -> CostModel | None:
    """The CostModel of an open device (its calibration cached or measured
    on first use), or None while a calibration is running: the probes
    compile graphs, and those must lower with the fixed fallbacks rather
    than recurse into calibrating."""
    if calibrating():
        return None
    # The host measures itself on first use (a few seconds). A GPU's probes
    # compile and time dozens of executables (about 20 s on an H200), too
    # long to spring on a first compile: GPUs use the cache written by
    # `rlx calibrate --device ...`, or the documented defaults.
    calib = get_calibration(device, measure_if_missing=device.backend == "host")
    # By identity of the measurement, not of the object: with RLX_CALIBRATE=0
    # every lookup builds a fresh defaults object, which must not grow this.
    key = (calib.backend, calib.hardware_id, calib.source, calib.created)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            model = _MODELS[key] = CostModel(calib)
        return model


_DEFAULT_MODELS: dict[str, CostModel] = {}


def decision_model(backend: str) -> CostModel:
    """The model of a backend's documented defaults (DEFAULTS): what the
    lowering asks when a compile has no calibrated model (the calibration
    probes' own compiles), so no fixed threshold is left anywhere."""
    with _MODELS_LOCK:
        model = _DEFAULT_MODELS.get(backend)
        if model is None:
            from rlx.runtime.calibrate import default_calibration

            model = _DEFAULT_MODELS[backend] = CostModel(default_calibration(backend))
        return model


# ---- device choice ----------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    """A device to consider: its rlx.compile name, lowering Target and
    calibration. Real devices are built from their names; tests pass fakes."""

    name: str
    target: Any
    calibration: Calibration


@dataclass(frozen=True)
class DevicePrediction:
    name: str
    seconds: float | None      # None when the graph cannot be lowered for it
    thunks: int
    reason: str | None = None


def _candidate(spec: str | Candidate) -> Candidate:
    if isinstance(spec, Candidate):
        return spec
    from rlx.runtime import devices

    device, target = devices.open_device(spec)
    return Candidate(spec, target, get_calibration(device))


def lower_for(graph: Any, target: Any, model: CostModel | None = None, precision: str = "f32") -> list[Any]:
    """The thunks rlx.compile would emit for ``target``, without touching a
    device: fusion, precision and lowering are pure Python over the Target."""
    from rlx.opt.fusion import fuse
    from rlx.opt.precision import apply_precision
    from rlx.runtime.lowering import Lowering
    from rlx.runtime.views import ARENA

    graph.topo_order()
    graph.validate()
    g, _ = fuse(graph, target.capabilities)
    g, _ = apply_precision(g, precision)
    lw = Lowering(g, target)
    lw.cost_model = model      # read by the gemm-or-row-kernel choice once it is wired to the cost model
    lw.run(g.topo_order())
    for name, node in g.outputs.items():     # as compile: non-dense outputs get a copy
        view = lw.views[node]
        if not (view.is_dense and view.storage.slot == ARENA):
            lw.emit_copy(f"output '{name}'", view, lw.new_value(node, tuple(view.shape), view.dtype))
    return lw.thunks


def _io_bytes(graph: Any) -> tuple[int, int]:
    def nbytes(nodes: Iterable[Any]) -> int:
        total = 0
        for node in nodes:
            count = 1
            for d in node.shape:
                count *= int(d)
            total += count * node.dtype.itemsize
        return total

    return nbytes(graph.inputs.values()), nbytes(graph.outputs.values())


def predict_devices(graph: Any, candidates: Sequence[str | Candidate] | None = None,
                    precision: str = "f32") -> list[DevicePrediction]:
    """Predicted run seconds of ``graph`` on each candidate (default: every
    available device)."""
    if candidates is None:
        from rlx.runtime import devices

        candidates = [d.name for d in devices.devices() if d.available]
    io = _io_bytes(graph)
    out = []
    for spec in candidates:
        name = spec.name if isinstance(spec, Candidate) else spec
        try:
            cand = _candidate(spec)
            model = CostModel(cand.calibration)
            thunks = lower_for(graph, cand.target, model, precision)
            out.append(DevicePrediction(cand.name, model.graph_seconds(thunks, io), len(thunks)))
        except RlxError as exc:
            out.append(DevicePrediction(name, None, 0, str(exc)))
    return out


# Lines of the last pick_best_device call (RLX_VERBOSE prints them).
last_decision: list[str] = []


def pick_best_device(graph: Any, params: Mapping[str, Any] | None = None,
                     candidates: Sequence[str | Candidate] | None = None, *, precision: str = "f32") -> str:
    """The device name (as rlx.compile takes it) with the fastest predicted
    run of ``graph``, launch, sync and transfer overheads included. params
    are not needed to predict (lowering depends on shapes only); accepted so
    callers can pass what they will compile with."""
    del params
    predictions = predict_devices(graph, candidates, precision)
    usable = [p for p in predictions if p.seconds is not None]
    if not usable:
        reasons = "; ".join(f"{p.name}: {p.reason}" for p in predictions) or "no device available"
        raise RlxError(f"pick_best_device: no device can run this graph ({reasons})")
    best = min(usable, key=lambda p: p.seconds)
    lines = [f"pick_best_device -> {best.name}"]
    for p in predictions:
        lines.append(f"  {p.name}: " + (f"{p.seconds * 1e6:.1f} us predicted ({p.thunks} thunks)"
                                        if p.seconds is not None else f"cannot run ({p.reason})"))
    last_decision[:] = lines
    if env.verbose():
        print("rlx: " + "\n".join(lines), file=sys.stderr)
    return best.name


def auto_device(graph: Any, params: Mapping[str, Any] | None = None, *, precision: str = "f32") -> str:
    """What ``rlx.compile(graph, device="auto")`` compiles for."""
    return pick_best_device(graph, params, precision=precision)
