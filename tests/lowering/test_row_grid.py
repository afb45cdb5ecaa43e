"""Target.row_grid: how row kernels split into groups on a GPU-like target
(pure Python: the shapes the lowering asks the shims for). The numerics of
the stacked groups: tests/ops/test_softmax.py."""

from __future__ import annotations

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
