"""rlx.compile: open the device, choose the decider, run the pipeline.

The one place where the runtime (rlx/runtime/compiler.py, which plans and
builds executables) meets tuning (rlx/tune/: calibration, the cost model,
device="auto"). Both sit below this module, so neither imports the other
upward."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlx import env
from rlx.ir.graph import Graph
from rlx.runtime import devices
from rlx.runtime.compiler import check_compile_args, compile_graph
from rlx.runtime.executable import Executable
from rlx.tune.cost import decision_model
from rlx.tune.decide import auto_device, cost_model_for


def compile(graph: Graph, device: str | None = None, params: Mapping[str, np.ndarray] | None = None, *,
            precision: str = "f32", passes: Mapping[str, bool] | None = None, pin_outputs: bool = True,
            replay: bool | None = None, share_params_with: Executable | None = None) -> Executable:
    """Compile ``graph`` for ``device`` ("cpu" by default, or $RLX_DEVICE;
    "auto" picks the device with the fastest predicted run).

    The pipeline: empty contractions -> fusion -> siblings -> precision ->
    lowering with view elision -> memory plan -> barriers -> segmenting
    (rlx/runtime/compiler.py). ``RLX_VERBOSE=1`` prints what each pass
    changed; ``exe.compile_report`` keeps the same lines.

    params: values for every ``graph.param`` (they stay resident across runs;
    ``Executable.set_params`` replaces them). precision: "f32", "f16",
    "auto" or "bf16" (host only) (rlx/opt/precision.py). passes: switch passes off for bisecting,
    e.g. ``{"fusion": False}``; names: fusion, siblings (rlx/opt/siblings.py), views, precision,
    memory_reuse, segments. pin_outputs: give outputs arena bytes no other
    value ever touches (dropped automatically when the arena would not fit
    the device). replay: record the schedule once and replay it every run
    (default: $RLX_REPLAY, on). share_params_with: an executable on the same
    device whose resident parameters this one reads instead of holding its
    own copy, for every param with the same name, shape and dtype (shape
    buckets of one model share one set of weights; ``set_params`` on either
    changes both); those params need no value in ``params``, and a value
    given for one is not used."""
    _, params = check_compile_args(graph, passes, params)
    report: list[str] = []
    if (device or env.default_device()) == "auto":
        device = auto_device(graph, params, precision=precision)
        report.append(f"device: auto chose {device}")
    dev, target = devices.open_device(device)
    # The calibrated model of this device; while a calibration runs (its
    # probes compile graphs) the model of the backend's documented defaults.
    decider = cost_model_for(dev) or decision_model(target.backend)
    return compile_graph(graph, dev, target, decider, params, precision=precision, passes=passes,
                         pin_outputs=pin_outputs, replay=replay, share_params_with=share_params_with,
                         report=report)
