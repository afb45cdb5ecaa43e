"""The float64 oracle of decoder-only LLM inference from a GGUF file (Gemma 3 and 2, Llama, Qwen 2 and 3).

Every compiled LLM path is checked against this module: a teacher-forced
forward pass in float64 over the dequantized weights (``gguf.quants``, the
gguf package's numpy port of llama.cpp's dequantizers, so the weights are
exactly the ones llama.cpp computes with), with no fusion, caching or
approximation beyond the model's own definition (the tanh GELU is Gemma's).

``LlmConfig`` is the single source of truth of the architecture mapping: the
GGUF metadata keys, llama.cpp's hard-coded conventions for the architecture
(which layers are sliding-window, the local RoPE base, the attention scale)
and the derived per-layer settings (``rope_for_layer``, ``window_for_layer``).
The compiled model builder imports it too, so a convention lives in one place.

Conventions (each checked against llama.cpp; tests/models/test_llm_reference.py):

* The embedding is scaled by sqrt(hidden) (Gemma), the output reuses the token
  embedding when the file has no ``output.weight`` (tied).
* RMSNorm is ``x / sqrt(mean(x^2) + eps) * w`` with the weight as stored: llama.cpp's
  converter already added Gemma's ``1 + w`` when it wrote the file.
* Per layer: attn_norm -> q/k/v -> per-head RMSNorm of q and k -> NEOX RoPE (rotating
  the halves (x[i], x[i + d/2])) -> causal GQA attention -> post_attention_norm ->
  residual; ffn_norm -> GeGLU (gelu_tanh(gate) * up -> down) -> post_ffw_norm -> residual.
* Layer il is sliding-window ("local") when il % 6 < 5 (llama.cpp's ``set_swa_pattern(6)``):
  its RoPE base is 10000 and a query at position p sees keys at p - window < k <= p.
  Every 6th layer is global: RoPE base ``rope.freq_base``, full causal attention.
* Gemma 2 ("gemma2"): Gemma 3's blocks without the q/k norms; every other layer (il % 2 == 0)
  sliding-window, one RoPE base and position scale for all layers; scores capped by 50 tanh(s / 50) and the logits
  by 30 tanh(l / 30) unless the file says otherwise (llama.cpp's defaults).
* Llama ("llama": Llama 1-3, Mistral, TinyLlama and the other files llama.cpp loads as
  llama), Qwen 2 ("qwen2") and Qwen 3 ("qwen3"), as llama.cpp builds them: pre-norm
  blocks with no post norms and no embedding scale, SwiGLU (silu(gate) * up), causal GQA
  attention scaled by 1/sqrt(head_dim) on every layer. Llama rotates adjacent pairs
  (x[2i], x[2i + 1]) (llama.cpp's LLAMA_ROPE_TYPE_NORM: its converter permuted q and k
  for that), the Qwens the halves. Qwen 2 adds biases to q, k and v; Qwen 3 norms q and k
  per head as Gemma 3 does. Any of them may carry q/k/v/output biases (llama.cpp reads
  them where the file has them). A file's ``rope_freqs.weight`` (Llama 3.1 and later) divides
  each pair's RoPE frequency on every layer, as llama.cpp's freq_factors do.

    cfg = LlmConfig.from_gguf(f)                 # f: an open rlx.gguf.GGUFFile
    logits = reference_logits(f, tokens)         # float64 [T, vocab]
    gen = reference_generate(f, prompt, 16)      # greedy: gen.tokens, gen.top2_gaps
"""

from __future__ import annotations

import math
import os
import weakref
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import numpy as np
from gguf import GGMLQuantizationType
from gguf import quants as _quants

from rlx import gguf as rlx_gguf
from rlx.arg_types import is_integer, is_real
from rlx.errors import InputError, ModelLoadError

__all__ = [
    "Generation", "LlmConfig", "LlmWeights", "SUPPORTED_ARCHITECTURES", "attention", "clear_cache",
    "final_hidden", "gelu_tanh", "gemma3_layer_kinds", "load_weights", "project", "reference_generate",
    "reference_logits", "rms_norm", "rope", "silu",
]

SUPPORTED_ARCHITECTURES = ("gemma3", "gemma2", "llama", "qwen2", "qwen3")
# How each architecture rotates pairs of q/k features (llama.cpp's llama_model_rope_type).
_ROPE_LAYOUTS = {"llama": "interleaved", "qwen2": "neox", "qwen3": "neox"}

# llama.cpp's gemma3 constants (src/llama-model.cpp, LLM_ARCH_GEMMA3 in load_hparams): they are not in the file.
_GEMMA3_SWA_PATTERN = 6              # hparams.set_swa_pattern(6): 5 local layers, then 1 global
_GEMMA3_ROPE_BASE_LOCAL = 10000.0    # hparams.rope_freq_base_train_swa (unless rope.freq_base_swa is given)
_GEMMA3_27B_LAYERS = 62              # 27B: q scaled by 1/sqrt(hidden / n_heads), others 1/sqrt(head_dim)
# llama.cpp's gemma2 constants (LLM_ARCH_GEMMA2 in load_hparams): every other layer sliding-window, the
# softcaps' defaults where the file has no key, and the 27B's (46 layers) attention scale.
_GEMMA2_SWA_PATTERN = 2
_GEMMA2_ATTN_SOFTCAP, _GEMMA2_FINAL_SOFTCAP = 50.0, 30.0
_GEMMA2_27B_LAYERS = 46

