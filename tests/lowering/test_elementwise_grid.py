"""Lowering of small elementwise ops: binary ops whose size-1 or mergeable
dimensions are dropped first (rlx/runtime/params.py merge_dims, every
target), and the CPU's scalar loops (binary, copy, gather) split into
several groups from 2048 elements (Target.elementwise_grid). Their numerics:
tests/ops/test_elementwise.py and test_movement.py."""

from __future__ import annotations

from rlx.runtime.params import merge_dims
from rlx.runtime.target import host_target


def test_merge_dims():
    # [1, 9, 384] + broadcast [9, 384]: size-1 dim dropped, then one dense run.
    assert merge_dims((1, 9, 384), ((3456, 384, 1), (0, 384, 1))) == ((3456,), ((1,), (1,)))
    # A row broadcast keeps its two dimensions.
    assert merge_dims((9, 384), ((384, 1), (0, 1))) == ((9, 384), ((384, 1), (0, 1)))
    # Leading dims merge when every operand steps over them exactly.
    assert merge_dims((2, 3, 4, 5), ((60, 20, 5, 1), (0, 0, 5, 1))) == ((6, 20), ((20, 1), (0, 1)))
    assert merge_dims((1, 1), ((0, 0), (1, 1))) == ((1,), ((0,), (0,)))


def test_scalar_loops_get_more_groups_on_the_cpu_only():
    cpu = host_target(2, 1 << 30)
    assert cpu.elementwise_grid(3456)[0] == (1, 1, 1)
    assert cpu.elementwise_grid(3456, scalar=True)[0] == (2, 1, 1)
    assert cpu.elementwise_grid(10**7, scalar=True)[0] == (8, 1, 1)
    from dataclasses import replace
    gpu = replace(cpu, backend="cuda", simd_width=32)
    assert gpu.elementwise_grid(3456, scalar=True) == gpu.elementwise_grid(3456)


def test_cost_weighs_elements_on_the_cpu_only():
    cpu = host_target(2, 1 << 30)
    # 100 elements of cost 64 are 6,400 scalar ones: four chunks of 2,048 or fewer.
    assert cpu.elementwise_grid(100, scalar=True)[0] == (1, 1, 1)
    assert cpu.elementwise_grid(100, scalar=True, cost=64)[0] == (4, 1, 1)
    from dataclasses import replace
    gpu = replace(cpu, backend="cuda", simd_width=32)
    # One thread an element on a GPU whatever the cost: 10**6 elements, 3,907 groups of 256.
    assert gpu.elementwise_grid(10**6, scalar=True, cost=64) == ((3907, 1, 1), (256, 1, 1))
