"""The splat family (rlx.splat.Renderer on the device under test) against
the float64 numpy reference (rlx/reference/splat.py).

Tolerance: the renderer computes in f32 (the CPU's exp is a polynomial
with < 4e-6 relative error), the reference in float64; images must agree
at PSNR >= 60 dB (RMS error <= 1e-3 on [0, 1] colours) over r, g, b and
alpha. Threshold decisions (alpha >= 1/255, T < 1e-4, the 3-sigma radius)
can flip for a Gaussian sitting on one in f32 but not float64; on these
scenes that costs far less than the 60 dB bound. Depth is compared at
PSNR >= 60 dB relative to the scene's largest depth.

Hand-built cases: one Gaussian at the centre, overlapping Gaussians in
depth order (and index order reversed), Gaussians behind the camera or
inside the near plane, a Gaussian straddling tile borders; random scenes
of every SH degree at odd image sizes; a frame past the capacity.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.reference import splat as ref
from rlx.reference.sort import sort_rows
from rlx.splat import Camera, Renderer, Scene, random_scene

PSNR_MIN = 60.0


def _camera(w: int, h: int, eye=(0.0, 0.0, -6.0), target=(0.0, 0.0, 0.0), f: float | None = None) -> Camera:
    f = f if f is not None else 0.9 * w
    return Camera.look_at(eye, target, fx=f, fy=f, cx=w / 2, cy=h / 2)


def _check(scene: Scene, cam: Camera, w: int, h: int, background=(0.0, 0.0, 0.0), **kw):
    r = Renderer(scene, w, h, background=background, **kw)
    frame = r.render(cam)
    want = ref.render(scene, cam, w, h, background)
    got = np.concatenate([frame.rgb, frame.alpha[..., None]], -1)
    exp = np.concatenate([want[..., :3], want[..., 4:5]], -1)
    assert got.shape == exp.shape and frame.rgb.dtype == np.float32
    p = ref.psnr(got, exp)
    assert p >= PSNR_MIN, f"PSNR {p:.1f} dB"
    zmax = max(float(np.abs(want[..., 3]).max()), 1e-6)
    assert ref.psnr(frame.depth / zmax, want[..., 3] / zmax) >= PSNR_MIN
    return frame, want, r


def _one(means, scales, quats=None, opac=None, colors=None) -> Scene:
    means = np.asarray(means, np.float64).reshape(-1, 3)
    n = len(means)
    quats = np.tile([1.0, 0, 0, 0], (n, 1)) if quats is None else quats
    opac = np.full(n, 3.0) if opac is None else opac
    colors = np.full((n, 3), 0.8) if colors is None else np.asarray(colors, np.float64)
    sh = ((colors - 0.5) / ref.SH_C0)[:, None, :]
    return Scene(means, np.broadcast_to(np.log(np.asarray(scales, np.float64)), (n, 3)), quats, opac, sh)


def test_one_gaussian_at_the_centre():
    w = h = 64
    scene = _one([0, 0, 0], [0.3, 0.3, 0.3], colors=[[0.9, 0.2, 0.1]])
    frame, want, _ = _check(scene, _camera(w, h), w, h)
    # Symmetric about the centre, brightest there, the colour of the SH dc term.
    a = frame.alpha
    np.testing.assert_allclose(a, a[::-1, ::-1], atol=1e-5)
    assert a[31, 31] > 0.9 and a[0, 0] < a[31, 31]
    np.testing.assert_allclose(frame.rgb[31, 31] / a[31, 31], [0.9, 0.2, 0.1], atol=1e-4)


def test_overlapping_gaussians_composite_in_depth_order():
    w, h = 80, 48
    front = [0.0, 0.0, -1.0]
    back = [0.0, 0.0, 1.0]
    colors = [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    a = _one([front, back], [0.5, 0.5, 0.5], opac=np.array([1.0, 4.0]), colors=colors)
    b = _one([back, front], [0.5, 0.5, 0.5], opac=np.array([4.0, 1.0]), colors=colors[::-1])
    cam = _camera(w, h)
    fa, _, _ = _check(a, cam, w, h)
    fb, _, _ = _check(b, cam, w, h)
    np.testing.assert_allclose(fa.rgb, fb.rgb, atol=1e-6)   # index order does not matter, depth does
    c = fa.rgb[h // 2, w // 2]
    assert c[0] > c[2] > 0.0       # the red one in front covers part of the blue behind


def test_gaussians_behind_the_camera_leave_the_background():
    w, h = 48, 40
    bg = (0.25, 0.5, 0.75)
    # z = -6 is the camera: means behind it, on its plane, and inside the near plane (z <= 0.2 in view space).
    scene = _one([[0, 0, -7.0], [0.1, 0, -6.0], [0, 0.1, -5.85], [0, 0, -5.81]], [0.5, 0.5, 0.5])
    frame, _, _ = _check(scene, _camera(w, h), w, h, background=bg)
    np.testing.assert_array_equal(frame.alpha, 0.0)
    np.testing.assert_allclose(frame.rgb, np.broadcast_to(bg, frame.rgb.shape), atol=0)
    assert frame.pairs == 0


def test_a_gaussian_straddling_tile_borders():
    """Centred on the corner of four tiles (pixel (32, 32)): every tile sees it, the image is symmetric."""
    w = h = 64
    f = 0.9 * w
    # u = f x / z + cx = 32 exactly at x = 0 with cx = 32; shift the camera so the mean sits on the corner.
    scene = _one([0, 0, 0], [0.2, 0.05, 0.2], quats=np.array([[0.9, 0.1, 0.3, 0.2]]))
    cam = Camera.look_at((0, 0, -6), (0, 0, 0), fx=f, fy=f, cx=32.0, cy=32.0)
    frame, want, r = _check(scene, cam, w, h)
    assert frame.pairs >= 4
    rec = ref.project(scene.means, scene.scales, scene.quats, scene.opacities, scene.sh, cam.packed(), w, h)
    assert rec[0, ref.XMIN] < 2 <= rec[0, ref.XMAX] and rec[0, ref.YMIN] < 2 <= rec[0, ref.YMAX]


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_random_scenes_match_the_reference(degree):
    w, h = 97, 61
    scene = random_scene(600, seed=degree, degree=degree)
    cam = _camera(w, h, eye=(1.0, -0.5, -5.0))
    frame, _, _ = _check(scene, cam, w, h, background=(0.1, 0.2, 0.3))
    assert frame.pairs > 600


def test_larger_random_scene_and_a_second_camera():
    w, h = 160, 120
    scene = random_scene(3000, seed=7, degree=3, scale=-3.5)
    r = None
    for eye in ((0.0, 0.0, -6.0), (4.0, 2.0, -4.0)):
        cam = _camera(w, h, eye=eye)
        if r is None:
            _, _, r = _check(scene, cam, w, h)
        else:   # the same executable, another camera: one replayed schedule per frame
            frame = r.render(cam)
            want = ref.render(scene, cam, w, h)
            got = np.concatenate([frame.rgb, frame.alpha[..., None]], -1)
            assert ref.psnr(got, np.concatenate([want[..., :3], want[..., 4:5]], -1)) >= PSNR_MIN


def test_capacity_overflow_raises_or_replans():
    w, h = 64, 64
    scene = random_scene(400, seed=3, degree=1)
    cam = _camera(w, h)
    r = Renderer(scene, w, h, capacity=50, auto_grow=False)
    with pytest.raises(rlx.CapacityError, match="pairs"):
        r.render(cam)
    frame, _, r2 = _check(scene, cam, w, h, capacity=50)
    assert r2.replans == 1 and r2.capacity >= frame.pairs > 50


def test_stage_references_agree_with_the_device():
    """The intermediate stages through rlx.run_reference on the renderer's
    graph: projection records to f32 rounding, pairs and ranges exactly."""
    from rlx.splat.renderer import build_graph

    w, h = 70, 50
    scene = random_scene(300, seed=11, degree=2)
    cam = _camera(w, h).packed()
    g = build_graph(scene.count, 9, w, h, 20000)
    params = {"means": scene.means, "scales": scene.scales, "quats": scene.quats, "opacities": scene.opacities,
              "sh": scene.sh}
    got = rlx.compile(g, params=params).run(camera=cam)
    want = rlx.run_reference(g, {"camera": cam}, params)
    assert int(got["pairs"][0]) == int(want["pairs"][0])
    exp = np.concatenate([want["image"][..., :3], want["image"][..., 4:]], -1)
    assert ref.psnr(np.concatenate([got["image"][..., :3], got["image"][..., 4:]], -1), exp) >= PSNR_MIN


def test_bad_renderer_arguments():
    scene = random_scene(10)
    with pytest.raises(rlx.InputError, match="width"):
        Renderer(scene, 0, 10)
    with pytest.raises(rlx.InputError, match="scene"):
        Renderer("scene.ply", 10, 10)
    r = Renderer(scene, 16, 16)
    with pytest.raises(rlx.InputError, match="camera"):
        r.render(np.zeros(7))


def test_half_precision_scene_and_image():
    """scene_dtype="f16": the scene is stored in half precision and computed
    in f32, against the reference of the same f16-rounded scene (PSNR >= 60
    dB); an f16 image (splat_raster_f16) within f16 rounding of the f32 one."""
    from rlx.splat.renderer import build_graph

    w, h = 72, 40
    scene = random_scene(500, seed=5, degree=3, extent=1.5)
    rounded = Scene(*(getattr(scene, n).astype(np.float16) for n in ("means", "scales", "quats", "opacities", "sh")))
    cam = _camera(w, h)
    frame = Renderer(scene, w, h, scene_dtype="f16").render(cam)
    want = ref.render(rounded, cam, w, h)
    got = np.concatenate([frame.rgb, frame.alpha[..., None]], -1)
    assert ref.psnr(got, np.concatenate([want[..., :3], want[..., 4:5]], -1)) >= PSNR_MIN
    params = {n: getattr(scene, n) for n in ("means", "scales", "quats", "opacities", "sh")}
    img = {}
    for dt in ("f32", "f16"):
        g = build_graph(scene.count, 16, w, h, 20000, image_dtype=dt)
        img[dt] = rlx.compile(g, params=params).run(camera=cam.packed())["image"]
    assert img["f16"].dtype == np.float16
    np.testing.assert_allclose(img["f16"].astype(np.float32), img["f32"], rtol=2e-3, atol=2e-3)


def _triple_order(rec: np.ndarray, width: int) -> np.ndarray:
    """The sorted (tile, index) pairs of a sort of (tile, depth key, index)
    triples by all three: the order of the renderer before the depth sort."""
    gx, _ = ref.tile_grid(width, 1)
    rows = [(t, int(ref.depth_bits(rec[i, ref.DEPTH])), i) for i in np.flatnonzero(rec[:, ref.TILES] > 0)
            for t in ref.gaussian_tiles(rec[i], gx)]
    trip = np.array(sorted(rows), np.int64).reshape(-1, 3)
    return trip[:, [0, 2]].astype(np.int32)


def test_depth_then_tile_sort_is_the_tile_depth_index_order():
    """A stable sort by depth, pairs emitted in that order, a stable sort by
    tile: exactly the (tile, depth, index) order; equal depths (duplicated
    Gaussians) keep index order, culled Gaussians emit no pairs."""
    w, h = 90, 70
    scene = random_scene(500, seed=2, degree=1)
    dup = Scene(*(np.concatenate([getattr(scene, n), getattr(scene, n)[:60]]) for n in
                  ("means", "scales", "quats", "opacities", "sh")))
    cam = _camera(w, h, eye=(0.3, 0.2, -4.0)).packed()
    rec = ref.project(dup.means, dup.scales, dup.quats, dup.opacities, dup.sh, cam, w, h).astype(np.float32)
    assert (rec[:, ref.TILES] == 0).any() and (rec[:, ref.TILES] > 0).sum() > 100
    order = ref.depth_order(rec)
    offs = ref.offsets(rec, order)
    total = int(offs[-1])
    pairs = ref.bin_pairs(rec, order, offs, total, w)
    srt = sort_rows(pairs, total, 1)
    np.testing.assert_array_equal(srt, _triple_order(rec, w))
    assert not np.isin(np.flatnonzero(rec[:, ref.TILES] == 0), srt[:, 1]).any()


def test_device_stages_equal_the_references_exactly():
    """On the device: the depth order, offsets and tile-sorted pairs equal
    the references run on the device's own records (so f32 rounding of the
    projection cannot hide a difference); the pairs equal the (tile, depth,
    index) order."""
    from rlx.ir import Graph

    w, h, n, cap = 83, 57, 700, 30000
    scene = random_scene(n, seed=12, degree=1)
    cam = _camera(w, h, eye=(0.4, -0.2, -5.0)).packed()
    rec = ref.project(scene.means, scene.scales, scene.quats, scene.opacities, scene.sh, cam, w, h)
    rec = rec.astype(np.float32)
    g = Graph()
    r = g.input("records", (n, 16), "f32")
    order = g.op("sort_by_key", [g.op("splat_depth_keys", [r])], keys=1, bits=32)
    offs = g.op("splat_offsets", [r, order])
    total = g.narrow(offs, 0, n, 1)
    pairs = g.op("splat_bin", [r, order, offs], capacity=cap, width=w, height=h)
    srt = g.op("sort_by_key", [pairs, total], keys=1, bits=5)
    g.set_outputs(order=order, offsets=offs, sorted=srt)
    got = rlx.compile(g).run(records=rec)
    want_order = ref.depth_order(rec)
    np.testing.assert_array_equal(got["order"], want_order)
    want_offs = ref.offsets(rec, want_order)
    np.testing.assert_array_equal(got["offsets"], want_offs)
    m = int(want_offs[-1])
    assert 0 < m <= cap
    np.testing.assert_array_equal(got["sorted"][:m], _triple_order(rec, w))


@pytest.mark.parametrize("groups", [2, 5])
def test_scans_over_several_groups_render_the_same(monkeypatch, groups):
    """splat_offsets' and the sorts' scans cut into several groups (the
    CPU's default is one at these sizes): the same image, bit for bit."""
    from rlx.lowering import sort as lowering_sort

    w, h = 97, 61
    scene = random_scene(600, seed=1, degree=1)
    cam = _camera(w, h, eye=(1.0, -0.5, -5.0))
    one = Renderer(scene, w, h).render(cam)
    monkeypatch.setattr(lowering_sort, "scan_groups", lambda target, n: min(groups, n))
    many = Renderer(scene, w, h).render(cam)
    assert many.pairs == one.pairs
    np.testing.assert_array_equal(many.rgb, one.rgb)
    np.testing.assert_array_equal(many.alpha, one.alpha)


def test_max_alpha_matches_the_reference():
    """max_alpha=0.999 (gsplat's clamp) against the reference at 0.999; it
    differs from the default 0.99 where opaque Gaussians pile up."""
    w, h = 64, 48
    s = random_scene(400, seed=9, degree=0)
    # Opacity logit 8: sigmoid ~ 0.9997, so the clamp decides each Gaussian's peak alpha.
    scene = Scene(s.means, s.scales, s.quats, np.full(s.count, 8.0), s.sh)
    cam = _camera(w, h)
    r = Renderer(scene, w, h, max_alpha=0.999)
    frame = r.render(cam)
    want = ref.render(scene, cam, w, h, max_alpha=0.999)
    default = ref.render(scene, cam, w, h)
    got = np.concatenate([frame.rgb, frame.alpha[..., None]], -1)
    exp = np.concatenate([want[..., :3], want[..., 4:5]], -1)
    assert ref.psnr(got, exp) >= PSNR_MIN
    other = np.concatenate([default[..., :3], default[..., 4:5]], -1)
    assert np.abs(exp - other).max() > 1e-3 and ref.psnr(got, other) < ref.psnr(got, exp) - 10.0
    assert r.max_alpha == 0.999


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.5, 1.5, float("nan"), "0.9", True, None])
def test_bad_max_alpha_is_an_input_error(bad):
    from rlx.splat.renderer import build_graph

    scene = random_scene(10)
    with pytest.raises(rlx.InputError, match="max_alpha"):
        Renderer(scene, 16, 16, max_alpha=bad)
    with pytest.raises(rlx.InputError, match="max_alpha"):
        build_graph(10, 1, 16, 16, 1000, max_alpha=bad)


