"""Device calibration: a few seconds of probes that measure what the cost
model (rlx/runtime/cost.py) needs, cached as JSON per device (DESIGN
section 4, "Calibration").

Everything here goes through the public runtime: graphs compiled with
``rlx.compile`` (for the run floor, and for thunks with real bindings and
params) and the shim ABI through the wrappers of ``rlx.runtime.shim``.
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
- ``row_kernel_curves["<dtype>[_tb]:pass"|"<dtype>_tb:m1"]``: ``matmul_rows``
  (the small-M linear kernel) at small-M shape classes, as weight elements
  per second over the weight size: one pass of ``row_pass_rows`` rows
  (the kernel streams the weights once per pass), and the mat-vec path of
  M = 1 with weights [N, K]. ``row_kernel_flops`` keeps one flop/s figure
  per variant (summary; the fallback when a curve is missing).
- ``family_rates[<family>]``: each other kernel family at transformer-layer
  sizes, in the work unit the cost model uses for it (bytes moved, or flops
  for attention); see ``cost.FAMILY_UNITS``. Each kernel variant the
  lowering picks by shape is its own family (``attention``: one query row
  per group); a family the device's lowering never emits keeps its default.

Cache: ``<cache_dir>/<backend>-calib-<hardware id>-<key>.json``, where the
key hashes what else the file depends on (rlx version, PROBE_SET and the
device configuration: unit count, BLAS library), and stamped with the same;
any mismatch is a miss and a re-measure, a corrupt file a warning and a
re-measure, and writes are atomic (temp file + os.replace).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlx import env

# Bump when a probe changes what it measures: old cache files then miss.
PROBE_SET = 4   # 4: no attention_tiled family (the kernel was removed)
SCHEMA = 1
DEFAULT_BUDGET_S = 3.0

GEMM_CLASSES = ("f32_small_m", "f32_large_m", "f16_small_m", "f16_large_m")
SMALL_M = 8          # gemms with M <= SMALL_M use the small-M throughput
FAMILIES = ("elementwise", "unary", "copy", "epilogue", "epilogue_act", "softmax", "softmax_masked", "norm",
            "attention")


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
                       if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0 or not np.isfinite(v)]
                if bad:
                    raise ValueError(f"field {f.name!r}: entries {bad} are not positive numbers")
                value = {k: float(v) for k, v in value.items()}
            if str(f.type) == "dict[str, list]":
                for key, curve in value.items():
                    if not (isinstance(curve, list) and all(
                            isinstance(p, list) and len(p) == 2 and all(
                                isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 and np.isfinite(x)
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
                 + (f", {self.probe_seconds:.1f} s of probes" if self.source == "measured" else "") + ")",
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
        from rlx.runtime.cost import FAMILY_UNITS

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
                      "softmax": 8e9, "softmax_masked": 3e9, "norm": 40e9, "attention": 12e9}),
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
                      "attention": 8.4e11}),
    # An Apple-silicon GPU (M-series Pro class): unified memory, MPS gemm.
    "metal": Calibration(
        backend="metal", unified_memory=True, parallel_units=16, sync_s=8e-5, dispatch_s=1.5e-6,
        dispatch_parallel_s=1.5e-6, mem_bw=150e9, h2d_bw=30e9, d2h_bw=30e9, gemm_call_s=1e-5,
        gemm_flops={"f32_small_m": 1e11, "f32_large_m": 4e12, "f16_small_m": 1.5e11, "f16_large_m": 6e12},
        row_kernel_flops={"f32": 8e10, "f16": 1e11, "f32_tb": 8e10, "f16_tb": 1e11},
        family_rates={"elementwise": 1e11, "unary": 8e10, "copy": 1e11, "epilogue": 1e11, "epilogue_act": 8e10,
                      "softmax": 6e10, "softmax_masked": 5e10, "norm": 6e10, "attention": 1e12}),
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
    return None


def write_cache(path: str | os.PathLike, text: str) -> None:
    """Atomically replace ``path`` with ``text``: readers (and other writers)
    only ever see a whole old file or a whole new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_cache_repeatedly(path: str, texts: list[str], start: Any = None) -> None:
    """Test helper (importable by spawned processes): many atomic writes,
    after ``start`` (a multiprocessing Event) is set, so writers overlap."""
    if start is not None:
        start.wait(30)
    for text in texts:
        write_cache(path, text)


# In-process memo: compile calls get_calibration often; read the file once.
_MEMO: dict[Path, Calibration] = {}
_MEMO_LOCK = threading.RLock()
_STATE = threading.local()


