"""Views: the no-copy reshape of strided views agrees with numpy on random
narrow/transpose chains (property test), and says "copy" only when needed
for the cases numpy itself can view."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rlx.ir.dtype import f32
from rlx.runtime.views import Storage, View


def _materialize(base: np.ndarray, v: View) -> np.ndarray:
    idx = np.full(v.shape, v.offset, dtype=np.int64)
    for ax, (d, s) in enumerate(zip(v.shape, v.strides)):
        shape = [1] * len(v.shape)
        shape[ax] = d
        idx = idx + np.arange(d).reshape(shape) * s
    return base[idx]


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**9))
def test_strided_reshape_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    base = np.arange(4 * 6 * 8 * 10, dtype=np.float32)
    v = View.dense(Storage("s", base.nbytes), f32, (4, 6, 8, 10))
    arr = base.reshape(4, 6, 8, 10)
    for _ in range(int(rng.integers(0, 3))):
        if rng.random() < 0.5:
            ax = int(rng.integers(0, len(v.shape)))
            if v.shape[ax] > 1:
                a = int(rng.integers(0, v.shape[ax] - 1))
                n = int(rng.integers(1, v.shape[ax] - a + 1))
                v = v.narrow(ax, a, n)
                index = [slice(None)] * arr.ndim
                index[ax] = slice(a, a + n)
                arr = arr[tuple(index)]
        else:
            perm = tuple(int(p) for p in rng.permutation(len(v.shape)))
            v, arr = v.transpose(perm), arr.transpose(perm)
    dims, rest = [], arr.size
    for f in (2, 3, 4, 5):
        while rest % f == 0 and rng.random() < 0.5:
            dims.append(f)
            rest //= f
    dims.append(rest)
    dims = tuple(int(d) for d in rng.permutation(dims))
    r = v.reshape(dims)
    if r is not None:
        np.testing.assert_array_equal(_materialize(base, r), arr.reshape(dims))
    else:   # rlx copies only where numpy cannot make a view either
        assert not np.shares_memory(arr.reshape(dims), base)


def test_narrow_of_packed_qkv_splits_into_heads_without_copy():
    v = View.dense(Storage("qkv", 0), f32, (2, 9, 3 * 4 * 8))      # [B, T, 3*H*D]
    k = v.narrow(2, 32, 32).reshape((2, 9, 4, 8))                  # K as [B, T, H, D]
    assert k is not None and k.strides == (9 * 96, 96, 8, 1) and k.offset == 32
