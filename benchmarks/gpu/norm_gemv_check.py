"""H200 by hand (issue 18): the decode step with the residual norms folded
into the GEMVs after them (gemv1n, rlx/lowering/quant.py norm_gemv) against
the same step without the fold, on the tiny random Gemma 3 of the tests
(tests/models/tiny_llm.py, Q8_0 projections, hidden 64) and against the CPU:
teacher-forced next-token logits over STEPS tokens, their largest
difference relative to the logits' range, argmax agreement, and the decode
step's gemv1n / rmsnorm_add thunk counts.

Run: PYTHONPATH=$PWD python3 benchmarks/gpu/norm_gemv_check.py OUT.json"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from rlx.lowering import quant as quant_lowering
from rlx.models.llm import LLM
from tests.models.tiny_llm import write_tiny_gemma

STEPS = 48


def _run(path: Path, device: str, fold: bool) -> tuple[np.ndarray, dict]:
    real = quant_lowering.norm_gemv
    if not fold:
        quant_lowering.norm_gemv = lambda *args: False
    try:
        llm = LLM(path, device=device, max_context=128)
        ids = [2] + [int(t) for t in np.random.default_rng(7).integers(3, 300, STEPS - 1)]
        logits = llm.logits(ids)
        kernels = [t.kernel or "" for t in llm._executable("decode", 1, "logits").thunks]
    finally:
        quant_lowering.norm_gemv = real
    return logits, {"gemv1n": sum(k.startswith("gemv1n_") for k in kernels),
                    "rmsnorm_add": sum(k.startswith("rmsnorm_add") for k in kernels), "thunks": len(kernels)}


def _compare(a: np.ndarray, b: np.ndarray) -> dict:
    span = float(np.abs(b).max()) or 1.0
    return {"max_abs_diff_over_max_abs": float(np.abs(a - b).max()) / span,
            "argmax_agreement": float(np.mean(a.argmax(-1) == b.argmax(-1)))}


def main(out: str, *_: str) -> None:
    path = write_tiny_gemma(Path(tempfile.mkdtemp()) / "tiny.gguf")
    dev = sys.argv[2] if len(sys.argv) > 2 else "cuda"
    folded, counts_f = _run(path, dev, True)
    plain, counts_p = _run(path, dev, False)
    cpu, _ = _run(path, "cpu", False)
    result = {"what": __doc__.splitlines()[0], "command": "PYTHONPATH=$PWD python3 benchmarks/gpu/norm_gemv_check.py "
              "OUT.json", "steps": STEPS, "cuda_folded_counts": counts_f, "cuda_unfolded_counts": counts_p,
              "folded_vs_unfolded": _compare(folded, plain), "folded_vs_cpu": _compare(folded, cpu),
              "unfolded_vs_cpu": _compare(plain, cpu)}
    print(json.dumps(result))
    json.dump(result, open(out, "w"), indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
