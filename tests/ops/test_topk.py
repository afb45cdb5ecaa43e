"""topk and topk_values (Graph.topk) against rlx/reference/topk.py and
torch.topk on the device under test: odd shapes, f32 and f16, k from 1 to
256, ties (to the lower index), NaN (above +inf, as torch) and infinities.

The CPU lowers topk to topk_select and GPUs to topk_tile passes; the
`path` parameter forces the tiled passes at small chunks (several passes
over candidates) and at the full tile, so the CPU runs the GPU kernel's
logic too, and the GPU the one-row selection."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx.lowering import topk as lowering_topk

from .helpers import DTYPES, kernels_of, np_dtype, rand

# None: the device's own choice; an int: every row in topk_tile passes of
# that many entries per group; 0: topk_select.
PATHS = [None, 0, 16, 64, lowering_topk.TILE]


def _force(monkeypatch, chunk: int | None, k: int) -> None:
    if chunk is None:
        return
    if chunk:
        chunk = max(chunk, 1 << (2 * k - 1).bit_length())   # at least 2k, a power of two
    monkeypatch.setattr(lowering_topk, "tile_chunk", lambda lw, rows, n, k_: chunk)


def _run(data: np.ndarray, k: int) -> tuple[dict, dict, list]:
    g = rlx.Graph()
    x = g.input("x", data.shape, "f16" if data.dtype == np.float16 else "f32")
    values, indices = g.topk(x, k)
    g.set_outputs(v=values, i=indices)
    exe = rlx.compile(g)
    return exe.run(x=data), rlx.run_reference(g, {"x": data}), kernels_of(exe)


def _check(data: np.ndarray, k: int) -> dict:
    got, want, _ = _run(data, k)
    np.testing.assert_array_equal(got["i"], want["i"])
    assert got["i"].dtype == np.int32 and got["v"].dtype == data.dtype
    np.testing.assert_array_equal(got["v"], want["v"])   # gathered, not computed: bit for bit (NaN == NaN here)
    return got


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("shape,k", [((1, 1), 1), ((7,), 3), ((3, 41), 40), ((2, 3, 257), 3), ((1, 300), 256),
                                     ((5, 1000), 1), ((2, 4099), 40), ((1, 9000), 256)])
def test_topk_matches_the_reference(rng, monkeypatch, dtype, path, shape, k):
    _force(monkeypatch, path, k)
    _check(rand(rng, shape, dtype), k)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_ties_go_to_the_lower_index(rng, monkeypatch, path, dtype):
    _force(monkeypatch, path, 40)
    # Few distinct values over long rows: every cut falls inside a run of ties.
    data = rng.integers(-3, 4, size=(3, 2500)).astype(np_dtype(dtype))
    data[1] = 0.0
    data[1, ::7] = -0.0   # -0 ties with +0
    data[2] = 1.0
    got = _check(data, 40)
    np.testing.assert_array_equal(got["i"][1], np.arange(40))
    np.testing.assert_array_equal(got["i"][2], np.arange(40))
    np.testing.assert_array_equal(got["i"][0], np.flatnonzero(data[0] == 3)[:40])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [5, 33, 600])
def test_nan_and_infinities_against_torch(rng, monkeypatch, path, dtype, cols):
    _force(monkeypatch, path, 3)
    data = rand(rng, (4, cols), dtype)
    data[0, cols // 2] = np.nan               # one NaN: it ranks first
    data[1, [1, cols - 1]] = np.inf           # +inf ties: lower index first
    data[1, 0] = -np.inf
    data[2, :] = -np.inf                      # all -inf
    data[3, ::2] = np.nan                     # many NaNs: first by index
    got = _check(data, 3)
    t_values, t_indices = torch.topk(torch.from_numpy(data.astype(np.float32)), 3, dim=-1)
    np.testing.assert_array_equal(got["v"].astype(np.float32), t_values.numpy())
    # torch leaves the order of ties open; compare indices where the values are distinct.
    for r in (0, 1):
        row = data[r].astype(np.float32)
        distinct = [j for j in range(3) if np.sum((row == row[got["i"][r, j]]) | (np.isnan(row) & np.isnan(
            row[got["i"][r, j]]))) == 1]
        np.testing.assert_array_equal(got["i"][r, distinct], t_indices.numpy()[r, distinct])
    assert got["i"][0, 0] == cols // 2
    np.testing.assert_array_equal(got["i"][1, :2], [1, cols - 1])
    np.testing.assert_array_equal(got["i"][2], [0, 1, 2])
    np.testing.assert_array_equal(got["i"][3], [0, 2, 4])


@pytest.mark.parametrize("chunk,want", [(0, ["topk_select_f32"]), (16, ["topk_tile_f32"] * 3)])
def test_the_forced_path_is_the_one_taken(rng, monkeypatch, chunk, want):
    _force(monkeypatch, chunk, 3)
    _, _, kernels = _run(rand(rng, (2, 100), "f32"), 3)
    assert kernels == want + ["topk_values_f32"]   # 100 -> 7 chunks x 3 = 21 -> 2 x 3 = 6 -> one chunk


def test_a_vocabulary_row_takes_several_tiled_passes(rng, monkeypatch):
    """The decoding case: one 262144-entry row in 128 groups, then merges."""
    _force(monkeypatch, lowering_topk.TILE, 40)
    data = rand(rng, (1, 262144), "f32") * 8
    got, want, kernels = _run(data, 40)
    np.testing.assert_array_equal(got["i"], want["i"])
    assert kernels.count("topk_tile_f32") >= 2


@pytest.mark.parametrize("k,n,msg", [(0, 5, "k must be in"), (257, 300, "k must be in"), (6, 5, "exceeds")])
def test_bad_k_is_refused_at_graph_build(k, n, msg):
    g = rlx.Graph()
    x = g.input("x", (2, n))
    with pytest.raises(rlx.RlxError, match=msg):
        g.topk(x, k)
    with pytest.raises(rlx.ShapeError):
        g.topk(x, k)


def test_bad_operands_are_refused():
    g = rlx.Graph()
    with pytest.raises(rlx.DTypeError):
        g.topk(g.input("i", (4,), "i32"), 2)
    x = g.input("x", (2, 5))
    with pytest.raises(rlx.DTypeError):
        g.op("topk_values", (x, g.input("f", (2, 3))))
    with pytest.raises(rlx.ShapeError):
        g.op("topk_values", (x, g.input("j", (3, 3), "i32")))


def test_values_of_out_of_range_indices_are_nan():
    g = rlx.Graph()
    x = g.input("x", (2, 4))
    idx = g.input("idx", (2, 3), "i32")
    g.set_outputs(v=g.op("topk_values", (x, idx)))
    feed = {"x": np.arange(8, dtype=np.float32).reshape(2, 4), "idx": np.array([[3, -1, 0], [4, 1, 2]], np.int32)}
    got = rlx.compile(g).run(feed)["v"]
    np.testing.assert_array_equal(got, [[3, np.nan, 0], [np.nan, 5, 6]])
    np.testing.assert_array_equal(rlx.run_reference(g, feed)["v"], got)
