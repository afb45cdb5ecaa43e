"""The GPU branches of shaders/sort.h and shaders/splat.h, run on the CPU
with real threads: tests/c/group_threads.cpp compiles the kernels behind
the CPU prelude with its one-thread-group macros replaced by G pthreads per
group sharing group memory and meeting at barriers (groups one after
another; group-memory atomic adds are real atomics), and drives the same
dispatches as rlx/lowering/{sort,splat}.py.

The host device always runs one-thread groups (so --rlx-group-size changes
nothing there); this is where the multi-thread forms (the sort's
vote-aggregated histogram and vote-ranked scatter, with the harness's
emulated SIMD groups of 32 threads and of 1, 4, 8 and 16; the scans'
per-thread segments over one or many groups, the raster's pixel ownership
and its all-done exit) execute at all
before a GPU runs them. Checked: the sort and the scan exactly against
numpy (odd row counts, all-equal keys, random keys, a count below n, one
and several scan groups), the renderer's depth order and sorted pairs
exactly, the frame at PSNR >= 60 dB against the float64 reference, at
G = 1, 2, 3, 32, 64, 256 and 1024. A race that does not fire in a run is
not caught; GPUs stay unverified."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from rlx.reference import splat as ref
from rlx.reference.sort import sort_rows
from rlx.splat import Camera, random_scene

from .helpers import GROUP_THREADS_MARK

pytestmark = GROUP_THREADS_MARK   # the harness builds beside the suite
ROOT = Path(__file__).resolve().parents[2]
GROUP_SIZES = [1, 2, 3, 32, 64, 256, 1024]   # 1024: the scans' partials group on CUDA takes that many


@pytest.fixture(scope="module")
def lib(group_threads_lib):
    lib = group_threads_lib
    u, i, p, f = ctypes.c_uint, ctypes.c_int, ctypes.c_void_p, ctypes.c_float
    lib.gt_simd_width.argtypes = [u]
    lib.gt_simd_width.restype = None
    lib.gt_sort.argtypes = [p, u, u, u, u, i, u, u, u, p]
    lib.gt_sort.restype = None
    lib.gt_scan.argtypes = [p, u, u, u]
    lib.gt_scan.restype = None
    lib.gt_render.argtypes = [p, p, p, p, p, u, u, p, u, u, u, f, u, u, p, p, p, p]
    lib.gt_render.restype = i
    return lib


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.c_void_p)


@pytest.fixture
def simd(lib):
    """Sets the harness's SIMD width (threads a vote spans) for one test:
    32 unless the test says otherwise (a GPU warp), 1 again after it."""
    def set_width(width: int = 32) -> None:
        lib.gt_simd_width(width)
    set_width()
    yield set_width
    lib.gt_simd_width(1)


SORT_CASES = [(1000, 1000, 1, 2, 1), (5000, 4321, 3, 2, 2), (700, 0, 2, 1, 1), (2049, 2049, 5, 1, 7),
              (257, 255, 1, 1, 3), (1, 1, 1, 1, 1)]


# Every case at every group size but the 5,000-row one at 1024 threads (37 s
# of barriers on two cores: 2049 rows cover 1024 threads, 5000 rows 256).
@pytest.mark.parametrize("threads,n,count,blocks,keys,scan_groups",
                         [(t, *case) for case in SORT_CASES for t in GROUP_SIZES if not (t == 1024 and case[0] > 4096)])
def test_sort_with_threads(lib, simd, rng, threads, n, count, blocks, keys, scan_groups):
    rec = rng.integers(-2**31, 2**31, size=(n, 3), dtype=np.int64).astype(np.int32)
    rec[:, 0] = rng.integers(0, 40, n)     # ties on the first word: stability matters
    out = np.zeros_like(rec)
    lib.gt_sort(_ptr(rec), n, 3, keys, 32, count, blocks, scan_groups, threads, _ptr(out))
    np.testing.assert_array_equal(out[:count], sort_rows(rec, count, keys)[:count])


@pytest.mark.parametrize("threads", [1, 2, 32, 256])
@pytest.mark.parametrize("keys_kind", ["equal", "random", "few"])
@pytest.mark.parametrize("n,bits", [(999, 13), (4097, 8), (3, 5)])
def test_sort_one_key_of_few_bits(lib, simd, rng, threads, keys_kind, n, bits):
    """The renderer's tile sort: one key word, `bits` of it, two-word rows;
    all-equal keys keep the row order."""
    rec = np.stack([np.zeros(n, np.int64) + 5 if keys_kind == "equal" else
                    rng.integers(0, 1 << bits, n) if keys_kind == "random" else rng.integers(0, 3, n),
                    np.arange(n)], -1).astype(np.int32)
    out = np.zeros_like(rec)
    lib.gt_sort(_ptr(rec), n, 2, 1, bits, -1, 2, 2, threads, _ptr(out))
    np.testing.assert_array_equal(out, sort_rows(rec, n, 1))


@pytest.mark.parametrize("width,threads,n,count", [(1, 3, 5000, 4999), (1, 64, 2049, 2049), (4, 3, 40, 17),
                                                   (4, 18, 5000, 4999), (8, 256, 2049, 2049), (16, 100, 300, 217),
                                                   (64, 512, 3000, 2999)])
def test_sort_with_other_simd_widths(lib, simd, rng, width, threads, n, count):
    """The scatter's votes at other SIMD widths: partial SIMD groups (18
    threads of width 4, 100 of 16), more SIMD groups than rank
    (RLX_SORT_SIMD: 256 threads of width 8 rank with their first 64, one
    thread a SIMD group with its first 8), and SIMD groups so wide that the
    stage bounds the tile (RLX_SORT_TILE: 512 threads of width 64 rank
    with their first 256)."""
    simd(width)
    rec = rng.integers(-2**31, 2**31, size=(n, 3), dtype=np.int64).astype(np.int32)
    rec[:, 0] = rng.integers(0, 40, n)
    out = np.zeros_like(rec)
    lib.gt_sort(_ptr(rec), n, 3, 2, 32, count, 3, 2, threads, _ptr(out))
    np.testing.assert_array_equal(out[:count], sort_rows(rec, count, 2)[:count])


@pytest.mark.parametrize("seed", range(6))
def test_sort_of_random_layouts(lib, simd, seed):
    """Random cases of everything the GPU branches depend on: rows, counted
    rows, words a row, key words and bits, chunks, scan groups, threads and
    SIMD width (the tile then covers anything from a few rows to several
    tiles a chunk, partial SIMD groups, SIMD groups that do not rank)."""
    rng = np.random.default_rng(9000 + seed)
    width = int(rng.choice([4, 8, 16, 32]))
    threads = int(rng.integers(width, 8 * width + 1))
    n = int(rng.integers(1, 6000))
    count = int(rng.integers(0, n + 1)) if seed % 2 else -1
    cols, keys = int(rng.integers(2, 5)), int(rng.integers(1, 3))
    bits = int(rng.integers(1, 33))
    simd(width)
    rec = rng.integers(-2**31, 2**31, size=(n, cols), dtype=np.int64).astype(np.int32)
    rec[:, 0] &= (1 << bits) - 1 if bits < 32 else -1
    rec[: n // 2, 0] = rng.integers(0, 3, n // 2)   # runs of equal keys: stability
    out = np.zeros_like(rec)
    blocks, scan_groups = int(rng.integers(1, 9)), int(rng.integers(1, 6))
    lib.gt_sort(_ptr(rec), n, cols, keys, bits, count, blocks, scan_groups, threads, _ptr(out))
    m = n if count < 0 else count
    np.testing.assert_array_equal(out[:m], sort_rows(rec, m, keys)[:m])


@pytest.mark.parametrize("threads", GROUP_SIZES)
@pytest.mark.parametrize("n,groups", [(1, 1), (7, 3), (1000, 1), (1000, 4), (100_003, 13), (5, 9)])
def test_scan_with_threads(lib, rng, threads, n, groups):
    data = np.zeros(n + 1, np.int32)
    data[:n] = rng.integers(0, 50, n)
    want = np.concatenate([[0], np.cumsum(data[:n], dtype=np.int64)])
    lib.gt_scan(_ptr(data), n, groups, threads)
    np.testing.assert_array_equal(data, want)


@pytest.mark.parametrize("threads", [1, 32, 256])
def test_scan_of_large_counts(lib, rng, threads):
    """Counts near 2^31 - 1 with random low bits: the group sums of a
    scan's segments add their low and high halves apart; the prefix sums
    saturate at 2^31 - 1 as a serial saturating sum does."""
    n = 3000
    data = np.zeros(n + 1, np.int32)
    data[:n] = rng.integers(0, 1 << 31, n) >> rng.integers(0, 31, n)   # every magnitude
    data[:n:97] = 0x7FFFFFFF
    want = np.concatenate([[0], np.minimum(np.cumsum(data[:n], dtype=np.int64), 0x7FFFFFFF)])
    lib.gt_scan(_ptr(data), n, 3, threads)
    np.testing.assert_array_equal(data, want)
    small = np.zeros(n + 1, np.int32)
    small[:n] = rng.integers(0, 1 << 19, n)   # sums up to ~2^30: exact, with carries between the halves
    want = np.concatenate([[0], np.cumsum(small[:n], dtype=np.int64)])
    lib.gt_scan(_ptr(small), n, 4, threads)
    np.testing.assert_array_equal(small, want)


@pytest.mark.parametrize("threads", [1, 32])
def test_scan_saturates(lib, threads):
    """Counts are i32: prefix sums stop at 2^31 - 1, in every group and past them."""
    n = 4000
    data = np.full(n + 1, 1 << 20, np.int32)
    lib.gt_scan(_ptr(data), n, 5, threads)
    want = np.minimum(np.arange(n + 1, dtype=np.int64) << 20, 0x7FFFFFFF)
    np.testing.assert_array_equal(data, want)


def _render(lib, scene, cam, w, h, threads, max_alpha=0.99, cap=20000):
    """gt_render: the whole frame at `threads` a group; (pairs, image, records,
    depth order, sorted pairs)."""
    img = np.zeros((h, w, 5), np.float32)
    rec = np.zeros((scene.count, 16), np.float32)
    order = np.zeros((scene.count, 2), np.int32)
    srt = np.zeros((cap, 2), np.int32)
    arrays = [np.ascontiguousarray(getattr(scene, n)) for n in ("means", "scales", "quats", "opacities", "sh")]
    pairs = lib.gt_render(*(_ptr(a) for a in arrays), scene.count, scene.sh.shape[1], _ptr(cam.packed()), w, h,
                          cap, max_alpha, 3, threads, _ptr(img), _ptr(rec), _ptr(order), _ptr(srt))
    return pairs, img, rec, order, srt


@pytest.mark.parametrize("threads", GROUP_SIZES)
@pytest.mark.parametrize("max_alpha", [0.99, 0.999])
def test_render_with_threads(lib, simd, threads, max_alpha):
    w, h, cap = 61, 45, 20000
    scene = random_scene(400, seed=4, degree=3)
    cam = Camera.look_at((0.5, -0.3, -5.0), (0, 0, 0), fx=55.0, cx=w / 2, cy=h / 2)
    pairs, img, rec, order, srt = _render(lib, scene, cam, w, h, threads, max_alpha, cap)
    assert 400 < pairs <= cap
    # The depth order of the device's own records, exactly; the pairs in (tile, depth, index) order.
    np.testing.assert_array_equal(order, ref.depth_order(rec))
    tile, idx = srt[:pairs, 0].astype(np.int64), srt[:pairs, 1]
    depth = ref.depth_bits(rec[idx, ref.DEPTH])
    assert np.all(np.lexsort((idx, depth, tile)) == np.arange(pairs))
    assert np.array_equal(np.bincount(idx, minlength=scene.count), rec[:, ref.TILES].astype(np.int64))
    want = ref.render(scene, cam, w, h, (0.1, 0.2, 0.3), max_alpha=max_alpha)
    got = np.concatenate([img[..., :3], img[..., 4:]], -1)
    assert ref.psnr(got, np.concatenate([want[..., :3], want[..., 4:]], -1)) >= 60.0


@pytest.mark.parametrize("seed", [5, 6])
def test_raster_forms_give_one_image(lib, simd, seed):
    """The raster's register form (256 threads: one a pixel, branches) and
    its group-memory form (other group sizes: masks) add the same Gaussians
    with the same arithmetic: the same image, to the bit, over dense scenes
    where pixels reach the transmittance stop."""
    w, h = 53, 37
    scene = random_scene(3000, seed=seed, degree=1, scale=-2.5)
    cam = Camera.look_at((0.2, 0.4, -5.0), (0, 0, 0), fx=50.0, cx=w / 2, cy=h / 2)
    one = _render(lib, scene, cam, w, h, 1)[1]
    assert (one[..., 4] > 0.999).mean() > 0.2   # many pixels stop on T < 1e-4 (alpha 1 - T)
    for threads in (32, 256):
        np.testing.assert_array_equal(_render(lib, scene, cam, w, h, threads)[1], one)
