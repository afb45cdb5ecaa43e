"""State (g.state) and set_rows: rows written in place at run-time slots,
kept across runs, shared between executables, ring-buffer wrap, and the
graph rules that keep the in-place write well ordered. Oracle:
rlx.reference.run_reference with a state dict carried across runs."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.errors import DTypeError, GraphError, ShapeError
from rlx.reference import run_reference


def _cache_graph(rows: int, t: int, width: int, dtype: str) -> rlx.Graph:
    """Writes x [t, width] into a state [rows, width]; outputs the state
    after the write, times two (a reader of the written value)."""
    g = rlx.Graph()
    x = g.input("x", (t, width), dtype)
    slot = g.input("slot", (2,), "i32")
    cache = g.set_rows(g.state("cache", (rows, width), dtype), x, slot)
    g.set_outputs(y=g.add(cache, cache))
    return g


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("rows, t, width", [(7, 3, 5), (16, 1, 33), (5, 9, 3), (1, 4, 8)])
def test_set_rows_matches_the_reference_across_runs(dtype, rows, t, width, rng):
    g = _cache_graph(rows, t, width, dtype)
    exe = rlx.compile(g)
    ref_state: dict[str, np.ndarray] = {}
    slots = [(0, t), (rows - 1, t), (3, 1), (-2, t), (rows * 3 + 1, max(0, t - 1)), (2, 0), (1, t + 5), (0, -3)]
    for start, count in slots:
        x = rng.standard_normal((t, width)).astype(np.float16 if dtype == "f16" else np.float32)
        slot = np.array([start, count], np.int32)
        got = exe.run(x=x, slot=slot)["y"]
        want = run_reference(g, {"x": x, "slot": slot}, state=ref_state)["y"]
        np.testing.assert_array_equal(got, want, err_msg=f"slot {(start, count)}")
        np.testing.assert_array_equal(exe.read_state("cache"), ref_state["cache"])


def test_state_is_shared_between_executables(rng):
    """A prefill-like executable writes 4 rows, a decode-like one appends
    one row at a time to the same buffer."""
    rows, width = 8, 6
    g4, g1 = _cache_graph(rows, 4, width, "f32"), _cache_graph(rows, 1, width, "f32")
    first = rlx.compile(g4)
    second = rlx.compile(g1, share_params_with=first)
    x4 = rng.standard_normal((4, width)).astype(np.float32)
    first.run(x=x4, slot=np.array([0, 4], np.int32))
    x1 = rng.standard_normal((1, width)).astype(np.float32)
    y = second.run(x=x1, slot=np.array([4, 1], np.int32))["y"]
    want = np.zeros((rows, width), np.float32)
    want[:4], want[4] = x4, x1[0]
    np.testing.assert_array_equal(y, 2 * want)
    np.testing.assert_array_equal(first.read_state("cache"), want)
    first.reset_state()
    assert not second.read_state("cache").any()
    second.write_state("cache", np.ones((rows, width), np.float32))
    assert (first.read_state("cache") == 1).all()
    with pytest.raises(rlx.errors.InputError, match="shape"):
        second.write_state("cache", np.ones((rows + 1, width), np.float32))
    with pytest.raises(rlx.errors.InputError, match="unknown state"):
        second.read_state("nope")


def test_set_rows_runs_when_nothing_reads_it(rng):
    g = rlx.Graph()
    x = g.input("x", (2, 3))
    g.set_rows(g.state("c", (4, 3)), x, g.input("slot", (2,), "i32"))
    g.set_outputs(y=g.add(x, x))
    exe = rlx.compile(g)
    xv = rng.standard_normal((2, 3)).astype(np.float32)
    exe.run(x=xv, slot=np.array([1, 2], np.int32))
    np.testing.assert_array_equal(exe.read_state("c")[1:3], xv)


def test_state_rules():
    g = rlx.Graph()
    s = g.state("s", (4, 3))
    x = g.input("x", (2, 3))
    slot = g.input("slot", (2,), "i32")
    g.add(s, s)   # a direct read of the old value, which the write below does not depend on
    with pytest.raises(GraphError, match="does not feed the write"):
        g.set_rows(s, x, slot)
    g = rlx.Graph()
    s = g.state("s", (4, 3))
    x = g.input("x", (2, 3))
    slot = g.input("slot", (2,), "i32")
    with pytest.raises(GraphError, match="input 0 must be a state"):
        g.set_rows(x, x, slot)
    g.set_rows(s, x, slot)
    with pytest.raises(GraphError, match="already written"):
        g.set_rows(s, x, slot)
    with pytest.raises(GraphError, match="directly after this graph writes it"):
        g.add(s, s)
    with pytest.raises(DTypeError, match="values are f16"):
        g.set_rows(g.state("h", (4, 3)), g.input("x16", (2, 3), "f16"), slot)
    with pytest.raises(ShapeError, match="rows of the state"):
        g.set_rows(g.state("w", (4, 5)), x, slot)
    with pytest.raises(GraphError, match="slot must be i32"):
        g.set_rows(g.state("v", (4, 3)), x, g.input("slot3", (3,), "i32"))
    with pytest.raises(GraphError, match="duplicate name"):
        g.state("s", (4, 3))
    with pytest.raises(DTypeError):
        g.state("q", (4, 32), "q8_0")


def test_chained_writes_follow_the_graph_rules():
    """A state is written again through what the earlier write returned
    (several decode steps in one graph); each overwritten value's readers
    must feed the next write, a value is written once, and a superseded
    value cannot be read later."""
    g = rlx.Graph()
    s = g.state("s", (4, 3))
    x = g.input("x", (1, 3))
    slot = g.input("slot", (2,), "i32")
    w1 = g.set_rows(s, x, slot)
    seen = g.add(w1, w1)   # reads the first write's result; the second write does not depend on it
    with pytest.raises(GraphError, match="does not feed the write"):
        g.set_rows(w1, x, slot)
    w2 = g.set_rows(w1, g.narrow(seen, 0, 0, 1), slot)   # ordered after the read
    with pytest.raises(GraphError, match="already written again"):
        g.set_rows(w1, x, slot)
    with pytest.raises(GraphError, match="before a later write"):
        g.mul(w1, w1)
    g.set_rows(w2, x, slot)
    with pytest.raises(GraphError, match="input 0 must be a state"):
        g.set_rows(seen, x, slot)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("rows, steps", [(5, 3), (2, 4), (8, 1)])
def test_chained_writes_match_the_reference_across_runs(dtype, rows, steps, rng):
    """steps writes of one row each into a ring of `rows` rows, every step
    reading the state as its write left it (a decode step's attention),
    the next row computed from that read: outputs and state against the
    reference across runs, ring wrap included."""
    g = rlx.Graph()
    x = g.input("x", (1, 4), dtype)
    slots = g.input("slots", (steps, 2), "i32")
    state = g.state("ring", (rows, 4), dtype)
    outs = {}
    row = x
    for i in range(steps):
        state = g.set_rows(state, row, g.reshape(g.narrow(slots, 0, i, 1), (2,)))
        total = g.sum(state, axis=0, keepdims=True)   # reads every row, as attention does
        outs[f"y{i}"] = total
        row = g.add(g.mul(row, g.constant(np.full((1, 4), 0.5), dtype=dtype)),
                    g.mul(total, g.constant(np.full((1, 4), 0.25), dtype=dtype)))
    g.set_outputs(**outs)
    exe = rlx.compile(g)
    ref_state: dict[str, np.ndarray] = {}
    np_dtype = np.float16 if dtype == "f16" else np.float32
    position = 0
    for run in range(4):
        feed = {"x": rng.standard_normal((1, 4)).astype(np_dtype),
                "slots": np.array([[position + i, 1] for i in range(steps)], np.int32)}
        position += steps
        got = exe.run(feed)
        want = run_reference(g, feed, state=ref_state)
        tol = 2e-3 if dtype == "f16" else 1e-5
        for name in want:
            np.testing.assert_allclose(got[name].astype(np.float64), want[name].astype(np.float64), rtol=tol,
                                       atol=tol, err_msg=f"{name}, run {run}")
        np.testing.assert_allclose(exe.read_state("ring").astype(np.float64), ref_state["ring"].astype(np.float64),
                                   rtol=tol, atol=tol)


def test_f16_policy_casts_rows_to_the_state_dtype(rng):
    g = _cache_graph(6, 2, 4, "f32")
    exe = rlx.compile(g, precision="f16")
    x = rng.standard_normal((2, 4)).astype(np.float32)
    exe.run(x=x, slot=np.array([0, 2], np.int32))
    np.testing.assert_allclose(exe.read_state("cache")[:2], x, rtol=1e-3)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_a_read_of_the_old_state_that_feeds_the_write_runs_before_it(rng, dtype):
    """keys = concat(the ring's old rows, new rows); the new rows are
    written from that concatenation (a chunk's attention over a ring it is
    about to overwrite): the output holds the rows the run found, run after
    run, and the state the rows written."""
    g = rlx.Graph()
    s = g.state("ring", (5, 3), dtype)
    x = g.input("x", (4, 3), dtype)
    both = g.concat([s, x], axis=0)
    g.set_rows(s, g.narrow(both, 0, 5, 4), g.input("slot", (2,), "i32"))
    g.set_outputs(y=g.mul(both, both))
    exe = rlx.compile(g)
    ring = np.zeros((5, 3))
    np_dtype = np.float16 if dtype == "f16" else np.float32
    for start in (0, 4, 7):
        xv = rng.standard_normal((4, 3)).astype(np_dtype)
        got = exe.run(x=xv, slot=np.array([start, 4], np.int32))["y"]
        want = np.concatenate([ring, xv.astype(np.float64)]) ** 2
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3 if dtype == "f16" else 1e-6)
        for t in range(4):
            ring[(start + t) % 5] = xv[t]
        np.testing.assert_array_equal(exe.read_state("ring"), ring.astype(np_dtype))


def _kv_graph(rows: int, t: int, width: int, dtype: str, between: bool) -> rlx.Graph:
    """A decoder layer's cache writes: K and V rows at one slot, V computed
    after the K write (as a separate projection is); with ``between``, a
    reader of the written K cache comes before the V write."""
    g = rlx.Graph()
    k = g.input("k", (t, width), dtype)
    v0 = g.input("v", (t, width), dtype)
    slot = g.input("slot", (2,), "i32")
    k_cache = g.set_rows(g.state("cache.k", (rows, width), dtype), k, slot)
    outs = {}
    v = g.mul(v0, v0)
    if between:
        seen = g.add(k_cache, k_cache)
        outs["seen"] = seen
        v = g.add(v, g.narrow(seen, 0, 0, t))
    v_cache = g.set_rows(g.state("cache.v", (rows, width), dtype), v, slot)
    outs["kv"] = g.add(k_cache, g.mul(v_cache, v_cache))   # one reader of both, as attention
    g.set_outputs(**outs)
    return g


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("rows, t, width, between", [(7, 1, 5, False), (16, 3, 33, False), (5, 9, 3, False),
                                                     (8, 1, 16, True)])
def test_two_writes_at_one_slot_run_as_one_dispatch(dtype, rows, t, width, between, rng):
    """K and V writes at one slot become one set_rows_pair dispatch where no
    thunk between them uses the first write's state, values or slot (a
    reader of the written K cache in between keeps them apart); the
    states match the reference across runs either way, ring wrap included."""
    from .helpers import kernels_of

    g = _kv_graph(rows, t, width, dtype, between)
    exe = rlx.compile(g)
    kernels = [k for k in kernels_of(exe) if k.startswith("set_rows")]
    assert kernels == ([f"set_rows_{dtype}"] * 2 if between else [f"set_rows_pair_{dtype}"])
    ref_state: dict[str, np.ndarray] = {}
    np_dtype = np.float16 if dtype == "f16" else np.float32
    for start, count in [(0, t), (rows - 1, t), (-2, t), (rows * 3 + 1, max(0, t - 1)), (1, t + 5), (0, -3)]:
        feed = {"k": rng.standard_normal((t, width)).astype(np_dtype),
                "v": rng.standard_normal((t, width)).astype(np_dtype), "slot": np.array([start, count], np.int32)}
        got = exe.run(feed)
        want = run_reference(g, feed, state=ref_state)
        # f16: kv's add(k, mul(v, v)) runs as one fused pass that rounds once, where
        # the reference rounds the product too: one f16 rounding of the largest
        # term apart, in absolute terms where k and v^2 cancel.
        for name in want:
            ref = want[name].astype(np.float64)
            atol = 1e-3 * float(np.abs(ref).max(initial=0.0)) if dtype == "f16" else 0.0
            np.testing.assert_allclose(got[name].astype(np.float64), ref, rtol=1e-3 if dtype == "f16" else 1e-6,
                                       atol=atol, err_msg=f"{name} at {(start, count)}")
        for name in ("cache.k", "cache.v"):   # v = v0^2 + seen: fused as kv above
            ref = ref_state[name].astype(np.float64)
            atol = 1e-3 * float(np.abs(ref).max(initial=0.0)) if dtype == "f16" else 0.0
            np.testing.assert_allclose(exe.read_state(name).astype(np.float64), ref,
                                       rtol=1e-3 if dtype == "f16" else 1e-6, atol=atol)
