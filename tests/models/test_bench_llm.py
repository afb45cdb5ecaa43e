"""`rlx bench llm` (rlx/models/bench_llm.py, issue 18): the report's
arithmetic and the turns of its rounds with the engines' runs stood in
for, and one real rlx run on a tiny GGUF model in its own process. The
llama.cpp side runs where llama-cpp-python is installed (benchmarks/)."""

from __future__ import annotations

import itertools

import pytest

from rlx.errors import InputError
from rlx.models import bench_llm

from .tiny_llm import write_tiny_gemma


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    return write_tiny_gemma(tmp_path_factory.mktemp("bench_llm") / "tiny.gguf", seed=3)


def _scripted_runs(monkeypatch, decode_s: dict[str, list[float]]) -> list[str]:
    """run_engine replaced: each engine's runs take the scripted decode
    seconds in turn (prompt seconds a tenth of them); returns the call order."""
    calls: list[str] = []
    left = {e: iter(v) for e, v in decode_s.items()}
    rss = itertools.count(100)

    def fake(engine, model, ids, gen, ctx, threads, device, prefill_precision="f32"):
        calls.append(engine)
        seconds = next(left[engine])
        return {"prefill_s": seconds / 10, "decode_s": seconds, "peak_rss_mb": float(next(rss))}

    monkeypatch.setattr(bench_llm, "run_engine", fake)
    return calls


def test_rounds_alternate_and_report_the_median_ratio(monkeypatch, tiny_path):
    # rlx 2, 4, 1 s; llama.cpp 4, 4, 4 s: round ratios 2.0, 1.0, 4.0 -> median 2.0
    calls = _scripted_runs(monkeypatch, {"rlx": [2.0, 4.0, 1.0], "llama.cpp": [4.0, 4.0, 4.0]})
    report = bench_llm.run_benchmark(str(tiny_path), prompt_tokens=8, gen=16, rounds=3)
    assert calls == ["rlx", "llama.cpp", "llama.cpp", "rlx", "rlx", "llama.cpp"]
    assert [r["decode"] for r in report["round_ratios"]] == pytest.approx([2.0, 1.0, 4.0])
    assert report["decode_ratio"] == pytest.approx(2.0)
    assert report["prefill_ratio"] == pytest.approx(2.0)
    rlx = report["engines"]["rlx"]
    assert rlx["decode_tok_s"] == pytest.approx(16 / 2.0)           # the median round's run
    assert rlx["peak_rss_mb"] == max(r["rlx"]["peak_rss_mb"] for r in report["rounds"])
    assert rlx["prefill_s"] == pytest.approx(0.2)                      # the median prompt run's time ...
    assert rlx["prefill_tok_s"] == pytest.approx(report["prompt_tokens"] / 0.2)   # ... and its speed
    text = bench_llm.format_report(report)
    assert "round 3:" in text and "median of the rounds" in text and "decode 2.00x" in text


def test_one_round_keeps_the_single_run_report(monkeypatch, tiny_path):
    _scripted_runs(monkeypatch, {"rlx": [1.0], "llama.cpp": [1.5]})
    report = bench_llm.run_benchmark(str(tiny_path), prompt_tokens=8, gen=16)
    assert "rounds" not in report and "round_ratios" not in report
    assert report["decode_ratio"] == pytest.approx(1.5)
    assert "round 1:" not in bench_llm.format_report(report)


def test_a_failed_run_is_reported_not_averaged(monkeypatch, tiny_path):
    runs = iter([{"prefill_s": 0.1, "decode_s": 1.0, "peak_rss_mb": 100.0},    # round 1: rlx
                 {"prefill_s": 0.2, "decode_s": 2.0, "peak_rss_mb": 100.0},    # llama.cpp
                 {"error": "llama.cpp exited with 1: boom"},                   # round 2: llama.cpp first
                 {"prefill_s": 0.1, "decode_s": 1.0, "peak_rss_mb": 100.0}])   # rlx
    monkeypatch.setattr(bench_llm, "run_engine", lambda *args, **kwargs: dict(next(runs)))
    report = bench_llm.run_benchmark(str(tiny_path), prompt_tokens=8, gen=16, rounds=2)
    assert report["engines"]["llama.cpp"]["error"].endswith("boom")
    assert "decode_ratio" not in report and "round_ratios" not in report
    assert "boom" in bench_llm.format_report(report)


def test_greedy_tokens_compared(monkeypatch, tiny_path):
    tokens = {"rlx": [5, 6, 7, 8], "llama.cpp": [5, 6, 9, 8]}
    monkeypatch.setattr(bench_llm, "run_engine", lambda engine, *a, **k: {
        "prefill_s": 0.1, "decode_s": 1.0, "peak_rss_mb": 1.0, "tokens": tokens[engine]})
    report = bench_llm.run_benchmark(str(tiny_path), prompt_tokens=8, gen=4)
    assert report["greedy_tokens_agree"] == 2
    assert "first 2 of 4 agree" in bench_llm.format_report(report)


def test_rounds_must_be_positive(tiny_path):
    with pytest.raises(InputError, match="rounds"):
        bench_llm.run_benchmark(str(tiny_path), rounds=0)


def test_rlx_runs_in_its_own_process(tiny_path):
    report = bench_llm.run_benchmark(str(tiny_path), prompt_tokens=12, gen=8, threads=1, engines=("rlx",),
                                     rounds=2)
    runs = [r["rlx"] for r in report["rounds"]]
    for r in runs:
        assert "error" not in r, r
        assert r["decode_tok_s"] > 0 and r["prefill_tok_s"] > 0 and r["peak_rss_mb"] > 0
    assert report["engines"]["rlx"]["decode_tok_s"] in {r["decode_tok_s"] for r in runs}
    assert runs[0]["tokens"] == runs[1]["tokens"] and len(runs[0]["tokens"]) == 8   # greedy: the same ids twice
    assert "decode_ratio" not in report   # no peer ran
