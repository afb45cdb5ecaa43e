"""References of the splat family (rlx/ir/ops/splat.py, shaders/splat.h):
the 3D Gaussian Splatting forward renderer in float64 numpy, stage by stage
in the kernels' order of operations, plus ``render`` (the whole frame).

Conventions (the kernels' too):
- camera: world-to-camera ``viewmat`` (x right, y down, z forward),
  pinhole fx, fy, cx, cy; a Gaussian at camera-space (x, y, z) projects to
  u = fx x / z + cx, v = fy y / z + cy; pixel (i, j)'s centre is
  (i + 0.5, j + 0.5).
- projection: Sigma = R S S^T R^T (S = diag(exp(scale)), R from the
  normalized quaternion w, x, y, z); z <= 0.2 is culled; EWA with the
  Jacobian of the perspective map at x / z, y / z clamped to 1.3 times the
  half field of view; 0.3 added to the 2D covariance's diagonal; the conic
  is its inverse (culled when the determinant is <= 0), kept factored as
  (qa, qk, qm) with q(dx, dy) = qa (dx + qk dy)^2 + qm dy^2 (``quad``:
  two squares, so f32 kernels evaluate it without cancellation); radius =
  ceil(3 sqrt(lambda_max)) with lambda_max = mid + sqrt(max(0.1, mid^2 -
  det)) (mid^2 - det formed as ((a - c) / 2)^2 + b^2); the determinant as
  det(P P^T) + 0.3 trace(P P^T) + 0.09 with P = J W R S and det(P P^T) the
  sum of P's squared 2x2 minors (Cauchy-Binet), never a c - b^2; the tile
  rectangle (16 x 16 pixels) is x in [floor((u - r) / 16), floor((u + r) /
  16)] clamped to the grid (likewise y), cut to the tiles that the box of
  the ellipse q <= reach (``reach``: opacity exp(-reach / 2) = 0.99 / 255)
  widened by a pixel can reach, and of it the tiles touched are those where
  q_min <= reach, q_min the least q over the tile's pixel-centre rectangle
  (``tile_hits``: no pixel of another tile could pass alpha >= 1/255);
  none touched: culled.
- colour: the SH basis of degree <= 3 at the direction from the camera
  centre to the mean (the 3DGS constants), + 0.5, clamped at 0.
- order: the Gaussians sorted stably by depth (its f32 bits; ties keep
  index order; culled ones last, with no pairs), their tiles' offsets and
  (tile, index) pairs emitted in that order, then the pairs sorted stably
  by tile alone: each tile's Gaussians by increasing depth, ties by index
  (the (tile, depth, index) order of a sort by all three).
- raster: per tile, the Gaussians touching it in that order; per pixel
  front to back: power = -0.5 q(dx, dy) with (dx, dy) = mean - pixel
  centre, skipped when power > 0 (never, but for NaN); alpha = min(max_alpha,
  opacity exp(power)) (max_alpha 0.99, the 3DGS paper's, as the f32 the
  kernels hold), skipped when < 1/255; stop (without that Gaussian) when T
  (1 - alpha) < 1e-4; out = sum(c alpha T) + T background, depth = sum(z
  alpha T), alpha = 1 - T. Two Gaussians clamped at max_alpha 0.99 put T
  on the stopping bound itself ((1 - 0.99)^2 = 1e-4): in f32, as in the
  kernels (and 3DGS's), the second is not added; float64 with 0.99 itself
  would add it, so the reference clamps at float32(max_alpha).
"""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import reference_for
from rlx.reference.sort import sort_rows

TILE = 16
NEAR = 0.2
RECORD = 16   # floats per projected Gaussian (shaders/splat.h: SPLAT_REC_*)
MAX_ALPHA = 0.99
CULLED_KEY = -1   # 0xFFFFFFFF as i32: culled Gaussians sort after every depth
# Record columns.
U, V, DEPTH, QA, QK, QM, OPACITY, R, G, B, RADIUS, TILES, XMIN, YMIN, XMAX, YMAX = range(RECORD)

SH_C0 = 0.28209479177387814
SH_C1 = 0.4886025119029199
SH_C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396)
SH_C3 = (-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154, -0.4570457994644658,
         1.445305721320277, -0.5900435899266435)


