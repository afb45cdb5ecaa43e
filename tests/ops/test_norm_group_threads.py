"""The fused norm kernels of issue 18 (rmsnorm_add of shaders/norm.h,
rmsnorm_rope of shaders/rope.h) with G real threads per group on the CPU:
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

from .test_splat_group_threads import _ptr, lib  # noqa: F401  (lib: the harness build, a module fixture)

GROUP_SIZES = [1, 3, 32, 64, 256]
TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def gt(lib):  # noqa: F811
    u, f, p = ctypes.c_uint, ctypes.c_float, ctypes.c_void_p
    lib.gt_rmsnorm_add.argtypes = [p, p, p, p, u, u, f, f, u, u, u, u, p]
    lib.gt_rmsnorm_add.restype = None
    lib.gt_rmsnorm_rope.argtypes = [p, p, p, p, p, u, u, u, u, u, u, f, u, u, p]
    lib.gt_rmsnorm_rope.restype = None
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
