"""The splat renderer: one graph per (scene size, image size, capacity),
compiled once; ``render`` runs it per camera.

The graph (rlx/ir/ops/splat.py, rlx/ir/ops/sort.py):
    records = splat_project(means, scales, quats, opacities, sh, camera)
    order   = sort_by_key(splat_depth_keys(records), keys=1)  # [N, 2]: depth key, index; by depth
    offsets = splat_offsets(records, order)       # [N + 1] in depth order, offsets[N]: pairs this frame
    pairs   = splat_bin(records, order, offsets)  # [capacity, 2]: tile, index; in depth order
    sorted  = sort_by_key(pairs, offsets[N:], keys=1, bits=tile bits)  # by tile, stably
    ranges  = splat_ranges(sorted, offsets[N:])
    image   = splat_raster(records, sorted, ranges; max_alpha)
Both sorts are stable, so the pairs end up in (tile, depth, index) order
while the big sort (N * tiles pairs) only sorts the ~13 tile bits (two
8-bit passes over two-word rows) and the 32-bit depth keys are sorted once
per Gaussian.
The scene is the executable's resident params; the camera is its one
input. The number of pairs is computed on the device and returned with the
image: when a frame needs more than the capacity, the renderer re-plans
(compiles again with room for twice the pairs) and renders the frame again,
or raises ``rlx.CapacityError`` when ``auto_grow=False``.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlx.api import compile as rlx_compile
from rlx.arg_types import is_integer
from rlx.errors import CapacityError, InputError
from rlx.ir import Graph
from rlx.ir.ops.splat import MAX_ALPHA, TILE, check_max_alpha, tiles_of
from rlx.splat.scene import Camera, Scene

MIN_CAPACITY = 1 << 16


@dataclass
class Frame:
    rgb: np.ndarray             # [H, W, 3]
    depth: np.ndarray | None    # [H, W]: sum of depth * weight (not normalized by alpha); None: not rendered
    alpha: np.ndarray | None    # [H, W]: 1 - final transmittance; None: not rendered
    pairs: int                  # (tile, Gaussian) pairs this frame binned


def build_graph(n: int, sh_k: int, width: int, height: int, capacity: int,
                background: Sequence[float] = (0.0, 0.0, 0.0), dtype: str = "f32", image_dtype: str = "f32",
                max_alpha: float = MAX_ALPHA, depth_and_alpha: bool = True) -> Graph:
    """The renderer's graph: params means, scales, quats, opacities, sh (of
    ``dtype``: f32, or f16 to halve a large scene's memory; computed in f32);
    input camera f32 [20]; outputs image [H, W, 5] (r, g, b, depth, alpha;
    [H, W, 3] without ``depth_and_alpha``; ``image_dtype``) and pairs i32
    [1]. ``max_alpha``: the clamp of each Gaussian's alpha."""
    g = Graph()
    means = g.param("means", (n, 3), dtype)
    scales = g.param("scales", (n, 3), dtype)
    quats = g.param("quats", (n, 4), dtype)
    opac = g.param("opacities", (n,), dtype)
    sh = g.param("sh", (n, sh_k, 3), dtype)
    cam = g.input("camera", (20,), "f32")
    rec = g.op("splat_project", [means, scales, quats, opac, sh, cam], width=width, height=height)
    order = g.op("sort_by_key", [g.op("splat_depth_keys", [rec])], keys=1, bits=32)
    offs = g.op("splat_offsets", [rec, order])
    total = g.narrow(offs, 0, n, 1)
    pairs = g.op("splat_bin", [rec, order, offs], capacity=capacity, width=width, height=height)
    tile_bits = max(1, (tiles_of(width, height) - 1).bit_length())
    srt = g.op("sort_by_key", [pairs, total], keys=1, bits=tile_bits)
    ranges = g.op("splat_ranges", [srt, total], width=width, height=height)
    img = g.op("splat_raster", [rec, srt, ranges], width=width, height=height,
               background=tuple(float(v) for v in background), dtype=image_dtype, max_alpha=max_alpha,
               channels=5 if depth_and_alpha else 3)
    g.set_outputs(image=img, pairs=total)
    return g


