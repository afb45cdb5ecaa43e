"""Lowering of small elementwise ops: binary ops whose size-1 or mergeable
dimensions are dropped first (rlx/runtime/params.py merge_dims, every
target), and the CPU's scalar loops (binary, copy, gather) split into
several groups from 2048 elements (Target.elementwise_grid). Numerics
against rlx/reference/core.py on the device under test."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_matches_reference

import rlx
from rlx.runtime.params import merge_dims
from rlx.runtime.target import host_target


def _rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(np.float16 if dtype == "f16" else np.float32)


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


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("shapes", [((1, 9, 384), (9, 384)), ((9, 384), (1, 384)), ((2, 3, 1, 700), (3, 1, 700)),
                                    ((5, 1, 2049), (1, 7, 2049)), ((4097,), (1,))])
def test_binary_broadcast_merged_and_split(rng, shapes, dtype):
    g = rlx.Graph()
    a, b = g.input("a", shapes[0], dtype), g.input("b", shapes[1], dtype)
    g.set_outputs(sum=g.add(a, b), diff=g.sub(b, a), prod=g.mul(a, b))
    assert_matches_reference(g, {"a": _rand(rng, shapes[0], dtype), "b": _rand(rng, shapes[1], dtype)})


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_strided_copy_and_gather_in_several_groups(rng, dtype):
    g = rlx.Graph()
    x = g.input("x", (70, 130), dtype)
    table = g.input("table", (50, 300), dtype)
    idx = g.input("idx", (33,), "i32")
    g.set_outputs(t=g.copy(g.transpose(x, (1, 0))), rows=g.gather(table, idx))
    assert_matches_reference(g, {"x": _rand(rng, (70, 130), dtype), "table": _rand(rng, (50, 300), dtype),
                                 "idx": rng.integers(0, 50, size=33).astype(np.int32)})
