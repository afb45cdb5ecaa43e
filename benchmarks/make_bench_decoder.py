"""A random decoder of a llama-family architecture at a benchmark size, as a
GGUF file in one of llama.cpp's quantization mixes, for `rlx bench llm` on an
architecture no real file of is available offline (issue 18: the Llama and
Qwen paths against llama.cpp). The weights are random (tests/models/
tiny_llm.py write_tiny_decoder, float32), written, then requantized by
llama.cpp's own quantizer (llama-cpp-python's llama_model_quantize) into
FTYPE (default Q4_K_M, the mix real files ship); the vocabulary is the tiny
test one (~330 tokens), so the output projection costs nothing and the step
is the layers.

    python benchmarks/make_bench_decoder.py OUT.gguf [--arch llama] [--hidden 1024] [--ffn 2816] \
        [--layers 8] [--heads 16] [--kv-heads 4] [--ftype Q4_K_M]
    rlx bench llm --model OUT.gguf --threads 2 --rounds 3 --json results.json
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.models.tiny_llm import write_tiny_decoder  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--arch", default="llama", choices=("llama", "qwen2", "qwen3"))
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--ffn", type=int, default=2816)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--ftype", default="Q4_K_M", help="llama.cpp's LLAMA_FTYPE_MOSTLY_<FTYPE>")
    args = ap.parse_args()
    import llama_cpp

    ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{args.ftype}", None)
    if ftype is None:
        sys.exit(f"llama-cpp-python has no LLAMA_FTYPE_MOSTLY_{args.ftype}")
    with tempfile.TemporaryDirectory() as folder:
        src = write_tiny_decoder(Path(folder) / "f32.gguf", args.arch, seed=0, hidden=args.hidden, ffn=args.ffn,
                                 heads=args.heads, kv_heads=args.kv_heads, layers=args.layers,
                                 projections_format=None, tied=False)
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype, params.allow_requantize, params.nthread = ftype, True, 2
        status = llama_cpp.llama_model_quantize(str(src).encode(), str(args.out).encode(), params)
    if status != 0:
        sys.exit(f"llama_model_quantize returned {status}")
    print(f"wrote {args.out} ({Path(args.out).stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
