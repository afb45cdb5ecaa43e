"""H200 by hand (issue 19): the FFT's two paths for lengths fft_shared covers
in one dispatch, timed both ways on the same shapes, and what the cost model
decides for each (its documented defaults, and the device's calibration,
measured here). Each form's thunks are timed as they cost inside a replayed
schedule (rlx.tune.calibrate.time_replayed, summed), so the host copies of
exe.run do not swamp them; each form's output is checked against numpy.

Run: PYTHONPATH=$PWD python3 benchmarks/gpu/fft_path_choice.py OUT.json [DEVICE]"""

from __future__ import annotations

import json
import sys

import numpy as np

import rlx
from rlx.lowering.fft import MIXED_SHARED_MAX, SHARED_MAX, shared_grid, transform_passes
from rlx.runtime import devices
from rlx.tune.calibrate import get_calibration, time_replayed
from rlx.tune.cost import CostModel, decision_model

CASES = [(1, 4096), (4, 4096), (16, 4096), (64, 4096), (1, 1024), (8, 1024), (64, 1024), (256, 1024),
         (1, 400), (37, 400), (655, 400), (1, 2000), (16, 2000)]


def _time_form(device: str, b: int, n: int, shared: bool) -> tuple[float, float, list[str]]:
    real = CostModel.prefer_fft_shared
    CostModel.prefer_fft_shared = lambda self, *a: shared
    try:
        g = rlx.Graph()
        g.set_outputs(y=g.fft(g.input("x", (b, n), "c64")))
        exe = rlx.compile(g, device=device)
    finally:
        CostModel.prefer_fft_shared = real
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((b, n)) + 1j * rng.standard_normal((b, n))).astype(np.complex64)
    want = np.fft.fft(x.astype(np.complex128))
    err = float(np.abs(exe.run(x=x)["y"] - want).max() / np.abs(want).max())
    seconds = sum(time_replayed(exe, t, samples=5, budget_s=0.5) for t in exe.thunks)
    return seconds, err, [t.kernel for t in exe.thunks]


def main(out: str, device: str = "cuda") -> None:
    dev, target = devices.open_device(device)
    calibrated = CostModel(get_calibration(dev, force=True))
    defaults = decision_model(target.backend)
    rows = []
    for b, n in CASES:
        one = transform_passes(n, False)
        stage_passes = len(transform_passes(n, False, shared=False))
        capacity = SHARED_MAX if one[0].radix == 0 else MIXED_SHARED_MAX
        (groups, _), _ = shared_grid(target, b, n, capacity)
        shared_s, shared_err, _ = _time_form(device, b, n, True)
        stage_s, stage_err, kernels = _time_form(device, b, n, False)
        row = {"rows": b, "n": n, "shared_us": shared_s * 1e6, "stage_us": stage_s * 1e6,
               "stage_passes": len(kernels), "faster": "shared" if shared_s <= stage_s else "stage",
               "defaults_pick": "shared" if defaults.prefer_fft_shared(n, b, groups[0], stage_passes) else "stage",
               "calibrated_pick": "shared" if calibrated.prefer_fft_shared(n, b, groups[0], stage_passes)
               else "stage", "max_rel_error": max(shared_err, stage_err)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    cal = calibrated.calibration
    json.dump({"what": __doc__.splitlines()[0], "command": "PYTHONPATH=$PWD python3 benchmarks/gpu/fft_path_choice.py "
               "OUT.json", "device": device,
               "calibrated_rates": {k: cal.family_rates.get(k) for k in ("fft_shared", "fft_stage")},
               "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
