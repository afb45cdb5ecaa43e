"""3D Gaussian Splatting scenes and cameras: the .ply files of the 3DGS
paper's training code, and camera lists (JSON, COLMAP text).

A scene holds, per Gaussian (all float32):
- ``means`` [N, 3]: centres in world space (x, y, z);
- ``scales`` [N, 3]: log standard deviations along the local axes (scale_0..2);
- ``quats`` [N, 4]: rotations (w, x, y, z; rot_0..3), not necessarily unit;
- ``opacities`` [N]: opacity logits (the opacity is their sigmoid);
- ``sh`` [N, K, 3]: spherical-harmonic coefficients, K = (degree + 1)^2
  in {1, 4, 9, 16}; ``sh[:, 0]`` is f_dc_0..2 and ``sh[:, 1 + k, c]`` is
  f_rest_{c * (K - 1) + k} (the file stores f_rest channel-major: all of
  red's K - 1 coefficients, then green's, then blue's).

Files are read with ``plyfile`` (binary little/big endian and ASCII); a file
that is not a PLY, lacks a property, has a count that is not a valid degree
or holds no vertices raises ``rlx.ModelLoadError`` naming what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlx.arg_types import is_integer, is_real
from rlx.errors import InputError, ModelLoadError

SH_COUNTS = {1: 0, 4: 1, 9: 2, 16: 3}   # coefficients per channel -> degree


@dataclass
class Scene:
    means: np.ndarray
    scales: np.ndarray
    quats: np.ndarray
    opacities: np.ndarray
    sh: np.ndarray

    def __post_init__(self) -> None:
        self.means = _f32(self.means, "means")
        self.scales = _f32(self.scales, "scales")
        self.quats = _f32(self.quats, "quats")
        self.opacities = _f32(self.opacities, "opacities")
        self.sh = _f32(self.sh, "sh")
        n = self.means.shape[0] if self.means.ndim == 2 else -1
        want = {"means": (n, 3), "scales": (n, 3), "quats": (n, 4), "opacities": (n,)}
        for name, shape in want.items():
            got = getattr(self, name).shape
            if n < 1 or got != shape:
                raise InputError(f"Scene.{name}: expected shape {shape} (N >= 1 Gaussians), got {got}")
        if self.sh.ndim != 3 or self.sh.shape[0] != n or self.sh.shape[2] != 3 or self.sh.shape[1] not in SH_COUNTS:
            raise InputError(f"Scene.sh: expected [{n}, K, 3] with K in (1, 4, 9, 16), got {self.sh.shape}")

    @property
    def count(self) -> int:
        return int(self.means.shape[0])

    @property
    def sh_degree(self) -> int:
        return SH_COUNTS[self.sh.shape[1]]


def _f32(a, name: str) -> np.ndarray:
    try:
        return np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    except (TypeError, ValueError) as exc:
        raise InputError(f"Scene.{name}: not a float array: {exc}") from None


def read_ply(path: str | Path) -> Scene:
    """A 3DGS scene from a .ply file (see the module docstring)."""
    try:
        from plyfile import PlyData, PlyParseError
    except ImportError as exc:   # a declared dependency; only a broken install lacks it
        raise ModelLoadError(f"reading {path}: the plyfile package is not installed ({exc})") from None
    path = Path(path)
    if not path.is_file():
        raise ModelLoadError(f"{path}: no such file")
    try:
        ply = PlyData.read(str(path))
    except (PlyParseError, ValueError, EOFError, OSError, IndexError, KeyError, TypeError, UnicodeDecodeError,
            MemoryError) as exc:
        raise ModelLoadError(f"{path}: not a readable PLY file ({type(exc).__name__}: {exc})") from None
    names = [e.name for e in ply.elements]
    if "vertex" not in names:
        raise ModelLoadError(f"{path}: no 'vertex' element (elements: {', '.join(names) or 'none'})")
    vertex = ply["vertex"]
    data = vertex.data
    n = len(data)
    if n < 1:
        raise ModelLoadError(f"{path}: the 'vertex' element holds no Gaussians")
    props = set(data.dtype.names or ())
    required = ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1", "scale_2",
                "rot_0", "rot_1", "rot_2", "rot_3"]
    missing = [p for p in required if p not in props]
    if missing:
        raise ModelLoadError(f"{path}: missing vertex properties {', '.join(missing)} (a 3DGS .ply has "
                             f"x, y, z, f_dc_0..2, f_rest_*, opacity, scale_0..2, rot_0..3)")
    rest = sorted((p for p in props if p.startswith("f_rest_")), key=lambda p: _rest_index(path, p))
    m = len(rest)
    if [_rest_index(path, p) for p in rest] != list(range(m)):
        raise ModelLoadError(f"{path}: f_rest_* properties must be numbered 0..{m - 1} without gaps")
    if m % 3 or (m // 3 + 1) not in SH_COUNTS:
        raise ModelLoadError(f"{path}: {m} f_rest_* properties is not 3 * ((d + 1)^2 - 1) for a degree d <= 3 "
                             f"(0, 9, 24 or 45)")

    def col(*ps: str) -> np.ndarray:
        return np.stack([np.asarray(data[p], dtype=np.float32) for p in ps], axis=-1)

    k = m // 3 + 1
    sh = np.zeros((n, k, 3), np.float32)
    sh[:, 0, :] = col("f_dc_0", "f_dc_1", "f_dc_2")
    if m:
        flat = col(*rest).reshape(n, 3, k - 1)          # channel-major in the file
        sh[:, 1:, :] = flat.transpose(0, 2, 1)
    scene = Scene(col("x", "y", "z"), col("scale_0", "scale_1", "scale_2"),
                  col("rot_0", "rot_1", "rot_2", "rot_3"), np.asarray(data["opacity"], np.float32), sh)
    bad = [name for name in ("means", "scales", "quats", "opacities", "sh")
           if not np.isfinite(getattr(scene, name)).all()]
    if bad:
        raise ModelLoadError(f"{path}: non-finite values in {', '.join(bad)}")
    return scene


def _rest_index(path: Path, name: str) -> int:
    tail = name[len("f_rest_"):]
    if not tail.isdigit():
        raise ModelLoadError(f"{path}: bad spherical-harmonic property name {name!r}")
    return int(tail)


def write_ply(path: str | Path, scene: Scene, binary: bool = True) -> None:
    """Write a scene in the 3DGS layout (what read_ply reads; tests and tools)."""
    from plyfile import PlyData, PlyElement

    n, k = scene.count, scene.sh.shape[1]
    fields = ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2",
              *(f"f_rest_{i}" for i in range(3 * (k - 1))), "opacity", "scale_0", "scale_1", "scale_2",
              "rot_0", "rot_1", "rot_2", "rot_3"]
    arr = np.zeros(n, dtype=[(f, "<f4") for f in fields])
    for i, c in enumerate("xyz"):
        arr[c] = scene.means[:, i]
    for c in range(3):
        arr[f"f_dc_{c}"] = scene.sh[:, 0, c]
        for j in range(k - 1):
            arr[f"f_rest_{c * (k - 1) + j}"] = scene.sh[:, 1 + j, c]
    arr["opacity"] = scene.opacities
    for i in range(3):
        arr[f"scale_{i}"] = scene.scales[:, i]
    for i in range(4):
        arr[f"rot_{i}"] = scene.quats[:, i]
    PlyData([PlyElement.describe(arr, "vertex")], text=not binary).write(str(path))


# ---------------------------------------------------------------- cameras


@dataclass
class Camera:
    """A pinhole camera: ``viewmat`` is world-to-camera (4 x 4, camera looks
    down +z, x right, y down: OpenCV / COLMAP), fx, fy, cx, cy in pixels
    (pixel (i, j)'s centre is at (i + 0.5, j + 0.5))."""

    viewmat: np.ndarray
    fx: float
    fy: float
    cx: float
    cy: float
    width: int | None = None
    height: int | None = None
    name: str = ""

    def __post_init__(self) -> None:
        try:
            vm = np.asarray(self.viewmat, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(f"Camera {self.name!r}: viewmat must be a finite 4x4 (or 3x4) matrix of numbers, got "
                             f"{self.viewmat!r:.80}") from None
        if vm.shape == (3, 4):
            vm = np.vstack([vm, [0.0, 0.0, 0.0, 1.0]])
        if vm.shape != (4, 4) or not np.isfinite(vm).all():
            raise InputError(f"Camera {self.name!r}: viewmat must be a finite 4x4 (or 3x4) matrix, got {vm.shape}")
        self.viewmat = vm
        for what in ("fx", "fy", "cx", "cy"):
            v = getattr(self, what)
            if not is_real(v):
                raise InputError(f"Camera {self.name!r}: {what} must be a finite number, got {v!r}")
            setattr(self, what, float(v))
        if self.fx <= 0 or self.fy <= 0:
            raise InputError(f"Camera {self.name!r}: fx and fy must be > 0, got {self.fx}, {self.fy}")

    def packed(self) -> np.ndarray:
        """The renderer's camera input: f32 [20], the viewmat row-major then fx, fy, cx, cy."""
        return np.concatenate([self.viewmat.reshape(-1), [self.fx, self.fy, self.cx, self.cy]]).astype(np.float32)

    @staticmethod
    def look_at(eye, target, up=(0.0, -1.0, 0.0), fx: float = 500.0, fy: float | None = None,
                cx: float = 0.0, cy: float = 0.0, **kw) -> Camera:
        """A camera at ``eye`` looking at ``target`` (``up``: the world direction that appears up)."""
        try:
            eye, target, up = (np.asarray(v, np.float64) for v in (eye, target, up))
        except (TypeError, ValueError):
            raise InputError(f"Camera.look_at: eye, target and up must be 3 numbers each, got {eye!r}, {target!r}, "
                             f"{up!r}") from None
        z = target - eye
        z /= np.linalg.norm(z)
        x = np.cross(-up, z)
        x /= np.linalg.norm(x)
        y = np.cross(z, x)
        r = np.stack([x, y, z])
        vm = np.eye(4)
        vm[:3, :3] = r
        vm[:3, 3] = -r @ eye
        return Camera(vm, fx, fx if fy is None else fy, cx, cy, **kw)


def _camera_from_json(i: int, d: dict, src: str) -> Camera:
    if not isinstance(d, dict):
        raise ModelLoadError(f"{src}: camera {i} is not an object")
    name = str(d.get("name", d.get("img_name", i)))
    try:
        if "viewmat" in d or "world_to_camera" in d:
            vm = np.asarray(d.get("viewmat", d.get("world_to_camera")), np.float64)
        elif "rotation" in d and "position" in d:
            # The 3DGS training code's cameras.json: camera-to-world rotation and the centre.
            r_c2w = np.asarray(d["rotation"], np.float64)
            pos = np.asarray(d["position"], np.float64)
            vm = np.eye(4)
            vm[:3, :3] = r_c2w.T
            vm[:3, 3] = -r_c2w.T @ pos
        else:
            raise ModelLoadError(f"{src}: camera {name!r} has no 'viewmat' (world-to-camera 4x4) nor "
                                 f"'rotation' + 'position'")
        w, h = d.get("width"), d.get("height")
        fx = d["fx"]
        fy = d.get("fy", fx)
        cx = d.get("cx", w / 2 if w is not None else None)
        cy = d.get("cy", h / 2 if h is not None else None)
        if cx is None or cy is None:
            raise ModelLoadError(f"{src}: camera {name!r} needs cx, cy (or width, height)")
        return Camera(vm, fx, fy, cx, cy, int(w) if w is not None else None, int(h) if h is not None else None, name)
    except KeyError as exc:
        raise ModelLoadError(f"{src}: camera {name!r} lacks {exc.args[0]!r}") from None
    except (InputError, TypeError, ValueError, OverflowError) as exc:   # OverflowError: int() of an infinite width
        raise ModelLoadError(f"{src}: camera {name!r}: {exc}") from None


def read_cameras(path: str | Path) -> list[Camera]:
    """Cameras from a JSON list (objects with "viewmat" [4x4 world-to-camera]
    or the 3DGS cameras.json "rotation" [camera-to-world 3x3] + "position";
    "fx", optional "fy", "cx", "cy", "width", "height", "name"), or from a
    COLMAP text model: a folder (or its images.txt) with cameras.txt beside."""
    path = Path(path)
    if path.is_dir() or path.name == "images.txt":
        return _read_colmap(path if path.is_dir() else path.parent)
    if not path.is_file():
        raise ModelLoadError(f"{path}: no such camera file")
    try:
        doc = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"{path}: not JSON ({exc})") from None
    if isinstance(doc, dict):
        doc = doc.get("cameras", [doc])
    if not isinstance(doc, list) or not doc:
        raise ModelLoadError(f"{path}: expected a non-empty list of cameras")
    return [_camera_from_json(i, d, str(path)) for i, d in enumerate(doc)]


def _colmap_lines(path: Path) -> list[list[str]]:
    if not path.is_file():
        raise ModelLoadError(f"{path}: missing (a COLMAP text model has cameras.txt and images.txt)")
    return [ln.split() for ln in path.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _read_colmap(folder: Path) -> list[Camera]:
    intr = {}
    for parts in _colmap_lines(folder / "cameras.txt"):
        try:
            cid, model, w, h, *p = parts
            p = [float(v) for v in p]
            if model in ("PINHOLE",):
                fx, fy, cx, cy = p[:4]
            elif model in ("SIMPLE_PINHOLE", "SIMPLE_RADIAL", "RADIAL"):
                fx = fy = p[0]
                cx, cy = p[1], p[2]
            else:
                raise ModelLoadError(f"{folder}/cameras.txt: camera model {model} is not a pinhole")
            intr[cid] = (fx, fy, cx, cy, int(w), int(h))
        except (ValueError, IndexError):
            raise ModelLoadError(f"{folder}/cameras.txt: malformed line {' '.join(parts)!r}") from None
    cams = []
    lines = _colmap_lines(folder / "images.txt")
    # images.txt alternates a pose line (10+ fields) and a line of 2D points (may be empty, then skipped).
    for parts in lines:
        if len(parts) < 10:
            continue
        try:
            qw, qx, qy, qz, tx, ty, tz = (float(v) for v in parts[1:8])
            cid, name = parts[8], parts[9]
        except ValueError:
            continue   # a points line
        if cid not in intr:
            raise ModelLoadError(f"{folder}/images.txt: image {name} uses unknown camera {cid}")
        fx, fy, cx, cy, w, h = intr[cid]
        vm = np.eye(4)
        vm[:3, :3] = quat_to_rot(np.array([qw, qx, qy, qz]))
        vm[:3, 3] = [tx, ty, tz]
        cams.append(Camera(vm, fx, fy, cx, cy, w, h, name))
    if not cams:
        raise ModelLoadError(f"{folder}/images.txt: no images")
    return cams


def quat_to_rot(q: np.ndarray) -> np.ndarray:
    """Rotation matrices of quaternions (w, x, y, z), normalized first; [..., 4] -> [..., 3, 3] float64."""
    q = np.asarray(q, np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


def random_scene(n: int, seed: int = 0, degree: int = 3, extent: float = 2.0, scale: float = -3.0) -> Scene:
    """n random Gaussians in a cube of half-width ``extent`` around the
    origin (tests and benchmarks)."""
    for what, v, least in (("n", n, 0), ("degree", degree, 0)):
        if not is_integer(v) or v < least:
            raise InputError(f"random_scene: {what} must be an int >= {least}, got {v!r}")
    rng = np.random.default_rng(seed)
    k = (degree + 1) ** 2
    return Scene(means=rng.uniform(-extent, extent, (n, 3)),
                 scales=scale + rng.normal(0.0, 0.4, (n, 3)),
                 quats=rng.normal(size=(n, 4)),
                 opacities=rng.normal(0.5, 1.5, n),
                 sh=np.concatenate([rng.normal(0.0, 0.8, (n, 1, 3)), rng.normal(0.0, 0.15, (n, k - 1, 3))], 1))
