"""The lowering makes one dense copy of a value per dtype, however many ops
read it that way: f16 attention widens the shared mask to f32 once, not once
per layer, and the results still match the reference."""

from __future__ import annotations

import numpy as np
from conftest import assert_matches_reference

import rlx
from rlx.blocks import bert_encoder, random_params


def test_shared_mask_is_widened_once_for_every_layer():
    layers = 3
    g = bert_encoder(layers, 2, 40, 64, 4, 128)      # >= 8 tokens: attention's gemm path on every device
    params = random_params(g, seed=1)
    exe = rlx.compile(g, params=params, precision="f16")
    widen = [t for t in exe.thunks if t.kernel == "copy_f16_f32" and "copy for" in t.label]
    assert len(widen) == 1, [t.label for t in widen]
    rng = np.random.default_rng(0)
    mask = np.where(rng.random((2, 1, 1, 40)) < 0.2, -1e4, 0.0).astype(np.float32)
    feed = {"x": rng.standard_normal((2, 40, 64)).astype(np.float32), "mask": mask}
    want = rlx.run_reference(g, feed, params)["y"]
    got = exe.run(feed)["y"]
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)   # f16 activations over 3 layers
    assert_matches_reference(g, feed, params)                      # f32: unchanged
