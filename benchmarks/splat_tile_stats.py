"""How many tiles the splat projection and binning test a Gaussian, on the
GPU benchmark's scene (benchmarks/gpu/splat_vs_gsplat.py: random, SH
degree 3, log-scales around -4, 1920 x 1080), from the float64
reference's records (rlx/reference/splat.py): the 3-sigma rectangle's
tiles, the rectangle the kernels walk (cut to the box of the ellipse
q <= reach), the pairs, and the warp divergence of the tile loops (32
consecutive threads wait on their largest rectangle: the loop's
iterations over the tiles its lanes need) in index order (projection)
and depth order (binning).

Run:  python benchmarks/splat_tile_stats.py [N]   (N = 1000000 by default)
"""

from __future__ import annotations

import json
import sys

import numpy as np
from test_splat_bench import bench_camera  # benchmarks/ (the script's own folder)

from rlx.reference import splat as ref
from rlx.splat import random_scene

WIDTH, HEIGHT = 1920, 1080


def _warp_waste(tiles: np.ndarray) -> float:
    m = len(tiles) // 32 * 32
    w = tiles[:m].reshape(-1, 32)
    return float(w.max(1).sum() * 32 / max(w.sum(), 1))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    s = random_scene(n, seed=0, degree=3, scale=-4.0)
    cam = bench_camera(WIDTH, HEIGHT)
    rec = ref.project(s.means, s.scales, s.quats, s.opacities, s.sh, cam.packed(), WIDTH, HEIGHT)
    drawn = rec[:, ref.TILES] > 0
    gx, gy = ref.tile_grid(WIDTH, HEIGHT)
    u, v, r = rec[:, ref.U], rec[:, ref.V], rec[:, ref.RADIUS]
    sigma3 = ((np.clip(np.floor((u + r) / 16) + 1, 0, gx) - np.clip(np.floor((u - r) / 16), 0, gx))
              * (np.clip(np.floor((v + r) / 16) + 1, 0, gy) - np.clip(np.floor((v - r) / 16), 0, gy)))
    walked = (rec[:, ref.XMAX] - rec[:, ref.XMIN]) * (rec[:, ref.YMAX] - rec[:, ref.YMIN])
    sigma3, walked = np.where(drawn, sigma3, 0), np.where(drawn, walked, 0)
    order = np.argsort(np.where(drawn, rec[:, ref.DEPTH], np.inf), kind="stable")
    out = {
        "gaussians": n, "drawn": int(drawn.sum()), "pairs": int(rec[:, ref.TILES].sum()),
        "tiles_a_drawn_gaussian": {"sigma3_rectangle": float(sigma3[drawn].mean()),
                                   "walked_rectangle": float(walked[drawn].mean()),
                                   "pairs": float(rec[drawn, ref.TILES].mean())},
        "walked_rectangle_percentiles_50_90_99_max": np.percentile(walked[drawn], [50, 90, 99, 100]).tolist(),
        "warp_iterations_over_needed": {
            "project_sigma3": _warp_waste(sigma3), "project_walked": _warp_waste(walked),
            "bin_sigma3": _warp_waste(sigma3[order]), "bin_walked": _warp_waste(walked[order])},
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
