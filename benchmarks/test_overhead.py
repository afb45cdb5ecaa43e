"""Run-path overhead on the host device.

- chain: 1,000 dependent tiny adds (16 floats each): rlx replayed, rlx
  re-encoded, numpy in a Python loop, PyTorch eager when installed.
  Target (issue 2): rlx's per-thunk cost at most 0.1 us over the kernels'
  own work.
- one_op: a one-op graph's full `Executable.run` (input checks, copy in,
  run, copy out). Target: at most 15 us fixed overhead.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx

N_OPS = 1000
WIDTH = 16


def _chain_graph():
    g = rlx.Graph()
    x = g.input("x", (WIDTH,))
    b = g.param("b", (WIDTH,))
    y = x
    for _ in range(N_OPS):
        y = g.add(y, b)
    g.set_outputs(y=y)
    return g


@pytest.fixture(scope="module")
def data():
    return np.ones(WIDTH, np.float32), np.full(WIDTH, 0.5, np.float32)


@pytest.mark.parametrize("replay", [True, False], ids=["replay", "reencode"])
def test_chain_rlx(benchmark, record, data, replay):
    x, b = data
    exe = rlx.compile(_chain_graph(), params={"b": b}, replay=replay)
    out = benchmark(exe.run, x=x)
    np.testing.assert_allclose(out["y"], x + N_OPS * 0.5)
    record("chain-1000" if replay else "chain-1000-reencode", "rlx", benchmark, per=N_OPS, unit="op")


def test_chain_numpy(benchmark, record, data):
    x, b = data

    def loop():
        y = x.copy()
        for _ in range(N_OPS):
            np.add(y, b, out=y)
        return y

    benchmark(loop)
    record("chain-1000", "numpy", benchmark, per=N_OPS, unit="op")
    record("chain-1000-reencode", "numpy", benchmark, per=N_OPS, unit="op")


def test_chain_torch(benchmark, record, data):
    torch = pytest.importorskip("torch", reason="PyTorch not installed: peer skipped")
    torch.set_num_threads(1)
    x, b = (torch.from_numpy(a) for a in data)

    def loop():
        y = x.clone()
        for _ in range(N_OPS):
            y.add_(b)
        return y

    benchmark(loop)
    record("chain-1000", "torch", benchmark, per=N_OPS, unit="op")


def test_one_op_rlx(benchmark, record, data):
    g = rlx.Graph()
    x = g.input("x", (WIDTH,))
    g.set_outputs(y=g.add(x, x))
    exe = rlx.compile(g)
    benchmark(exe.run, x=data[0])
    record("one-op-run", "rlx", benchmark)


def test_one_op_numpy(benchmark, record, data):
    benchmark(np.add, data[0], data[0])
    record("one-op-run", "numpy", benchmark)
