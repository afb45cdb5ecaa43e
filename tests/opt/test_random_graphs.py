"""Random graphs through the whole pipeline: the memory plan never lets two
simultaneously live values share bytes, and results match the reference
(which they could not if it did). Also: output pinning and its fallback,
RLX_ARENA_NO_REUSE, and hazard barriers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlx
from rlx.opt.memory import check_plan


def build_random_graph(seed: int, n_ops: int):
    rng = np.random.default_rng(seed)
    rows, cols = int(rng.integers(1, 6)), int(rng.integers(1, 40))
    g = rlx.Graph()
    pool = [g.input("x0", (rows, cols)), g.input("x1", (rows, cols))]
    params = {}
    for i in range(n_ops):
        kind = rng.choice(["add", "mul", "gelu", "silu", "softmax", "layernorm", "matmul", "transpose_add"])
        a = pool[int(rng.integers(len(pool)))]
        b = pool[int(rng.integers(len(pool)))]
        if kind in ("add", "mul"):
            node = getattr(g, kind)(a, b)
        elif kind in ("gelu", "silu", "softmax"):
            node = getattr(g, kind)(a)
        elif kind == "layernorm":
            w, bb = g.param(f"w{i}", (cols,)), g.param(f"b{i}", (cols,))
            params[f"w{i}"] = rng.standard_normal(cols).astype(np.float32)
            params[f"b{i}"] = rng.standard_normal(cols).astype(np.float32)
            node = g.layernorm(a, w, bb)
        elif kind == "matmul":
            w = g.param(f"m{i}", (cols, cols))
            params[f"m{i}"] = (rng.standard_normal((cols, cols)) / np.sqrt(cols)).astype(np.float32)
            node = g.matmul(a, w)
        else:
            sq = g.reshape(a, (rows * cols,))
            node = g.reshape(g.add(sq, g.reshape(b, (rows * cols,))), (rows, cols))
        pool.append(node)
    outs = {f"y{j}": pool[-1 - j] for j in range(min(3, n_ops))}
    g.set_outputs(outs)
    inputs = {name: rng.standard_normal((rows, cols)).astype(np.float32) for name in ("x0", "x1")}
    return g, inputs, params


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), n_ops=st.integers(1, 25), pin=st.booleans())
def test_random_graphs_plan_and_numerics(seed, n_ops, pin):
    g, inputs, params = build_random_graph(seed, n_ops)
    exe = rlx.compile(g, params=params, pin_outputs=pin)
    check_plan(exe.lifetimes, exe.plan)
    got = exe.run(inputs)
    want = rlx.run_reference(g, inputs, params)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-4, atol=2e-4, err_msg=name)


def test_reuse_shrinks_the_arena_and_no_reuse_env_disables_it(monkeypatch):
    g, inputs, params = build_random_graph(7, 30)
    reused = rlx.compile(g, params=params)
    assert reused.stats.arena_bytes < reused.stats.arena_no_reuse_bytes
    monkeypatch.setenv("RLX_ARENA_NO_REUSE", "1")
    plain = rlx.compile(g, params=params)
    assert plain.stats.arena_bytes == plain.stats.arena_no_reuse_bytes
    want = rlx.run_reference(g, inputs, params)
    for exe in (reused, plain):
        for name, value in exe.run(inputs).items():
            np.testing.assert_allclose(value, want[name], rtol=2e-4, atol=2e-4)


def test_pin_dropped_when_arena_exceeds_device_maximum(monkeypatch):
    import dataclasses

    from rlx.runtime import devices

    g, inputs, params = build_random_graph(3, 20)
    pinned = rlx.compile(g, params=params)
    unpinned = rlx.compile(g, params=params, pin_outputs=False)
    assert pinned.stats.outputs_pinned and not unpinned.stats.outputs_pinned
    # This (seeded) graph is one where the pin costs bytes, so the fallback is observable.
    assert unpinned.stats.arena_bytes < pinned.stats.arena_bytes
    real_open = devices.open_device

    def small_device(name):
        dev, target = real_open(name)
        return dev, dataclasses.replace(target, max_buffer_length=unpinned.stats.arena_bytes)

    monkeypatch.setattr(devices, "open_device", small_device)
    exe = rlx.compile(g, params=params)
    assert not exe.stats.outputs_pinned
    assert exe.stats.arena_bytes <= unpinned.stats.arena_bytes
    want = rlx.run_reference(g, inputs, params)
    for name, value in exe.run(inputs).items():
        np.testing.assert_allclose(value, want[name], rtol=2e-4, atol=2e-4)
    monkeypatch.setattr(devices, "open_device", lambda name: (real_open(name)[0], dataclasses.replace(
        real_open(name)[1], max_buffer_length=64)))
    with pytest.raises(rlx.MemoryPlanError, match="arena"):
        rlx.compile(g, params=params)


def test_independent_branches_get_no_barrier_and_dependent_ones_do():
    g = rlx.Graph()
    x = g.input("x", (8,))
    a = g.gelu(x)
    b = g.silu(x)           # independent of a
    c = g.add(a, b)         # reads both: needs a barrier
    g.set_outputs(c=c)
    exe = rlx.compile(g, passes={"fusion": False})   # fused, the three are one pass (test_elementwise_chain)
    assert [t.barrier for t in exe.thunks] == [False, False, True]


def _input_is_output_graph(as_view: bool):
    """c = tanh(exp(y)) + x with x (or a dense reshape of it) also an output:
    the exp and tanh temporaries must never take x's bytes."""
    g = rlx.Graph()
    x = g.input("x", (8, 8) if as_view else (64,))
    y = g.input("y", (64,))
    flat = g.reshape(x, (64,)) if as_view else x
    g.set_outputs(c=g.add(g.tanh(g.exp(y)), flat), x_out=flat)
    xv = np.arange(64, dtype=np.float32).reshape(x.shape)
    return g, {"x": xv, "y": np.full(64, 0.5, np.float32)}


@pytest.mark.parametrize("as_view", [False, True], ids=["input", "dense_view"])
@pytest.mark.parametrize("how", ["pinned", "unpinned", "pin_dropped"])
def test_an_input_that_is_an_output_stays_live_from_the_start(monkeypatch, as_view, how):
    import dataclasses

    from rlx.runtime import devices

    g, inputs = _input_is_output_graph(as_view)
    if how == "pin_dropped":
        real_open = devices.open_device
        unpinned = rlx.compile(g, pin_outputs=False)
        monkeypatch.setattr(devices, "open_device", lambda name: (real_open(name)[0], dataclasses.replace(
            real_open(name)[1], max_buffer_length=unpinned.stats.arena_bytes)))
    exe = rlx.compile(g, pin_outputs=how == "pinned")
    check_plan(exe.lifetimes, exe.plan)
    want = rlx.run_reference(g, inputs, {})
    for _ in range(2):   # and again: the second run must not see the first one's bytes
        got = exe.run(inputs)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6, err_msg=name)
