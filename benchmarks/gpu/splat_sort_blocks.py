"""Device by hand (issue 21): the splat frame at 1M Gaussians, 1920x1080, as
the sort's rows per group (rlx/lowering/sort.py ROWS_PER_BLOCK: the chunk
one group of a pass histograms and scatters) changes: the RGB-only frame
(Renderer.render, median of 10) and the stages (Renderer.profile), a JSON
line per setting.

Run: PYTHONPATH=$PWD python3 benchmarks/gpu/splat_sort_blocks.py [ROWS ...]"""

from __future__ import annotations

import json
import statistics
import sys
import time

from splat_cuda import HEIGHT, WIDTH, _camera  # benchmarks/gpu/splat_cuda.py (the script's own folder)

from rlx.lowering import sort as lowering_sort
from rlx.splat import Renderer, random_scene


def main(settings: list[int]) -> None:
    scene = random_scene(1_000_000, seed=0, degree=3, scale=-4.0)
    cam = _camera(WIDTH, HEIGHT)
    for rows in settings:
        lowering_sort.ROWS_PER_BLOCK = rows
        r = Renderer(scene, WIDTH, HEIGHT, device="cuda", depth_and_alpha=False)
        r.render(cam)
        times = []
        for _ in range(10):
            t = time.perf_counter()
            r.render(cam)
            times.append(time.perf_counter() - t)
        prof = r.profile(cam, repeats=5)
        print(json.dumps({"rows_per_block": rows, "rgb_frame_ms": 1e3 * statistics.median(times),
                          "stages_ms": {k: round(v, 3) for k, v in prof["stages_ms"].items()},
                          "pairs": prof["pairs"], "thunks": prof["thunks"]}), flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [2048, 4096, 8192, 16384])
