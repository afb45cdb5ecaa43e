"""H200 by hand (issue 21): rlx.splat frame times on cuda at 1920x1080 for
100k and 1M random Gaussians (SH degree 3), with where the time goes
(Renderer.profile: each stage's thunks run alone, over the frame's own
buffers), and the cuda image against the CPU renderer's on a smaller frame
(PSNR). gsplat is not on the device (nothing can be installed there), so no
peer ratio is measured here.

Run: PYTHONPATH=$PWD python3 benchmarks/gpu/splat_cuda.py OUT.json"""

from __future__ import annotations

import sys
import time
import traceback

import numpy as np
from results import emit  # benchmarks/gpu/results.py (the script's own folder)

from rlx.splat import Camera, Renderer, random_scene

WIDTH, HEIGHT = 1920, 1080


def _camera(width: int, height: int) -> Camera:
    return Camera.look_at((1.0, -0.5, -6.0), (0.0, 0.0, 0.0), fx=0.9 * width, fy=0.9 * width, cx=width / 2,
                          cy=height / 2)


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(1.0 / mse)


def _frame(n: int) -> dict:
    scene = random_scene(n, seed=0, degree=3, scale=-4.0)
    t = time.perf_counter()
    r = Renderer(scene, WIDTH, HEIGHT, device="cuda")
    compile_s = time.perf_counter() - t
    prof = r.profile(_camera(WIDTH, HEIGHT), repeats=10)
    return {"gaussians": n, "width": WIDTH, "height": HEIGHT, "compile_s": compile_s, "replans": r.replans, **prof}


def main(out_path: str | None) -> None:
    result: dict = {"what": __doc__.splitlines()[0], "command": "python3 benchmarks/gpu/splat_cuda.py OUT.json",
                    "timing": "frame_ms: exe.run wall time (camera in, the [H, W, 5] f32 image out to the host); "
                              "stages_ms: Program.run_one per thunk, summed per stage",
                    "rows": []}
    for n in (100_000, 1_000_000):
        try:
            result["rows"].append(_frame(n))
        except Exception:
            result["rows"].append({"gaussians": n, "error": traceback.format_exc()[-1500:]})
        print(result["rows"][-1], flush=True)
    try:
        scene = random_scene(20_000, seed=1, degree=3, scale=-3.5)
        cam = _camera(640, 360)
        gpu = Renderer(scene, 640, 360, device="cuda").render(cam)
        cpu = Renderer(scene, 640, 360, device="cpu").render(cam)
        result["cuda_vs_cpu"] = {"gaussians": 20_000, "size": "640x360", "psnr_rgb_db": _psnr(gpu.rgb, cpu.rgb),
                                 "pairs": [gpu.pairs, cpu.pairs]}
    except Exception:
        result["cuda_vs_cpu"] = {"error": traceback.format_exc()[-1500:]}
    print(result.get("cuda_vs_cpu"), flush=True)
    emit(result, out_path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
