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


def write_tiny_gemma(path: Path, seed: int = 0, *, hidden: int = HIDDEN, ffn: int = FFN, heads: int = HEADS,
                     kv_heads: int = KV_HEADS, head_dim: int = HEAD_DIM, layers: int = LAYERS,
                     sliding_window: int = 0, rope_base: float = 10000.0, rope_base_local: float | None = None,
                     rope_linear_factor: float = 0.0, final_softcap: float = 0.0,
                     projections_format: str | None = "q8_0") -> Path:
    """Writes the model to ``path`` (float32 weights from ``seed``) and returns it. The keywords
    change its shape and Gemma 3 settings (the fuzzer's random models, tests/fuzz/llm.py);
    ``projections_format``: the GGML type of the layers' projections (None: float32)."""
    tokens, scores, types = _vocabulary()
    vocab = len(tokens)
    rng = np.random.default_rng(seed)

    def w(*shape: int, scale: float = 0.08) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    embd = w(vocab, hidden, scale=0.15)
    embd[len(_SPECIAL):len(_SPECIAL) + 256] *= 0.1   # byte tokens: logits near zero
    tensors = {"token_embd.weight": embd, "output_norm.weight": np.full(hidden, 2.0, np.float32)}
    for il in range(layers):
        p = f"blk.{il}."
        tensors.update({
            p + "attn_norm.weight": np.ones(hidden, np.float32),
            p + "attn_q.weight": w(heads * head_dim, hidden), p + "attn_k.weight": w(kv_heads * head_dim, hidden),
            p + "attn_v.weight": w(kv_heads * head_dim, hidden), p + "attn_output.weight": w(hidden, heads * head_dim),
            p + "attn_q_norm.weight": np.ones(head_dim, np.float32),
            p + "attn_k_norm.weight": np.ones(head_dim, np.float32),
            p + "post_attention_norm.weight": np.full(hidden, LAYER_GAIN, np.float32),
            p + "ffn_norm.weight": np.ones(hidden, np.float32),
            p + "ffn_gate.weight": w(ffn, hidden), p + "ffn_up.weight": w(ffn, hidden),
            p + "ffn_down.weight": w(hidden, ffn),
            p + "post_ffw_norm.weight": np.full(hidden, LAYER_GAIN, np.float32),
        })
    metadata = {
        "gemma3.context_length": CONTEXT, "gemma3.embedding_length": hidden, "gemma3.block_count": layers,
        "gemma3.feed_forward_length": ffn, "gemma3.attention.head_count": heads,
        "gemma3.attention.head_count_kv": kv_heads, "gemma3.attention.key_length": head_dim,
        "gemma3.attention.value_length": head_dim, "gemma3.attention.layer_norm_rms_epsilon": 1e-6,
        "gemma3.rope.freq_base": float(rope_base),
        "tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores,
        "tokenizer.ggml.token_type": types, "tokenizer.ggml.bos_token_id": 2, "tokenizer.ggml.eos_token_id": 1,
        "tokenizer.ggml.unknown_token_id": 3, "tokenizer.ggml.padding_token_id": 0,
    }
    if sliding_window:
        metadata["gemma3.attention.sliding_window"] = int(sliding_window)
    if rope_base_local is not None:
        metadata["gemma3.rope.freq_base_swa"] = float(rope_base_local)
    if rope_linear_factor:
        metadata["gemma3.rope.scaling.type"] = "linear"
        metadata["gemma3.rope.scaling.factor"] = float(rope_linear_factor)
    if final_softcap:
        metadata["gemma3.final_logit_softcapping"] = float(final_softcap)
    # The projections in Q8_0 by default, as real files quantize them (the norms and the embedding stay float32).
    projections = {name: projections_format for name in tensors
                   if projections_format and name.startswith("blk.") and not name.endswith("norm.weight")}
    return write_gguf(path, "gemma3", metadata, tensors, quantize=projections)