class Renderer:
    """Renders ``scene`` at width x height on ``device`` ("cpu", "cuda",
    "metal"; default as rlx.compile). ``capacity``: room for (tile,
    Gaussian) pairs (default max(2^16, 8 N)); ``auto_grow``: re-plan when a
    frame needs more (else CapacityError); ``scene_dtype``: "f32" or "f16"
    (the scene held in half precision on the device, computed in f32);
    ``max_alpha``: the clamp of each Gaussian's alpha, in (0, 1) (0.99 as
    in the 3DGS paper; gsplat uses 0.999); ``depth_and_alpha=False``: the
    frame's RGB only (``Frame.depth`` and ``alpha`` None), three fifths of
    the image's bytes to copy back: at 1920 x 1080 the five-channel f32
    image is 41 MB, whose copy to the host took most of an H200 frame."""

    def __init__(self, scene: Scene, width: int, height: int, device: str | None = None, *,
                 background: Sequence[float] = (0.0, 0.0, 0.0), capacity: int | None = None,
                 auto_grow: bool = True, scene_dtype: str = "f32", max_alpha: float = MAX_ALPHA,
                 depth_and_alpha: bool = True) -> None:
        if not isinstance(scene, Scene):
            raise InputError(f"Renderer: scene must be an rlx.splat.Scene, got {type(scene).__name__}")
        for what, v in (("width", width), ("height", height)):
            if not is_integer(v) or not 1 <= v <= 16384:
                raise InputError(f"Renderer: {what} must be an int in [1, 16384], got {v!r}")
        bg = _floats(background)
        if bg is None or bg.shape != (3,) or not np.isfinite(bg).all():
            raise InputError(f"Renderer: background must be 3 finite numbers, got {background!r}")
        self.scene, self.width, self.height, self.device = scene, int(width), int(height), device
        self.background = tuple(float(c) for c in bg)
        if capacity is not None and not is_integer(capacity):
            raise InputError(f"Renderer: capacity must be an int or None, got {capacity!r}")
        self.capacity = int(capacity) if capacity is not None else max(MIN_CAPACITY, 8 * scene.count)
        if self.capacity < 1:
            raise InputError(f"Renderer: capacity must be >= 1, got {capacity!r}")
        self.auto_grow = bool(auto_grow)
        if scene_dtype not in ("f32", "f16"):
            raise InputError(f"Renderer: scene_dtype must be 'f32' or 'f16', got {scene_dtype!r}")
        self.scene_dtype = scene_dtype
        self.max_alpha = check_max_alpha("Renderer", max_alpha)
        if not isinstance(depth_and_alpha, (bool, np.bool_)):
            raise InputError(f"Renderer: depth_and_alpha must be True or False, got {depth_and_alpha!r}")
        self.depth_and_alpha = bool(depth_and_alpha)
        self.replans = 0
        self._compile()

    @property
    def tiles(self) -> tuple[int, int]:
        return -(-self.width // TILE), -(-self.height // TILE)

    def _compile(self) -> None:
        s = self.scene
        g = build_graph(s.count, s.sh.shape[1], self.width, self.height, self.capacity, self.background,
                        dtype=self.scene_dtype, max_alpha=self.max_alpha, depth_and_alpha=self.depth_and_alpha)
        np_dtype = np.float16 if self.scene_dtype == "f16" else np.float32
        self.exe = rlx_compile(g, device=self.device, params={
            name: getattr(s, name).astype(np_dtype) for name in ("means", "scales", "quats", "opacities", "sh")})

    @staticmethod
    def camera_input(camera: Camera | np.ndarray) -> np.ndarray:
        if isinstance(camera, Camera):
            return camera.packed()
        cam = _floats(camera)
        if cam is None or cam.shape != (20,) or not np.isfinite(cam).all():
            raise InputError(f"render: camera must be an rlx.splat.Camera or a finite f32 [20] "
                             f"(viewmat row-major, fx, fy, cx, cy), got {camera!r:.80}")
        return cam

    def render(self, camera: Camera | np.ndarray) -> Frame:
        """One frame: one run of the compiled schedule (two, plus a compile,
        when the frame outgrew the capacity and auto_grow is on)."""
        cam = self.camera_input(camera)
        out = self.exe.run(camera=cam)
        pairs = int(out["pairs"][0])
        if pairs > self.capacity:
            if not self.auto_grow:
                raise CapacityError(f"splat frame needs {pairs} (tile, Gaussian) pairs, the renderer was "
                                    f"compiled for {self.capacity} (pass a larger capacity or auto_grow=True)")
            self.capacity = max(2 * self.capacity, int(pairs * 1.25) + 1)
            self.replans += 1
            self._compile()
            out = self.exe.run(camera=cam)
            pairs = int(out["pairs"][0])
        img = out["image"]
        if not self.depth_and_alpha:
            return Frame(rgb=img, depth=None, alpha=None, pairs=pairs)
        return Frame(rgb=img[..., :3], depth=img[..., 3], alpha=img[..., 4], pairs=pairs)

    def profile(self, camera: Camera | np.ndarray, repeats: int = 5) -> dict:
        """Where a frame's time goes: the whole run (median of ``repeats``),
        and each stage's thunks run one at a time, in schedule order, over
        the frame's own buffers (Program.run_one), summed per op."""
        cam = self.camera_input(camera)
        self.render(cam)   # warm, and re-plan first if needed
        frame = []
        for _ in range(repeats):
            s = time.perf_counter()
            self.exe.run(camera=cam)
            frame.append(time.perf_counter() - s)
        program = self.exe.program
        per: dict[str, list[float]] = {}
        for _ in range(repeats):
            acc: dict[str, float] = {}
            for i, t in enumerate(self.exe.thunks):
                s = time.perf_counter()
                program.run_one(i)
                acc[_stage(t.label, t.kernel)] = acc.get(_stage(t.label, t.kernel), 0.0) + time.perf_counter() - s
            for k, v in acc.items():
                per.setdefault(k, []).append(v)
        return {"frame_ms": 1e3 * statistics.median(frame),
                "stages_ms": {k: 1e3 * statistics.median(v) for k, v in per.items()},
                "pairs": int(self.exe.run(camera=cam)["pairs"][0]), "capacity": self.capacity,
                "thunks": len(self.exe.thunks)}


def _floats(value: object) -> np.ndarray | None:
    """``value`` as a float32 array, or None where numpy cannot read it as numbers."""
    try:
        return np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        return None


def _stage(label: str, kernel: str | None) -> str:
    """The profile's stage of a thunk: its op; the depth sort (sort_by_key
    of the keys alone, no count) apart from the sort of the pairs."""
    k = kernel or "gemm"
    if k.startswith("splat_order_tiles") or (k.startswith("scan_") and "splat_offsets" in label):
        return "splat_offsets"
    for op in ("splat_project", "splat_depth_keys", "splat_bin", "splat_ranges", "splat_raster"):
        if k.startswith(op):
            return op
    if k.startswith(("sort_", "scan_")):
        return "sort_by_key (depth)" if re.search(r"= sort_by_key\(%\d+\)", label) else "sort_by_key"
    return k
