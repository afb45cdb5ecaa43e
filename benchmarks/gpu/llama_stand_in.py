"""A zero-weight GGUF of a llama-family model's shape, for decode speed on a
device (issue 18: the Llama / Qwen paths; the weights' values change no
kernel's time, as the Gemma stand-in's zero tensor bytes in common.sh's
stand_in_model). The default shape is Llama 3.2 1B's in Q4_K_M's formats:
hidden 2048, 16 layers, FFN 8192, 32 query / 8 KV heads of 64, a 128,256-token
vocabulary (a tied Q6_K embedding), Q4_K projections with Q6_K V and down
projections, RoPE base 500000 and Llama 3's rope_freqs. The tokenizer is a
SentencePiece stand-in of the same size (byte tokens and filler words). No
llama.cpp is needed: zero blocks are zero bytes in every format.

    PYTHONPATH=$PWD python3 benchmarks/gpu/llama_stand_in.py OUT.gguf [--arch llama] [--layers 16] ...
    PYTHONPATH=$PWD python3 benchmarks/gpu/llm_decode_speed.py OUT.gguf RESULT.json cuda
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

_BLOCKS = {"q4_k": (256, 144), "q6_k": (256, 210), "q8_0": (32, 34)}   # elements and bytes a block


def write_stand_in(out: Path, arch: str = "llama", hidden: int = 2048, layers: int = 16, ffn: int = 8192,
                   heads: int = 32, kv_heads: int = 8, vocab: int = 128256, rope_base: float = 500000.0) -> Path:
    import gguf

    head = hidden // heads
    w = gguf.GGUFWriter(str(out), arch)

    def zeros(name: str, rows: int, cols: int, fmt: str) -> None:
        elems, nbytes = _BLOCKS[fmt]
        if cols % elems:
            raise SystemExit(f"{name}: {cols} columns are no whole {fmt} blocks")
        w.add_tensor(name, np.zeros((rows, cols // elems * nbytes), np.uint8),
                     raw_dtype=gguf.GGMLQuantizationType[fmt.upper()])

    p = arch + "."
    for key, value in {"context_length": 131072, "embedding_length": hidden, "block_count": layers,
                       "feed_forward_length": ffn, "attention.head_count": heads,
                       "attention.head_count_kv": kv_heads, "rope.dimension_count": head}.items():
        w.add_uint32(p + key, value)
    w.add_float32(p + "attention.layer_norm_rms_epsilon", 1e-5)
    w.add_float32(p + "rope.freq_base", rope_base)
    specials, fill = ["<unk>", "<s>", "</s>"], vocab - 3 - 256
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", specials + [f"<0x{b:02X}>" for b in range(256)] +
                [f"\u2581w{i}" for i in range(fill)])
    w.add_array("tokenizer.ggml.scores", [0.0] * (3 + 256) + [-float(i) for i in range(fill)])
    w.add_array("tokenizer.ggml.token_type", [2, 3, 3] + [6] * 256 + [1] * fill)
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    zeros("token_embd.weight", vocab, hidden, "q6_k")
    w.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    if arch == "llama":
        w.add_tensor("rope_freqs.weight", np.geomspace(1.0, 8.0, head // 2).astype(np.float32))
    for il in range(layers):
        b = f"blk.{il}."
        w.add_tensor(b + "attn_norm.weight", np.ones(hidden, np.float32))
        w.add_tensor(b + "ffn_norm.weight", np.ones(hidden, np.float32))
        zeros(b + "attn_q.weight", heads * head, hidden, "q4_k")
        zeros(b + "attn_k.weight", kv_heads * head, hidden, "q4_k")
        zeros(b + "attn_v.weight", kv_heads * head, hidden, "q6_k")
        zeros(b + "attn_output.weight", hidden, heads * head, "q4_k")
        zeros(b + "ffn_gate.weight", ffn, hidden, "q4_k")
        zeros(b + "ffn_up.weight", ffn, hidden, "q4_k")
        zeros(b + "ffn_down.weight", hidden, ffn, "q6_k")
        if arch == "qwen2":
            for name, rows in (("attn_q", heads * head), ("attn_k", kv_heads * head), ("attn_v", kv_heads * head)):
                w.add_tensor(b + name + ".bias", np.zeros(rows, np.float32))
        if arch == "qwen3":
            w.add_tensor(b + "attn_q_norm.weight", np.ones(head, np.float32))
            w.add_tensor(b + "attn_k_norm.weight", np.ones(head, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--arch", default="llama", choices=("llama", "qwen2", "qwen3"))
    for name, default in (("hidden", 2048), ("layers", 16), ("ffn", 8192), ("heads", 32), ("kv-heads", 8),
                          ("vocab", 128256)):
        ap.add_argument(f"--{name}", type=int, default=default)
    a = ap.parse_args()
    path = write_stand_in(Path(a.out), a.arch, a.hidden, a.layers, a.ffn, a.heads, a.kv_heads, a.vocab)
    print(f"wrote {path} ({path.stat().st_size / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
