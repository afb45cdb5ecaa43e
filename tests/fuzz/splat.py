"""Random splat frames: rlx.splat.Renderer on the device under test against
the float64 reference of the same algorithm (rlx/reference/splat.py).

``splat_case(seed)`` is a pure function of its seed: a scene (1 to 1,000
Gaussians, SH degree 0-3, spread, scale and opacity drawn per scene;
needle-thin and flat Gaussians, unnormalized, tiny and axis-aligned
quaternions, duplicated means, so equal depths), an image of 1-299 x
1-199 pixels, a background, max_alpha, a capacity (1 and 64 make the
renderer re-plan), the scene stored in f32 or f16, the rgb-only raster
(``depth_and_alpha=False``) or all five channels, and two cameras
(inside or outside the scene, off-centre principal points, unequal focal
lengths, tilted up vectors) rendered by the one compiled schedule.

Tolerance (tests/ops/test_splat.py's): PSNR >= 60 dB over r, g, b and
alpha, and over depth relative to the frame's largest depth. An f16 scene
is compared with the reference of its f16-rounded values.

The first fuzz run found needle-thin Gaussians at 42-49 dB: a c - b^2 and
the expanded conic cancelled in f32; shaders/splat.h now forms both
without cancellation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlx.reference import splat as ref
from rlx.splat import Camera, Renderer, Scene

from .ops import repro_command

PSNR_MIN = 60.0
FIELDS = ("means", "scales", "quats", "opacities", "sh")


@dataclass
class SplatCase:
    seed: int
    scene: Scene
    width: int
    height: int
    background: tuple[float, float, float]
    max_alpha: float
    capacity: int
    scene_dtype: str
    depth_and_alpha: bool
    cameras: list[Camera] = field(default_factory=list)

    def describe(self) -> str:
        return (f"{self.scene.count} Gaussians (SH degree {self.scene.sh_degree}, {self.scene_dtype}), "
                f"{self.width} x {self.height}, background {self.background}, max_alpha {self.max_alpha}, "
                f"capacity {self.capacity}" + ("" if self.depth_and_alpha else ", rgb only"))

    def command(self) -> str:
        return repro_command("splat", self.seed)


def _scene(rng: np.random.Generator) -> Scene:
    n = int(rng.choice([1, 2, 3, 7, 31, 100, 257, 1000]))
    k = (int(rng.integers(0, 4)) + 1) ** 2
    extent = float(rng.choice([0.5, 2.0, 6.0]))
    means = rng.uniform(-extent, extent, (n, 3))
    scales = float(rng.choice([-6.0, -3.0, -1.5, 0.0])) + rng.normal(0.0, float(rng.choice([0.1, 0.5, 2.0])), (n, 3))
    quats = rng.normal(size=(n, 4))
    shape = int(rng.integers(0, 6))
    if shape == 0:     # flat or needle-thin: one axis 1e-2 to 6e-6 of the others, another maybe 20x longer
        scales[:, rng.integers(0, 3)] -= float(rng.choice([4.0, 8.0, 12.0]))
        if rng.random() < 0.5:
            scales[:, rng.integers(0, 3)] += 3.0
    elif shape == 1:   # axis-aligned, unnormalized
        quats = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1)) * rng.uniform(0.01, 100.0, (n, 1))
    elif shape == 2:   # tiny norms
        quats *= 1e-3
    opacities = rng.normal(float(rng.choice([-3.0, 0.5, 4.0])), float(rng.choice([0.5, 3.0])), n)
    sh = np.concatenate([rng.normal(0.0, 0.8, (n, 1, 3)), rng.normal(0.0, 0.3, (n, k - 1, 3))], 1)
    if rng.random() < 0.2:   # duplicated means: equal depths, other shapes and colours
        means[n // 2:] = means[:n - n // 2]
    return Scene(means, scales, quats, opacities, sh)


def _camera(rng: np.random.Generator, width: int, height: int) -> Camera:
    eye = rng.normal(0.0, 1.0, 3)
    eye *= float(rng.choice([0.5, 3.0, 8.0])) / np.linalg.norm(eye)
    target = rng.normal(0.0, 0.5, 3)
    f = float(rng.choice([0.3, 0.9, 3.0])) * max(width, height)
    fy = f * float(rng.choice([1.0, 0.5, 2.0]))
    cx, cy = width / 2 + rng.normal(0.0, width / 4), height / 2 + rng.normal(0.0, height / 4)
    up = (0.0, -1.0, 0.0) if rng.random() < 0.7 else tuple(rng.normal(size=3))
    return Camera.look_at(eye, target, up=up, fx=f, fy=fy, cx=cx, cy=cy)


def splat_case(seed: int) -> SplatCase:
    rng = np.random.default_rng([seed, 11])
    width, height = int(rng.integers(1, 300)), int(rng.integers(1, 200))
    scene = _scene(rng)
    background = tuple(float(c) for c in rng.uniform(0.0, 1.0, 3)) if rng.random() < 0.5 else (0.0, 0.0, 0.0)
    case = SplatCase(seed, scene, width, height, background, float(rng.choice([0.99, 0.5, 0.999])),
                     int(rng.choice([1, 64, 100_000])), "f16" if rng.random() < 0.25 else "f32",
                     bool(rng.random() < 0.8))
    case.cameras = [_camera(rng, width, height) for _ in range(2)]
    return case


def check_splat_case(case: SplatCase) -> list[str]:
    """The failures (empty: passed) of each camera's frame against the reference."""
    r = Renderer(case.scene, case.width, case.height, background=case.background, max_alpha=case.max_alpha,
                 capacity=case.capacity, scene_dtype=case.scene_dtype, depth_and_alpha=case.depth_and_alpha)
    scene = case.scene
    if case.scene_dtype == "f16":
        scene = Scene(*(getattr(scene, name).astype(np.float16) for name in FIELDS))
    failures = []
    for i, cam in enumerate(case.cameras):
        frame = r.render(cam)
        want = ref.render(scene, cam, case.width, case.height, case.background, case.max_alpha)
        if not case.depth_and_alpha:   # the rgb-only raster
            colour = depth = ref.psnr(frame.rgb, want[..., :3])
        else:
            colour = ref.psnr(np.concatenate([frame.rgb, frame.alpha[..., None]], -1),
                              np.concatenate([want[..., :3], want[..., 4:5]], -1))
            zmax = max(float(np.abs(want[..., 3]).max()), 1e-6)
            depth = ref.psnr(frame.depth / zmax, want[..., 3] / zmax)
        if min(colour, depth) < PSNR_MIN:
            failures.append(f"splat frame seed {case.seed}, camera {i}: PSNR rgb+alpha {colour:.1f} dB, depth "
                            f"{depth:.1f} dB (bound {PSNR_MIN}); {case.describe()}; re-run: {case.command()}")
    return failures
