"""An LLM whose projection weights are plain float32 GGUF tensors (not a
block format): the sibling pass merges q/k/v and gate/up from the file's
tensors, which it once read with np.asarray (a 0-d object array of the
tensor, so the compile failed with "shape ()"). The logits must equal the
float64 oracle's."""

from __future__ import annotations

import re

import numpy as np

from rlx.models.llm import load_llm
from rlx.reference.llm import reference_logits

from .gguf_writer import write_gguf
from .tiny_llm import write_tiny_gemma


def _float_model(tmp_path):
    """The tiny Gemma with every tensor written as float32."""
    from rlx import gguf

    src = gguf.open(write_tiny_gemma(tmp_path / "q8.gguf"))
    tensors = {t.name: t.dequantize() for t in src.tensors.values()}
    metadata = {k: v for k, v in src.metadata.items() if not k.startswith("general.") and not k.startswith("GGUF.")}
    return write_gguf(tmp_path / "f32.gguf", "gemma3", metadata, tensors)


def test_float32_projections_compile_and_match_the_oracle(tmp_path):
    from rlx import gguf

    path = _float_model(tmp_path)
    llm = load_llm(path, max_context=64)
    assert gguf.open(path).tensors["blk.0.attn_q.weight"].type == "F32"
    tokens = [2, 300, 301, 302, 303, 304]
    got = llm.logits(tokens)
    want = reference_logits(path, tokens)
    # f32 kernels against float64: |error| within 1e-4 of the logits' scale.
    np.testing.assert_allclose(got, want, atol=1e-4 * float(np.abs(want).max()), rtol=0)


def test_float32_projections_under_a_bf16_prefill(tmp_path):
    """prefill_precision="bf16" with float weights: the precision pass
    converts them to bf16 for the prefill executable (its own copy beside
    the decode step's f32 weights), and a decode step after it still runs.
    The prefill's last logits within 2% of the logits' scale (bf16 weights
    and x; measured 0.6%)."""
    path = _float_model(tmp_path)
    llm = load_llm(path, max_context=64, prefill_precision="bf16")
    tokens = [2, 300, 301, 302, 303, 304, 305, 306]
    want = reference_logits(path, tokens + [2])
    got = llm.prefill(tokens)
    report = llm._executable("prefill", llm._bucket(len(tokens)), "logits").compile_report
    assert any(re.match(r"precision: bf16, [1-9]\d* params", line) for line in report), report
    np.testing.assert_allclose(got, want[len(tokens) - 1], atol=0.02 * float(np.abs(want).max()), rtol=0)
    step = llm.step(2)
    np.testing.assert_allclose(step, want[-1], atol=0.02 * float(np.abs(want).max()), rtol=0)
