"""H200 by hand (issue 21): rlx.splat against gsplat (its CUDA rasterizer,
built on the device from the PyPI wheel by its own JIT step) on the same
random scenes (SH degree 3) and camera at 1920x1080: PSNR between the two
RGB images and frame times, 100k and 1M Gaussians.

gsplat is called as the 3DGS forward pass: quaternions as stored (it
normalizes them), exp(log scales), sigmoid(opacity logits), the SH
coefficients with sh_degree 3, near plane 0.2 (rlx's), eps2d 0.3, 16-pixel
tiles, classic rasterization, black background. Conventions that differ:
gsplat clamps alpha at 0.999 where rlx (the 3DGS paper) clamps at 0.99; where
rlx's Renderer takes ``max_alpha``, the comparison runs with 0.999 too.

Timing, median of REPEATS after a warm-up, each side's wall time around one
frame with the device synchronized: rlx ``Renderer.render`` (camera in, the
[H, W, 5] f32 image copied to the host; and, where the Renderer has it,
``depth_and_alpha=False``: the [H, W, 3] RGB image); gsplat
``rasterization`` (image left on the device; and again with the RGB image
copied to the host). Then each with the image left on the device: rlx's
RGB-only schedule replayed with no input or output copies
(benchmarks/gpu/cuda_timing.py ``bare_replay``: the frame's kernels over
the executable's own arena, camera included), wall time around a
synchronized run and the shim's device time; gsplat's frame between two
CUDA events on its stream.

Run: PYTHONPATH=$PWD python3 benchmarks/gpu/splat_vs_gsplat.py OUT.json"""

from __future__ import annotations

import inspect
import json
import statistics
import sys
import time
import traceback

import numpy as np
import torch
from cuda_timing import bare_replay, events_ms, replay_ms  # benchmarks/gpu/ (the script's own folder)
from splat_cuda import HEIGHT, WIDTH, _camera, _psnr

from rlx.splat import Camera, Renderer, random_scene

REPEATS = 10


def _median_ms(fn) -> float:
    fn()
    times = []
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def _gsplat_frame(scene, cam: Camera, width: int, height: int):
    """A closure rendering one gsplat frame (RGB [H, W, 3] and alpha on the device)."""
    from gsplat import rasterization

    dev = torch.device("cuda")
    means = torch.tensor(scene.means, device=dev)
    quats = torch.tensor(scene.quats, device=dev)
    scales = torch.exp(torch.tensor(scene.scales, device=dev))
    opac = torch.sigmoid(torch.tensor(scene.opacities, device=dev))
    sh = torch.tensor(scene.sh, device=dev)
    viewmat = torch.tensor(cam.viewmat, dtype=torch.float32, device=dev)[None]
    ks = torch.tensor([[cam.fx, 0.0, cam.cx], [0.0, cam.fy, cam.cy], [0.0, 0.0, 1.0]], dtype=torch.float32,
                      device=dev)[None]
    degree = int(round(np.sqrt(scene.sh.shape[1]))) - 1

    def frame():
        colors, alphas, _ = rasterization(means, quats, scales, opac, sh, viewmat, ks, width, height,
                                          near_plane=0.2, far_plane=1e10, eps2d=0.3, sh_degree=degree,
                                          packed=False, tile_size=16, render_mode="RGB",
                                          rasterize_mode="classic")
        return colors[0], alphas[0]
    return frame


def _compare(n: int, width: int, height: int, timed: bool) -> dict:
    scene = random_scene(n, seed=0, degree=3, scale=-4.0)
    cam = _camera(width, height)
    row: dict = {"gaussians": n, "width": width, "height": height}
    gs = _gsplat_frame(scene, cam, width, height)
    with torch.no_grad():
        g_rgb, g_alpha = gs()
        g_rgb, g_alpha = g_rgb.cpu().numpy(), g_alpha[..., 0].cpu().numpy()
        if timed:
            row["gsplat_frame_ms_device"] = _median_ms(gs)
            row["gsplat_frame_ms_with_rgb_to_host"] = _median_ms(lambda: gs()[0].cpu())
            row["gsplat_frame_events_ms"] = events_ms(gs, REPEATS, warmup=1)
    alphas = [0.99]
    if "max_alpha" in inspect.signature(Renderer).parameters:
        alphas.append(0.999)
    for max_alpha in alphas:
        kw = {} if max_alpha == 0.99 else {"max_alpha": max_alpha}
        r = Renderer(scene, width, height, device="cuda", **kw)
        f = r.render(cam)
        key = f"max_alpha_{max_alpha}"
        row[key] = {"psnr_rgb_db_vs_gsplat": _psnr(f.rgb, g_rgb), "psnr_alpha_db_vs_gsplat": _psnr(f.alpha, g_alpha),
                    "max_abs_rgb": float(np.abs(f.rgb - g_rgb).max()), "pairs": f.pairs}
        if timed and max_alpha == 0.99:
            row["rlx_frame_ms"] = _median_ms(lambda r=r: r.render(cam))
            row["rlx_over_gsplat_device"] = row["rlx_frame_ms"] / row["gsplat_frame_ms_device"]
            row["rlx_over_gsplat_with_rgb_to_host"] = row["rlx_frame_ms"] / row["gsplat_frame_ms_with_rgb_to_host"]
            prof = r.profile(cam, repeats=5)
            row["rlx_stages_ms"] = prof["stages_ms"]
            if "depth_and_alpha" in inspect.signature(Renderer).parameters:   # RGB only: gsplat's own output
                rgb = Renderer(scene, width, height, device="cuda", depth_and_alpha=False)
                row["rlx_rgb_only_frame_ms"] = _median_ms(lambda rgb=rgb: rgb.render(cam))
                row["rlx_rgb_only_over_gsplat_with_rgb_to_host"] = (row["rlx_rgb_only_frame_ms"]
                                                                    / row["gsplat_frame_ms_with_rgb_to_host"])
                try:   # the image left on the device, as gsplat's
                    bare = bare_replay(rgb.exe)
                    row["rlx_rgb_only_device_frame_ms"] = _median_ms(lambda bare=bare: bare.run([], []))
                    row["rlx_rgb_only_device_events_ms"] = replay_ms(bare)
                    row["rlx_on_device_over_gsplat_device"] = (row["rlx_rgb_only_device_frame_ms"]
                                                               / row["gsplat_frame_ms_device"])
                except Exception:
                    row["rlx_on_device_error"] = traceback.format_exc()[-1500:]
    return row


def main(out_path: str) -> None:
    import gsplat

    result = {"what": __doc__.splitlines()[0], "command": "PYTHONPATH=$PWD python3 benchmarks/gpu/splat_vs_gsplat.py "
              "OUT.json (gsplat wheel carried in .gpu_carry, built by its JIT on the device)",
              "gsplat": getattr(gsplat, "__version__", "?"), "torch": torch.__version__,
              "gpu": torch.cuda.get_device_name(), "rows": []}
    cases = [(20_000, 640, 360, False), (100_000, WIDTH, HEIGHT, True), (1_000_000, WIDTH, HEIGHT, True)]
    for n, w, h, timed in cases:
        try:
            row = _compare(n, w, h, timed)
        except Exception:
            row = {"gaussians": n, "error": traceback.format_exc()[-2000:]}
        result["rows"].append(row)
        print(json.dumps(row), flush=True)
    json.dump(result, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
