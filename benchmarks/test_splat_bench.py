"""Gaussian splatting on the CPU (issue 21): one frame of 100k random
Gaussians (SH degree 3, log-scales around -4) at 1280x720, through
rlx.splat.Renderer.render (one replayed schedule: projection, prefix sum,
binning, the device radix sort, tile ranges, raster, plus copying the
camera in and the [720, 1280, 5] image out), and where the time goes
(each stage's thunks run alone, in schedule order, over the frame's own
buffers: Renderer.profile).

Run:  python -m pytest benchmarks/test_splat_bench.py --benchmark-enable -s
Results JSON (the command, lscpu model/flags, frame and stage times):
      python benchmarks/test_splat_bench.py --json benchmarks/results/cpu-splat-DATE.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import pytest
from bench_machine import lscpu

N, WIDTH, HEIGHT = 100_000, 1280, 720


def bench_camera(width: int, height: int):
    """The splat benchmarks' camera (benchmarks/gpu/splat_cuda.py's too)."""
    from rlx.splat import Camera

    return Camera.look_at((1.0, -0.5, -6.0), (0.0, 0.0, 0.0), fx=0.9 * width, fy=0.9 * width, cx=width / 2,
                          cy=height / 2)


def make_renderer():
    from rlx.splat import Renderer, random_scene

    scene = random_scene(N, seed=0, degree=3, scale=-4.0)
    cam = bench_camera(WIDTH, HEIGHT)
    t = time.perf_counter()
    r = Renderer(scene, WIDTH, HEIGHT)
    compile_s = time.perf_counter() - t
    r.render(cam)   # warm (and re-plan if the default capacity is short)
    return r, cam, compile_s


@pytest.fixture(scope="module")
def renderer():
    return make_renderer()


def test_splat_frame(benchmark, record, renderer):
    r, cam, _ = renderer
    benchmark(lambda: r.render(cam))
    record(f"splat {N} Gaussians {WIDTH}x{HEIGHT}", "rlx", benchmark, unit="frame")


def test_splat_stages(renderer):
    r, cam, _ = renderer
    prof = r.profile(cam, repeats=3)
    print(f"\nframe {prof['frame_ms']:.1f} ms, {prof['pairs']} pairs (capacity {prof['capacity']}), "
          f"{prof['thunks']} thunks")
    for stage, ms in sorted(prof["stages_ms"].items(), key=lambda kv: -kv[1]):
        print(f"  {stage:14s} {ms:8.2f} ms")
    assert prof["pairs"] <= prof["capacity"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    from rlx import env

    r, cam, compile_s = make_renderer()
    frames = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        frame = r.render(cam)
        frames.append(1e3 * (time.perf_counter() - t))
    prof = r.profile(cam, repeats=args.repeats)
    frames.sort()
    doc = {"what": f"rlx.splat CPU frame: {N} random Gaussians (SH degree 3, log-scale ~ N(-4, 0.4)) at "
                   f"{WIDTH}x{HEIGHT}, Renderer.render (one replayed schedule, camera in, image out)",
           "date": time.strftime("%Y-%m-%d"),
           "command": f"python benchmarks/test_splat_bench.py --json {args.json} --repeats {args.repeats}",
           "machine": {**lscpu(), "python": platform.python_version(), "rlx_threads": env.num_threads()},
           "compile_s": round(compile_s, 3),
           "frame_ms": {"median": round(frames[len(frames) // 2], 2), "min": round(frames[0], 2),
                        "runs": len(frames)},
           "pairs": frame.pairs, "capacity": r.capacity, "thunks": prof["thunks"],
           "stages_ms_median_run_alone": {k: round(v, 3) for k, v in prof["stages_ms"].items()},
           "note": "stage times: each thunk run alone (Program.run_one, its own command buffer), summed per op; "
                   "their total exceeds the frame by the per-thunk submit cost"}
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "machine"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