def calibrating() -> bool:
    """True while this thread runs probes. The probes compile graphs, so a
    compile hook asking for a calibration must not recurse into probing:
    it gets the defaults instead (see ``get_calibration``)."""
    return bool(getattr(_STATE, "active", False))


def _log(message: str) -> None:
    if env.verbose():
        print(f"rlx calibrate: {message}", file=sys.stderr)


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
            write_cache(path, calib.to_json())
            _log(f"wrote {path}")
        except OSError as exc:
            warnings.warn(f"rlx: cannot write the calibration cache {path}: {exc}", RuntimeWarning, stacklevel=2)
        _MEMO[path] = calib
        return calib


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


# ---- timing helpers (also used by benchmarks/test_cost_accuracy.py) -------------------------
def _buffers(exe: Any) -> tuple[Any, Any]:
    # The executable's arena and resident buffers: probes re-encode its own
    # thunks in place, so bindings and params are exactly what compile made.
    return exe._arena, exe._resident


def encode_thunk(cb: Any, exe: Any, thunk: Any, buffers: tuple[Any, ...] | None = None) -> None:
    """Encode one thunk of ``exe`` into a ``shim.CommandBuffer`` (what the
    Cython core does per thunk, through the Python wrappers). ``buffers``:
    the buffer of each storage slot (default: the arena and resident
    buffers of ``exe``)."""
    from rlx.runtime.lowering import GEMM

    buffers = _buffers(exe) if buffers is None else buffers

    def where(binding: Any) -> tuple[Any, int]:
        return buffers[binding.storage.slot], binding.storage.offset + binding.offset

    if thunk.kind == GEMM:
        g = thunk.gemm
        (a, ao), (b, bo), (c, co) = where(g["a"]), where(g["b"]), where(g["c"])
        cb.gemm(a, b, c, g["m"], g["n"], g["k"], lda=g["lda"], ldb=g["ldb"], ldc=g["ldc"],
                trans_a=bool(g["trans_a"]), trans_b=bool(g["trans_b"]), dtype=g["dtype"], alpha=g["alpha"],
                beta=g["beta"], a_offset=ao, b_offset=bo, c_offset=co, batch=g.get("batch", 1),
                stride_a=g.get("stride_a", 0), stride_b=g.get("stride_b", 0), stride_c=g.get("stride_c", 0),
                outer=g.get("outer", 1), outer_strides=g.get("outer_strides", (0, 0, 0)),
                b_dtype=g.get("b_dtype"), c_dtype=g.get("c_dtype"),
                bias=where(g["bias"])[0] if g.get("bias") else None,
                bias_offset=where(g["bias"])[1] if g.get("bias") else 0)
        return
    pipeline = _pipeline(exe, thunk)
    cb.set_pipeline(pipeline)
    for i, binding in enumerate(thunk.bindings):
        buf, off = where(binding)
        cb.set_buffer(i, buf, off)
    tx = max(1, min(thunk.threads[0], pipeline.max_threads_per_group or thunk.threads[0]))
    cb.dispatch(thunk.groups, (tx, thunk.threads[1], thunk.threads[2]))


def _pipeline(exe: Any, thunk: Any) -> Any:
    """The thunk's pipeline as the executable has it: recordable into ICBs."""
    from rlx.runtime.shim import PIPELINE_INDIRECT

    if thunk.source is not None:
        from rlx.runtime.custom_kernels import library_for

        return library_for(exe.device, thunk.source).pipeline(thunk.kernel, PIPELINE_INDIRECT)
    return exe.device.builtin_library().pipeline(thunk.kernel, PIPELINE_INDIRECT)


def _run_encoded(device: Any, encode: Callable[[Any], None]) -> float:
    """Seconds for one committed command buffer: the device's own timing
    when the shim reports it, else wall time of commit + wait."""
    from rlx.runtime import shim

    with shim.CommandBuffer(device) as cb:
        encode(cb)
        t0 = time.perf_counter()
        cb.commit()
        device_s = cb.wait()
        wall = time.perf_counter() - t0
    return device_s if device_s > 0 else wall


def time_thunk(exe: Any, thunk: Any, *, repeats: int = 8, samples: int = 5, budget_s: float | None = None,
               buffers: tuple[Any, ...] | None = None) -> float:
    """Seconds per execution of one thunk of ``exe``, encoded ``repeats``
    times with a barrier between (a dependent chain, like a real schedule)
    into one command buffer; the minimum over ``samples`` buffers (or over
    as many as fit in ``budget_s``), so other load on the machine counts
    as little as possible."""
    def encode(cb: Any) -> None:
        for i in range(repeats):
            if i:
                cb.barrier()
            encode_thunk(cb, exe, thunk, buffers)

    return _sample(lambda: _run_encoded(exe.device, encode), samples, budget_s) / repeats


