"""Device choice and the calibrated cost model of an open device: what
``rlx.compile`` injects into the pipeline as its decider, and what
``device="auto"`` compiles for (the same pipeline, planned for every
candidate and priced by its cost model)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlx import env
from rlx.errors import RlxError
from rlx.runtime import devices
from rlx.runtime.compiler import plan_graph
from rlx.tune.calibrate import calibrating, get_calibration
from rlx.tune.calibration import Calibration
from rlx.tune.cost import CostModel, decision_model

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
    # compile and time dozens of executables (tens of seconds on a GPU:
    # benchmarks/results/cost_accuracy-cuda.json), too long to spring on a
    # first compile: GPUs use the cache written by
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
    device, target = devices.open_device(spec)
    return Candidate(spec, target, get_calibration(device))


def lower_for(graph: Any, target: Any, model: CostModel | None = None, precision: str = "f32") -> list[Any]:
    """The thunks rlx.compile would emit for ``target``, without touching a
    device: the compile's own pipeline (plan_graph), pure Python over the
    Target, deciding with ``model`` (default: the backend's documented
    defaults)."""
    graph.topo_order()
    graph.validate()
    decider = model if model is not None else decision_model(target.backend)
    return plan_graph(graph, target, decider, precision=precision).thunks


def _io_bytes(graph: Any) -> tuple[int, int]:
    def nbytes(nodes: Iterable[Any]) -> int:
        total = 0
        for node in nodes:
            count = 1
            for d in node.shape:
                count *= int(d)
            total += node.dtype.nbytes(count, int(node.shape[-1]) if len(node.shape) else None)
        return total

    return nbytes(graph.inputs.values()), nbytes(graph.outputs.values())


def predict_devices(graph: Any, candidates: Sequence[str | Candidate] | None = None,
                    precision: str = "f32") -> list[DevicePrediction]:
    """Predicted run seconds of ``graph`` on each candidate (default: every
    available device)."""
    if candidates is None:
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
