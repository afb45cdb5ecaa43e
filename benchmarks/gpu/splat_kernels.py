"""Where an rlx.splat frame spends its GPU time (issue 21): the kernels'
own durations (CUPTI, through torch.profiler) while the RGB-only frame's
schedule is replayed with no copies (cuda_timing.bare_replay), at 1920 x
1080 for 100k and 1M random Gaussians (the scenes and camera of
splat_vs_gsplat.py). A development aid: it names the kernels to work on;
the ratio against gsplat is splat_vs_gsplat.py's.

Run: PYTHONPATH=$PWD python3 benchmarks/gpu/splat_kernels.py OUT.json
Under Nsight Compute: ... splat_kernels.py --frames N (N frames of the 1M
scene, nothing timed or written)."""

from __future__ import annotations

import json
import sys

from cuda_timing import bare_replay, kernel_table, replay_ms  # benchmarks/gpu/ (the script's own folder)
from splat_cuda import HEIGHT, WIDTH, _camera

from rlx.splat import Renderer, random_scene


def frames(count: int) -> None:
    """`count` RGB-only frames of the 1M scene: the kernels for a profiler to see."""
    r = Renderer(random_scene(1_000_000, seed=0, degree=3, scale=-4.0), WIDTH, HEIGHT, device="cuda",
                 depth_and_alpha=False)
    for _ in range(count):
        r.render(_camera(WIDTH, HEIGHT))


def main(out_path: str) -> None:
    rows = []
    for n in (100_000, 1_000_000):
        scene = random_scene(n, seed=0, degree=3, scale=-4.0)
        r = Renderer(scene, WIDTH, HEIGHT, device="cuda", depth_and_alpha=False)
        frame = r.render(_camera(WIDTH, HEIGHT))
        bare = bare_replay(r.exe)
        row = {"gaussians": n, "pairs": frame.pairs, "device_frame_ms": replay_ms(bare),
               "kernels": kernel_table(lambda bare=bare: bare.run([], []), runs=20, top=40)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(out_path, "w") as f:
        json.dump({"what": __doc__.splitlines()[0], "command": "PYTHONPATH=$PWD python3 "
                   "benchmarks/gpu/splat_kernels.py OUT.json", "rows": rows}, f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--frames":
        frames(int(sys.argv[2]))
    else:
        main(sys.argv[1])