# How many rows of the output matrix are cast to float64 at a time: 16384 x 640 x 8 B = 84 MB.
_OUTPUT_BLOCK_ROWS = 16384

FileLike = Union[rlx_gguf.GGUFFile, str, "os.PathLike[str]"]     # an open file or a path


# ---------------------------------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LlmConfig:
    """The hyperparameters of a decoder-only transformer, with the field names of no one architecture.

    Per-layer settings come from ``layer_kinds`` ("local": sliding-window attention with the local RoPE base,
    "global": full causal attention with the global base and scale); use ``rope_for_layer`` and
    ``window_for_layer`` rather than re-deriving them.
    """

    architecture: str
    n_layers: int
    hidden: int
    ffn: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    context_length: int
    rms_eps: float
    rope_base: float                   # global layers
    rope_base_local: float             # sliding-window layers
    rope_scale: float                  # linear position scale of the global layers (llama.cpp's freq_scale); 1: none
    rope_layout: str                   # "neox": rotate (x[i], x[i + d/2]); "interleaved": (x[2i], x[2i + 1])
    sliding_window: int | None         # None: no sliding-window layers
    swa_pattern: int                   # layer il is local when il % swa_pattern < swa_pattern - 1 (0: every layer)
    attn_scale: float                  # multiplies q.k (applied to q, as llama.cpp does)
    embed_scale: float                 # multiplies the token embedding (Gemma: sqrt(hidden))
    attn_softcap: float | None         # scores -> cap * tanh(scores / cap); None: none
    final_softcap: float | None        # logits -> cap * tanh(logits / cap); None: none
    norm_offset: float                 # added to each stored RMSNorm weight (GGUF: 0, the converter added Gemma's 1)
    activation: str                    # of the gated FFN: act(gate) * up; "gelu_tanh" or "silu"
    tied_output: bool                  # the output projection is the token embedding (no output.weight)
    bos_id: int | None
    eos_id: int | None
    rope_scale_local: float = 1.0      # the sliding-window layers' position scale (Gemma 3: none; Gemma 2: rope_scale)

    # -- derived ---------------------------------------------------------------------------------------------------

    @property
    def q_dim(self) -> int:
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    @property
    def n_rep(self) -> int:
        """Query heads per kv head (GQA): query head h reads kv head h // n_rep."""
        return self.n_heads // self.n_kv_heads

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        """"local" or "global" for each layer, llama.cpp's ``set_swa_pattern(n)`` rule (dense_first=false)."""
        if self.sliding_window is None:
            return ("global",) * self.n_layers
        n = self.swa_pattern
        return tuple("local" if n == 0 or il % n < n - 1 else "global" for il in range(self.n_layers))

    def rope_for_layer(self, il: int) -> tuple[float, float]:
        """(base, position scale) of layer il's RoPE: local layers use the local base and scale."""
        if self.layer_kinds[il] == "local":
            return self.rope_base_local, self.rope_scale_local
        return self.rope_base, self.rope_scale

    def window_for_layer(self, il: int) -> int | None:
        """Layer il's attention window (a query at p sees keys k with p - k < window), None for full causal."""
        return self.sliding_window if self.layer_kinds[il] == "local" else None

    # -- reading ---------------------------------------------------------------------------------------------------

    @classmethod
    def from_gguf(cls, file: rlx_gguf.GGUFFile) -> LlmConfig:
        """The config of an open GGUF file; ModelLoadError names a missing key, a bad value or an unsupported
        architecture. The token embedding's shape is checked against the metadata."""
        cfg = cls.from_metadata(file.metadata, file.tensors.keys(), source=str(file.path))
        embd = file.tensors.get("token_embd.weight")
        if embd is None:
            raise ModelLoadError(f"{file.path}: tensor 'token_embd.weight' is missing")
        if embd.shape != (cfg.vocab_size, cfg.hidden):
            raise ModelLoadError(f"{file.path}: tensor 'token_embd.weight' has shape {embd.shape}, expected "
                                 f"(vocab_size, hidden) = ({cfg.vocab_size}, {cfg.hidden})")
        # The file must hold the layers it declares: per-layer structures are
        # sized by block_count, so 2^40 of them took all the memory before a
        # missing tensor was noticed.
        if f"blk.{cfg.n_layers - 1}.attn_q.weight" not in file.tensors:
            held = sum(1 for name in file.tensors if name.startswith("blk.") and name.endswith(".attn_q.weight"))
            raise ModelLoadError(f"{file.path}: metadata key '{cfg.architecture}.block_count' is {cfg.n_layers}, "
                                 f"but the file holds {held} layers' tensors")
        return cfg

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any], tensor_names: Collection[str] = (),
                      source: str = "metadata") -> LlmConfig:
        """The config from GGUF metadata (a typed dict, ``GGUFFile.metadata``) and the file's tensor names
        (which decide whether the output is tied); ``source`` prefixes error messages."""
        arch = metadata.get("general.architecture")
        if arch is None:
            raise ModelLoadError(f"{source}: metadata key 'general.architecture' is missing")
        if arch not in SUPPORTED_ARCHITECTURES:
            raise ModelLoadError(f"{source}: architecture {arch!r} is not supported by the LLM reference "
                                 f"(supported: {', '.join(SUPPORTED_ARCHITECTURES)})")
        if arch == "gemma3":
            return _gemma3_config(metadata, set(tensor_names), source)
        if arch == "gemma2":
            return _gemma2_config(metadata, set(tensor_names), source)
        return _llama_family_config(arch, metadata, set(tensor_names), source)


