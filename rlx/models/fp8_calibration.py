"""Calibrated FP8 weights for a BERT encoder: GPTQ rounding (rlx.fp8_gptq)
of every encoder linear against the inputs it sees on calibration text.

``calibrate_fp8(model)`` runs the f32 encoder (with its linears' inputs as
extra outputs, ``BertModel.build_graph(taps=True)``) over the calibration
text one layer at a time: layer n's inputs are measured with layers 0..n-1
already rounded, so each layer's rounding also absorbs what the earlier
layers' rounding did to its inputs. The result is a model whose
``fp8_weights`` hold the codes and per-row scales, which ``precision="fp8"``
and ``"fp8-dynamic"`` then use as they use an FP8 checkpoint's (same
kernels, same bytes). Weights that arrived as FP8 codes stay as shipped.
The layer-by-layer walk itself is ``rewrite_layers``, which
benchmarks/fp8_corrections.py also drives with other rewrites.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from rlx.arg_types import is_integer
from rlx.errors import InputError, ModelLoadError, ParameterError
from rlx.fp8 import dequantize_array
from rlx.fp8_gptq import gptq_quantize
from rlx.models.bert import BertModel
from rlx.models.calibration_texts import CALIBRATION_TEXTS

__all__ = ["calibrate_fp8", "check_new_folder", "rewrite_layers", "save_fp8", "TapStatistics", "CALIBRATION_TEXTS"]

# Weight files of other formats a model folder may hold: save_fp8 does not
# copy them beside the FP8 checkpoint (they would hold the f32 weights).
_WEIGHT_FILES = ("*.safetensors", "*.safetensors.index.json", "*.bin", "*.pt", "*.h5", "*.onnx", "*.msgpack",
                 "*.ot", "onnx", "openvino")

# A tap (an input measured by build_graph(taps=True)) and the weights that read it.
_LAYER_TAPS = (("attention.self", ("attention.self.query", "attention.self.key", "attention.self.value")),
               ("attention.output.dense", ("attention.output.dense",)),
               ("intermediate.dense", ("intermediate.dense",)),
               ("output.dense", ("output.dense",)))


@dataclasses.dataclass
class TapStatistics:
    """What one tap's inputs looked like over the calibration text: their sum
    (first moment, [K]) and the sum of their outer products (second, [K, K]),
    in float64 over ``tokens`` real (non-padding) tokens."""
    first: np.ndarray
    second: np.ndarray
    tokens: int

    def hessian(self) -> np.ndarray:
        """E[x x^T]: GPTQ's Hessian of the layer's squared output error."""
        return self.second / self.tokens

    def mean(self) -> np.ndarray:
        return self.first / self.tokens


# rewrite(weight name, its f32 weight, its inputs' statistics) -> the
# replaced parameters (the weight and, where it changes, its bias), f32.
Rewrite = Callable[[str, np.ndarray, TapStatistics], dict[str, np.ndarray]]


def rewrite_layers(model: BertModel, rewrite: Rewrite, texts: Sequence[str] | None = None, *,
                   device: str | None = "cpu", batch_size: int = 16,
                   progress: Callable[[int, int], None] | None = None, caller: str = "rewrite_layers") -> None:
    """Runs the f32 encoder (its linears' inputs as extra outputs,
    ``BertModel.build_graph(taps=True)``) over ``texts`` one layer at a
    time and calls ``rewrite`` for each encoder linear weight of the layer
    that did not arrive as FP8 codes, with the statistics of its inputs
    measured behind the earlier layers' rewrites (so each layer's change
    also answers what the earlier ones did to its inputs). The parameters
    it returns are set before the next layer is measured; ``model`` itself
    is not changed. progress(done, total) is called after each layer."""
    from rlx.models.embedder import Embedder, seq_bucket

    items = list(CALIBRATION_TEXTS if texts is None else texts)
    if not items:
        raise InputError(f"{caller}: no calibration texts")
    for i, t in enumerate(items):
        if not isinstance(t, str):
            raise InputError(f"{caller}: texts[{i}] is a {type(t).__name__}, not a str")
    if not is_integer(batch_size) or batch_size < 1:
        raise ParameterError(f"{caller}: batch_size must be an integer >= 1, got {batch_size!r}")

    import rlx

    ids = Embedder(model, device=device, precision="f32").tokenize(items)
    batch = min(batch_size, len(ids))
    seq = seq_bucket(max(len(s) for s in ids), model.max_seq_length)
    graph = model.build_graph(batch, seq, "f32", pooled=False, packed_qkv=False, taps=True)
    exe = rlx.compile(graph, device=device, params=model.params("f32", packed_qkv=False))
    pad = model.config.pad_token_id
    chunks = [ids[i:i + batch] for i in range(0, len(ids), batch)]
    layers = model.config.num_hidden_layers
    for n in range(layers):
        prefix = f"encoder.layer.{n}."
        first: dict[str, np.ndarray] = {}
        second: dict[str, np.ndarray] = {}
        tokens = 0
        for chunk in chunks:
            input_ids = np.full((batch, seq), pad, np.int32)
            mask = np.zeros((batch, seq), np.float32)
            for r, s in enumerate(chunk):
                input_ids[r, :len(s)], mask[r, :len(s)] = s, 1.0
            mask[len(chunk):, 0] = 1.0   # filler rows attend to one token; they are not measured
            out = exe.run(input_ids=input_ids, attention_mask=mask)
            real = mask[:len(chunk)] > 0
            for tap, _ in _LAYER_TAPS:
                x = np.asarray(out[prefix + tap][:len(chunk)][real], np.float64)
                first[tap] = first.get(tap, 0.0) + x.sum(0)
                second[tap] = second.get(tap, 0.0) + x.T @ x
            tokens += int(real.sum())
        replaced: dict[str, np.ndarray] = {}
        for tap, weights in _LAYER_TAPS:
            stats = TapStatistics(first[tap], second[tap], tokens)
            for w in weights:
                name = f"{prefix}{w}.weight"
                if name not in model.fp8_weights:   # shipped as FP8: kept
                    replaced.update(rewrite(name, model.weights[name], stats))
        if replaced:
            exe.set_params(replaced)   # the next layers are measured behind this one's change
        if progress is not None:
            progress(n + 1, layers)


def calibrate_fp8(model: BertModel, texts: Sequence[str] | None = None, *, device: str | None = "cpu",
                  batch_size: int = 16, damp: float = 0.3, act_order: bool = True,
                  progress: Callable[[int, int], None] | None = None) -> BertModel:
    """A copy of ``model`` whose encoder linears carry GPTQ-rounded e4m3
    codes (one scale per output channel) for ``precision="fp8"``.

    texts: calibration sentences (default: ``CALIBRATION_TEXTS``, 64 varied
    ones); device: where the f32 encoder runs to measure the inputs;
    progress(done, total) is called after each layer. Takes a few seconds
    a layer for MiniLM on two CPU cores.
    """
    calibrated: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def gptq(name: str, weight: np.ndarray, stats: TapStatistics) -> dict[str, np.ndarray]:
        codes, scale = gptq_quantize(weight, stats.hessian(), damp=damp, act_order=act_order)
        calibrated[name] = (codes, scale)
        return {name: dequantize_array(codes, scale)}

    rewrite_layers(model, gptq, texts, device=device, batch_size=batch_size, progress=progress,
                   caller="calibrate_fp8")
    return dataclasses.replace(model, fp8_weights={**model.fp8_weights, **calibrated}, _params_cache={})


def check_new_folder(folder: str | Path) -> Path:
    """``folder`` as a Path, if save_fp8 may write it (it does not exist, or
    is an empty folder); callers check before a long calibration."""
    out = Path(folder)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ModelLoadError(f"save_fp8: {out} exists and is not an empty folder; nothing was written")
    return out


def save_fp8(model: BertModel, folder: str | Path) -> Path:
    """Write ``model`` as an FP8 checkpoint in a new folder: its config,
    tokenizer and pooling files copied, and a ``model.safetensors`` with
    each ``fp8_weights`` entry as F8 codes plus ``<name>_scale`` (one per
    output channel) and every other tensor f32, the layout FP8 checkpoints
    ship and ``BertModel.load`` reads. A calibration is computed once:
    ``load_embedder(folder, precision="fp8")`` runs on its codes. The folder
    must not exist yet, or be empty."""
    from rlx.safetensors import save_safetensors

    if not model.fp8_weights:
        raise ParameterError("save_fp8: the model has no FP8 weights (calibrate_fp8 gives them)")
    out = check_new_folder(folder)
    if out.exists():
        out.rmdir()
    shutil.copytree(model.folder, out, ignore=shutil.ignore_patterns(*_WEIGHT_FILES))
    tensors: dict[str, np.ndarray] = {}
    for name, value in model.weights.items():
        if name in model.fp8_weights:
            codes, scale = model.fp8_weights[name]
            tensors[name], tensors[name + "_scale"] = codes, np.asarray(scale, np.float32).reshape(-1, 1)
        else:
            tensors[name] = np.asarray(value, np.float32)
    save_safetensors(out / "model.safetensors", tensors, {"format": "pt", "producer": "rlx save_fp8"})
    return out