@pytest.mark.parametrize("image_dtype", ["f32", "f16"])
def test_rgb_only_frames_equal_the_rgb_of_full_frames(image_dtype):
    """depth_and_alpha=False: an [H, W, 3] image, bit for bit the first three
    channels of the five-channel frame (odd size, a background), and
    Frame.depth / alpha None."""
    from rlx.splat.renderer import build_graph

    w, h = 53, 37
    scene = random_scene(700, seed=4, degree=2)
    cam = _camera(w, h)
    full = Renderer(scene, w, h, background=(0.1, 0.2, 0.3)).render(cam)
    rgb = Renderer(scene, w, h, background=(0.1, 0.2, 0.3), depth_and_alpha=False).render(cam)
    assert rgb.rgb.shape == (h, w, 3) and rgb.depth is None and rgb.alpha is None
    np.testing.assert_array_equal(rgb.rgb, full.rgb)
    assert rgb.pairs == full.pairs
    g = build_graph(scene.count, scene.sh.shape[1], w, h, 1 << 16, image_dtype=image_dtype, depth_and_alpha=False)
    params = {k: getattr(scene, k) for k in ("means", "scales", "quats", "opacities", "sh")}
    got = rlx.compile(g, params=params).run(camera=cam.packed())["image"]
    want = rlx.run_reference(g, {"camera": cam.packed()}, params=params)["image"]
    assert got.shape == (h, w, 3) and got.dtype == (np.float16 if image_dtype == "f16" else np.float32)
    assert ref.psnr(got.astype(np.float64), want.astype(np.float64)) >= (40.0 if image_dtype == "f16" else PSNR_MIN)