def _get(metadata: Mapping[str, Any], key: str, kind: type, source: str, default: Any = ...) -> Any:
    """metadata[key] checked to be a ``kind`` (int or float; an int is accepted as a float, a bool never)."""
    if key not in metadata:
        if default is ...:
            raise ModelLoadError(f"{source}: metadata key {key!r} is missing")
        return default
    value = metadata[key]
    if not (is_integer(value) if kind is int else is_real(value, finite=False)):
        raise ModelLoadError(f"{source}: metadata key {key!r} is {value!r}, expected "
                             f"{'an int' if kind is int else 'a number'}")
    return kind(value)


class _Hparams:
    """Typed reads of one architecture's metadata keys (``<arch>.<key>``), errors naming the key."""

    def __init__(self, arch: str, md: Mapping[str, Any], source: str) -> None:
        self.prefix, self.md, self.source = arch + ".", md, source

    def get(self, key: str, kind: type, default: Any = ...) -> Any:
        return _get(self.md, self.prefix + key, kind, self.source, default)

    def positive(self, key: str, kind: type = int, default: Any = ...) -> Any:
        value = self.get(key, kind, default)
        if value is not None and not value > 0:
            raise ModelLoadError(f"{self.source}: metadata key {self.prefix + key!r} is {value!r}, expected a "
                                 "positive value")
        return value

    def attention_shape(self, hidden: int, llama_defaults: bool = True) -> tuple[int, int, int]:
        """(heads, kv heads, head dim), checked. llama_defaults: kv heads default to the heads and the head
        dim to hidden / heads, as llama.cpp defaults them; else (Gemma 3's reader) both keys are required."""
        n_heads = self.positive("attention.head_count")
        if not llama_defaults:
            n_kv_heads, head_dim = self.positive("attention.head_count_kv"), self.positive("attention.key_length")
        else:
            n_kv_heads = self.positive("attention.head_count_kv", default=n_heads)
            if hidden % n_heads and self.prefix + "attention.key_length" not in self.md:
                raise ModelLoadError(f"{self.source}: embedding_length {hidden} is not a multiple of "
                                     f"attention.head_count {n_heads} and metadata key "
                                     f"{self.prefix + 'attention.key_length'!r} is missing")
            head_dim = self.positive("attention.key_length", default=hidden // n_heads)
        self._check_heads(n_heads, n_kv_heads, head_dim)
        return n_heads, n_kv_heads, head_dim

    def _check_heads(self, n_heads: int, n_kv_heads: int, head_dim: int) -> None:
        """Checks the attention shape the reference (and the compiled model) can run."""
        value_length = self.positive("attention.value_length", default=head_dim)
        if value_length != head_dim:
            raise ModelLoadError(f"{self.source}: metadata key {self.prefix + 'attention.value_length'!r} is "
                                 f"{value_length}, but the reference needs it equal to attention.key_length "
                                 f"({head_dim})")
        if n_heads % n_kv_heads:
            raise ModelLoadError(f"{self.source}: attention.head_count {n_heads} is not a multiple of "
                                 f"attention.head_count_kv {n_kv_heads}")
        if head_dim % 2:
            raise ModelLoadError(f"{self.source}: attention.key_length {head_dim} is odd; RoPE rotates pairs")

    def vocab_size(self) -> int:
        vocab = self.md.get(self.prefix + "vocab_size")
        if vocab is None:
            tokens = self.md.get("tokenizer.ggml.tokens")
            if not isinstance(tokens, list):
                raise ModelLoadError(f"{self.source}: neither metadata key {self.prefix + 'vocab_size'!r} nor "
                                     "'tokenizer.ggml.tokens' gives the vocabulary size")
            vocab = len(tokens)
        return _get({"v": vocab}, "v", int, self.source)

    def rope_scale(self) -> float:
        """llama.cpp's freq_scale: 1 / rope.scaling.factor for linear scaling (1: none)."""
        scaling = self.md.get(self.prefix + "rope.scaling.type", "none")
        factor = self.get("rope.scaling.factor", float, default=0.0)
        if scaling not in ("none", "linear"):
            raise ModelLoadError(f"{self.source}: metadata key {self.prefix + 'rope.scaling.type'!r} is "
                                 f"{scaling!r}; the reference supports 'none' and 'linear'")
        return 1.0 / factor if scaling == "linear" and factor > 0 else 1.0

    def token_id(self, key: str) -> int | None:
        return _get(self.md, key, int, self.source, default=None)


def _gemma3_config(md: Mapping[str, Any], tensor_names: set[str], source: str) -> LlmConfig:
    hp = _Hparams("gemma3", md, source)
    p, positive = hp.prefix, hp.positive
    n_layers, hidden, ffn = positive("block_count"), positive("embedding_length"), positive("feed_forward_length")
    n_heads, n_kv_heads, head_dim = hp.attention_shape(hidden, llama_defaults=False)

    # A missing or zero window means no sliding-window layers (llama.cpp: LLAMA_SWA_TYPE_NONE, one RoPE base).
    window = hp.get("attention.sliding_window", int, default=0)
    sliding_window = window if window > 0 else None

    # llama.cpp ignores attention.sliding_window_pattern for gemma3 and hard-codes 6; a file that says otherwise
    # is ambiguous, so it is refused rather than silently read one way.
    pattern = md.get(p + "attention.sliding_window_pattern", _GEMMA3_SWA_PATTERN)
    if pattern != _GEMMA3_SWA_PATTERN:
        raise ModelLoadError(f"{source}: metadata key {p + 'attention.sliding_window_pattern'!r} is {pattern!r}, "
                             f"but llama.cpp's gemma3 uses {_GEMMA3_SWA_PATTERN} whatever the file says")

    # No attention softcap: Gemma 3 dropped Gemma 2's, and llama.cpp's gemma3 never reads attn_logit_softcapping.
    final_cap = hp.get("final_logit_softcapping", float, default=0.0)
    # query_pre_attn_scalar: head_dim, except the 27B's hidden / n_heads (llama.cpp's f_attention_scale).
    attn_scale = 1.0 / math.sqrt(hidden / n_heads if n_layers == _GEMMA3_27B_LAYERS else head_dim)

    return LlmConfig(
        architecture="gemma3", n_layers=n_layers, hidden=hidden, ffn=ffn, n_heads=n_heads, n_kv_heads=n_kv_heads,
        head_dim=head_dim, vocab_size=hp.vocab_size(), context_length=positive("context_length"),
        rms_eps=positive("attention.layer_norm_rms_epsilon", float),
        rope_base=positive("rope.freq_base", float),
        rope_base_local=positive("rope.freq_base_swa", float, default=_GEMMA3_ROPE_BASE_LOCAL),
        rope_scale=hp.rope_scale(), rope_layout="neox", sliding_window=sliding_window,
        swa_pattern=_GEMMA3_SWA_PATTERN, attn_scale=attn_scale, embed_scale=math.sqrt(hidden),
        attn_softcap=None, final_softcap=final_cap if final_cap > 0 else None,
        norm_offset=0.0, activation="gelu_tanh", tied_output="output.weight" not in tensor_names,
        bos_id=hp.token_id("tokenizer.ggml.bos_token_id"), eos_id=hp.token_id("tokenizer.ggml.eos_token_id"),
    )


def _gemma2_config(md: Mapping[str, Any], tensor_names: set[str], source: str) -> LlmConfig:
    """Gemma 2 as llama.cpp reads it: Gemma 3's blocks without q/k norms, every other layer (the even
    ones) sliding-window, one RoPE base for all layers, attention and final logit softcaps."""
    hp = _Hparams("gemma2", md, source)
    positive = hp.positive
    n_layers, hidden, ffn = positive("block_count"), positive("embedding_length"), positive("feed_forward_length")
    n_heads, n_kv_heads, head_dim = hp.attention_shape(hidden)
    window = hp.get("attention.sliding_window", int, default=0)
    base = positive("rope.freq_base", float, default=10000.0)
    attn_cap = hp.get("attn_logit_softcapping", float, default=_GEMMA2_ATTN_SOFTCAP)
    final_cap = hp.get("final_logit_softcapping", float, default=_GEMMA2_FINAL_SOFTCAP)
    attn_scale = 1.0 / math.sqrt(hidden / n_heads if n_layers == _GEMMA2_27B_LAYERS else head_dim)
    rope_scale = hp.rope_scale()   # every layer's: llama.cpp's swa layers keep the train scale for gemma2
    return LlmConfig(
        architecture="gemma2", n_layers=n_layers, hidden=hidden, ffn=ffn, n_heads=n_heads, n_kv_heads=n_kv_heads,
        head_dim=head_dim, vocab_size=hp.vocab_size(), context_length=positive("context_length"),
        rms_eps=positive("attention.layer_norm_rms_epsilon", float), rope_base=base, rope_base_local=base,
        rope_scale=rope_scale, rope_scale_local=rope_scale, rope_layout="neox",
        sliding_window=window if window > 0 else None, swa_pattern=_GEMMA2_SWA_PATTERN, attn_scale=attn_scale,
        embed_scale=math.sqrt(hidden),
        attn_softcap=attn_cap if attn_cap > 0 else None, final_softcap=final_cap if final_cap > 0 else None,
        norm_offset=0.0, activation="gelu_tanh", tied_output="output.weight" not in tensor_names,
        bos_id=hp.token_id("tokenizer.ggml.bos_token_id"), eos_id=hp.token_id("tokenizer.ggml.eos_token_id"),
    )


# Per-layer tensors the llama-family blocks read ("blk.N.<name>"); a file with others (mixture-of-experts
# routers, FFN biases, ...) needs a block this module does not build, and is refused rather than run without them.
_LLAMA_FAMILY_LAYER_TENSORS = frozenset(
    [f"attn_{x}.weight" for x in ("norm", "q", "k", "v", "output", "q_norm", "k_norm")]
    + [f"attn_{x}.bias" for x in ("q", "k", "v", "output")]
    + [f"ffn_{x}.weight" for x in ("norm", "gate", "up", "down")])


def _llama_family_config(arch: str, md: Mapping[str, Any], tensor_names: set[str], source: str) -> LlmConfig:
    """Llama, Qwen 2 and Qwen 3 as llama.cpp reads them (src/llama-model.cpp load_hparams): head_count_kv
    defaults to head_count, key_length to embedding_length / head_count, rope.freq_base to 10000."""
    hp = _Hparams(arch, md, source)
    p, positive = hp.prefix, hp.positive
    experts = hp.get("expert_count", int, default=0)
    if experts:
        raise ModelLoadError(f"{source}: metadata key {p + 'expert_count'!r} is {experts}: mixture-of-experts "
                             "models are not supported")
    n_layers, hidden, ffn = positive("block_count"), positive("embedding_length"), positive("feed_forward_length")
    n_heads, n_kv_heads, head_dim = hp.attention_shape(hidden)
    rope_dim = positive("rope.dimension_count", default=head_dim)
    if rope_dim != head_dim:
        raise ModelLoadError(f"{source}: metadata key {p + 'rope.dimension_count'!r} is {rope_dim}: RoPE over part "
                             f"of a head (attention.key_length {head_dim}) is not supported")
    for name in sorted(tensor_names):
        if name.startswith("blk.") and name.split(".", 2)[-1] not in _LLAMA_FAMILY_LAYER_TENSORS:
            raise ModelLoadError(f"{source}: tensor {name!r} belongs to a block rlx's {arch} model does not build")
    return LlmConfig(
        architecture=arch, n_layers=n_layers, hidden=hidden, ffn=ffn, n_heads=n_heads, n_kv_heads=n_kv_heads,
        head_dim=head_dim, vocab_size=hp.vocab_size(), context_length=positive("context_length"),
        rms_eps=positive("attention.layer_norm_rms_epsilon", float),
        rope_base=positive("rope.freq_base", float, default=10000.0), rope_base_local=10000.0,
        rope_scale=hp.rope_scale(), rope_layout=_ROPE_LAYOUTS[arch], sliding_window=None, swa_pattern=0,
        attn_scale=1.0 / math.sqrt(head_dim), embed_scale=1.0, attn_softcap=None, final_softcap=None,
        norm_offset=0.0, activation="silu", tied_output="output.weight" not in tensor_names,
        bos_id=hp.token_id("tokenizer.ggml.bos_token_id"), eos_id=hp.token_id("tokenizer.ggml.eos_token_id"),
    )


def gemma3_layer_kinds(cfg: LlmConfig) -> list[str]:
    """"local" / "global" per layer of a Gemma 3 config (``cfg.layer_kinds`` as a list)."""
    return list(cfg.layer_kinds)


# ---------------------------------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerWeights:
    """One transformer block's weights in float64; matrices are (out, in), as GGUF stores them."""

    attn_norm: np.ndarray
    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    q_norm: np.ndarray | None
    k_norm: np.ndarray | None
    post_attn_norm: np.ndarray | None
    ffn_norm: np.ndarray
    w_gate: np.ndarray
    w_up: np.ndarray
    w_down: np.ndarray
    post_ffn_norm: np.ndarray | None
    bq: np.ndarray | None = None       # projection biases (Qwen 2's q, k and v; any that a file has)
    bk: np.ndarray | None = None
    bv: np.ndarray | None = None
    bo: np.ndarray | None = None


class LlmWeights:
    """The dequantized weights of one file: the blocks in float64 (about 0.8 GB for Gemma 3 270M), the token
    embedding dequantized per row on lookup, and the output matrix (the embedding when tied) dequantized once
    to float32 (exact: the dequantizers compute in float32) and cast to float64 block by block when projecting.

    Holds views of the file's memory map, never the ``GGUFFile`` itself (so a cache keyed weakly by the file
    lets it go)."""

    def __init__(self, file: rlx_gguf.GGUFFile, config: LlmConfig | None = None) -> None:
        self.config = cfg = config or LlmConfig.from_gguf(file)
        self.source = str(file.path)
        tensors = file.tensors

        def tensor(name: str, shape: tuple[int, ...], required: bool = True) -> rlx_gguf.GGUFTensor | None:
            t = tensors.get(name)
            if t is None:
                if required:
                    raise ModelLoadError(f"{file.path}: tensor {name!r} is missing")
                return None
            if t.shape != shape:
                raise ModelLoadError(f"{file.path}: tensor {name!r} has shape {t.shape}, expected {shape}")
            return t

        def f64(name: str, shape: tuple[int, ...], required: bool = True) -> np.ndarray | None:
            t = tensor(name, shape, required)
            return None if t is None else t.dequantize().astype(np.float64)

        h, d = cfg.hidden, cfg.head_dim
        self.layers: list[LayerWeights] = []
        for il in range(cfg.n_layers):
            b = f"blk.{il}."
            self.layers.append(LayerWeights(
                attn_norm=f64(b + "attn_norm.weight", (h,)),
                wq=f64(b + "attn_q.weight", (cfg.q_dim, h)),
                wk=f64(b + "attn_k.weight", (cfg.kv_dim, h)),
                wv=f64(b + "attn_v.weight", (cfg.kv_dim, h)),
                wo=f64(b + "attn_output.weight", (h, cfg.q_dim)),
                q_norm=f64(b + "attn_q_norm.weight", (d,), required=False),
                k_norm=f64(b + "attn_k_norm.weight", (d,), required=False),
                post_attn_norm=f64(b + "post_attention_norm.weight", (h,), required=False),
                ffn_norm=f64(b + "ffn_norm.weight", (h,)),
                w_gate=f64(b + "ffn_gate.weight", (cfg.ffn, h)),
                w_up=f64(b + "ffn_up.weight", (cfg.ffn, h)),
                w_down=f64(b + "ffn_down.weight", (h, cfg.ffn)),
                post_ffn_norm=f64(b + "post_ffw_norm.weight", (h,), required=False),
                bq=f64(b + "attn_q.bias", (cfg.q_dim,), required=False),
                bk=f64(b + "attn_k.bias", (cfg.kv_dim,), required=False),
                bv=f64(b + "attn_v.bias", (cfg.kv_dim,), required=False),
                bo=f64(b + "attn_output.bias", (h,), required=False),
            ))
        self.output_norm: np.ndarray = f64("output_norm.weight", (h,))
        # Per-pair RoPE frequency divisors, every layer (Llama 3.1+'s long-context scaling), where the file has them.
        self.rope_freqs: np.ndarray | None = f64("rope_freqs.weight", (d // 2,), required=False)
        embd = tensor("token_embd.weight", (cfg.vocab_size, h))
        self._embd = _RawMatrix(embd)
        out = embd if cfg.tied_output else tensor("output.weight", (cfg.vocab_size, h))
        self._out = _RawMatrix(out)
        self._out_f32: np.ndarray | None = None

    def embed(self, tokens: np.ndarray) -> np.ndarray:
        """The embedding rows of ``tokens`` in float64 (only those rows are dequantized)."""
        unique, inverse = np.unique(tokens, return_inverse=True)
        return self._embd.rows(unique)[inverse]

    def output_blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, float64 rows) of the output matrix [vocab, hidden], in blocks of bounded size."""
        if self._out_f32 is None:
            self._out_f32 = self._out.all_f32()
        for start in range(0, self.config.vocab_size, _OUTPUT_BLOCK_ROWS):
            yield start, self._out_f32[start:start + _OUTPUT_BLOCK_ROWS].astype(np.float64)


class _RawMatrix:
    """A 2-D GGUF tensor's raw rows (a view of the map) with row-wise dequantization."""

    def __init__(self, t: rlx_gguf.GGUFTensor) -> None:
        self.name, self.type, self.shape = t.name, t.type, t.shape
        self._plain = t.numpy() if t.type in ("F32", "F16", "F64") else None
        self._data = t.data                      # (rows, bytes_per_row) uint8
        self._qtype = GGMLQuantizationType[t.type]

    def rows(self, idx: np.ndarray) -> np.ndarray:
        if self._plain is not None:
            return self._plain[idx].astype(np.float64)
        raw = np.ascontiguousarray(self._data[idx])
        return np.asarray(_quants.dequantize(raw, self._qtype), np.float64).reshape(len(idx), self.shape[1])

    def all_f32(self) -> np.ndarray:
        if self._plain is not None:
            return self._plain.astype(np.float32)
        return np.asarray(_quants.dequantize(self._data, self._qtype), np.float32).reshape(self.shape)


# One LlmWeights per open GGUFFile (weakly keyed: the weights do not keep the file object alive), and the most
# recent one opened from a path (so repeated calls with the same path dequantize once).
_BY_FILE: weakref.WeakKeyDictionary[rlx_gguf.GGUFFile, LlmWeights] = weakref.WeakKeyDictionary()
_BY_PATH: dict[tuple[str, int, int], LlmWeights] = {}


def load_weights(file_or_path: FileLike | LlmWeights) -> LlmWeights:
    """The (cached) weights of an open GGUF file or a path; an ``LlmWeights`` is returned as is."""
    if isinstance(file_or_path, LlmWeights):
        return file_or_path
    if isinstance(file_or_path, rlx_gguf.GGUFFile):
        weights = _BY_FILE.get(file_or_path)
        if weights is None:
            weights = _BY_FILE[file_or_path] = LlmWeights(file_or_path)
        return weights
    if not isinstance(file_or_path, (str, os.PathLike)):
        raise ModelLoadError(f"expected a GGUF file, a path or LlmWeights, got a {type(file_or_path).__name__}")
    path = Path(file_or_path).resolve()
    try:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
    except OSError:
        key = (str(path), -1, -1)               # rlx.gguf.open raises the error that names the problem
    if key not in _BY_PATH:
        _BY_PATH.clear()                        # one entry: a model's weights are a gigabyte or more
        with rlx_gguf.open(path) as f:
            _BY_PATH[key] = LlmWeights(f)
    return _BY_PATH[key]


def clear_cache() -> None:
    """Drop the weights cached for paths (those of open files go with the file object)."""
    _BY_PATH.clear()


# ---------------------------------------------------------------------------------------------------------------------
# The pieces (float64 in, float64 out)
# ---------------------------------------------------------------------------------------------------------------------


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm over the last axis: x / sqrt(mean(x^2) + eps) * weight."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rope(x: np.ndarray, positions: np.ndarray, base: float, scale: float = 1.0, layout: str = "neox",
         factors: np.ndarray | None = None) -> np.ndarray:
    """Rotary embedding of x [T, heads, d] at ``positions`` [T]: pair i turns by (scale * pos) * base^(-2i/d),
    divided by factors[i] where given (llama.cpp's rope_freqs: Llama 3's long-context factors).

    "neox" pairs (x[i], x[i + d/2]) (Gemma, Qwen: llama.cpp's LLAMA_ROPE_TYPE_NEOX), "interleaved" (or llama.cpp's
    name, "normal") pairs (x[2i], x[2i+1]) (Llama: LLAMA_ROPE_TYPE_NORM)."""
    d = x.shape[-1]
    half = d // 2
    inv_freq = base ** (-np.arange(half, dtype=np.float64) * 2.0 / d)
    if factors is not None:
        inv_freq = inv_freq / np.asarray(factors, np.float64)
    angle = (scale * np.asarray(positions, np.float64))[:, None] * inv_freq     # [T, half]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]             # broadcast over heads
    if layout == "neox":
        a, b = x[..., :half], x[..., half:]
    elif layout in ("interleaved", "normal"):
        a, b = x[..., 0::2], x[..., 1::2]
    else:
        raise ValueError(f"unknown RoPE layout {layout!r} (neox, interleaved)")
    ra, rb = a * cos - b * sin, a * sin + b * cos
    if layout == "neox":
        return np.concatenate([ra, rb], axis=-1)
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = ra, rb
    return out


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU with the tanh approximation (Gemma's ``gelu_pytorch_tanh``, llama.cpp's ggml_gelu)."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x: np.ndarray) -> np.ndarray:
    """x * sigmoid(x) (SwiGLU's gate: Llama, Qwen), in a form that does not overflow for large |x|."""
    return x * (0.5 * (1.0 + np.tanh(0.5 * x)))


_ACTIVATIONS = {"gelu_tanh": gelu_tanh, "silu": silu}


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, positions: np.ndarray, *, scale: float,
              window: int | None = None, softcap: float | None = None) -> np.ndarray:
    """Causal GQA attention: q [T, Hq, d], k and v [T, Hkv, d], all at ``positions`` [T] -> [T, Hq, d].

    Query head h reads kv head h // (Hq / Hkv). A query at p sees keys at k <= p, and with a window only
    those with p - k < window (llama.cpp's LLAMA_SWA_TYPE_STANDARD)."""
    n_rep = q.shape[1] // k.shape[1]
    kh = np.repeat(k, n_rep, axis=1).transpose(1, 0, 2)                         # [Hq, T, d]
    vh = np.repeat(v, n_rep, axis=1).transpose(1, 0, 2)
    scores = np.matmul(q.transpose(1, 0, 2), kh.transpose(0, 2, 1)) * scale     # [Hq, Tq, Tk]
    if softcap is not None:
        scores = softcap * np.tanh(scores / softcap)
    qpos, kpos = positions[:, None], positions[None, :]
    allowed = kpos <= qpos
    if window is not None:
        allowed &= qpos - kpos < window
    scores = np.where(allowed, scores, -np.inf)         # every query sees itself: no row is all -inf
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return np.matmul(p, vh).transpose(1, 0, 2)


