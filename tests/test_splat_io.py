"""rlx.splat's scene and camera readers, and the float64 reference's own
sanity (rlx/reference/splat.py): PLY round trips at every SH degree (the
channel-major f_rest layout), typed ModelLoadErrors for damaged files, each
read in a child process so that a crash fails the test instead of ending
the run, camera lists (JSON both forms, COLMAP text), and the reference
against closed forms (one Gaussian's conic, the degree-0 colour)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import rlx
from rlx.reference import splat as ref
from rlx.splat import Camera, Scene, random_scene, read_cameras, read_ply, write_ply


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
@pytest.mark.parametrize("binary", [True, False])
def test_ply_round_trip(tmp_path, degree, binary):
    scene = random_scene(37, seed=degree, degree=degree)
    path = tmp_path / "s.ply"
    write_ply(path, scene, binary=binary)
    back = read_ply(path)
    assert back.sh_degree == degree and back.count == 37
    for name in ("means", "scales", "quats", "opacities", "sh"):
        np.testing.assert_array_equal(getattr(back, name), getattr(scene, name))


def test_f_rest_is_channel_major(tmp_path):
    """f_rest_0..14 are red's 15 coefficients, 15..29 green's, 30..44 blue's."""
    from plyfile import PlyData, PlyElement

    names = ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", *(f"f_rest_{i}" for i in range(45)), "opacity",
             "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    arr = np.zeros(1, dtype=[(n, "<f4") for n in names])
    for i in range(45):
        arr[f"f_rest_{i}"] = i
    arr["rot_0"] = 1.0
    path = tmp_path / "c.ply"
    PlyData([PlyElement.describe(arr, "vertex")]).write(str(path))
    sh = read_ply(path).sh
    assert sh.shape == (1, 16, 3)
    np.testing.assert_array_equal(sh[0, 1:, 0], np.arange(15))
    np.testing.assert_array_equal(sh[0, 1:, 1], np.arange(15, 30))
    np.testing.assert_array_equal(sh[0, 1:, 2], np.arange(30, 45))


def _damage(tmp_path, kind: str):
    good = tmp_path / "good.ply"
    write_ply(good, random_scene(20, degree=3))
    raw = good.read_bytes()
    p = tmp_path / f"{kind}.ply"
    if kind == "truncated":
        p.write_bytes(raw[: len(raw) - 500])
    elif kind == "header_only":
        p.write_bytes(raw[: raw.index(b"end_header") + 11])
    elif kind == "garbage":
        p.write_bytes(b"\x00\xff" * 300)
    elif kind == "not_ply_text":
        p.write_text("hello\nworld\n")
    elif kind == "bad_count":
        p.write_bytes(raw.replace(b"element vertex 20", b"element vertex 999999999"))
    elif kind == "negative_count":
        p.write_bytes(raw.replace(b"element vertex 20", b"element vertex -5"))
    elif kind in ("missing_opacity", "missing_rot", "bad_rest", "empty", "no_vertex"):
        from plyfile import PlyData, PlyElement

        data = PlyData.read(str(good))["vertex"].data
        names = list(data.dtype.names)
        drop = {"missing_opacity": ["opacity"], "missing_rot": ["rot_3"], "bad_rest": ["f_rest_44"]}.get(kind, [])
        keep = [n for n in names if n not in drop]
        arr = np.zeros(0 if kind == "empty" else len(data), dtype=[(n, "<f4") for n in keep])
        for n in keep:
            arr[n] = data[n][: len(arr)]
        PlyData([PlyElement.describe(arr, "face" if kind == "no_vertex" else "vertex")]).write(str(p))
    elif kind == "nan":
        scene = random_scene(5)
        scene.means[2, 1] = np.nan
        write_ply(p, scene)
    return p


DAMAGE = ["truncated", "header_only", "garbage", "not_ply_text", "bad_count", "negative_count", "missing_opacity",
          "missing_rot", "bad_rest", "empty", "no_vertex", "nan"]