def tile_grid(width: int, height: int) -> tuple[int, int]:
    return -(-width // TILE), -(-height // TILE)


def sh_color(sh: np.ndarray, dirs: np.ndarray) -> np.ndarray:
    """RGB of SH coefficients sh [N, K, 3] at unit directions [N, 3] (+0.5, clamped at 0)."""
    k = sh.shape[1]
    res = SH_C0 * sh[:, 0]
    if k > 1:
        x, y, z = (dirs[:, i:i + 1] for i in range(3))
        res = res - SH_C1 * y * sh[:, 1] + SH_C1 * z * sh[:, 2] - SH_C1 * x * sh[:, 3]
        if k > 4:
            xx, yy, zz, xy, yz, xz = x * x, y * y, z * z, x * y, y * z, x * z
            res = (res + SH_C2[0] * xy * sh[:, 4] + SH_C2[1] * yz * sh[:, 5]
                   + SH_C2[2] * (2.0 * zz - xx - yy) * sh[:, 6] + SH_C2[3] * xz * sh[:, 7]
                   + SH_C2[4] * (xx - yy) * sh[:, 8])
            if k > 9:
                res = (res + SH_C3[0] * y * (3.0 * xx - yy) * sh[:, 9] + SH_C3[1] * xy * z * sh[:, 10]
                       + SH_C3[2] * y * (4.0 * zz - xx - yy) * sh[:, 11]
                       + SH_C3[3] * z * (2.0 * zz - 3.0 * xx - 3.0 * yy) * sh[:, 12]
                       + SH_C3[4] * x * (4.0 * zz - xx - yy) * sh[:, 13] + SH_C3[5] * z * (xx - yy) * sh[:, 14]
                       + SH_C3[6] * x * (xx - 3.0 * yy) * sh[:, 15])
    return np.maximum(res + 0.5, 0.0)


def quad(qa, qk, qm, dx, dy):
    """The conic's quadratic form from its factors: qa (dx + qk dy)^2 + qm dy^2."""
    t = dx + qk * dy
    return qa * t * t + qm * dy * dy


def factored_conic(a, b, c, det):
    """(qa, qk, qm) of the inverse of the 2D covariance [[a, b], [b, c]]
    (det its determinant): the conic (c, -b, a) / det as qa (dx + qk dy)^2 +
    qm dy^2."""
    return c / det, -b / c, 1.0 / c


def reach(op):
    """The q at which a Gaussian of opacity op falls to alpha 0.99 / 255
    (1/255 with 1% of margin): op exp(-q / 2) >= 0.99 / 255 is q <= reach
    (negative: op itself is below it, no pixel is reached)."""
    return 2.0 * np.log(op * (255.0 / 0.99))


def tile_hits(u, v, qa, qk, qm, reach_q, x0, y0) -> np.ndarray:
    """Whether a Gaussian (mean u, v; factored conic qa, qk, qm; ``reach``
    reach_q) can reach alpha >= 1/255 (with 1% margin) at a pixel centre of
    the tiles whose first pixels are (x0, y0) (arrays): the minimum of q
    over the rectangle of the tile's pixel centres (0 with the mean inside;
    else the least of the four edges' clamped 1D minima) against reach_q."""
    x0, y0 = np.asarray(x0, np.float64), np.asarray(y0, np.float64)
    dx_lo, dx_hi = u - (x0 + 15.5), u - (x0 + 0.5)
    dy_lo, dy_hi = v - (y0 + 15.5), v - (y0 + 0.5)
    dy_of_dx = -qa * qk / (qa * qk * qk + qm)   # the least q on a line of fixed dx
    q = np.minimum(
        np.minimum(quad(qa, qk, qm, dx_lo, np.clip(dy_of_dx * dx_lo, dy_lo, dy_hi)),
                   quad(qa, qk, qm, dx_hi, np.clip(dy_of_dx * dx_hi, dy_lo, dy_hi))),
        np.minimum(quad(qa, qk, qm, np.clip(-qk * dy_lo, dx_lo, dx_hi), dy_lo),     # fixed dy: at dx = -qk dy
                   quad(qa, qk, qm, np.clip(-qk * dy_hi, dx_lo, dx_hi), dy_hi)))
    inside = (dx_lo <= 0) & (dx_hi >= 0) & (dy_lo <= 0) & (dy_hi >= 0)
    q = np.where(inside, 0.0, q)
    return q <= reach_q


def gaussian_tiles(r: np.ndarray, gx: int) -> np.ndarray:
    """Tile ids (row-major) a projected record reaches, in row-major order."""
    x0, y0, x1, y1 = (int(t) for t in r[XMIN:YMAX + 1])
    ty, tx = np.meshgrid(np.arange(y0, y1), np.arange(x0, x1), indexing="ij")
    tx, ty = tx.reshape(-1), ty.reshape(-1)
    hit = tile_hits(r[U], r[V], r[QA], r[QK], r[QM], reach(r[OPACITY]), 16.0 * tx, 16.0 * ty)
    return (ty * gx + tx)[hit]


def project(means, scales, quats, opacities, sh, camera, width: int, height: int) -> np.ndarray:
    """Per-Gaussian records [N, 16] (float64; culled rows are zero): u, v,
    depth, factored conic (qa, qk, qm), opacity, r, g, b, radius, tiles touched, tile
    rectangle xmin, ymin, xmax, ymax (max exclusive)."""
    means, scales, quats, opac, sh, cam = (np.asarray(a, np.float64)
                                           for a in (means, scales, quats, opacities, sh, camera))
    n = means.shape[0]
    vm = cam[:16].reshape(4, 4)
    fx, fy, cx, cy = cam[16:20]
    w3, t3 = vm[:3, :3], vm[:3, 3]
    t = means @ w3.T + t3
    tx, ty, tz = t[:, 0], t[:, 1], t[:, 2]
    out = np.zeros((n, RECORD))
    keep = tz > NEAR
    tzs = np.where(keep, tz, 1.0)

    q = quats / np.linalg.norm(quats, axis=1, keepdims=True)
    qw, qx, qy, qz = q.T
    rot = np.stack([
        np.stack([1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qw * qz), 2 * (qx * qz + qw * qy)], -1),
        np.stack([2 * (qx * qy + qw * qz), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qw * qx)], -1),
        np.stack([2 * (qx * qz - qw * qy), 2 * (qy * qz + qw * qx), 1 - 2 * (qx * qx + qy * qy)], -1)], -2)
    m = rot * np.exp(scales)[:, None, :]   # R S: Sigma = m m^T

    limx, limy = 1.3 * 0.5 * width / fx, 1.3 * 0.5 * height / fy
    txc = np.clip(tx / tzs, -limx, limx) * tzs
    tyc = np.clip(ty / tzs, -limy, limy) * tzs
    j = np.zeros((n, 2, 3))
    j[:, 0, 0] = fx / tzs
    j[:, 0, 2] = -fx * txc / (tzs * tzs)
    j[:, 1, 1] = fy / tzs
    j[:, 1, 2] = -fy * tyc / (tzs * tzs)
    p = j @ w3 @ m   # cov2d = p p^T
    cov = p @ np.swapaxes(p, 1, 2)
    a, b, c = cov[:, 0, 0] + 0.3, cov[:, 0, 1], cov[:, 1, 1] + 0.3
    # det(p p^T) by Cauchy-Binet (the squared 2x2 minors of p), as the kernel
    # forms it: a c - b^2 cancels for needle-thin Gaussians.
    minors = [p[:, 0, i] * p[:, 1, k] - p[:, 0, k] * p[:, 1, i] for i, k in ((0, 1), (0, 2), (1, 2))]
    det = sum(mi * mi for mi in minors) + 0.3 * (cov[:, 0, 0] + cov[:, 1, 1]) + 0.09
    keep &= det > 0
    dets = np.where(keep, det, 1.0)
    mid = 0.5 * (a + c)
    lam = mid + np.sqrt(np.maximum(0.1, 0.25 * (a - c) ** 2 + b * b))   # mid^2 - det, cancellation-free
    radius = np.ceil(3.0 * np.sqrt(lam))
    u = fx * tx / tzs + cx
    v = fy * ty / tzs + cy
    gx, gy = tile_grid(width, height)
    xmin = np.clip(np.floor((u - radius) / TILE), 0, gx)
    xmax = np.clip(np.floor((u + radius) / TILE) + 1, 0, gx)
    ymin = np.clip(np.floor((v - radius) / TILE), 0, gy)
    ymax = np.clip(np.floor((v + radius) / TILE) + 1, 0, gy)
    opacity = 1.0 / (1.0 + np.exp(-opac))
    keep &= opacity > 0
    # The box of the ellipse q <= reach (half-widths sqrt(reach a), sqrt(reach c))
    # and a pixel: no tile outside it passes tile_hits.
    reach_q = reach(np.where(keep, opacity, 1.0))
    keep &= reach_q >= 0
    ex = np.sqrt(np.maximum(reach_q, 0.0) * a) + 1.0
    ey = np.sqrt(np.maximum(reach_q, 0.0) * c) + 1.0
    xmin = np.maximum(xmin, np.clip(np.floor((u - ex) / TILE), 0, gx))
    xmax = np.minimum(xmax, np.clip(np.floor((u + ex) / TILE) + 1, 0, gx))
    ymin = np.maximum(ymin, np.clip(np.floor((v - ey) / TILE), 0, gy))
    ymax = np.minimum(ymax, np.clip(np.floor((v + ey) / TILE) + 1, 0, gy))
    keep &= (xmax > xmin) & (ymax > ymin)
    conic = factored_conic(a, b, c, dets)
    tiles = np.zeros(n)
    for i in np.flatnonzero(keep):
        ty, tx = np.meshgrid(np.arange(ymin[i], ymax[i]), np.arange(xmin[i], xmax[i]), indexing="ij")
        tiles[i] = np.count_nonzero(tile_hits(u[i], v[i], conic[0][i], conic[1][i], conic[2][i], reach_q[i],
                                              16.0 * tx, 16.0 * ty))
    keep &= tiles > 0

    campos = -w3.T @ t3
    d = means - campos
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    rgb = sh_color(sh, d)
    cols = [u, v, tz, *conic, opacity, rgb[:, 0], rgb[:, 1], rgb[:, 2],
            radius, tiles, xmin, ymin, xmax, ymax]
    for i, col in enumerate(cols):
        out[:, i] = np.where(keep, col, 0.0)
    return out


