"""The fused norm kernels of issue 18 (rmsnorm_add of shaders/norm.h,
rmsnorm_rope of shaders/rope.h, and gemv1n's staging of the same norm chain
into its x tile, shaders/quant_gemv.h) with G real threads per group on the CPU:
tests/c/group_threads.cpp runs them behind pthreads that share group memory,
meet at barriers and reduce through a real group sum, as a GPU's group
would (the host device runs one-thread groups, so --rlx-group-size changes
nothing there). Checked against rlx/reference (float64) at G = 1, 3, 32, 64
and 256 on odd row widths, f32, to the suite's f32 tolerance. A race that
does not fire in a run is not caught; GPUs stay to be run."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from rlx.ir import TensorType
from rlx.ir.dtype import f32
from rlx.ir.ops.rope import rope_inv_freq
from rlx.reference import REFERENCE

from .helpers import GROUP_THREADS_MARK
from .test_splat_group_threads import _ptr, lib  # noqa: F401  (lib: the harness build, a module fixture)

pytestmark = GROUP_THREADS_MARK   # the harness builds beside the suite

GROUP_SIZES = [1, 3, 32, 64, 256]
TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def gt(lib):  # noqa: F811
    u, f, p = ctypes.c_uint, ctypes.c_float, ctypes.c_void_p
    lib.gt_rmsnorm_add.argtypes = [p, p, p, p, u, u, f, f, u, u, u, u, p]
    lib.gt_rmsnorm_add.restype = None
    lib.gt_rmsnorm_rope.argtypes = [p, p, p, p, p, u, u, u, u, u, u, f, u, u, p]
    lib.gt_rmsnorm_rope.restype = None
    lib.gt_stage_x_norm.argtypes = [p, p, p, p, u, f, f, u, u, u, u, u, p, p]
    lib.gt_stage_x_norm.restype = None
    return lib


def _f32(rng, shape, scale=1.0, offset=0.0):
    return np.ascontiguousarray(rng.standard_normal(shape) * scale + offset, dtype=np.float32)


@pytest.mark.parametrize("threads", GROUP_SIZES)
@pytest.mark.parametrize("rows, cols", [(1, 1), (3, 7), (4, 33), (2, 640), (2, 1025)])
@pytest.mark.parametrize("then_norm", [False, True])
def test_rmsnorm_add_with_threads(gt, rng, threads, rows, cols, then_norm):
    o, x = _f32(rng, (rows, cols), 3.0), _f32(rng, (rows, cols), offset=1.0)
    w, w_next = _f32(rng, (cols,)), _f32(rng, (cols,))
    attrs = dict(eps=1e-6, add_one=True, next_eps=1e-5, next_add_one=False)
    y = np.full((2 if then_norm else 1, rows, cols), np.nan, np.float32)
    gt.gt_rmsnorm_add(_ptr(o), _ptr(x), _ptr(w), _ptr(w_next), rows, cols, attrs["eps"], attrs["next_eps"], 1, 0,
                      int(then_norm), threads, _ptr(y))
    op = "rmsnorm_add_rmsnorm" if then_norm else "rmsnorm_add"
    out = TensorType((2, rows, cols) if then_norm else (rows, cols), f32)
    want = REFERENCE[op]([o, x, w, w_next] if then_norm else [o, x, w], attrs, out)
    np.testing.assert_allclose(y.reshape(want.shape), want, **TOL)


@pytest.mark.parametrize("threads", GROUP_SIZES)
@pytest.mark.parametrize("k", [32, 96, 640, 4096])   # up to 8 a thread in registers, more streamed
@pytest.mark.parametrize("then_norm", [False, True])
def test_gemv1n_staging_with_threads(gt, rng, threads, k, then_norm):
    """Three groups each stage the chain into their own x tile; group 0 also
    writes the chain's output as rmsnorm_add would."""
    groups = 3
    o, r = _f32(rng, (1, k), 3.0), _f32(rng, (1, k), offset=1.0)
    w, w_next = _f32(rng, (k,)), _f32(rng, (k,))
    attrs = dict(eps=1e-6, add_one=True, next_eps=1e-5, next_add_one=False)
    out = np.full((2, k), np.nan, np.float32)
    tiles = np.full((groups, k), np.nan, np.float32)
    gt.gt_stage_x_norm(_ptr(o), _ptr(r), _ptr(w), _ptr(w_next), k, attrs["eps"], attrs["next_eps"], 1, 0,
                       2 if then_norm else 1, groups, threads, _ptr(out), _ptr(tiles))
    if then_norm:
        want = REFERENCE["rmsnorm_add_rmsnorm"]([o, r, w, w_next], attrs, TensorType((2, 1, k), f32)).reshape(2, k)
    else:
        want = REFERENCE["rmsnorm_add"]([o, r, w], attrs, TensorType((1, k), f32)).reshape(1, k)
    np.testing.assert_allclose(out[:len(want)], want, **TOL)
    assert np.isnan(out[len(want):]).all()   # nothing past the chain's output
    for tile in tiles:   # the GEMV's x: the normed sums, or the sums
        np.testing.assert_allclose(tile, want[0], **TOL)


@pytest.mark.parametrize("threads", GROUP_SIZES)
@pytest.mark.parametrize("t, h, d, rotary_dim", [(1, 4, 64, 64), (3, 2, 6, 6), (2, 3, 34, 18), (2, 1, 256, 256)])
@pytest.mark.parametrize("layout", ["neox", "interleaved"])
@pytest.mark.parametrize("second_weight", [False, True])
def test_rmsnorm_rope_with_threads(gt, rng, threads, t, h, d, rotary_dim, layout, second_weight):
    """second_weight: the heads from h // 2 on normed by their own weight
    (a query's and a key's heads in one dispatch)."""
    x, w, w_b = _f32(rng, (t, h, d), 4.0), _f32(rng, (d,)), _f32(rng, (d,))
    pos = np.ascontiguousarray(rng.integers(0, 5000, (t,)), dtype=np.int32)
    attrs = dict(eps=1e-6, add_one=True, base=1e6, layout=layout, rotary_dim=rotary_dim,
                 weight_b_from=h // 2 if second_weight else h)
    table = rope_inv_freq(attrs["base"], rotary_dim)
    y = np.full((t, h, d), np.nan, np.float32)
    gt.gt_rmsnorm_rope(_ptr(x), _ptr(pos), _ptr(table), _ptr(w), _ptr(w_b if second_weight else w),
                       attrs["weight_b_from"], t, h, d, rotary_dim, int(layout == "interleaved"), attrs["eps"], 1,
                       threads, _ptr(y))
    inputs = [x, pos, w, w_b] if second_weight else [x, pos, w]
    want = REFERENCE["rmsnorm_rope"](inputs, attrs, TensorType((t, h, d), f32))
    np.testing.assert_allclose(y, want, **TOL)
