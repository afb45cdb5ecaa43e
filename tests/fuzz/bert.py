"""Random tiny BERT embedders: a sentence-transformers folder of random shape
(tests/models/test_bert.py's make_tiny_bert) through rlx.models.load_embedder
at a random precision and batch size, against that file's float64 oracle
(numpy_bert: the forward pass, masked mean pooling, L2 normalisation).

``bert_case(seed)`` is a pure function of its seed: 1-12 heads of 4-64
features, 1-3 layers, odd intermediate widths (37, 100), 16-64 positions,
either layer-norm epsilon, 1-39 texts of 1-29 words (padding within a
batch, texts cut at the position limit), batch sizes 1-32, and f32, bf16
or f16 weights.

Tolerance: the least cosine over the texts >= 0.99999 in f32; >= 0.995 in
bf16 and >= 0.999 in f16, where the weights' rounding (2^-9 and 2^-12 of
each) passes through random, untrained layers (MiniLM's own bounds are in
tests/models/test_bert.py). Low precisions only up to a width of 256:
make_tiny_bert's weights (std 0.2) make wider random models chaotic, so
that at 768 rounding the weights to bf16 alone moved the float64 oracle
to a cosine of 0.992 (seed 5358, 0.982 with rlx's bf16 activations too).
"""

from __future__ import annotations

import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from .ops import repro_command

VOCABULARY = ("the", "a", "cat", "dog", "sat", "on", "mat", "runs", "fast", "slow", "red", "blue", "big", "small",
              "hello", "world", "rlx", "model", "cats", "sitting", "zebra")
MIN_COSINE = {"f32": 0.99999, "bf16": 0.995, "f16": 0.999}


@dataclass
class BertCase:
    seed: int
    config: dict
    precision: str
    batch_size: int
    texts: list[str]

    def describe(self) -> str:
        return f"{self.config}, {self.precision}, batch size {self.batch_size}, {len(self.texts)} texts"


def bert_case(seed: int) -> BertCase:
    rng = np.random.default_rng([seed, 23])
    heads = int(rng.choice([1, 2, 3, 4, 6, 8, 12]))
    config = dict(hidden_size=heads * int(rng.choice([4, 8, 16, 24, 32, 64])), num_attention_heads=heads,
                  num_hidden_layers=int(rng.choice([1, 2, 3])),
                  intermediate_size=int(rng.choice([16, 37, 64, 100, 256])),
                  max_position_embeddings=int(rng.choice([16, 32, 64])),
                  layer_norm_eps=float(rng.choice([1e-12, 1e-5])))
    texts = [" ".join(rng.choice(VOCABULARY, int(rng.integers(1, 30)))) for _ in range(int(rng.integers(1, 40)))]
    precision = str(rng.choice(["f32", "f32", "bf16", "f16"]))
    if config["hidden_size"] > 256:   # too ill-conditioned for a low precision (module docstring)
        precision = "f32"
    return BertCase(seed, config, precision, int(rng.choice([1, 3, 8, 32])), texts)


def check_bert_case(case: BertCase) -> str | None:
    bert = pytest.importorskip("models.test_bert", reason="needs safetensors and tokenizers")
    from rlx.models import load_embedder

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*were truncated")   # long texts are part of the case
        model = load_embedder(bert.make_tiny_bert(Path(folder) / "bert", **case.config), precision=case.precision)
        got = model.encode(case.texts, batch_size=case.batch_size)
        ids = model.tokenize(case.texts)
    width = max(len(i) for i in ids)
    padded, mask = np.zeros((len(ids), width), np.int64), np.zeros((len(ids), width), np.float32)
    for row, seq in enumerate(ids):
        padded[row, :len(seq)], mask[row, :len(seq)] = seq, 1.0
    config = dict(bert.TINY, **case.config)
    want = bert.numpy_bert(bert._tiny_weights(config), config, padded, mask)
    least = float(bert.cosine(got, want).min())
    if not least >= MIN_COSINE[case.precision]:
        return (f"{case.describe()}: least cosine {least:.6f} to the float64 oracle (bound "
                f"{MIN_COSINE[case.precision]}); re-run: {repro_command('bert', case.seed)}")
    return None
