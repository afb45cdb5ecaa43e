"""`rlx splat render`: PNGs per camera (checked byte for byte against the
renderer's frame), the progress bar, and a damaged scene answered with a
one-line error and exit status 2 (run as a child process: a crash fails)."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib

import numpy as np

from rlx.splat import Camera, Renderer, random_scene, write_ply
from rlx.splat.png import to_uint8, write_png


def _read_png(path) -> np.ndarray:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h, ctype = 8, b"", 0, 0, 0
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, ctype = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big"), body[9]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    c = {0: 1, 2: 3, 6: 4}[ctype]
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * c)
    assert (raw[:, 0] == 0).all()
    return raw[:, 1:].reshape(h, w, c)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlx.cli", "splat", "render", *args], capture_output=True,
                          text=True, timeout=300)


def test_render_writes_pngs_with_a_progress_bar(tmp_path):
    scene = random_scene(500, seed=2, degree=2)
    write_ply(tmp_path / "s.ply", scene)
    cams = [Camera.look_at((0, 0, -6), (0, 0, 0), fx=60.0, cx=40.0, cy=24.0, width=80, height=48, name="front.png"),
            Camera.look_at((3, 1, -5), (0, 0, 0), fx=60.0, cx=40.0, cy=24.0, width=80, height=48)]
    doc = [{"name": c.name or str(i), "viewmat": c.viewmat.tolist(), "fx": c.fx, "fy": c.fy, "cx": c.cx,
            "cy": c.cy, "width": 80, "height": 48} for i, c in enumerate(cams)]
    (tmp_path / "cams.json").write_text(json.dumps(doc))
    out = _cli(str(tmp_path / "s.ply"), "--camera", str(tmp_path / "cams.json"), "-o", str(tmp_path / "out"),
               "--depth", "--alpha", "--progress", "--background", "0.1,0.2,0.3")
    assert out.returncode == 0, out.stderr
    assert "rendering [" in out.stderr and "2/2" in out.stderr and "frames/s" in out.stderr
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == ["0000_front.png", "0000_front_alpha.png", "0000_front_depth.png", "0001.png", "0001_alpha.png",
                     "0001_depth.png"]
    frame = Renderer(scene, 80, 48, background=(0.1, 0.2, 0.3)).render(cams[0])
    np.testing.assert_array_equal(_read_png(tmp_path / "out" / "0000_front.png"), to_uint8(frame.rgb))
    np.testing.assert_array_equal(_read_png(tmp_path / "out" / "0000_front_alpha.png")[..., 0], to_uint8(frame.alpha))


def test_damaged_scene_is_an_error_not_a_crash(tmp_path):
    (tmp_path / "bad.ply").write_bytes(b"ply\nformat binary_little_endian 1.0\nelement vertex 10\n"
                                       b"property float x\nend_header\n\x00\x01")
    (tmp_path / "cams.json").write_text(json.dumps([{"viewmat": np.eye(4).tolist(), "fx": 10, "cx": 4, "cy": 4,
                                                     "width": 8, "height": 8}]))
    out = _cli(str(tmp_path / "bad.ply"), "--camera", str(tmp_path / "cams.json"), "-o", str(tmp_path / "o"))
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("rlx: error:") and "bad.ply" in out.stderr


def test_png_writer_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    for shape in ((5, 7), (3, 4, 3), (2, 9, 4)):
        img = rng.integers(0, 256, shape, dtype=np.uint8)
        write_png(tmp_path / "x.png", img)
        got = _read_png(tmp_path / "x.png")
        np.testing.assert_array_equal(got.reshape(img.shape), img)


def test_max_alpha_option(tmp_path):
    """--max-alpha reaches the renderer; a value outside (0, 1) is a one-line error, exit status 2."""
    scene = random_scene(300, seed=3, degree=0, scale=-1.5)
    write_ply(tmp_path / "s.ply", scene)
    cam = Camera.look_at((0, 0, -6), (0, 0, 0), fx=60.0, cx=32.0, cy=24.0, width=64, height=48)
    doc = [{"name": "0", "viewmat": cam.viewmat.tolist(), "fx": cam.fx, "fy": cam.fy, "cx": cam.cx, "cy": cam.cy,
            "width": 64, "height": 48}]
    (tmp_path / "cams.json").write_text(json.dumps(doc))
    out = _cli(str(tmp_path / "s.ply"), "--camera", str(tmp_path / "cams.json"), "-o", str(tmp_path / "out"),
               "--max-alpha", "0.999")
    assert out.returncode == 0, out.stderr
    frame = Renderer(scene, 64, 48, max_alpha=0.999).render(cam)
    np.testing.assert_array_equal(_read_png(tmp_path / "out" / "0000.png"), to_uint8(frame.rgb))
    bad = _cli(str(tmp_path / "s.ply"), "--camera", str(tmp_path / "cams.json"), "-o", str(tmp_path / "out"),
               "--max-alpha", "1.5")
    assert bad.returncode == 2 and "max_alpha" in bad.stderr and "Traceback" not in bad.stderr


def test_an_output_folder_that_cannot_be_made_is_refused_before_rendering(tmp_path):
    # mkdir ran after the scene loaded and raised NotADirectoryError / FileNotFoundError as a traceback.
    write_ply(tmp_path / "s.ply", random_scene(20, seed=1, degree=0))
    (tmp_path / "cams.json").write_text(json.dumps([{"viewmat": np.eye(4).tolist(), "fx": 10, "cx": 4, "cy": 4,
                                                     "width": 8, "height": 8}]))
    (tmp_path / "a_file").write_text("")
    out = _cli(str(tmp_path / "s.ply"), "--camera", str(tmp_path / "cams.json"), "-o", str(tmp_path / "a_file" / "o"))
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("rlx splat render: error: -o ")
