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
                     rope_linear_factor: float = 0.0, final_softcap: float = 0.0, arch: str = "gemma3",
                     attn_softcap: float = 0.0,
                     projections_format: str | None = "q8_0") -> Path:
    """Writes the model to ``path`` (float32 weights from ``seed``) and returns it. The keywords
    change its shape and Gemma 3 settings (the fuzzer's random models, tests/fuzz/llm.py);
    ``projections_format``: the GGML type of the layers' projections (None: float32); arch "gemma2"
    writes Gemma 2's keys and blocks (no q/k norms; attn_softcap: its attention logit softcap)."""
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
            p + "post_attention_norm.weight": np.full(hidden, LAYER_GAIN, np.float32),
            p + "ffn_norm.weight": np.ones(hidden, np.float32),
            p + "ffn_gate.weight": w(ffn, hidden), p + "ffn_up.weight": w(ffn, hidden),
            p + "ffn_down.weight": w(hidden, ffn),
            p + "post_ffw_norm.weight": np.full(hidden, LAYER_GAIN, np.float32),
        })
        if arch == "gemma3":   # Gemma 2 has no q/k norms
            tensors.update({p + "attn_q_norm.weight": np.ones(head_dim, np.float32),
                            p + "attn_k_norm.weight": np.ones(head_dim, np.float32)})
    metadata = {
        f"{arch}.context_length": CONTEXT, f"{arch}.embedding_length": hidden, f"{arch}.block_count": layers,
        f"{arch}.feed_forward_length": ffn, f"{arch}.attention.head_count": heads,
        f"{arch}.attention.head_count_kv": kv_heads, f"{arch}.attention.key_length": head_dim,
        f"{arch}.attention.value_length": head_dim, f"{arch}.attention.layer_norm_rms_epsilon": 1e-6,
        f"{arch}.rope.freq_base": float(rope_base),
        "tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores,
        "tokenizer.ggml.token_type": types, "tokenizer.ggml.bos_token_id": 2, "tokenizer.ggml.eos_token_id": 1,
        "tokenizer.ggml.unknown_token_id": 3, "tokenizer.ggml.padding_token_id": 0,
    }
    if sliding_window:
        metadata[f"{arch}.attention.sliding_window"] = int(sliding_window)
    if rope_base_local is not None:
        metadata[f"{arch}.rope.freq_base_swa"] = float(rope_base_local)
    if rope_linear_factor:
        metadata[f"{arch}.rope.scaling.type"] = "linear"
        metadata[f"{arch}.rope.scaling.factor"] = float(rope_linear_factor)
    if final_softcap:
        metadata[f"{arch}.final_logit_softcapping"] = float(final_softcap)
    if attn_softcap:
        metadata[f"{arch}.attn_logit_softcapping"] = float(attn_softcap)
    # The projections in Q8_0 by default, as real files quantize them (the norms and the embedding stay float32).
    projections = {name: projections_format for name in tensors
                   if projections_format and name.startswith("blk.") and not name.endswith("norm.weight")}
    return write_gguf(path, arch, metadata, tensors, quantize=projections)


# The llama-family blocks write_tiny_decoder adds per architecture, as llama.cpp reads them:
# Qwen 2's q/k/v biases, Qwen 3's per-head q/k norms (none for Llama).
_FAMILY_EXTRAS = {"llama": (), "qwen2": ("bias",), "qwen3": ("qk_norm",)}


