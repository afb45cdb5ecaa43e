"""Two more standard repairs of an FP8 weight rounding, measured on MiniLM
(issue 20 asks cosine >= 0.999 to the f32 embeddings on the held-in test
sentences; round to nearest gives 0.99296 at the worst one, GPTQ 0.99486):

- bias correction: each linear's bias takes (W - W_fp8) E[x] over the
  calibration text, so the rounding's mean output error is removed;
- an activation-aware rank-r correction: W_fp8 + C, C the best rank-r
  approximation of (W - W_fp8) in the norm that the layer's inputs weigh
  (the truncated SVD of (W - W_fp8) H^1/2, mapped back by H^-1/2; H =
  E[x x^T]). It would cost r (N + K) extra values a weight and a second,
  thin product: measured here folded into f32 weights, to see whether it
  is worth building.

Both run layer by layer behind the earlier layers' rounding
(``rlx.models.fp8_calibration.rewrite_layers``, the walk calibrate_fp8
uses), after round to nearest or GPTQ rounding, with f32 activations, and
are scored against sentence-transformers' f32 embeddings.

By hand, not in CI (a few minutes on two cores):

    HF_HUB_OFFLINE=1 python benchmarks/fp8_corrections.py OUT.json
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
from bench_machine import write_results
from fp8_accuracy import TARGET, cosine, minilm_setup

from rlx import fp8
from rlx.fp8_gptq import gptq_quantize
from rlx.models import BertModel
from rlx.models.embedder import Embedder
from rlx.models.fp8_calibration import TapStatistics, rewrite_layers

RANKS = (4, 16, 64)


def rounded(weight: np.ndarray, stats: TapStatistics, rounding: str) -> np.ndarray:
    if rounding == "gptq":
        codes, scale = gptq_quantize(weight, stats.hessian())
    else:
        codes, scale = fp8.quantize_array(weight, "f8e4m3", "channel", None)
    return fp8.dequantize_array(codes, scale)


def low_rank_correction(error: np.ndarray, hessian: np.ndarray, rank: int) -> np.ndarray:
    """The rank-r C closest to ``error`` [N, K] in the norm |E H^1/2|_F."""
    k = hessian.shape[0]
    values, vectors = np.linalg.eigh(hessian + 1e-6 * np.trace(hessian) / k * np.eye(k))
    root, inverse_root = (vectors * np.sqrt(values)) @ vectors.T, (vectors / np.sqrt(values)) @ vectors.T
    u, s, vt = np.linalg.svd(error @ root, full_matrices=False)
    return (u[:, :rank] * s[:rank]) @ (vt[:rank] @ inverse_root)


def corrected_model(model: BertModel, rounding: str, bias: bool, rank: int) -> BertModel:
    weights = dict(model.weights)

    def rewrite(name: str, weight: np.ndarray, stats: TapStatistics) -> dict[str, np.ndarray]:
        w = weight.astype(np.float64)
        q = rounded(weight, stats, rounding).astype(np.float64)
        if rank:
            q = q + low_rank_correction(w - q, stats.hessian(), rank)
        out = {name: q.astype(np.float32)}
        if bias:
            b = name.removesuffix("weight") + "bias"
            out[b] = (model.weights[b].astype(np.float64) + (w - q) @ stats.mean()).astype(np.float32)
        weights.update(out)
        return out

    rewrite_layers(model, rewrite)
    return dataclasses.replace(model, weights=weights, _params_cache={})


def main() -> None:
    start = time.time()
    out, sentences, peer, model = minilm_setup(__doc__)
    rows = []
    for rounding in ("nearest", "gptq"):
        for bias, rank in [(False, 0), (True, 0), *((False, r) for r in RANKS)]:
            got = Embedder(corrected_model(model, rounding, bias, rank), precision="f32").encode(sentences)
            c = cosine(got, peer)
            label = f"{rounding}{' + bias correction' if bias else ''}{f' + rank {rank}' if rank else ''}"
            print(f"{label:<32} worst {c.min():.5f} mean {c.mean():.5f}  " + " ".join(f"{v:.4f}" for v in c),
                  flush=True)
            rows.append({"rounding": rounding, "bias_correction": bias, "rank": rank, "cos_st": c.round(6).tolist(),
                         "min_st": float(c.min()), "mean_st": float(c.mean()), "meets_target": bool(c.min() >= TARGET)})
    write_results(str(out), "HF_HUB_OFFLINE=1 python benchmarks/fp8_corrections.py OUT.json",
                  sentences=sentences, rows=rows, seconds=round(time.time() - start, 1))


if __name__ == "__main__":
    main()