def depth_bits(depth: np.ndarray) -> np.ndarray:
    """The sort key of a positive depth: its f32 bit pattern (monotonic for positive floats)."""
    return np.asarray(depth, np.float32).view(np.int32).astype(np.int64)


def depth_keys(records: np.ndarray) -> np.ndarray:
    """(depth key, index) rows [N, 2] int32; culled rows (no tiles) key CULLED_KEY."""
    records = np.asarray(records)
    n = records.shape[0]
    keys = np.where(records[:, TILES] > 0, depth_bits(records[:, DEPTH]), CULLED_KEY)
    return np.stack([keys, np.arange(n)], -1).astype(np.int32)


def depth_order(records: np.ndarray) -> np.ndarray:
    """depth_keys stably sorted by key (as unsigned): [N, 2] int32, column 1 the depth order."""
    keys = depth_keys(records)
    return sort_rows(keys, keys.shape[0], 1)


def offsets(records: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Exclusive prefix sum of the tiles touched in depth order (order: depth_order's [N, 2]),
    [N + 1] (the last: the total)."""
    counts = np.asarray(records)[np.asarray(order)[:, 1], TILES].astype(np.int64)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def bin_pairs(records: np.ndarray, order: np.ndarray, offs: np.ndarray, capacity: int, width: int) -> np.ndarray:
    """(tile, index) rows [capacity, 2] int32, Gaussian by Gaussian in depth
    order, each one's tiles row-major; rows at and past min(total,
    capacity) are zero."""
    records = np.asarray(records)
    gx, _ = tile_grid(width, 1)
    out = np.zeros((capacity, 2), np.int64)
    for k, i in enumerate(np.asarray(order)[:, 1]):
        if not records[i, TILES] > 0:
            continue
        tile = gaussian_tiles(np.asarray(records[i], np.float64), gx)
        o = int(offs[k])
        end = min(o + tile.size, capacity)
        if end > o:
            out[o:end, 0] = tile[:end - o]
            out[o:end, 1] = i
    return out.astype(np.int32)


def tile_ranges(sorted_pairs: np.ndarray, count: int, tiles: int) -> np.ndarray:
    """[tiles, 2] int32: each tile's [start, end) in the sorted pairs."""
    tile_col = np.asarray(sorted_pairs)[:count, 0]
    t = np.arange(tiles)
    return np.stack([np.searchsorted(tile_col, t, "left"), np.searchsorted(tile_col, t, "right")], -1).astype(np.int32)


def raster(records: np.ndarray, sorted_pairs: np.ndarray, ranges: np.ndarray, width: int, height: int,
           background=(0.0, 0.0, 0.0), max_alpha: float = MAX_ALPHA) -> np.ndarray:
    """[height, width, 5]: r, g, b, depth, alpha (float64); sorted_pairs: (tile, index) rows."""
    records = np.asarray(records, np.float64)
    max_alpha = float(np.float32(max_alpha))   # the kernels' parameter (the module's docstring says why)
    gx, gy = tile_grid(width, height)
    img = np.zeros((gy * TILE, gx * TILE, 5))
    bg = np.asarray(background, np.float64)
    ly, lx = np.meshgrid(np.arange(TILE), np.arange(TILE), indexing="ij")
    for t in range(gx * gy):
        s, e = (int(v) for v in ranges[t])
        ty, tx = divmod(t, gx)
        pcx = (tx * TILE + lx).reshape(-1) + 0.5
        pcy = (ty * TILE + ly).reshape(-1) + 0.5
        tr = np.ones(TILE * TILE)
        col = np.zeros((TILE * TILE, 4))
        live = np.ones(TILE * TILE, bool)
        for idx in sorted_pairs[s:e, 1]:
            if not live.any():
                break
            r = records[idx]
            dx, dy = r[U] - pcx, r[V] - pcy
            power = -0.5 * quad(r[QA], r[QK], r[QM], dx, dy)
            alpha = np.minimum(max_alpha, r[OPACITY] * np.exp(power))
            use = live & (power <= 0.0) & (alpha >= 1.0 / 255.0)
            test = tr * (1.0 - alpha)
            stop = use & (test < 1e-4)
            live &= ~stop
            use &= ~stop
            wgt = np.where(use, alpha * tr, 0.0)
            col += wgt[:, None] * np.array([r[R], r[G], r[B], r[DEPTH]])[None, :]
            tr = np.where(use, test, tr)
        block = np.concatenate([col[:, :3] + tr[:, None] * bg[None, :], col[:, 3:4], 1.0 - tr[:, None]], 1)
        img[ty * TILE:(ty + 1) * TILE, tx * TILE:(tx + 1) * TILE] = block.reshape(TILE, TILE, 5)
    return img[:height, :width]


def render(scene, camera, width: int, height: int, background=(0.0, 0.0, 0.0),
           max_alpha: float = MAX_ALPHA) -> np.ndarray:
    """The whole frame in float64: [height, width, 5] (r, g, b, depth, alpha).
    ``camera``: an rlx.splat.Camera or its packed f32 [20] form."""
    cam = camera.packed() if hasattr(camera, "packed") else np.asarray(camera)
    cam = np.asarray(cam, np.float64)
    rec = project(scene.means, scene.scales, scene.quats, scene.opacities, scene.sh, cam, width, height)
    order = depth_order(rec)
    offs = offsets(rec, order)
    total = int(offs[-1])
    pairs = bin_pairs(rec, order, offs, total, width)
    srt = sort_rows(pairs, total, 1)
    gx, gy = tile_grid(width, height)
    return raster(rec, srt, tile_ranges(srt, total, gx * gy), width, height, background, max_alpha)


def psnr(a: np.ndarray, b: np.ndarray, peak: float = 1.0) -> float:
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(peak * peak / mse)


# ---------------------------------------------------------------- graph ops


@reference_for("splat_project")
def _project(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return project(*xs, attrs["width"], attrs["height"]).astype(np.float32)


@reference_for("splat_depth_keys")
def _depth_keys(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return depth_keys(xs[0])


@reference_for("splat_offsets")
def _offsets(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.minimum(offsets(xs[0], xs[1]), 0x7FFFFFFF).astype(np.int32)


@reference_for("splat_bin")
def _bin(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return bin_pairs(xs[0], xs[1], xs[2].astype(np.int64), attrs["capacity"], attrs["width"])


@reference_for("splat_ranges")
def _ranges(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    pairs, count = xs
    n = min(int(count.reshape(-1)[0]), pairs.shape[0])
    gx, gy = tile_grid(attrs["width"], attrs["height"])
    return tile_ranges(pairs, n, gx * gy)


@reference_for("splat_raster")
def _raster(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    rec, pairs, ranges = xs
    img = raster(rec, pairs, ranges, attrs["width"], attrs["height"], attrs["background"], attrs["max_alpha"])
    return img[..., :attrs["channels"]].astype(out.dtype.numpy)
