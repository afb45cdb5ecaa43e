"""H200 by hand (issue 18): Gemma 3 decode tokens/s of rlx on cuda against
Hugging Face transformers in bf16 on the same architecture, in one run:
static cache with generate's automatic compile (CUDA graphs) and eager
with the dynamic cache; beside them the physical floor, the weights' bytes
per token over the device's copy bandwidth measured in the same run.

transformers loads the same GGUF file (its GGUF loader dequantizes to bf16)
where it can; where it cannot, a randomly initialised model of the same
config stands in (the time of a decode step does not depend on the weight
values) and the JSON says which.

Run: python3 benchmarks/gpu/llm_cuda.py MODEL.gguf OUT.json [GEN]
(HF_PEERS=hf_static_compiled,hf_eager: the peers to run, comma-separated.)"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
from kernel_defines import apply_kernel_defines  # benchmarks/gpu/kernel_defines.py (the script's own folder)

import rlx.gguf
from rlx.models.bench_llm import prompt_ids, run_benchmark
from rlx.reference.llm import LlmConfig
from rlx.tokenizer import Tokenizer

PROMPT_TOKENS = 128


def _copy_bandwidth() -> dict:
    """Device-to-device copy of 4 GiB: bytes read + written per second (and one side)."""
    n = 4 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        dst.copy_(src)
    end.record()
    torch.cuda.synchronize()
    s = start.elapsed_time(end) / 1e3 / 10
    del src, dst
    return {"read_plus_write_GBps": 2 * n / s / 1e9, "one_side_GBps": n / s / 1e9}


def _hf_config(cfg: LlmConfig):
    from transformers import Gemma3TextConfig

    kinds = ["sliding_attention" if (il % cfg.swa_pattern) < cfg.swa_pattern - 1 else "full_attention"
             for il in range(cfg.n_layers)]
    return Gemma3TextConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.hidden, intermediate_size=cfg.ffn,
                            num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
                            num_key_value_heads=cfg.n_kv_heads, head_dim=cfg.head_dim, rms_norm_eps=cfg.rms_eps,
                            rope_theta=cfg.rope_base, rope_local_base_freq=cfg.rope_base_local,
                            sliding_window=cfg.sliding_window, layer_types=kinds,
                            query_pre_attn_scalar=round(cfg.attn_scale ** -2), max_position_embeddings=4096)


def _load_hf(path: Path, cfg: LlmConfig):
    from transformers import AutoModelForCausalLM, Gemma3ForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.bfloat16)
        source = "the same GGUF file through transformers' GGUF loader (dequantized to bf16)"
    except Exception as e:  # noqa: BLE001  (any loader failure: fall back, and say so)
        torch.manual_seed(0)
        model = Gemma3ForCausalLM(_hf_config(cfg)).to(torch.bfloat16)
        source = f"random init of the same config (GGUF load failed: {type(e).__name__}: {str(e)[:200]})"
    return model.to("cuda").eval(), source


def _hf_decode(model, ids: list[int], gen: int, **kw) -> dict:
    x = torch.tensor([ids], device="cuda")
    common = dict(do_sample=False, pad_token_id=0, eos_token_id=None, **kw)

    def timed(n: int) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.generate(x, max_new_tokens=n, min_new_tokens=n, **common)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    for _ in range(2):                      # compiles (static cache) and warms up
        timed(gen)
    first = min(timed(1) for _ in range(3))  # prefill + one token
    total = min(timed(gen) for _ in range(2))
    per_token = (total - first) / (gen - 1)
    return {"prefill_plus_first_s": first, "total_s": total, "decode_tok_s": 1.0 / per_token,
            "ms_per_token": per_token * 1e3}


def main(model: str, out: str, gen: str = "256") -> None:
    n_gen = int(gen)
    defines = apply_kernel_defines()   # KERNEL_DEFINES: a kernel variant (an A/B across calls)
    path = Path(model)
    with rlx.gguf.open(path) as f:
        cfg = LlmConfig.from_gguf(f)
        weight_bytes = sum(int(t.data.nbytes) for t in f.tensors.values())
    rlx_report = run_benchmark(str(path), prompt_tokens=PROMPT_TOKENS, gen=n_gen, device="cuda",
                               engines=("rlx",), threads=4, log=print)
    bw = _copy_bandwidth()
    ids = prompt_ids(Tokenizer.from_gguf(str(path)), PROMPT_TOKENS)
    hf, source = _load_hf(path, cfg)
    peers = {}
    wanted = os.environ.get("HF_PEERS", "hf_static_compiled,hf_eager").split(",")
    for name, kw in (("hf_static_compiled", {"cache_implementation": "static"}),
                     ("hf_eager", {"disable_compile": True})):
        if name not in wanted:
            continue
        try:
            peers[name] = _hf_decode(hf, ids, n_gen, **kw)
        except Exception as e:  # noqa: BLE001
            peers[name] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
        print(name, peers[name], flush=True)
    floor_s = weight_bytes / (bw["read_plus_write_GBps"] * 1e9)
    r = rlx_report["engines"]["rlx"]
    result = {"what": __doc__.splitlines()[0], "command": "python3 benchmarks/gpu/llm_cuda.py MODEL.gguf OUT.json",
              "gpu": torch.cuda.get_device_name(), "rlx": r, "hf_source": source, "peers": peers,
              "copy_bandwidth": bw, "weight_bytes_per_token": weight_bytes,
              "floor_tok_s": 1.0 / floor_s, "floor_one_side_tok_s": bw["one_side_GBps"] * 1e9 / weight_bytes,
              "prompt_tokens": PROMPT_TOKENS, "generated_tokens": n_gen}
    if "decode_tok_s" in r:
        for name, p in peers.items():
            if "decode_tok_s" in p:
                result[f"rlx_over_{name}"] = r["decode_tok_s"] / p["decode_tok_s"]
        result["fraction_of_floor"] = r["decode_tok_s"] / result["floor_tok_s"]
    result["kernel_defines"] = defines
    Path(out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("rlx",)}, indent=1))
    print("rlx", json.dumps(r))


if __name__ == "__main__":
    main(*sys.argv[1:])
