"""By hand (issue 18): rlx's compiled Gemma 3 (f32 activations, decode
steps) against the float64 oracle, teacher-forced over the long varied text
of tests/models/test_llm_reference.py (705 tokens: past the 512-token
window), beside llama.cpp's agreement with the same oracle from
benchmarks/results/cpu-llm-reference-vs-llamacpp-2026-12-01.json; then
greedy generation of 64 tokens from 10 prompts against the oracle's.

Run: .venv/bin/python benchmarks/llm_parity.py MODEL.gguf OUT.json [DEVICE] [PROMPTS]
(PROMPTS: how many of the 10 greedy prompts; default all)"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "models"))
from test_llm_reference import LONG_TEXT  # noqa: E402

from rlx.models.llm import LLM  # noqa: E402
from rlx.reference.llm import load_weights, reference_generate, reference_logits  # noqa: E402

PROMPTS = ["The capital of France is", "def quicksort(arr):", "Once upon a time, in a small village,",
           "The three laws of thermodynamics are", "SELECT name, age FROM users WHERE",
           "La tour Eiffel se trouve à", "東京は日本の", "1, 1, 2, 3, 5, 8, 13,",
           "To make a cup of tea, first", "import numpy as np\nx = np.arange(10)\n"]


def agreement(got: np.ndarray, want: np.ndarray) -> dict:
    def lsm(x):
        x = x.astype(np.float64) - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    kl = []
    for i in range(0, len(got), 64):
        p, q = lsm(want[i:i + 64]), lsm(got[i:i + 64])
        kl.append((np.exp(p) * (p - q)).sum(-1))
    kl = np.concatenate(kl)
    return {"top1_agreement": float((got.argmax(-1) == want.argmax(-1)).mean()), "kl_mean": float(kl.mean()),
            "kl_max": float(kl.max()), "positions": int(len(got))}


def main(model: str, out: str, device: str = "cpu", prompts: str = "10") -> None:
    llm = LLM(model, device=device, max_context=1024)
    weights = load_weights(model)
    ids = llm.tokenizer.encode(LONG_TEXT)
    t0 = time.perf_counter()
    got = llm.logits(ids)
    rlx_s = time.perf_counter() - t0
    want = reference_logits(weights, ids)
    result = {"what": __doc__.splitlines()[0],
              "command": f"python benchmarks/llm_parity.py MODEL OUT {device} {prompts}",
              "device": device, "teacher_forced": agreement(got, want),
              "teacher_forced_positions_512_on": agreement(got[512:], want[512:]), "rlx_seconds": rlx_s}
    llama = Path(__file__).parent / "results" / "cpu-llm-reference-vs-llamacpp-2026-12-01.json"
    if llama.exists():
        result["llama_cpp_vs_oracle_same_text"] = json.loads(llama.read_text())["correct"]
    gens = []
    for prompt in PROMPTS[:int(prompts)]:
        p = llm.tokenizer.encode(prompt)
        ref = reference_generate(weights, p, 64)
        mine = [int(llm.prefill(p, "token"))]
        while len(mine) < 64:
            mine.append(int(llm.step(mine[-1], "token")))
        first_tie = next((i for i, g in enumerate(ref.top2_gaps) if g < 0.05), None)
        same = next((i for i, (a, b) in enumerate(zip(mine, ref.tokens)) if a != b), 64)
        gens.append({"prompt": prompt, "agrees": ref.agrees_with(mine), "first_difference": same,
                     "first_near_tie": first_tie})
        print(json.dumps(gens[-1], ensure_ascii=False), flush=True)
    result["greedy_64"] = gens
    result["greedy_all_agree"] = all(g["agrees"] for g in gens)
    Path(out).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "greedy_64"}, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:])
