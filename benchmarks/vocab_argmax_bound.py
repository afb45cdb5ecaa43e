"""Could greedy decoding read fewer bytes of the vocabulary projection?
(issue 18: on AVX2 machines a CPU decode step streams Gemma 3 270M's
178 MB Q8_0 output table at the machine's read bandwidth, as llama.cpp's
does.) The argmax over the exact logits W x is found from a b-bit copy W'
of the table (absmax scale per 32 weights, so every weight's rounding
error is at most d / 2) with a rigorous bound |(W - W') x| <= sum over
blocks of (d_block / 2) |x_block|_1: every row whose approximate logit
plus its bound reaches the best approximate logit minus its bound is a
candidate, and only the candidates' exact rows would be read. This
measures the candidates per position on real final hidden states (the
float64 oracle's, teacher-forced over rlx's calibration texts), the bytes
each copy costs, and checks the exact argmax is always a candidate.

    python benchmarks/vocab_argmax_bound.py .gg/gemma.gguf OUT.json [TEXTS]"""

from __future__ import annotations

import json
import sys

import numpy as np

from rlx.models.calibration_texts import CALIBRATION_TEXTS
from rlx.reference import llm as oracle
from rlx.tokenizer import Tokenizer

BLOCK = 32


def candidates(w: np.ndarray, x: np.ndarray, bits: int) -> np.ndarray:
    """Candidate rows per position (x: [T, K]) for a b-bit copy of w [V, K]."""
    v, k = w.shape
    blocks = w.reshape(v, k // BLOCK, BLOCK)
    qmax = 2 ** (bits - 1) - 1
    d = (np.abs(blocks).max(-1, keepdims=True) / qmax).astype(np.float16).astype(np.float32)
    approx_w = (np.clip(np.rint(blocks / np.where(d == 0, 1, d)), -qmax - 1, qmax) * d).reshape(v, k)
    half_step = d[..., 0] / 2 * 1.001   # the bound's own rounding: a margin of 0.1%
    counts = []
    for row in x.astype(np.float32):
        approx = approx_w @ row
        bound = half_step @ np.abs(row).reshape(k // BLOCK, BLOCK).sum(-1) + 1e-4
        kept = np.nonzero(approx + bound >= (approx - bound).max())[0]
        assert int(np.argmax(w @ row)) in kept, "the bound lost the argmax"
        counts.append(kept.size)
    return np.array(counts)


def main() -> None:
    path, out = sys.argv[1], sys.argv[2]
    n_texts = int(sys.argv[3]) if len(sys.argv) > 3 else 12
    weights = oracle.load_weights(path)
    tok = Tokenizer.from_gguf(path)
    hidden = np.concatenate([oracle.final_hidden(weights, [2, *tok.encode(t)])[1:]
                             for t in CALIBRATION_TEXTS[:n_texts]])
    w = np.concatenate([b for _, b in weights.output_blocks()]).astype(np.float32)
    v, k = w.shape
    rows = []
    for bits in (4, 5, 6):
        c = candidates(w, hidden, bits)
        table_mb = v * k * bits / 8 / 1e6 + v * (k // BLOCK) * 2 / 1e6   # codes + f16 scales
        exact_row_bytes = k // BLOCK * 34   # a Q8_0 row
        rows.append({"bits": bits, "table_mb": round(table_mb, 1), "positions": int(c.size),
                     "candidates_median": float(np.median(c)), "candidates_p90": float(np.percentile(c, 90)),
                     "candidates_max": int(c.max()),
                     "mb_read_median": round(table_mb + np.median(c) * exact_row_bytes / 1e6, 1),
                     "mb_read_max": round(table_mb + c.max() * exact_row_bytes / 1e6, 1)})
        print(rows[-1], flush=True)
    json.dump({"what": __doc__.splitlines()[0], "command": f"python benchmarks/vocab_argmax_bound.py {path} OUT "
               f"{n_texts}", "model": path, "vocab": v, "hidden": k,
               "q8_0_table_mb": round(v * k / BLOCK * 34 / 1e6, 1), "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
