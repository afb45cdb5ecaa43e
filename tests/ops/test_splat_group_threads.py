"""The GPU branches of shaders/sort.h and shaders/splat.h, run on the CPU
with real threads: tests/c/group_threads.cpp compiles the kernels behind
the CPU prelude with its one-thread-group macros replaced by G pthreads per
group sharing group memory and meeting at barriers (groups one after
another), and drives the same dispatches as rlx/lowering/{sort,splat}.py.

The host device always runs one-thread groups (so --rlx-group-size changes
nothing there); this is where the multi-thread forms (the sort's tile
ranking and per-digit owners, the one-group scans, the raster's pixel
ownership and its all-done exit) execute at all before a GPU runs them.
Checked: the sort exactly against rlx/reference/sort.py, the frame at
PSNR >= 60 dB against the float64 reference, at G = 1, 3, 32, 64 and 256.
A race that does not fire in a run is not caught; GPUs stay unverified."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rlx.reference import splat as ref
from rlx.reference.sort import sort_rows
from rlx.splat import Camera, random_scene

ROOT = Path(__file__).resolve().parents[2]
GROUP_SIZES = [1, 3, 32, 64, 256, 1024]   # 1024: the one-group scans on CUDA take that many


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    cxx = shutil.which("g++")
    assert cxx, "g++ builds rlx's host shim; the group-thread harness needs it too"   # a failure, not a skip
    out = tmp_path_factory.mktemp("gt") / "group_threads.so"
    build = subprocess.run([cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-pthread", f"-I{ROOT / 'shaders'}",
                            "-fno-math-errno", "-fno-trapping-math", "-fassociative-math", "-fno-signed-zeros",
                            "-fopenmp-simd", "-Wall", "-Werror", "-Wno-unused-function",
                            str(ROOT / "tests/c/group_threads.cpp"), "-o", str(out)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-4000:]
    lib = ctypes.CDLL(str(out))
    u, i, p = ctypes.c_uint, ctypes.c_int, ctypes.c_void_p
    lib.gt_sort.argtypes = [p, u, u, u, u, i, u, u, p]
    lib.gt_sort.restype = None
    lib.gt_render.argtypes = [p, p, p, p, p, u, u, p, u, u, u, u, p]
    lib.gt_render.restype = i
    return lib


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.c_void_p)


@pytest.mark.parametrize("threads", GROUP_SIZES)
@pytest.mark.parametrize("n,count,blocks,keys", [(1000, 1000, 1, 2), (5000, 4321, 3, 2), (700, 0, 2, 1),
                                                 (2049, 2049, 5, 1)])
def test_sort_with_threads(lib, rng, threads, n, count, blocks, keys):
    rec = rng.integers(-2**31, 2**31, size=(n, 3), dtype=np.int64).astype(np.int32)
    rec[:, 0] = rng.integers(0, 40, n)     # ties on the first word: stability matters
    out = np.zeros_like(rec)
    lib.gt_sort(_ptr(rec), n, 3, keys, 32, count, blocks, threads, _ptr(out))
    np.testing.assert_array_equal(out[:count], sort_rows(rec, count, keys)[:count])


@pytest.mark.parametrize("threads", GROUP_SIZES)
def test_render_with_threads(lib, threads):
    w, h = 61, 45
    scene = random_scene(400, seed=4, degree=3)
    cam = Camera.look_at((0.5, -0.3, -5.0), (0, 0, 0), fx=55.0, cx=w / 2, cy=h / 2)
    packed = cam.packed()
    img = np.zeros((h, w, 5), np.float32)
    arrays = [np.ascontiguousarray(getattr(scene, n)) for n in ("means", "scales", "quats", "opacities", "sh")]
    pairs = lib.gt_render(*(_ptr(a) for a in arrays), scene.count, 16, _ptr(packed), w, h, 20000, threads, _ptr(img))
    want = ref.render(scene, cam, w, h, (0.1, 0.2, 0.3))
    assert 400 < pairs <= 20000
    got = np.concatenate([img[..., :3], img[..., 4:]], -1)
    assert ref.psnr(got, np.concatenate([want[..., :3], want[..., 4:]], -1)) >= 60.0
