"""A 6-layer BERT graph (random weights, batch 1, 128 tokens, built from
primitives) on the host device with the optimizer pipeline on versus off:
thunk count, arena bytes and latency, in the same run (issue 4)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.blocks import bert_encoder, random_params

OFF = {"fusion": False, "views": False, "memory_reuse": False, "segments": False}


@pytest.fixture(scope="module")
def model():
    g = bert_encoder(layers=6, batch=1, seq=128)
    return g, random_params(g), {"x": np.random.default_rng(0).standard_normal((1, 128, 384)).astype(np.float32),
                                 "mask": np.zeros((1, 1, 1, 128), np.float32)}


@pytest.mark.parametrize("pipeline", ["on", "off"])
def test_bert6_pipeline(benchmark, record, model, pipeline):
    g, params, feed = model
    exe = rlx.compile(g, params=params, passes=None if pipeline == "on" else OFF)
    benchmark.extra_info.update(thunks=exe.stats.thunks, arena_bytes=exe.stats.arena_bytes,
                                barriers=exe.stats.barriers, fused=exe.stats.fused)
    out = benchmark(exe.run, feed)
    np.testing.assert_allclose(out["y"], rlx.run_reference(g, feed, params)["y"], rtol=2e-3, atol=2e-3)
    print(f"\npipeline {pipeline}: {exe.stats.thunks} thunks, {exe.stats.barriers} barriers, "
          f"arena {exe.stats.arena_bytes / 2**20:.2f} MiB, fused {exe.stats.fused}")
    record("bert6 1x128 pipeline", "rlx" if pipeline == "on" else "pipeline-off", benchmark)
