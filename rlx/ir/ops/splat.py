"""The splat family: the stages of a 3D Gaussian Splatting forward
renderer (rlx.splat builds the graph; rlx/reference/splat.py states the
algorithm and its conventions).

splat_project(means [N,3], scales [N,3], quats [N,4], opacities [N],
  sh [N,K,3] (the scene: all f32 or all f16), camera f32 [20]; width,
  height) -> f32 [N, 16]: one record per
  Gaussian (u, v, depth, conic a b c, opacity, r g b, radius, tiles
  touched, tile rectangle xmin ymin xmax ymax); culled rows are zero.
  camera: the world-to-camera 4x4 row-major, then fx, fy, cx, cy.
splat_depth_keys(records [N,16]) -> i32 [N, 2]: (depth key, index) rows,
  the depth key the f32 bits of the (positive) depth, 0xFFFFFFFF for a
  culled Gaussian; sort_by_key(keys=1) of them, a stable sort, is the
  depth order (ties by index), "order" below.
splat_offsets(records [N,16], order [N,2]) -> i32 [N+1]: exclusive prefix
  sum of the tiles touched, Gaussian by Gaussian in depth order; the last
  element is the number of (tile, Gaussian) pairs (saturating at 2^31 - 1).
splat_bin(records, order, offsets; capacity, width, height) -> i32
  [capacity, 2]: (tile, Gaussian) rows in depth order, each Gaussian's
  tiles row-major; pairs past capacity are dropped (the caller compares
  offsets[N] with capacity); rows past the total are unspecified. A stable
  sort by tile alone orders them by (tile, depth, index).
splat_ranges(sorted pairs [capacity,2], count i32 [1]; width, height) ->
  i32 [tiles, 2]: each tile's [start, end) in the sorted pairs.
splat_raster(records, sorted pairs, ranges; width, height, background,
  max_alpha, channels) -> f32 (or dtype="f16") [height, width, channels]:
  r, g, b, depth, alpha (channels 5, the default) or r, g, b (channels 3:
  two fifths fewer bytes to read back when depth and alpha are not
  wanted). max_alpha in (0, 1): each Gaussian's alpha is clamped to it
  (the 3DGS paper's 0.99 by default; gsplat uses 0.999).
"""

from __future__ import annotations

from rlx.arg_types import is_real
from rlx.errors import DTypeError, GraphError, InputError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _MISSING, _attrs, _int, _number, _reg

RECORD = 16
TILE = 16
PAIR = 2          # words per (tile, Gaussian) pair
MAX_ALPHA = 0.99  # the 3DGS paper's clamp of alpha
SH_COUNTS = (1, 4, 9, 16)


def _size(op: str, attrs: dict) -> tuple[int, int]:
    w = attrs["width"] = _int(op, "width", attrs["width"])
    h = attrs["height"] = _int(op, "height", attrs["height"])
    if not (1 <= w <= 16384 and 1 <= h <= 16384):
        raise ShapeError(f"{op}: width and height must be in [1, 16384], got {w} x {h}")
    return w, h


