"""A device's calibration: the measured (or documented default) speeds the
cost model reads, and their cache. The probes that measure them are in
rlx/tune/calibrate.py.

What is measured (PROBE_SET 4):

- ``sync_s``: a whole ``Executable.run`` of a graph with no thunk (input
  checks, copy in, commit, wait, copy out): the floor of every run.
- ``dispatch_s`` / ``dispatch_parallel_s``: the per-node cost of a replayed
  ICB of tiny dispatches, one-group (adds of 16 elements) and spread over
  the device's units (row softmaxes): slope of N entries over 1.
- ``segment_s``: what a replay range costs beyond its dispatches (a run's
  list is ICB ranges with gemms between them): slope of a list of 1 + N
  one-entry ranges over one, less a dispatch.
- ``mem_bw``: a large add (bytes read + written per second).
- ``h2d_bw`` / ``d2h_bw``: inputs copied in and outputs copied out by the
  run path (1 MiB, as the core does it on this device: buffer writes and
  reads, or copies staged in the run's command buffer).
- ``gemm_call_s``, ``gemm_curves[<dtype>_<small_m|large_m>]`` (throughput
  over problem size, a few shapes per class, plus the small-M shapes of the
  row-kernel decision) and ``gemm_flops`` (each class's peak): the shim's
  gemm inside a replayed list; ``gemm_call_s`` is its fixed cost there.
- ``row_kernel_curves["<dtype>[_tb]:pass"|"<dtype>[_tb]:passes"|"<dtype>_tb:m1"]``:
  ``matmul_rows`` (the small-M linear kernel) at small-M shape classes, as
  weight elements per second over the weight size: one pass of
  ``row_pass_rows`` rows (the kernel streams the weights once per pass), a
  pass among several (``passes``: timed over 8 passes, where A no longer
  sits in the first cache level), and the mat-vec path of M = 1 with
  weights [N, K]. ``row_kernel_flops`` keeps one flop/s figure
  per variant (summary; the fallback when a curve is missing).
- ``family_rates[<family>]``: each other kernel family at transformer-layer
  sizes, in the work unit the cost model uses for it (bytes moved, or flops
  for attention); see ``rlx.tune.work.FAMILY_UNITS``. ``quant_gemv`` /
  ``quant_gemv_m8``: the fused GEMV from Q8_0 blocks for one and for eight
  rows of x (bytes: the weight's blocks, x and y); ``dequantize``: Q8_0
  blocks to f32 (bytes read + written); ``fft_shared``: the one-dispatch
  transform of rows in group memory (flops, 5 N log2 N a row);
  ``fft_stage``: one Stockham pass over global memory (bytes). Each kernel variant the
  lowering picks by shape is its own family (``attention``: one query row
  per group); a family the device's lowering never emits keeps its default.

Cache: ``<cache_dir>/<backend>-calib-<hardware id>-<key>.json``, where the
key hashes what else the file depends on (rlx version, PROBE_SET and the
device configuration: unit count, BLAS library), and stamped with the same;
any mismatch is a miss and a re-measure, a corrupt file a warning and a
re-measure, and writes are atomic (temp file + os.replace). A host
calibration measured while the machine was busy (``load_per_core``: the
1-minute load average per core, the higher of before and after the
probes, at least BUSY_LOAD_PER_CORE) is re-measured once the machine is
quiet (under QUIET_LOAD_PER_CORE): other processes' work inflates the
probes unevenly, and one such calibration once sent a BERT batch of 32
through the row kernel at 6x the gemm's time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sys
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlx import env
from rlx.arg_types import is_real
from rlx.atomic_file import write_atomic
from rlx.tune.work import FAMILY_UNITS

# A host whose 1-minute load average per core reaches BUSY while probing
# shared its cores with other work; its calibration is re-measured when the
# load falls under QUIET.
BUSY_LOAD_PER_CORE = 1.0
QUIET_LOAD_PER_CORE = 0.5


def load_per_core() -> float:
    """The 1-minute load average over the core count (0.0 where the OS has no load average)."""
    try:
        return os.getloadavg()[0] / max(1, os.cpu_count() or 1)
    except (AttributeError, OSError):
        return 0.0


# Bump when a probe changes what it measures: old cache files then miss.
# 8: the host gemm's packed small-M form (f32, x86-64) under the small-M probes
# 7: in-cache small-M gemm probes on the host, matmul_rows over 8 passes, the load
# 6: the FFT families (fft_shared, fft_stage); 5: the quantized GEMV and dequantize
PROBE_SET = 8

SCHEMA = 1

DEFAULT_BUDGET_S = 3.0

GEMM_CLASSES = ("f32_small_m", "f32_large_m", "f16_small_m", "f16_large_m")

SMALL_M = 8          # gemms with M <= SMALL_M use the small-M throughput

FAMILIES = ("elementwise", "unary", "copy", "epilogue", "epilogue_act", "softmax", "softmax_masked", "norm",
            "attention", "quant_gemv", "quant_gemv_m8", "dequantize", "fft_shared", "fft_stage")


def _rlx_version() -> str:
    import rlx

    return rlx.__version__


@dataclass
class Calibration:
    """Measured (or default) speeds of one device. Times in seconds, rates
    in bytes/s or flop/s (see the field comments)."""

    backend: str
    hardware_id: str = ""
    device_name: str = ""
    unified_memory: bool = True
    parallel_units: int = 1          # groups the device runs at once (host: threads; GPU: compute units)
    config: dict[str, Any] = field(default_factory=dict)   # settings that change speed but not the hardware id
    source: str = "defaults"         # "measured" or "defaults"
    rlx_version: str = ""
    probe_set: int = PROBE_SET
    created: str = ""
    probe_seconds: float = 0.0
    load_per_core: float = 0.0       # host: the machine's load while probing (see BUSY_LOAD_PER_CORE)
    sync_s: float = 1e-5             # floor of one Executable.run
    dispatch_s: float = 1e-7         # per replayed one-group dispatch
    dispatch_parallel_s: float = 5e-6   # per replayed dispatch spread over the units
    segment_s: float = 1e-6          # per replay range in a run's list, beyond its dispatches
    mem_bw: float = 1e10             # bytes/s, large copy (read + write)
    h2d_bw: float = 1e10             # bytes/s, Buffer.write
    d2h_bw: float = 1e10             # bytes/s, Buffer.read
    gemm_call_s: float = 2e-6        # fixed cost of one gemm call
    gemm_flops: dict[str, float] = field(default_factory=dict)         # GEMM_CLASSES -> peak flop/s
    # GEMM_CLASSES -> [[flops, flop/s], ...] ascending: throughput by problem size
    gemm_curves: dict[str, list] = field(default_factory=dict)
    row_kernel_flops: dict[str, float] = field(default_factory=dict)   # "f32", "f16", "f32_tb", "f16_tb" -> flop/s
    # "<dtype>[_tb]:pass" / "<dtype>_tb:m1" -> [[weight elements, weight elements/s], ...] ascending
    row_kernel_curves: dict[str, list] = field(default_factory=dict)
    row_pass_rows: int = 8           # rows of A per pass over the weights (shaders/linear.h RLX_ROWS_PER_PASS)
    family_rates: dict[str, float] = field(default_factory=dict)       # FAMILIES -> unit/s
    log: list[str] = field(default_factory=list)

    # ---- JSON ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **dataclasses.asdict(self)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        """Strict: a missing or mistyped field raises ValueError, which the
        cache treats as a corrupt file."""
        if not isinstance(data, dict):
            raise ValueError("calibration JSON is not an object")
        if data.get("schema") != SCHEMA:
            raise ValueError(f"schema {data.get('schema')!r}, expected {SCHEMA}")
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                raise ValueError(f"field {f.name!r} missing")
            value = data[f.name]
            kind = {"str": str, "bool": bool, "int": int, "float": (int, float), "dict[str, Any]": dict,
                    "dict[str, float]": dict, "list[str]": list, "dict[str, list]": dict}[str(f.type)]
            if not isinstance(value, kind) or (str(f.type) == "float" and isinstance(value, bool)):
                raise ValueError(f"field {f.name!r} has type {type(value).__name__}")
            if str(f.type) == "float":
                value = float(value)
                if not np.isfinite(value) or value < 0:
                    raise ValueError(f"field {f.name!r} = {value} is not a non-negative number")
            if str(f.type) == "dict[str, float]":
                bad = [k for k, v in value.items()
                       if not is_real(v) or not v > 0]
                if bad:
                    raise ValueError(f"field {f.name!r}: entries {bad} are not positive numbers")
                value = {k: float(v) for k, v in value.items()}
            if str(f.type) == "dict[str, list]":
                for key, curve in value.items():
                    if not (isinstance(curve, list) and all(
                            isinstance(p, list) and len(p) == 2 and all(
                                is_real(x) and x > 0
                                for x in p) for p in curve)):
                        raise ValueError(f"field {f.name!r}: {key!r} is not a list of [flops, rate] pairs")
            kwargs[f.name] = value
        return cls(**kwargs)

    @classmethod
    def from_json(cls, text: str) -> Calibration:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc}") from None
        return cls.from_dict(data)

    def replace(self, **changes: Any) -> Calibration:
        return dataclasses.replace(self, **changes)

    def summary(self) -> list[str]:
        """Human-readable lines (``rlx calibrate``, RLX_VERBOSE)."""
        us = 1e6
        lines = [f"{self.backend} {self.device_name or ''} [{self.hardware_id}] ({self.source}"
                 + (f", {self.probe_seconds:.1f} s of probes" if self.source == "measured" else "")
                 + (f", under a load of {self.load_per_core:.1f} per core" if self.load_per_core >= BUSY_LOAD_PER_CORE
                    else "") + ")",
                 f"  run floor {self.sync_s * us:.2f} us; per thunk {self.dispatch_s * us:.3f} us (one group), "
                 f"{self.dispatch_parallel_s * us:.2f} us (spread over {self.parallel_units} units); "
                 f"per replay range {self.segment_s * us:.2f} us",
                 f"  memory {self.mem_bw / 1e9:.1f} GB/s; host->device {self.h2d_bw / 1e9:.1f} GB/s, "
                 f"device->host {self.d2h_bw / 1e9:.1f} GB/s" + (" (unified)" if self.unified_memory else ""),
                 f"  gemm call {self.gemm_call_s * us:.2f} us; " +
                 ", ".join(f"{k} {v / 1e9:.1f}" for k, v in sorted(self.gemm_flops.items())) + " GFLOP/s",
                 "  matmul_rows " + ", ".join(f"{k} {v / 1e9:.2f}" for k, v in sorted(self.row_kernel_flops.items()))
                 + f" GFLOP/s (one pass of {self.row_pass_rows} rows)"]
        if self.row_kernel_curves:
            lines.append("  matmul_rows replayed, weights -> G weight elements/s: " + "; ".join(
                f"{k} " + ", ".join(f"{int(x)}: {y / 1e9:.2f}" for x, y in curve)
                for k, curve in sorted(self.row_kernel_curves.items())))
        fams = [f"{k} {v / 1e9:.1f} G{FAMILY_UNITS.get(k, 'B')}/s" for k, v in sorted(self.family_rates.items())]
        lines.append("  families: " + ", ".join(fams))
        return lines

# ---- documented defaults (RLX_CALIBRATE=0, and what a failed probe falls back to) ----------
# Rough figures for a typical machine of each backend, from public specs and
# the seed's measurements; they only need to put decisions on the right side
# of the obvious cases (a tiny graph on the CPU, a big one on the GPU).
DEFAULTS: dict[str, Calibration] = {
    # A few-core x86 server CPU with OpenBLAS: a quiet 2-core AMD EPYC VM's
    # measurements, rounded (rlx calibrate).
    "host": Calibration(
        backend="host", unified_memory=True, parallel_units=2, sync_s=3e-6, dispatch_s=5e-8,
        dispatch_parallel_s=5e-7, mem_bw=20e9, h2d_bw=20e9, d2h_bw=20e9, gemm_call_s=2e-7,
        gemm_flops={"f32_small_m": 30e9, "f32_large_m": 150e9, "f16_small_m": 10e9, "f16_large_m": 80e9},
        row_kernel_flops={"f32": 1e9, "f16": 1e9, "f32_tb": 4e9, "f16_tb": 4e9}, row_pass_rows=16,
        family_rates={"elementwise": 15e9, "unary": 15e9, "copy": 1e9, "epilogue": 40e9, "epilogue_act": 8e9,
                      "softmax": 8e9, "softmax_masked": 3e9, "norm": 40e9, "attention": 12e9,
                      "quant_gemv": 12e9, "quant_gemv_m8": 4e9, "dequantize": 3e10,
                      # fft_cpu.h at N = 1024 x 256 on a 2-core AVX-512 Xeon (benchmarks/README, "CPU: FFT")
                      "fft_shared": 6e10, "fft_stage": 1e10}),
    # A datacenter NVIDIA GPU (H100/H200 class) over PCIe, cuBLAS, CUDA graphs:
    # an H200's replayed (in-graph) measurements, rounded (rlx calibrate,
    # PROBE_SET 3; benchmarks/results/cost_accuracy-cuda.json).
    "cuda": Calibration(
        backend="cuda", unified_memory=False, parallel_units=132, sync_s=2e-5, dispatch_s=8e-7,
        dispatch_parallel_s=1.5e-6, segment_s=1e-8, mem_bw=3e12, h2d_bw=9e9, d2h_bw=7e9, gemm_call_s=1.4e-6,
        gemm_flops={"f32_small_m": 1e13, "f32_large_m": 5e13, "f16_small_m": 3.5e13, "f16_large_m": 8.8e14},
        gemm_curves={"f32_small_m": [[3e5, 2.3e11], [2.1e6, 1e12], [1.7e7, 2.8e12], [2.7e8, 6e12], [2.1e9, 1e13]],
                     "f32_large_m": [[7.4e4, 5.2e10], [2.1e6, 8e11], [1.9e7, 5e12], [1.5e8, 1e13], [5.4e8, 1.2e13],
                                     [8.6e9, 5e13]],
                     "f16_small_m": [[3e5, 2e11], [2.1e6, 1e12], [1.7e7, 7e12], [2.7e8, 3.5e13]],
                     "f16_large_m": [[7.4e4, 6.3e10], [2.1e6, 1.4e12], [1.9e7, 1.2e13], [1.5e8, 7.5e13],
                                     [5.4e8, 1.2e14], [8.6e9, 7e14], [1.4e11, 8.8e14]]},
        row_kernel_flops={"f32": 1.7e12, "f16": 1.6e12, "f32_tb": 3.4e12, "f16_tb": 4e12},
        row_kernel_curves={f"{d}{v}": c for d in ("f32", "f16") for v, c in (
            (":pass", [[1.5e5, 1.3e10], [5.9e5, 4.8e10], [1e6, 1e11]]),
            ("_tb:pass", [[1.5e5, 1.4e10], [5.9e5, 6.4e10], [1e6, 1.45e11], [1.7e7, 2.3e11]]),
            ("_tb:m1", [[1.5e5, 9.5e10], [5.9e5, 2.8e11], [1e6, 6e11], [1.7e7, 4e11]]))},
        family_rates={"elementwise": 2.7e12, "unary": 1.8e12, "copy": 1.8e12, "epilogue": 1.5e12,
                      "epilogue_act": 4.2e12, "softmax": 2.4e12, "softmax_masked": 2.1e12, "norm": 2.4e12,
                      "attention": 8.4e11, "quant_gemv": 5e11, "quant_gemv_m8": 1.5e11, "dequantize": 1e12,
                      # an H200's calibrated FFT rates, rounded (benchmarks/README, "H200
                      # (2026-12-03, session 14)"): they pick the faster path at all 13 shapes of
                      # fft_path_choice.py, where 1.2e12 / 1.5e12 sent 4096 to the slower passes
                      "fft_shared": 2.5e12, "fft_stage": 7.7e11}),
    # An Apple-silicon GPU (M-series Pro class): unified memory, MPS gemm.
    "metal": Calibration(
        backend="metal", unified_memory=True, parallel_units=16, sync_s=8e-5, dispatch_s=1.5e-6,
        dispatch_parallel_s=1.5e-6, mem_bw=150e9, h2d_bw=30e9, d2h_bw=30e9, gemm_call_s=1e-5,
        gemm_flops={"f32_small_m": 1e11, "f32_large_m": 4e12, "f16_small_m": 1.5e11, "f16_large_m": 6e12},
        row_kernel_flops={"f32": 8e10, "f16": 1e11, "f32_tb": 8e10, "f16_tb": 1e11},
        family_rates={"elementwise": 1e11, "unary": 8e10, "copy": 1e11, "epilogue": 1e11, "epilogue_act": 8e10,
                      "softmax": 6e10, "softmax_masked": 5e10, "norm": 6e10, "attention": 1e12,
                      "quant_gemv": 8e10, "quant_gemv_m8": 2e10, "dequantize": 5e10,
                      "fft_shared": 1e11, "fft_stage": 8e10}),
}


def default_calibration(backend: str, device: Any = None) -> Calibration:
    """DEFAULTS[backend] (host's for an unknown backend), labelled with the
    device when one is given."""
    base = DEFAULTS.get(backend, DEFAULTS["host"])
    calib = base.replace(gemm_flops=dict(base.gemm_flops),
                         gemm_curves={k: [list(p) for p in v] for k, v in base.gemm_curves.items()},
                         row_kernel_flops=dict(base.row_kernel_flops),
                         row_kernel_curves={k: [list(p) for p in v] for k, v in base.row_kernel_curves.items()},
                         family_rates=dict(base.family_rates), log=[], config={}, rlx_version=_rlx_version())
    if device is not None:
        info = device.info
        calib = calib.replace(hardware_id=info.hardware_id, device_name=info.name,
                              unified_memory=bool(info.unified_memory),
                              parallel_units=max(1, int(info.compute_units)), config=_config(device))
    return calib


# ---- cache ---------------------------------------------------------------------------------
def _sanitize(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:120] or "unknown"


def calibration_path(device: Any) -> Path:
    """``<cache_dir>/<backend>-calib-<hardware id>-<key>.json``: the key is a
    hash of everything else the staleness check compares (device
    configuration incl. the BLAS library, rlx version, probe set), so two
    environments on one machine (say two virtual environments with
    different BLAS builds) each keep their own file instead of invalidating
    each other's on every compile."""
    stamp = json.dumps({"config": _config(device), "rlx_version": _rlx_version(), "probe_set": PROBE_SET},
                       sort_keys=True)
    key = hashlib.sha256(stamp.encode()).hexdigest()[:12]
    return env.cache_dir() / f"{_sanitize(device.backend)}-calib-{_sanitize(device.info.hardware_id)}-{key}.json"


def _config(device: Any) -> dict[str, Any]:
    """What changes speed without changing the hardware id: the host's
    thread count (RLX_NUM_THREADS) and its BLAS library (RLX_BLAS)."""
    config: dict[str, Any] = {"compute_units": int(device.info.compute_units)}
    if getattr(device, "blas", None) is not None or device.backend == "host":
        config["blas"] = getattr(device, "blas", None) or ""
    return config


def _stale_reason(calib: Calibration, device: Any) -> str | None:
    checks = (("backend", calib.backend, device.backend), ("hardware id", calib.hardware_id, device.info.hardware_id),
              ("rlx version", calib.rlx_version, _rlx_version()), ("probe set", calib.probe_set, PROBE_SET),
              ("device configuration", calib.config, _config(device)))
    for what, have, want in checks:
        if have != want:
            return f"{what} {have!r} != {want!r}"
    if calib.source != "measured":
        return "not measured"
    if calib.backend == "host" and calib.load_per_core >= BUSY_LOAD_PER_CORE:
        now = load_per_core()
        if now < QUIET_LOAD_PER_CORE:
            return f"measured under a load of {calib.load_per_core:.1f} per core, {now:.1f} now"
    return None


def _write_cache_repeatedly(path: str, texts: list[str], start: Any = None) -> None:
    """Test helper (importable by spawned processes): many atomic writes,
    after ``start`` (a multiprocessing Event) is set, so writers overlap."""
    if start is not None:
        start.wait(30)
    for text in texts:
        write_atomic(path, text)

# In-process memo: compile calls get_calibration often; read the file once.
_MEMO: dict[Path, Calibration] = {}

_MEMO_LOCK = threading.RLock()


def _log(message: str) -> None:
    if env.verbose():
        print(f"rlx calibrate: {message}", file=sys.stderr)


def _read_cache(path: Path, device: Any) -> Calibration | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        _log(f"no cache at {path}: measuring")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        warnings.warn(f"rlx: calibration cache {path} is unreadable ({exc}); re-measuring", RuntimeWarning,
                      stacklevel=3)
        return None
    try:
        # A file of another probe set or schema is stale, not corrupt (its
        # fields may differ): a quiet re-measure, no warning.
        data = json.loads(text)
        if isinstance(data, dict) and (data.get("probe_set"), data.get("schema")) != (PROBE_SET, SCHEMA) \
                and isinstance(data.get("probe_set"), int):
            _log(f"cache {path} is stale (probe set {data.get('probe_set')!r}, schema {data.get('schema')!r}): "
                 f"re-measuring")
            return None
        calib = Calibration.from_dict(data)
    except json.JSONDecodeError as exc:
        warnings.warn(f"rlx: calibration cache {path} is corrupt (not JSON: {exc}); re-measuring and replacing it",
                      RuntimeWarning, stacklevel=3)
        return None
    except (ValueError, TypeError) as exc:
        warnings.warn(f"rlx: calibration cache {path} is corrupt ({exc}); re-measuring and replacing it",
                      RuntimeWarning, stacklevel=3)
        return None
    reason = _stale_reason(calib, device)
    if reason is not None:
        _log(f"cache {path} is stale ({reason}): re-measuring")
        return None
    _log(f"loaded {path}")
    for line in calib.summary():
        _log(line)
    return calib


def clear_memo() -> None:
    """Forget calibrations read in this process (tests)."""
    with _MEMO_LOCK:
        _MEMO.clear()
