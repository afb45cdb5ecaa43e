"""repetition_penalty against rlx/reference/penalty.py (and a direct
statement of llama.cpp's rule) on the device under test: f32 and f16, one
history for every row or one per row, repeated ids applied once, padding
and out-of-range ids ignored, the penalty as run-time data."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

from .helpers import DTYPES, kernels_of, rand


def _graph(x_shape, h_shape, dtype):
    g = rlx.Graph()
    x = g.input("x", x_shape, dtype)
    g.set_outputs(y=g.repetition_penalty(x, g.input("h", h_shape, "i32"), g.input("p", (1,))))
    return g


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape,h_shape", [((1, 7), (5,)), ((3, 1001), (64,)), ((2, 3, 257), (2, 3, 40)),
                                             ((2, 50), (0,))])
@pytest.mark.parametrize("penalty", [1.0, 1.3, 0.7])
def test_penalty_matches_the_reference_bit_for_bit(rng, dtype, x_shape, h_shape, penalty):
    g = _graph(x_shape, h_shape, dtype)
    vocab = x_shape[-1]
    hist = rng.integers(-2, vocab + 2, size=h_shape).astype(np.int32)   # padding and out-of-range ids too
    if hist.size:
        hist.reshape(-1)[: hist.size // 2] = hist.reshape(-1)[0]          # many repeats of one id
    feed = {"x": rand(rng, x_shape, dtype, scale=3.0), "h": hist, "p": np.array([penalty], np.float32)}
    exe = rlx.compile(g)
    got = exe.run(feed)["y"]
    np.testing.assert_array_equal(got, rlx.run_reference(g, feed)["y"])
    assert got.dtype == feed["x"].dtype


def test_llama_cpp_rule_once_per_id():
    g = _graph((1, 6), (8,), "f32")
    x = np.array([[2.0, -2.0, 0.0, 3.0, -1.0, 5.0]], np.float32)
    feed = {"x": x, "h": np.array([0, 0, 0, 1, 1, 2, -1, 6], np.int32), "p": np.array([2.0], np.float32)}
    exe = rlx.compile(g)
    np.testing.assert_array_equal(exe.run(feed)["y"], [[1.0, -4.0, 0.0, 3.0, -1.0, 5.0]])
    # The penalty is data: the same executable at another value, and 1 is the identity.
    feed["p"] = np.array([4.0], np.float32)
    np.testing.assert_array_equal(exe.run(feed)["y"], [[0.5, -8.0, 0.0, 3.0, -1.0, 5.0]])
    feed["p"] = np.array([1.0], np.float32)
    np.testing.assert_array_equal(exe.run(feed)["y"], x)
    assert kernels_of(exe) == ["copy_f32_f32", "repetition_penalty_f32"]


def test_nan_and_infinities_follow_the_rule():
    g = _graph((1, 4), (4,), "f32")
    feed = {"x": np.array([[np.nan, np.inf, -np.inf, 1.0]], np.float32), "h": np.arange(4, dtype=np.int32),
            "p": np.array([2.0], np.float32)}
    got = rlx.compile(g).run(feed)["y"]
    np.testing.assert_array_equal(got, [[np.nan, np.inf, -np.inf, 0.5]])
    np.testing.assert_array_equal(rlx.run_reference(g, feed)["y"], got)


def test_bad_operands_are_refused():
    g = rlx.Graph()
    x = g.input("x", (2, 10))
    p = g.input("p", (1,))
    with pytest.raises(rlx.DTypeError, match="history must be i32"):
        g.repetition_penalty(x, g.input("hf", (4,)), p)
    with pytest.raises(rlx.ShapeError, match="one row per row"):
        g.repetition_penalty(x, g.input("h3", (3, 4), "i32"), p)
    with pytest.raises(rlx.DTypeError, match="one f32 value"):
        g.repetition_penalty(x, g.input("h", (4,), "i32"), g.input("p2", (2,)))