def tiles_of(width: int, height: int) -> int:
    return -(-width // TILE) * -(-height // TILE)


def _records(op: str, t: TensorType) -> int:
    if t.dtype.name != "f32" or t.rank != 2 or t.shape[1] != RECORD:
        raise ShapeError(f"{op}: records must be f32[N, {RECORD}], got {t}")
    return t.shape[0]


def _pairs(op: str, t: TensorType) -> int:
    if t.dtype.name != "i32" or t.rank != 2 or t.shape[1] != PAIR:
        raise ShapeError(f"{op}: pairs must be i32[capacity, {PAIR}], got {t}")
    return t.shape[0]


def _order(op: str, t: TensorType, n: int) -> None:
    if t.dtype.name != "i32" or tuple(t.shape) != (n, 2):
        raise ShapeError(f"{op}: order must be i32[{n}, 2] (depth-sorted splat_depth_keys), got {t}")


def _infer_project(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("splat_project", attrs, {"width": _MISSING, "height": _MISSING})
    _size("splat_project", attrs)
    means, scales, quats, opac, sh, cam = types
    for name, t in zip(("means", "scales", "quats", "opacities", "sh", "camera"), types, strict=True):
        want_dtype = "f32" if name == "camera" else means.dtype.name
        if t.dtype.name != want_dtype or want_dtype not in ("f32", "f16"):
            raise DTypeError(f"splat_project: {name} must be {want_dtype} (the scene all f32 or all f16, "
                             f"the camera f32), got {t}")
    n = means.shape[0] if means.rank == 2 else 0
    want = {"means": (means, (n, 3)), "scales": (scales, (n, 3)), "quats": (quats, (n, 4)),
            "opacities": (opac, (n,)), "camera": (cam, (20,))}
    for name, (t, shape) in want.items():
        if n < 1 or tuple(t.shape) != shape:
            raise ShapeError(f"splat_project: {name} must be {list(shape)} (N >= 1), got {t}")
    if sh.rank != 3 or sh.shape[0] != n or sh.shape[2] != 3 or sh.shape[1] not in SH_COUNTS:
        raise ShapeError(f"splat_project: sh must be [{n}, K, 3] with K in {SH_COUNTS}, got {sh}")
    return TensorType((n, RECORD), "f32")


def _infer_depth_keys(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("splat_depth_keys", attrs, {})
    n = _records("splat_depth_keys", types[0])
    return TensorType((n, 2), "i32")


def _infer_offsets(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("splat_offsets", attrs, {})
    n = _records("splat_offsets", types[0])
    _order("splat_offsets", types[1], n)
    return TensorType((n + 1,), "i32")


def _infer_bin(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("splat_bin", attrs, {"capacity": _MISSING, "width": _MISSING, "height": _MISSING})
    _size("splat_bin", attrs)
    n = _records("splat_bin", types[0])
    _order("splat_bin", types[1], n)
    if types[2].dtype.name != "i32" or tuple(types[2].shape) != (n + 1,):
        raise ShapeError(f"splat_bin: offsets must be i32[{n + 1}], got {types[2]}")
    cap = attrs["capacity"] = _int("splat_bin", "capacity", attrs["capacity"])
    if not 1 <= cap <= (1 << 28):
        raise ShapeError(f"splat_bin: capacity must be in [1, 2^28], got {cap}")
    return TensorType((cap, PAIR), "i32")


def _infer_ranges(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("splat_ranges", attrs, {"width": _MISSING, "height": _MISSING})
    w, h = _size("splat_ranges", attrs)
    _pairs("splat_ranges", types[0])
    if types[1].dtype.name != "i32" or tuple(types[1].shape) != (1,):
        raise ShapeError(f"splat_ranges: count must be i32[1], got {types[1]}")
    return TensorType((tiles_of(w, h), 2), "i32")


def check_max_alpha(where: str, value: object) -> float:
    """max_alpha as a float in the open interval (0, 1), else InputError."""
    if not is_real(value) or not 0.0 < float(value) < 1.0:   # NaN fails too
        raise InputError(f"{where}: max_alpha must be a number in (0, 1) (3DGS: 0.99, gsplat: 0.999), "
                         f"got {value!r}")
    return float(value)


def _infer_raster(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("splat_raster", attrs, {"width": _MISSING, "height": _MISSING, "background": (0.0, 0.0, 0.0),
                                   "dtype": "f32", "max_alpha": MAX_ALPHA, "channels": 5})
    w, h = _size("splat_raster", attrs)
    _records("splat_raster", types[0])
    _pairs("splat_raster", types[1])
    if types[2].dtype.name != "i32" or tuple(types[2].shape) != (tiles_of(w, h), 2):
        raise ShapeError(f"splat_raster: ranges must be i32[{tiles_of(w, h)}, 2], got {types[2]}")
    bg = attrs["background"]
    if not isinstance(bg, (tuple, list)) or len(bg) != 3:
        raise GraphError(f"splat_raster: background must be 3 numbers (r, g, b), got {bg!r}")
    attrs["background"] = tuple(_number("splat_raster", "background", v) for v in bg)
    attrs["max_alpha"] = check_max_alpha("splat_raster", attrs["max_alpha"])
    if attrs["dtype"] not in ("f32", "f16"):
        raise DTypeError(f"splat_raster: dtype must be 'f32' or 'f16', got {attrs['dtype']!r}")
    channels = attrs["channels"]
    if isinstance(channels, bool) or channels not in (3, 5):
        raise GraphError(f"splat_raster: channels must be 5 (r, g, b, depth, alpha) or 3 (r, g, b), got {channels!r}")
    return TensorType((h, w, channels), attrs["dtype"])


OPS: tuple[OpDef, ...] = (
    _reg("splat_project", 6, _infer_project,
         "3DGS projection: per-Gaussian screen mean, depth, conic, opacity, SH colour, radius and tile rectangle.",
         precision="fixed"),
    _reg("splat_depth_keys", 1, _infer_depth_keys,
         "(depth key, index) rows of the projected Gaussians, to sort into depth order.", precision="fixed"),
    _reg("splat_offsets", 2, _infer_offsets,
         "Exclusive prefix sum of the tiles each projected Gaussian touches, in depth order (last: the total).",
         precision="fixed"),
    _reg("splat_bin", 3, _infer_bin,
         "(tile, Gaussian) pairs of every projected Gaussian in depth order, up to a capacity.", precision="fixed"),
    _reg("splat_ranges", 2, _infer_ranges, "Each tile's [start, end) in tile-sorted pairs.", precision="fixed"),
    _reg("splat_raster", 3, _infer_raster,
         "Front-to-back alpha compositing of each tile's depth-sorted Gaussians: r, g, b, depth, alpha.",
         precision="fixed"),
)