# A one-entry ICB per device: gemm lists start with it so they look like a
# replayed run's command list (ICB ranges with gemms between them).
_ANCHORS: dict[int, tuple[Any, Any, Any]] = {}


def _anchor(device: Any) -> Any:
    entry = _ANCHORS.get(id(device))
    if entry is None or entry[0] is not device:
        from rlx.runtime import shim

        g = _chain(1, (16,), "add")
        exe = _compile(g, device, _params_for(g))
        icb = shim.Icb(device, 1)
        _record(icb, exe, exe.thunks[0], 1)
        entry = _ANCHORS[id(device)] = (device, exe, icb)
    return entry[2]


def _record(icb: Any, exe: Any, thunk: Any, count: int, buffers: tuple[Any, ...] | None = None) -> None:
    """Entries 0..count-1 of ``icb``: the dispatch ``thunk`` of ``exe``, each
    after a barrier (a dependent chain, like a real schedule)."""
    buffers = _buffers(exe) if buffers is None else buffers
    pipeline = _pipeline(exe, thunk)
    bindings = [(buffers[b.storage.slot], b.storage.offset + b.offset) for b in thunk.bindings]
    tx = max(1, min(thunk.threads[0], pipeline.max_threads_per_group or thunk.threads[0]))
    for i in range(count):
        icb.encode_dispatch(i, pipeline, bindings, thunk.groups, (tx, thunk.threads[1], thunk.threads[2]),
                            barrier_before=i > 0)


REPLAY_TARGET_S = 2e-4    # auto repeats: the long replay should take about this long
LONG_NODE_S = 1e-3        # a replay of one node this long: its mean, not the slope


