"""The cost model: predicted seconds for thunks, whole runs and per-shape
lowering choices, from a device's calibration (rlx/tune/calibration.py).

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
- ``prefer_quant_gemv``: for a block-format weight and m <= 8 rows of x,
  the fused GEMV versus dequantize + gemm (+ epilogue), from the calibrated
  quant_gemv (m = 1, m = 8) and dequantize rates and the gemm curves.
- ``prefer_fft_shared``: for a transform length that fft_shared covers in
  one dispatch (a power of two up to 4096, 2^a 3^b 5^c up to 2048), that
  dispatch (5 N log2 N flops a row at the calibrated fft_shared rate,
  scaled by the share of the device its groups fill) versus one Stockham
  pass per radix (each reads and writes every row, at the fft_stage rate).
- ``prefer_fp8_gemm``: for an FP8 x FP8 scaled_linear on a target whose
  gemm takes FP8 (cuda), the FP8 gemm + scale epilogue versus dequantizing
  x and the weight and the f16/f32 gemm (+ epilogue).
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
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rlx.lowering import GEMM
from rlx.runtime.views import RESIDENT
from rlx.tune.calibration import DEFAULTS, SMALL_M, Calibration, default_calibration
from rlx.tune.work import (
    dtype_of,
    family_of,
    group_count,
    thunk_bytes,
    thunk_work,
)

# Bytes a dispatch may touch and still be served from cache at the probed
# rate; beyond it the memory bandwidth bounds it. Not measured: the order of
# a last-level cache (CPU) or L2 (GPU) of each backend.
CACHE_BYTES = {"host": 8 << 20, "cuda": 48 << 20, "metal": 16 << 20}

# The row kernel must be predicted this much faster than gemm (+ epilogue)
# to be chosen: replayed probes of one shape scatter on a loaded machine, and
# within that the gemm, the general path, is the safer pick (a predicted
# near-tie once ran far slower on the row kernel in a whole run:
# benchmarks/README.md, "Cost-model accuracy").
ROW_KERNEL_MARGIN = 0.9

# The FP8 gemm's rate over the f16 gemm's, until calibration measures it:
# the dense tensor-core ratio of FP8 to f16 on Ada and Hopper (NVIDIA's
# datasheets: 2x). Only asked where the target's gemm takes FP8 (cuda).
FP8_GEMM_SPEEDUP = 2.0


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
        # Several passes: the many-pass curve when measured (each pass re-reads A per column).
        per_pass = (c.row_kernel_curves.get(key + ":passes") if passes > 1 else None) \
            or c.row_kernel_curves.get(key + ":pass")
        if m1:
            return overhead + weights / _interpolate(m1, weights)
        if per_pass and not matvec:
            return overhead + passes * weights / _interpolate(per_pass, weights)
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
        if thunk.kind == GEMM:
            g = thunk.gemm
            return self.gemm_seconds(g["m"], g["n"], g["k"], dtype_of(thunk), g.get("batch", 1) * g.get("outer", 1))
        family = family_of(thunk)
        groups = group_count(thunk)
        overhead = c.dispatch_s if groups == 1 else c.dispatch_parallel_s
        if family == "matmul_rows" and thunk.work.mnk is not None:
            m, n, k = thunk.work.mnk
            return self.row_kernel_seconds(m, n, k, dtype_of(thunk), thunk.work.transpose_b)
        if family == "matmul_rows":
            rate = _rate(c.row_kernel_flops, dtype_of(thunk), self._defaults.row_kernel_flops)
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
            resident += sum(max(end - start, 0) for storage, start, end in t.reads if storage.slot == RESIDENT)
        if sum(sizes.values()) <= CACHE_BYTES.get(c.backend, 8 << 20):
            return 0.0
        return resident / max(c.mem_bw, 1.0)

    @staticmethod
    def replay_ranges(thunks: Sequence[Any]) -> int:
        """Replay ranges of a run's list: maximal runs of dispatches between
        gemms (the segmenter's plan, rlx/opt/segments.py)."""
        ranges, inside = 0, False
        for t in thunks:
            if t.kind == GEMM:
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
        self._record_once(key, (
            f"linear {m}x{n}x{k} {dtype_name}: {'matmul_rows' if choice else 'gemm'} "
            f"(row kernel {row * 1e6:.2f} us vs gemm{' + epilogue' if epilogue else ''} {gemm * 1e6:.2f} us)"))
        return choice

    def quant_gemv_seconds(self, m: int, n: int, k: int, weight_dtype: Any, dtype_name: str = "f32") -> float:
        """The fused GEMV from a block-format weight [n, k] for m <= 8 rows
        of x: it streams the blocks once whatever m is, and its per-row dot
        work grows with m, so its rate is interpolated linearly in m between
        the calibrated m = 1 and m = 8 rates (bytes: the blocks, x and y)."""
        isz = 2 if dtype_name == "f16" else 4
        nbytes = weight_dtype.nbytes(n * k, k) + (m * k + m * n) * isz
        t1 = nbytes / self._family_rate("quant_gemv")
        t8 = nbytes / self._family_rate("quant_gemv_m8")
        groups = max(1, -(-n // 8))   # the kernel's groups (8 rows each at least): a partial group still runs
        overhead = self.calibration.dispatch_s if groups == 1 else self.calibration.dispatch_parallel_s
        return overhead + (t1 + (t8 - t1) * (min(max(m, 1), 8) - 1) / 7.0) / self._occupancy(groups)

    def dequant_gemm_seconds(self, m: int, n: int, k: int, weight_dtype: Any, dtype_name: str = "f32", *,
                             epilogue: bool = False) -> float:
        """The other path: the weight dequantized into scratch (tiles of
        rows, one dispatch each), the gemm, and with ``epilogue`` the
        bias/activation dispatch."""
        isz = 2 if dtype_name == "f16" else 4
        nbytes = weight_dtype.nbytes(n * k, k) + n * k * isz
        seconds = self.calibration.dispatch_parallel_s + nbytes / self._family_rate("dequantize")
        seconds += self.gemm_seconds(m, n, k, dtype_name)
        if epilogue:
            seconds += self.epilogue_seconds(m, n, dtype_name, activation=True)
        return seconds

    def prefer_quant_gemv(self, m: int, n: int, k: int, weight_dtype: Any, dtype_name: str = "f32", *,
                          epilogue: bool = False) -> bool:
        """True when the fused GEMV (bias and activation in it) is predicted
        faster than dequantize + gemm (+ epilogue) for m rows of x against
        the block-format weight [n, k]."""
        gemv = self.quant_gemv_seconds(m, n, k, weight_dtype, dtype_name)
        other = self.dequant_gemm_seconds(m, n, k, weight_dtype, dtype_name, epilogue=epilogue)
        choice = gemv <= other
        key = ("quant_linear", m, n, k, weight_dtype.name, dtype_name, epilogue)
        self._record_once(key, (
            f"linear {m}x{n}x{k} {weight_dtype.name} weights, {dtype_name}: "
            f"{'fused GEMV' if choice else 'dequantize + gemm'} (GEMV {gemv * 1e6:.2f} us vs "
            f"dequantize + gemm{' + epilogue' if epilogue else ''} {other * 1e6:.2f} us)"))
        return choice

    def fp8_gemm_seconds(self, m: int, n: int, k: int, dtype_name: str = "f32", *, bias: bool = False,
                         activation: bool = False, epilogue: bool = True) -> float:
        """The FP8 x FP8 gemm path (rlx/lowering/fp8_gemm.py): the shim's
        FP8 gemm into f32, then the epilogue that reads it, the scales and
        the bias and writes the output (``epilogue`` False: the direct form,
        the scaled gemm writing the output alone). The FP8 gemm is not
        calibrated yet: it is costed as the f16 gemm curve at
        FP8_GEMM_SPEEDUP times the rate (the call overhead unchanged)."""
        c = self.calibration
        gemm = c.gemm_call_s + (self.gemm_seconds(m, n, k, "f16") - c.gemm_call_s) / FP8_GEMM_SPEEDUP
        if not epilogue:
            return gemm
        isz = 2 if dtype_name == "f16" else 4
        nbytes = m * n * (4 + isz) + (m + n) * 4 + (n * isz if bias else 0)
        overhead = c.dispatch_s if m == 1 else c.dispatch_parallel_s
        rate = self._family_rate("epilogue_act" if activation else "epilogue")
        return gemm + overhead + nbytes / (rate * self._occupancy(m))

    def fp8_kernel_path_seconds(self, m: int, n: int, k: int, dtype_name: str = "f32", *, bias: bool = False,
                                activation: bool = False) -> float:
        """What the kernel path of the same product costs: x's codes
        dequantized (one elementwise pass), the weight dequantized in
        tiles, the gemm in x's dtype and the bias/activation epilogue."""
        from rlx.ir.dtype import f8e4m3

        isz = 2 if dtype_name == "f16" else 4
        x_pass = self.calibration.dispatch_parallel_s + m * k * (1 + isz) / self._family_rate("dequantize")
        return x_pass + self.dequant_gemm_seconds(m, n, k, f8e4m3, dtype_name, epilogue=bias or activation)

    def prefer_fp8_gemm(self, m: int, n: int, k: int, dtype_name: str = "f32", *, bias: bool = False,
                        activation: bool = False, epilogue: bool = True) -> bool:
        """True when the FP8 gemm path is predicted faster than the kernel
        path for an FP8 x FP8 scaled_linear of m x n x k (output dtype
        ``dtype_name``; ``epilogue`` False: its direct form). Asked only
        where the target's gemm takes FP8."""
        fp8 = self.fp8_gemm_seconds(m, n, k, dtype_name, bias=bias, activation=activation, epilogue=epilogue)
        other = self.fp8_kernel_path_seconds(m, n, k, dtype_name, bias=bias, activation=activation)
        choice = fp8 < other
        key = ("fp8_linear", m, n, k, dtype_name, bias, activation, epilogue)
        form = "FP8 gemm + epilogue" if epilogue else "scaled FP8 gemm"
        self._record_once(key, (
            f"FP8 x FP8 linear {m}x{n}x{k} -> {dtype_name}: {'FP8 gemm' if choice else 'kernel path'} "
            f"({form} {fp8 * 1e6:.2f} us vs dequantize + gemm {other * 1e6:.2f} us)"))
        return choice

    def fft_shared_seconds(self, n: int, rows: int, groups: int) -> float:
        """fft_shared over ``rows`` rows of length n in ``groups`` groups:
        its flops at the calibrated rate, which assumes the device full, so
        scaled by the share of the compute units the groups occupy."""
        flops = 5.0 * n * max(1.0, math.log2(max(n, 2))) * rows
        overhead = self.calibration.dispatch_s if groups == 1 else self.calibration.dispatch_parallel_s
        return overhead + flops / self._family_rate("fft_shared") / self._occupancy(groups)

    def fft_stage_seconds(self, n: int, rows: int, passes: int) -> float:
        """``passes`` Stockham passes (fft_stage), each reading and writing
        every row once (c64) over a grid of a thread per butterfly."""
        nbytes = 2.0 * rows * n * 8
        groups = max(1, rows * n // 1024)
        return passes * (self.calibration.dispatch_parallel_s
                         + nbytes / self._family_rate("fft_stage") / self._occupancy(groups))

    def prefer_fft_shared(self, n: int, rows: int, groups: int, stage_passes: int) -> bool:
        """True when one fft_shared dispatch (``groups`` groups) is predicted
        faster than ``stage_passes`` fft_stage passes for ``rows`` rows of
        length n; ties go to the one dispatch."""
        shared = self.fft_shared_seconds(n, rows, groups)
        stage = self.fft_stage_seconds(n, rows, stage_passes)
        choice = shared <= stage
        key = ("fft", n, rows, groups, stage_passes)
        self._record_once(key, (
            f"fft {rows} x {n}: {'fft_shared' if choice else f'{stage_passes} fft_stage passes'} "
            f"(one dispatch {shared * 1e6:.2f} us vs passes {stage * 1e6:.2f} us)"))
        return choice

    def note(self, key: tuple, line: str) -> None:
        with self._lock:
            self._decisions[key] = line

    def _record_once(self, key: tuple, line: str) -> None:
        """A decision's line for RLX_VERBOSE, the first time it is asked
        (the same question gets the same answer from the same model)."""
        with self._lock:
            self._decisions.setdefault(key, line)

    def describe_decisions(self) -> list[str]:
        """What the model decided so far, one line each (RLX_VERBOSE)."""
        c = self.calibration
        with self._lock:
            lines = list(self._decisions.values())
        return [f"cost model: {c.backend} {c.hardware_id} ({c.source} calibration)"] + [f"  {x}" for x in lines]

_MODELS_LOCK = threading.Lock()

_DEFAULT_MODELS: dict[str, CostModel] = {}


def decision_model(backend: str) -> CostModel:
    """The model of a backend's documented defaults (DEFAULTS): what the
    lowering asks when a compile has no calibrated model (the calibration
    probes' own compiles), so no fixed threshold is left anywhere."""
    with _MODELS_LOCK:
        model = _DEFAULT_MODELS.get(backend)
        if model is None:
            model = _DEFAULT_MODELS[backend] = CostModel(default_calibration(backend))
        return model
