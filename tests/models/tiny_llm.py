"""A tiny random Gemma 3 GGUF file (2 layers, hidden 64, ~330 tokens) for
tests that need a real ``rlx.models.llm.LLM`` but not a real model's text:
it compiles and generates in well under a second a request on the CPU.

The vocabulary is a SentencePiece one (the "llama" tokenizer model) with
Gemma's special tokens (``<eos>`` 1, ``<bos>`` 2, ``<end_of_turn>``), the
256 byte tokens and some words. Byte tokens get small embedding rows, so
with the tied output their logits stay near zero and generated text is
mostly words (readable in a failure message) rather than stray bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .gguf_writer import write_gguf

WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches and "
         "sphinx of black quartz hears my vow as rivers run to the distant sea hello world model user "
         "turn start end of").split()
_SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
_CONTROL, _NORMAL, _UNKNOWN, _BYTE = 3, 1, 2, 6
HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM, LAYERS, CONTEXT = 64, 128, 2, 1, 32, 2, 4096
# The layers' outputs outweigh the token's own embedding in the residual: otherwise the tied output
# scores the input token far above the rest and every generation repeats one token.
LAYER_GAIN = 2.0


def _vocabulary() -> tuple[list[str], list[float], list[int]]:
    pieces = ["\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["\u2581" + w for w in dict.fromkeys(WORDS)]
    tokens = _SPECIAL + [f"<0x{b:02X}>" for b in range(256)] + pieces
    # Longer pieces score higher, so whole words are merged before letters.
    scores = [0.0] * (len(_SPECIAL) + 256) + [float(len(p)) - 100.0 for p in pieces]
    types = [_CONTROL, _CONTROL, _CONTROL, _UNKNOWN, _CONTROL, _CONTROL] + [_BYTE] * 256 + [_NORMAL] * len(pieces)
    return tokens, scores, types


def write_tiny_gemma(path: Path, seed: int = 0) -> Path:
    """Writes the model to ``path`` (float32 weights from ``seed``) and returns it."""
    tokens, scores, types = _vocabulary()
    vocab = len(tokens)
    rng = np.random.default_rng(seed)

    def w(*shape: int, scale: float = 0.08) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    embd = w(vocab, HIDDEN, scale=0.15)
    embd[len(_SPECIAL):len(_SPECIAL) + 256] *= 0.1   # byte tokens: logits near zero
    tensors = {"token_embd.weight": embd, "output_norm.weight": np.full(HIDDEN, 2.0, np.float32)}
    for il in range(LAYERS):
        p = f"blk.{il}."
        tensors.update({
            p + "attn_norm.weight": np.ones(HIDDEN, np.float32),
            p + "attn_q.weight": w(HEADS * HEAD_DIM, HIDDEN), p + "attn_k.weight": w(KV_HEADS * HEAD_DIM, HIDDEN),
            p + "attn_v.weight": w(KV_HEADS * HEAD_DIM, HIDDEN), p + "attn_output.weight": w(HIDDEN, HEADS * HEAD_DIM),
            p + "attn_q_norm.weight": np.ones(HEAD_DIM, np.float32),
            p + "attn_k_norm.weight": np.ones(HEAD_DIM, np.float32),
            p + "post_attention_norm.weight": np.full(HIDDEN, LAYER_GAIN, np.float32),
            p + "ffn_norm.weight": np.ones(HIDDEN, np.float32),
            p + "ffn_gate.weight": w(FFN, HIDDEN), p + "ffn_up.weight": w(FFN, HIDDEN),
            p + "ffn_down.weight": w(HIDDEN, FFN),
            p + "post_ffw_norm.weight": np.full(HIDDEN, LAYER_GAIN, np.float32),
        })
    metadata = {
        "gemma3.context_length": CONTEXT, "gemma3.embedding_length": HIDDEN, "gemma3.block_count": LAYERS,
        "gemma3.feed_forward_length": FFN, "gemma3.attention.head_count": HEADS,
        "gemma3.attention.head_count_kv": KV_HEADS, "gemma3.attention.key_length": HEAD_DIM,
        "gemma3.attention.value_length": HEAD_DIM, "gemma3.attention.layer_norm_rms_epsilon": 1e-6,
        "gemma3.rope.freq_base": 10000.0,
        "tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores,
        "tokenizer.ggml.token_type": types, "tokenizer.ggml.bos_token_id": 2, "tokenizer.ggml.eos_token_id": 1,
        "tokenizer.ggml.unknown_token_id": 3, "tokenizer.ggml.padding_token_id": 0,
    }
    # The projections in Q8_0, as real files quantize them (the norms and the embedding stay float32).
    projections = {name: "q8_0" for name in tensors if name.startswith("blk.") and not name.endswith("norm.weight")}
    return write_gguf(path, "gemma3", metadata, tensors, quantize=projections)