@pytest.mark.parametrize("bad", [4, 0, True, "3", None])
def test_bad_channel_counts_are_refused(bad):
    g = rlx.Graph()
    rec = g.input("rec", (4, 16))
    pairs = g.input("pairs", (8, 2), "i32")
    ranges = g.input("ranges", (1, 2), "i32")
    with pytest.raises(rlx.RlxError, match="channels"):
        g.op("splat_raster", [rec, pairs, ranges], width=16, height=16, channels=bad)


def test_bad_depth_and_alpha_is_an_input_error():
    with pytest.raises(rlx.InputError, match="depth_and_alpha"):
        Renderer(random_scene(10), 16, 16, depth_and_alpha="no")


@pytest.mark.parametrize("degree,scene_dtype", [(3, "f32"), (1, "f32"), (2, "f16")])
def test_vector_accesses_land_on_aligned_buffers(degree, scene_dtype):
    """splat_project stores its records and reads f32 SH rows of degree 1
    and 3 in 16-byte accesses, splat_bin reads records in 16-byte loads and
    writes 8-byte pairs, splat_depth_keys writes 8-byte rows: every buffer
    they take (params blocks aside) starts 16-byte aligned, as the shaders
    assume (shaders/splat.h, rlx_float4 / rlx_int2)."""
    r = Renderer(random_scene(40, seed=1, degree=degree, scale=-3.0), 48, 32, scene_dtype=scene_dtype)
    vector_kernels = ("splat_project_", "splat_bin_rec", "splat_depth_keys_rec")
    seen = set()
    for t in r.exe.thunks:
        if t.kernel and t.kernel.startswith(vector_kernels):
            seen.add(t.kernel.rsplit("_", 1)[0])
            for b in t.bindings:
                if b.storage.key != "params":   # the kernels' params block: scalar reads
                    assert (b.storage.offset + b.offset) % 16 == 0, (t.kernel, b)
    assert seen == {"splat_project", "splat_bin", "splat_depth_keys"}
