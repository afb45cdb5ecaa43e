"""Embedder.encode time per text against batch_size, for the serving
benchmark's texts (4-24 words, MiniLM f32): whether batching pays on this
device at all, before any server is involved. 256 texts, in calls of 32
texts (as a serving batch would be), each call split into batch_size runs
(sorted by length, as encode does).

Run:  python benchmarks/embed_batch_sizes.py [--device cpu] [--json OUT]
"""

from __future__ import annotations

import argparse
import os
import random
import time

from bench_machine import write_results

WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches".split()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", help="model folder (default: all-MiniLM-L6-v2's package)")
    ap.add_argument("--json")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rlx.models.embedder import load_embedder

    e = load_embedder(args.model, device=args.device)
    rng = random.Random(1)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 24))) for _ in range(256)]
    ms_per_text = {}
    for bs in (1, 4, 8, 16, 32, 64):
        for i in range(0, len(texts), 32):     # compile every bucket first
            e.encode(texts[i:i + 32], batch_size=bs)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for i in range(0, len(texts), 32):
                e.encode(texts[i:i + 32], batch_size=bs)
            best = min(best, time.perf_counter() - t0)
        ms_per_text[bs] = round(best * 1e3 / len(texts), 3)
        print(f"batch_size {bs:2d}: {ms_per_text[bs]:.2f} ms a text")
    if args.json:
        write_results(args.json, f"python benchmarks/embed_batch_sizes.py --device {args.device}"
                      + (f" --model {args.model}" if args.model else "") + f" --json {args.json}",
                      device=args.device, model=args.model, ms_per_text_by_batch_size=ms_per_text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
