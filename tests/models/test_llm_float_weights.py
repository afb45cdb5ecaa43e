"""An LLM whose projection weights are plain float32 GGUF tensors (not a
block format): the sibling pass merges q/k/v and gate/up from the file's
tensors, which it once read with np.asarray (a 0-d object array of the
tensor, so the compile failed with "shape ()"). The logits must equal the
float64 oracle's."""

from __future__ import annotations

import numpy as np

from rlx.models.llm import load_llm
from rlx.reference.llm import reference_logits

from .gguf_writer import write_gguf
from .tiny_llm import write_tiny_gemma


def test_float32_projections_compile_and_match_the_oracle(tmp_path):
    quantized = write_tiny_gemma(tmp_path / "q8.gguf")
    from rlx import gguf

    src = gguf.open(quantized)
    tensors = {t.name: t.dequantize() for t in src.tensors.values()}
    metadata = {k: v for k, v in src.metadata.items() if not k.startswith("general.") and not k.startswith("GGUF.")}
    path = write_gguf(tmp_path / "f32.gguf", "gemma3", metadata, tensors)
    llm = load_llm(path, max_context=64)
    assert gguf.open(path).tensors["blk.0.attn_q.weight"].type == "F32"
    tokens = [2, 300, 301, 302, 303, 304]
    got = llm.logits(tokens)
    want = reference_logits(path, tokens)
    # f32 kernels against float64: |error| within 1e-4 of the logits' scale.
    np.testing.assert_allclose(got, want, atol=1e-4 * float(np.abs(want).max()), rtol=0)