def _norm(x: np.ndarray, w: np.ndarray | None, cfg: LlmConfig) -> np.ndarray:
    """A Gemma norm that may be absent from a file (then it is the identity)."""
    return x if w is None else rms_norm(x, w + cfg.norm_offset, cfg.rms_eps)


def _affine(x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    return x @ w.T if b is None else x @ w.T + b


def _layer(x: np.ndarray, lw: LayerWeights, cfg: LlmConfig, il: int, positions: np.ndarray,
           rope_freqs: np.ndarray | None = None) -> np.ndarray:
    """One block on the residual stream x [T, hidden] (the norms a file leaves out are identities)."""
    t, d = x.shape[0], cfg.head_dim
    h = rms_norm(x, lw.attn_norm + cfg.norm_offset, cfg.rms_eps)
    q = _affine(h, lw.wq, lw.bq).reshape(t, cfg.n_heads, d)
    k = _affine(h, lw.wk, lw.bk).reshape(t, cfg.n_kv_heads, d)
    v = _affine(h, lw.wv, lw.bv).reshape(t, cfg.n_kv_heads, d)
    q, k = _norm(q, lw.q_norm, cfg), _norm(k, lw.k_norm, cfg)      # per head, over head_dim
    base, scale = cfg.rope_for_layer(il)
    q = rope(q, positions, base, scale, cfg.rope_layout, rope_freqs)
    k = rope(k, positions, base, scale, cfg.rope_layout, rope_freqs)
    a = attention(q, k, v, positions, scale=cfg.attn_scale, window=cfg.window_for_layer(il),
                  softcap=cfg.attn_softcap)
    x = x + _norm(_affine(a.reshape(t, cfg.q_dim), lw.wo, lw.bo), lw.post_attn_norm, cfg)

    h = rms_norm(x, lw.ffn_norm + cfg.norm_offset, cfg.rms_eps)
    act = _ACTIVATIONS.get(cfg.activation)
    if act is None:
        raise ModelLoadError(f"activation {cfg.activation!r} is not supported by the reference "
                             f"({', '.join(_ACTIVATIONS)})")
    f = (act(h @ lw.w_gate.T) * (h @ lw.w_up.T)) @ lw.w_down.T
    return x + _norm(f, lw.post_ffn_norm, cfg)


def _check_tokens(tokens: Sequence[int], cfg: LlmConfig) -> np.ndarray:
    ids = np.asarray(tokens)
    if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
        raise InputError(f"tokens must be a non-empty sequence of ints, got {ids.dtype} of shape {ids.shape}")
    if ids.min() < 0 or ids.max() >= cfg.vocab_size:
        raise InputError(f"token ids must be in [0, {cfg.vocab_size}), got {int(ids.min())}..{int(ids.max())}")
    if ids.size > cfg.context_length:
        raise InputError(f"{ids.size} tokens is more than the context length {cfg.context_length}")
    return ids.astype(np.int64)


def final_hidden(weights: LlmWeights, tokens: Sequence[int]) -> np.ndarray:
    """The final-normed hidden states [T, hidden] of ``tokens`` at positions 0..T-1 (teacher forced)."""
    cfg = weights.config
    ids = _check_tokens(tokens, cfg)
    positions = np.arange(ids.size, dtype=np.int64)
    x = weights.embed(ids) * cfg.embed_scale
    for il, lw in enumerate(weights.layers):
        x = _layer(x, lw, cfg, il, positions, weights.rope_freqs)
    return rms_norm(x, weights.output_norm + cfg.norm_offset, cfg.rms_eps)


def project(weights: LlmWeights, h: np.ndarray) -> np.ndarray:
    """Logits [T, vocab] of final hidden states h [T, hidden], the output matrix taken in row blocks."""
    cfg = weights.config
    logits = np.empty((h.shape[0], cfg.vocab_size), np.float64)
    for start, block in weights.output_blocks():
        logits[:, start:start + block.shape[0]] = h @ block.T
    if cfg.final_softcap is not None:
        logits = cfg.final_softcap * np.tanh(logits / cfg.final_softcap)
    return logits


# ---------------------------------------------------------------------------------------------------------------------
# The oracle
# ---------------------------------------------------------------------------------------------------------------------


def reference_logits(file_or_path: FileLike | LlmWeights, tokens: Sequence[int]) -> np.ndarray:
    """float64 logits [T, vocab] of a teacher-forced pass over ``tokens`` at positions 0..T-1.

    The weights are dequantized once per file object (or path) and cached (about 4 s for Gemma 3 270M); the
    output projection is computed in blocks of vocabulary rows, so the float64 output matrix never exists
    whole. Memory: the cached weights (1.5 GB for Gemma 3 270M) plus the T x vocab float64 result."""
    weights = load_weights(file_or_path)
    return project(weights, final_hidden(weights, tokens))


@dataclass(frozen=True)
class Generation:
    """A greedy generation: the new tokens and, per step, the reference's top-1 minus top-2 logit."""

    prompt: tuple[int, ...]
    tokens: tuple[int, ...]
    top2_gaps: tuple[float, ...]

    def agrees_with(self, tokens: Sequence[int], margin: float = 0.05) -> bool:
        """Whether ``tokens`` (another implementation's greedy generation from the same prompt) match this one
        up to the first step whose top-2 logits are within ``margin``: there a different pick is a legitimate
        tie-break and everything after it may differ."""
        for i, ref in enumerate(self.tokens):
            if self.top2_gaps[i] < margin:
                return True
            if i >= len(tokens) or int(tokens[i]) != ref:
                return False
        return len(tokens) == len(self.tokens)


def reference_generate(file_or_path: FileLike | LlmWeights, prompt_tokens: Sequence[int], n: int, *,
                       stop_at_eos: bool = False) -> Generation:
    """Greedy generation of ``n`` tokens after ``prompt_tokens`` (fewer if ``stop_at_eos`` and the model emits
    its eos token, which is then the last token).

    Each step recomputes the whole sequence teacher-forced (no KV cache: one code path, the one
    ``reference_logits`` uses) and projects only the last position."""
    weights = load_weights(file_or_path)
    seq = [int(t) for t in prompt_tokens]
    out: list[int] = []
    gaps: list[float] = []
    for _ in range(n):
        logits = project(weights, final_hidden(weights, seq)[-1:])[0]
        top2 = np.partition(logits, -2)[-2:]
        nxt = int(np.argmax(logits))
        out.append(nxt)
        gaps.append(float(top2[1] - top2[0]))
        seq.append(nxt)
        if stop_at_eos and nxt == weights.config.eos_id:
            break
    return Generation(prompt=tuple(int(t) for t in prompt_tokens), tokens=tuple(out), top2_gaps=tuple(gaps))
