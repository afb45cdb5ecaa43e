"""Data movement against rlx/reference/core.py on the device under test:
gather, concat, copy and the reshape / transpose / narrow views (outputs
that are views or params are materialized), f32 and f16, in one group and
in several."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_matches_reference

import rlx

from .helpers import DTYPES
from .helpers import rand as _rand


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", ["i32", "i64"])
@pytest.mark.parametrize("idx_shape", [(1,), (7,), (3, 11)])
def test_gather(rng, dtype, index_dtype, idx_shape):
    g = rlx.Graph()
    table = g.param("table", (33, 17), dtype)
    idx = g.input("idx", idx_shape, index_dtype)
    g.set_outputs(y=g.gather(table, idx))
    np_idx = rng.integers(0, 33, idx_shape).astype(np.int32 if index_dtype == "i32" else np.int64)
    assert_matches_reference(g, {"idx": np_idx}, {"table": _rand(rng, (33, 17), dtype)})


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_copy_and_views(rng, dtype):
    g = rlx.Graph()
    x = g.input("x", (4, 7, 9), dtype)
    t = g.transpose(x, (2, 0, 1))
    nar = g.narrow(t, 1, 1, 2)
    g.set_outputs(t=g.copy(t), n=g.copy(nar), r=g.reshape(nar, (9, 14)))
    assert_matches_reference(g, {"x": _rand(rng, (4, 7, 9), dtype)})


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_strided_copy_and_gather_in_several_groups(rng, dtype):
    g = rlx.Graph()
    x = g.input("x", (70, 130), dtype)
    table = g.input("table", (50, 300), dtype)
    idx = g.input("idx", (33,), "i32")
    g.set_outputs(t=g.copy(g.transpose(x, (1, 0))), rows=g.gather(table, idx))
    assert_matches_reference(g, {"x": _rand(rng, (70, 130), dtype), "table": _rand(rng, (50, 300), dtype),
                                 "idx": rng.integers(0, 50, size=33).astype(np.int32)})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5, 7, 11), (2, 1, 129, 3), (37, 1001)])
def test_strided_walks_over_every_chunk_boundary(rng, dtype, shape):
    """The CPU's copy and elementwise-chain loads walk a chunk as runs of
    the innermost dimension from the chunk's first coordinates (an odometer,
    no division per element): chunks that begin and end mid-run, runs of
    one element, broadcast (zero) strides, size-1 dimensions, casts, every
    permutation's inner stride; the GPUs' per-element form on cuda."""
    g = rlx.Graph()
    x = g.input("x", shape, dtype)
    rank, np_dt = len(shape), np.float16 if dtype == "f16" else np.float32
    flipped = g.transpose(x, tuple(reversed(range(rank))))
    rolled = g.transpose(x, tuple(range(1, rank)) + (0,))
    cut = g.narrow(x, rank - 1, 1, shape[-1] - 2) if shape[-1] > 2 else x
    row = g.input("row", (shape[-1],), dtype)
    outs = {"flipped": g.copy(flipped), "rolled": g.copy(rolled), "cut": g.copy(cut),
            "chain": g.exp(g.mul(g.add(flipped, g.constant(np.array(0.5, np_dt))), g.constant(np.array(0.25, np_dt)))),
            "broadcast": g.add(g.mul(x, row), g.transpose(g.transpose(x, (1, 0) + tuple(range(2, rank))),
                                                          (1, 0) + tuple(range(2, rank))))}
    if dtype == "f32":
        outs["cast"] = g.cast(rolled, "f16")
    g.set_outputs(**outs)
    assert_matches_reference(g, {"x": _rand(rng, shape, dtype), "row": _rand(rng, (shape[-1],), dtype)})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(rng, dtype, axis):
    g = rlx.Graph()
    a, b = g.input("a", (2, 3, 4), dtype), g.input("b", (2, 3, 4), dtype)
    c = g.transpose(g.input("c", (4, 3, 2), dtype), (2, 1, 0))
    g.set_outputs(y=g.concat([a, b, c], axis=axis))
    assert_matches_reference(g, {"a": _rand(rng, (2, 3, 4), dtype), "b": _rand(rng, (2, 3, 4), dtype),
                                 "c": _rand(rng, (4, 3, 2), dtype)})


def test_output_that_is_a_parameter_or_view_is_materialized(rng):
    g = rlx.Graph()
    w = g.param("w", (3, 4))
    x = g.input("x", (4, 3))
    g.set_outputs(w=w, xt=g.transpose(x, (1, 0)), x=x)
    assert_matches_reference(g, {"x": _rand(rng, (4, 3), "f32")}, {"w": _rand(rng, (3, 4), "f32")})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("length,n,hop", [(16, 4, 2), (17, 5, 3), (10, 9, 1), (10, 3, 5), (100, 33, 7)])
def test_frames_view(rng, dtype, length, n, hop):
    """frames: overlapping (hop < n), touching and gapped (hop > n) frames
    of the last axis, read in place by a strided consumer (mul), copied,
    and framing a narrowed (strided) input."""
    g = rlx.Graph()
    x = g.input("x", (3, length), dtype)
    w = g.input("w", (n,), dtype)
    f = g.frames(x, n, hop)
    assert tuple(f.shape) == (3, 1 + (length - n) // hop, n)
    sub = g.frames(g.narrow(g.transpose(g.input("t", (length, 3), dtype), (1, 0)), 1, 1, length - 1), n, hop)
    g.set_outputs(f=f, wf=g.mul(f, w), c=g.copy(f), s=sub)
    assert_matches_reference(g, {"x": _rand(rng, (3, length), dtype), "w": _rand(rng, (n,), dtype),
                                 "t": _rand(rng, (length, 3), dtype)})


def test_frames_refuses_bad_arguments():
    g = rlx.Graph()
    x = g.input("x", (10,))
    with pytest.raises(rlx.ShapeError, match="shorter than one frame"):
        g.frames(x, 11, 1)
    with pytest.raises(rlx.ShapeError, match=">= 1"):
        g.frames(x, 4, 0)
    with pytest.raises(rlx.GraphError, match="int"):
        g.frames(x, 4.5, 1)