def time_replayed(exe: Any, thunk: Any, *, repeats: int | None = None, samples: int = 4,
                  budget_s: float | None = None, buffers: tuple[Any, ...] | None = None) -> float:
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
    microseconds is timed over tens of them, above the launch jitter)."""
    from rlx.runtime import shim
    from rlx.runtime.lowering import GEMM

    device = exe.device
    if repeats is None:
        probe = _one_replay(exe, thunk, buffers)
        repeats = int(min(64, max(2, round(REPLAY_TARGET_S / max(probe, 1e-9)))))
    short, long = 1, 1 + max(1, int(repeats))
    icb = None
    if thunk.kind == GEMM:
        anchor = _anchor(device)

        def encoder(count: int) -> Callable[[Any], None]:
            def encode(cb: Any) -> None:
                cb.execute_icb(anchor, 0, 1)
                for _ in range(count):
                    cb.barrier()
                    encode_thunk(cb, exe, thunk, buffers)
            return encode
    else:
        icb = shim.Icb(device, long)
        _record(icb, exe, thunk, long, buffers)

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


def _one_replay(exe: Any, thunk: Any, buffers: tuple[Any, ...] | None) -> float:
    """Seconds of a replayed list holding the thunk once (an upper bound of
    its cost: the list's launch is included)."""
    from rlx.runtime import shim
    from rlx.runtime.lowering import GEMM

    device = exe.device
    if thunk.kind == GEMM:
        anchor = _anchor(device)

        def encode(cb: Any) -> None:
            cb.execute_icb(anchor, 0, 1)
            cb.barrier()
            encode_thunk(cb, exe, thunk, buffers)
        return min(_run_encoded(device, encode) for _ in range(3))
    icb = shim.Icb(device, 1)
    try:
        _record(icb, exe, thunk, 1, buffers)
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
                      ((1, 512, 512), (4, 1024, 1024), (8, 2048, 1024)),
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
    for line in calib.summary():
        _log(line)
    for line in calib.log:
        _log(line)
    return calib


def _compile(graph: Any, device: Any, params: dict[str, np.ndarray] | None = None) -> Any:
    from rlx.runtime.compiler import compile as rlx_compile

    name = {"host": "cpu"}.get(device.backend, device.backend)
    if device.index:
        name += f":{device.index}"
    return rlx_compile(graph, device=name, params=params or {})


def _params_for(graph: Any, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: (rng.standard_normal(tuple(node.shape)) / np.sqrt(max(node.shape[0], 1))).astype(node.dtype.numpy)
            for name, node in graph.params.items()}


def _empty_graph() -> Any:
    from rlx.ir.graph import Graph

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
    from rlx.ir.graph import Graph

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
    return per, _groups_of(thunk)


def _groups_of(thunk: Any) -> int:
    return int(thunk.groups[0]) * int(thunk.groups[1]) * int(thunk.groups[2])


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
    from rlx.runtime.cost import dispatch_overhead

    return max(per_rep - dispatch_overhead(calib, thunk), 0.2 * per_rep)


def _probe_memory(calib: Calibration, sizes: _Sizes, budget: float, device: Any) -> None:
    """Streaming bandwidth from a large contiguous add (two reads, one write):
    the copy kernel is the generic strided one, slower than memory on a CPU."""
    from rlx.ir.graph import Graph
    from rlx.runtime.cost import thunk_bytes

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
    from rlx.ir.graph import Graph

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
    from rlx.ir.graph import Graph
    from rlx.runtime.lowering import GEMM

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
    from rlx.runtime.lowering import GEMM

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
    from rlx.runtime.lowering import GEMM

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
        exe = _matmul_exe(device, 2 * p, n, k, dtype, tb)
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
        for m in ((1, p) if tb else (p,)):
            per = _time_row_kernel(calib, exe, gemm, m, n, k, dtype, share * 0.35)
            key = f"{dtype}{'_tb' if tb else ''}:{'m1' if m == 1 else 'pass'}"
            calib.row_kernel_curves.setdefault(key, []).append([float(n * k), n * k / per])
            calib.row_kernel_curves[key].sort()
            rows.append(f"M={m} {per * 1e6:.1f} us")
            if m == p:      # the variant's peak one-pass throughput, in flops of p rows
                variant = dtype + ("_tb" if tb else "")
                rate = 2.0 * p * n * k / per
                calib.row_kernel_flops[variant] = max(rate, calib.row_kernel_flops[variant]) if variant in seen \
                    else rate
                seen.add(variant)
        calib.log.append(f"small-M {dtype} {'[N, K]' if tb else '[K, N]'} weights ({n}, {k}): gemm "
                         + ", ".join(gemm_pts) + "; matmul_rows " + ", ".join(rows) + " (work, replayed)")


def _time_row_kernel(calib: Calibration, exe: Any, gemm: Any, m: int, n: int, k: int, dtype: str,
                     budget: float) -> float:
    """Work seconds of matmul_rows on the gemm's own operands (node overhead
    removed): the lowering's choice between the two is exactly what this
    calibrates, so the probe builds the row-kernel thunk by hand (the
    compiled graph took the gemm path)."""
    from rlx.runtime import params as P
    from rlx.runtime.lowering import DISPATCH, Binding, Thunk
    from rlx.runtime.views import Storage

    g = gemm.gemm
    trans_b = bool(g["trans_b"])
    params = P.linear(m, n, k, g["a"].offset // (2 if dtype == "f16" else 4), trans_b, False, 0)
    # The kernel reads x at an element offset from its binding, so bind x's
    # storage at its start; params go in a small buffer of their own (slot 2).
    pbuf = exe.device.alloc(256)
    try:
        pbuf.write(0, params)
        pstore = Storage("params", len(params), slot=2)
        pstore.offset = 0
        groups, threads = exe.target.row_grid(n, k)   # as lowering_nn: one group per output column
        thunk = Thunk(DISPATCH, "matmul_rows probe", kernel=f"matmul_rows_{dtype}",
                      bindings=[Binding(g["a"].storage), g["b"], g["b"], g["c"], Binding(pstore)],
                      params=params, groups=groups, threads=threads)
        isz = 2 if dtype == "f16" else 4
        thunk.reads = [(g["a"].storage, 0, m * k * isz), (g["b"].storage, 0, n * k * isz)]
        thunk.writes = [(g["c"].storage, 0, m * n * isz)]
        per = time_replayed(exe, thunk, samples=4, budget_s=budget, buffers=(*_buffers(exe), pbuf))
    finally:
        pbuf.free()
    return _work_seconds(calib, thunk, per)


def _family_graph(sizes: _Sizes) -> Any:
    """One graph with a thunk of every family at transformer-layer sizes."""
    from rlx.ir.graph import Graph

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
    }
    g.set_outputs(**outs)
    return g


def _probe_families(calib: Calibration, sizes: _Sizes, budget: float, device: Any) -> None:
    from rlx.runtime.cost import FAMILY_UNITS, family_of, thunk_work

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
    from rlx.runtime import devices

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
