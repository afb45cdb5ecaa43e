"""Target.row_grid: how row kernels split into groups on a GPU-like target
(pure Python: the shapes the lowering asks the shims for)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_matches_reference

import rlx
from rlx.runtime.target import ROWS_PER_GROUP, Target, host_target

H200_LIKE = Target("cuda", 132, 1024, 32, 1 << 40)


def test_one_simd_group_rows_are_stacked_when_rows_are_many():
    rows = 32 * 12 * 128 + 3                      # not a multiple of the stack
    groups, threads = H200_LIKE.row_grid(rows, 128, stacked=True)
    assert threads == (32, ROWS_PER_GROUP, 1)
    assert groups == (-(-rows // ROWS_PER_GROUP), 1, 1)
    # unchanged: not asked for, few rows, or rows wider than one SIMD group
    assert H200_LIKE.row_grid(rows, 128) == ((rows, 1, 1), (32, 1, 1))
    assert H200_LIKE.row_grid(100, 128, stacked=True) == ((100, 1, 1), (128, 1, 1))
    assert H200_LIKE.row_grid(rows, 384, stacked=True) == ((rows, 1, 1), (96, 1, 1))


def test_the_cpu_never_stacks():
    assert host_target(2, 1 << 40).row_grid(10_000, 16, stacked=True) == ((10_000, 1, 1), (1, 1, 1))


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_masked_softmax_over_many_short_rows(rng, dtype):
    """Enough rows for the GPU's stacked groups (4 x 132 cores and more),
    a row count that leaves the last group part-empty, short odd rows."""
    shape = (3, 7, 29, 19)                         # 609 rows
    g = rlx.Graph()
    x = g.input("x", shape, dtype)
    m = g.input("m", (3, 1, 1, 19), dtype)
    g.set_outputs(y=g.masked_softmax(x, m, scale=0.3))
    np_dtype = np.float32 if dtype == "f32" else np.float16
    mask = np.where(rng.random((3, 1, 1, 19)) < 0.3, -np.inf, 0.0).astype(np_dtype)
    assert_matches_reference(g, {"x": (4 * rng.standard_normal(shape)).astype(np_dtype), "m": mask})