def write_tiny_decoder(path: Path, arch: str, seed: int = 0, *, hidden: int = HIDDEN, ffn: int = FFN,
                       heads: int = 4, kv_heads: int = 2, head_dim: int | None = None, layers: int = LAYERS,
                       rope_base: float = 10000.0, tied: bool = True, output_bias: bool = False,
                       projections_format: str | None = "q8_0", tokenizer: dict | None = None,
                       rope_freqs: bool = False, rope_linear_factor: float = 0.0) -> Path:
    """A tiny random model of a llama-family architecture ("llama", "qwen2", "qwen3") with the vocabulary
    of write_tiny_gemma. head_dim None: hidden / heads, written as no attention.key_length (llama.cpp's
    default); otherwise written. tied False writes an output.weight of its own; output_bias adds an
    attn_output.bias (llama.cpp reads one where a llama file has it). tokenizer: the tokenizer.ggml.* metadata
    of another vocabulary (tests/models/tiny_bpe.py metadata()) in place of the SPM one. rope_freqs: a
    rope_freqs.weight of per-pair frequency divisors, as Llama 3.1+ files carry (1 for the fast pairs, up to
    8 for the slow ones); rope_linear_factor: linear RoPE scaling by that factor."""
    extras = _FAMILY_EXTRAS[arch]
    tokens, scores, types = _vocabulary()
    spm = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores,
           "tokenizer.ggml.token_type": types, "tokenizer.ggml.bos_token_id": 2, "tokenizer.ggml.eos_token_id": 1,
           "tokenizer.ggml.unknown_token_id": 3, "tokenizer.ggml.padding_token_id": 0}
    vocab = len((tokenizer or spm)["tokenizer.ggml.tokens"])
    rng = np.random.default_rng(seed)
    hd = head_dim or hidden // heads

    def w(*shape: int, scale: float = 0.08) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    embd = w(vocab, hidden, scale=0.15)
    if tokenizer is None:
        embd[len(_SPECIAL):len(_SPECIAL) + 256] *= 0.1
    tensors = {"token_embd.weight": embd, "output_norm.weight": (1.0 + w(hidden, scale=0.2))}
    if not tied:
        tensors["output.weight"] = w(vocab, hidden, scale=0.15)
    if rope_freqs:
        tensors["rope_freqs.weight"] = np.geomspace(1.0, 8.0, hd // 2).astype(np.float32)
    for il in range(layers):
        p = f"blk.{il}."
        tensors.update({
            p + "attn_norm.weight": 1.0 + w(hidden, scale=0.2),
            p + "attn_q.weight": w(heads * hd, hidden, scale=0.25), p + "attn_k.weight": w(kv_heads * hd, hidden,
                                                                                         scale=0.25),
            p + "attn_v.weight": w(kv_heads * hd, hidden), p + "attn_output.weight": w(hidden, heads * hd),
            p + "ffn_norm.weight": 1.0 + w(hidden, scale=0.2),
            p + "ffn_gate.weight": w(ffn, hidden), p + "ffn_up.weight": w(ffn, hidden),
            p + "ffn_down.weight": w(hidden, ffn),
        })
        if "bias" in extras:
            tensors.update({p + "attn_q.bias": w(heads * hd, scale=0.5), p + "attn_k.bias": w(kv_heads * hd, scale=0.5),
                            p + "attn_v.bias": w(kv_heads * hd, scale=0.5)})
        if "qk_norm" in extras:
            tensors.update({p + "attn_q_norm.weight": 1.0 + w(hd, scale=0.2),
                            p + "attn_k_norm.weight": 1.0 + w(hd, scale=0.2)})
        if output_bias:
            tensors[p + "attn_output.bias"] = w(hidden, scale=0.5)
    metadata = {
        f"{arch}.context_length": CONTEXT, f"{arch}.embedding_length": hidden, f"{arch}.block_count": layers,
        f"{arch}.feed_forward_length": ffn, f"{arch}.attention.head_count": heads,
        f"{arch}.attention.head_count_kv": kv_heads, f"{arch}.attention.layer_norm_rms_epsilon": 1e-5,
        f"{arch}.rope.freq_base": float(rope_base), f"{arch}.rope.dimension_count": hd, **(tokenizer or spm),
    }
    if rope_linear_factor:
        metadata[f"{arch}.rope.scaling.type"] = "linear"
        metadata[f"{arch}.rope.scaling.factor"] = float(rope_linear_factor)
    if head_dim is not None:
        metadata[f"{arch}.attention.key_length"] = head_dim
        metadata[f"{arch}.attention.value_length"] = head_dim
    projections = {name: projections_format for name in tensors
                   if projections_format and name.startswith("blk.") and name.endswith(".weight")
                   and not name.endswith("norm.weight")}
    return write_gguf(path, arch, metadata, tensors, quantize=projections)