@pytest.mark.parametrize("kind", DAMAGE)
def test_damaged_ply_raises_model_load_error_in_a_child(tmp_path, kind):
    path = _damage(tmp_path, kind)
    code = ("import sys, rlx\nfrom rlx.splat import read_ply\n"
            "try:\n    read_ply(sys.argv[1])\nexcept rlx.ModelLoadError as e:\n    print('ModelLoadError:', e)\n"
            "else:\n    print('no error')\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"child died ({out.returncode}): {out.stderr[-2000:]}"
    assert out.stdout.startswith("ModelLoadError:"), out.stdout + out.stderr[-2000:]


def test_missing_file():
    with pytest.raises(rlx.ModelLoadError, match="no such file"):
        read_ply("/nonexistent/scene.ply")


def test_cameras_json_both_forms_and_colmap(tmp_path):
    cam = Camera.look_at((1.0, 2.0, -5.0), (0, 0, 0), fx=300.0, fy=310.0, cx=64.0, cy=48.0)
    r_w2c, t = cam.viewmat[:3, :3], cam.viewmat[:3, 3]
    doc = [{"name": "a", "viewmat": cam.viewmat.tolist(), "fx": 300.0, "fy": 310.0, "cx": 64.0, "cy": 48.0},
           {"img_name": "b", "rotation": r_w2c.T.tolist(), "position": (-r_w2c.T @ t).tolist(), "fx": 300.0,
            "fy": 310.0, "width": 128, "height": 96}]
    (tmp_path / "cams.json").write_text(json.dumps(doc))
    cams = read_cameras(tmp_path / "cams.json")
    assert [c.name for c in cams] == ["a", "b"]
    for c in cams:
        np.testing.assert_allclose(c.viewmat, cam.viewmat, atol=1e-12)
        assert (c.fx, c.fy, c.cx, c.cy) == (300.0, 310.0, 64.0, 48.0)
    # COLMAP: quaternion (w, x, y, z) of the world-to-camera rotation, then t.
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(r_w2c).as_quat()
    (tmp_path / "cameras.txt").write_text("# c\n1 PINHOLE 128 96 300 310 64 48\n")
    (tmp_path / "images.txt").write_text(f"# i\n1 {w} {x} {y} {z} {t[0]} {t[1]} {t[2]} 1 img0.png\n\n")
    (col,) = read_cameras(tmp_path)
    np.testing.assert_allclose(col.viewmat, cam.viewmat, atol=1e-9)
    assert (col.width, col.height, col.name) == (128, 96, "img0.png")


@pytest.mark.parametrize("text", ["not json", "[]", '[{"fx": 1}]', '[{"viewmat": [[1]], "fx": 1, "cx": 0, "cy": 0}]'])
def test_bad_camera_files(tmp_path, text):
    p = tmp_path / "c.json"
    p.write_text(text)
    with pytest.raises(rlx.ModelLoadError):
        read_cameras(p)


def test_scene_shapes_are_checked():
    with pytest.raises(rlx.InputError, match="quats"):
        Scene(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((2, 3)), np.zeros(2), np.zeros((2, 1, 3)))
    with pytest.raises(rlx.InputError, match="sh"):
        Scene(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((2, 4)), np.zeros(2), np.zeros((2, 5, 3)))


def test_reference_closed_forms():
    """An isotropic Gaussian of std s at depth d straight ahead: conic =
    1 / (f^2 s^2 / d^2 + 0.3) on the diagonal, at the principal point; the
    degree-0 colour is C0 * dc + 0.5; the centre pixel's alpha is
    min(0.99, sigmoid(logit) exp(-0.5 |dx|^2 conic))."""
    s, d, f, w = 0.2, 5.0, 100.0, 33
    scene = Scene([[0, 0, 0]], [[np.log(s)] * 3], [[1, 0, 0, 0]], [0.5], [[[0.3, -0.2, 0.1]]])
    cam = Camera(np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, d], [0, 0, 0, 1]]), f, f, w / 2, w / 2)
    rec = ref.project(scene.means, scene.scales, scene.quats, scene.opacities, scene.sh, cam.packed(), w, w)[0]
    var = f * f * s * s / (d * d) + 0.3
    np.testing.assert_allclose(rec[[ref.U, ref.V, ref.DEPTH]], [w / 2, w / 2, d])
    np.testing.assert_allclose(rec[[ref.QA, ref.QK, ref.QM]], [1 / var, 0, 1 / var], rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(rec[ref.RADIUS], np.ceil(3 * np.sqrt(var)))
    np.testing.assert_allclose(rec[[ref.R, ref.G, ref.B]], ref.SH_C0 * np.array([0.3, -0.2, 0.1]) + 0.5)
    img = ref.render(scene, cam, w, w)
    op = 1 / (1 + np.exp(-0.5))
    np.testing.assert_allclose(img[16, 16, 4], min(0.99, op), rtol=1e-12)   # pixel 16's centre is the mean
    np.testing.assert_allclose(img[16, 17, 4], min(0.99, op * np.exp(-0.5 / var)), rtol=1e-8)   # one pixel right


def test_tile_hits_never_drop_a_blended_pixel():
    """ref.tile_hits (and so shaders/splat.h's rlx_splat_tile_hit) rejects a
    tile only when no pixel centre in it reaches alpha >= 1/255 and power
    <= 0: checked by brute force over random anisotropic Gaussians and
    tiles around them; it must also reject most of the tiles that no pixel
    reaches (a third of the 3-sigma rectangle's tiles on random scenes)."""
    rng = np.random.default_rng(3)
    ly, lx = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    kept_dead = dead = 0
    for _ in range(3000):
        sx, sy, rho = rng.uniform(0.5, 20.0), rng.uniform(0.5, 20.0), rng.uniform(-0.95, 0.95)
        cov = np.array([[sx * sx, rho * sx * sy], [rho * sx * sy, sy * sy]])
        a, b, c = np.linalg.inv(cov)[0, 0], np.linalg.inv(cov)[0, 1], np.linalg.inv(cov)[1, 1]
        factors = ref.factored_conic(cov[0, 0], cov[0, 1], cov[1, 1], np.linalg.det(cov))
        op = rng.uniform(0.0, 1.0)
        u, v = rng.uniform(0, 64, 2)
        x0, y0 = 16.0 * rng.integers(-3, 8), 16.0 * rng.integers(-3, 8)
        dx, dy = u - (x0 + lx + 0.5), v - (y0 + ly + 0.5)
        power = -0.5 * (a * dx * dx + c * dy * dy) - b * dx * dy
        alive = ((power <= 0) & (np.minimum(0.99, op * np.exp(power)) >= 1 / 255)).any()
        hit = bool(ref.tile_hits(u, v, *factors, ref.reach(op), x0, y0))
        assert hit or not alive, (u, v, a, b, c, op, x0, y0)
        dead += not alive
        kept_dead += hit and not alive
    assert dead > 500 and kept_dead < 0.1 * dead


def test_arguments_numpy_cannot_read_are_input_errors():
    # np.asarray / float() / int() conversions raised ValueError and TypeError before.
    from rlx.errors import InputError
    from rlx.splat import Camera, Renderer, random_scene

    scene = random_scene(20, degree=1)
    for kw in ({"background": ("a", 0, 0)}, {"background": 3}, {"background": None}, {"capacity": "x"}):
        with pytest.raises(InputError, match="Renderer"):
            Renderer(scene, 16, 16, **kw)
    with pytest.raises(InputError, match="viewmat"):
        Camera([["a"] * 4] * 4, 100, 100, 8, 8)
    with pytest.raises(InputError, match="look_at"):
        Camera.look_at("abc", [0, 0, 1])
    with pytest.raises(InputError, match="render: camera"):
        Renderer(scene, 16, 16).render("x")
    for kw in ({"n": -1}, {"n": "x"}, {"degree": 2.0}):
        with pytest.raises(InputError, match="random_scene"):
            random_scene(**{"n": 4, **kw})


def test_a_camera_file_with_an_infinite_width_is_a_model_load_error(tmp_path):
    # int(inf) raised OverflowError, which the reader did not turn into its error.
    from rlx.errors import ModelLoadError
    from rlx.splat import read_cameras

    path = tmp_path / "cams.json"
    path.write_text('[{"viewmat": [[1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]], "fx": 100, "cx": 8, "cy": 8, '
                    '"width": Infinity, "height": 16}]')
    with pytest.raises(ModelLoadError, match="cams.json"):
        read_cameras(path)
