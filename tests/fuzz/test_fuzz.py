"""The differential fuzzer (tests/fuzz/): random single ops and random graphs,
compiled by rlx and compared with PyTorch (and rlx.run_reference); random
splat frames against the float64 splat reference; random stft / istft
against their definition and librosa; random requests to rlx.serve.

Short CI run (fixed seeds, well under 90 s on 2 cores):
    .venv/bin/python -m pytest tests/fuzz/test_fuzz.py
Long run, from any seed, on any device and group size:
    .venv/bin/python -m pytest tests/fuzz/test_fuzz.py --fuzz-runs 5000 [--fuzz-seed S] [--fuzz-options 0]
        [--rlx-device cuda --rlx-group-size 32]
A failure prints its seed, the compile options, the graph listing and the
one command that re-runs exactly that case.

test_op_special_values checks PyTorch's NaN semantics (NaN propagates through
relu / maximum / max / softmax, argmax returns the first NaN's index); it
fails on code without the `nan` branch's fixes.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx

from .bert import bert_case, check_bert_case
from .check import (
    ALL_OPTIONS,
    F32_ILL_REL,
    FIXED_OPTIONS,
    Case,
    _norm_rows_ill_conditioned,
    check_case,
    default_options,
    sample_options,
)
from .graphs import graph_case, model_graph_case
from .llm import check_llm_case, llm_case
from .ops import OP_NAMES, op_case
from .serve import ServeFixture, check_serve_case, serve_case
from .signal import check_log_mel_case, check_signal_case, log_mel_case, signal_case
from .splat import check_splat_case, splat_case

SHORT_OPS = 4 * len(OP_NAMES)
SHORT_SPECIAL = 2 * len(OP_NAMES)
SHORT_GRAPHS = 200
SHORT_SPLAT = 120
SHORT_SIGNAL = 160
SHORT_LOG_MEL = 40
SHORT_LLM = 12
SHORT_BERT = 30
SHORT_SERVE = 80


def pytest_generate_tests(metafunc):
    cfg = metafunc.config
    runs, base = cfg.getoption("--fuzz-runs"), cfg.getoption("--fuzz-seed")
    for arg, short in (("op_seed", SHORT_OPS), ("special_seed", SHORT_SPECIAL), ("graph_seed", SHORT_GRAPHS),
                       ("splat_seed", SHORT_SPLAT), ("signal_seed", SHORT_SIGNAL),
                       ("log_mel_seed", SHORT_LOG_MEL), ("llm_seed", SHORT_LLM),
                       ("bert_seed", SHORT_BERT), ("serve_seed", SHORT_SERVE)):
        if arg in metafunc.fixturenames:
            seeds = range(base, base + runs) if runs else range(short)
            op_ids = arg in ("op_seed", "special_seed")
            ids = [f"s{s}-{OP_NAMES[s % len(OP_NAMES)]}" if op_ids else f"s{s}" for s in seeds]
            metafunc.parametrize(arg, list(seeds), ids=ids)


def _report(out, what: str) -> None:
    if out.failures:
        n = len(out.failures)
        pytest.fail(f"{what}: {n} failing option set(s); the first {min(n, 2)}:\n\n" + "\n\n".join(out.failures[:2]),
                    pytrace=False)


def test_op(op_seed):
    case = op_case(op_seed)
    _report(check_case(case, [default_options(), default_options(pin_outputs=False, replay=False),
                              ALL_OPTIONS[0 if op_seed % 2 else -1]]), f"op case seed {op_seed}")


def test_op_special_values(special_seed):
    case = op_case(special_seed, special=True)
    _report(check_case(case, [default_options()]), f"special-value op case seed {special_seed}")


def _check_graph(case: Case, seed: int, request, what: str) -> None:
    """A random graph under --fuzz-options option sets drawn from its seed."""
    k = request.config.getoption("--fuzz-options")
    _report(check_case(case, sample_options(np.random.default_rng([seed, 5]), k)), f"{what} seed {seed}")


def test_random_graph(graph_seed, request):
    _check_graph(graph_case(graph_seed), graph_seed, request, "random graph")


def test_random_model_graph(graph_seed, request):
    """The random graphs with a model's parts among their motifs (tests/fuzz/graphs.py ModelGraphBuilder)."""
    _check_graph(model_graph_case(graph_seed), graph_seed, request, "random model graph")


def _fail_with(failure: str | None) -> None:
    """Fails the test with a checker's message (None or empty: passed)."""
    if failure:
        pytest.fail(failure, pytrace=False)


def test_splat_frame(splat_seed):
    """A random scene and two cameras through rlx.splat.Renderer against the
    float64 reference (tests/fuzz/splat.py)."""
    _fail_with("\n".join(check_splat_case(splat_case(splat_seed))))


def test_signal_transform(signal_seed):
    """A random stft or istft (rlx.signal) against its definition and
    librosa (tests/fuzz/signal.py)."""
    pytest.importorskip("librosa", reason="librosa (a test extra) is not installed")
    _fail_with(check_signal_case(signal_case(signal_seed)))


def test_log_mel(log_mel_seed):
    """A random log-mel front end (rlx.signal) against librosa's
    (tests/fuzz/signal.py)."""
    pytest.importorskip("librosa", reason="librosa (a test extra) is not installed")
    _fail_with(check_log_mel_case(log_mel_case(log_mel_seed)))


def test_llm_model(llm_seed):
    """A random tiny Gemma 3 file through rlx.models.llm.LLM against the
    float64 oracle (tests/fuzz/llm.py)."""
    pytest.importorskip("gguf", reason="the gguf package (a dependency of rlx.gguf) is not installed")
    _fail_with(check_llm_case(llm_case(llm_seed)))


def test_bert_embedder(bert_seed):
    """A random tiny BERT embedder (rlx.models.load_embedder) against the
    float64 oracle (tests/fuzz/bert.py)."""
    _fail_with(check_bert_case(bert_case(bert_seed)))


@pytest.fixture(scope="module")
def serve_fixture():
    pytest.importorskip("starlette", reason="starlette (the serve extra) is not installed")
    pytest.importorskip("httpx", reason="httpx (the serve extra's test client) is not installed")
    pytest.importorskip("tokenizers", reason="tokenizers is not installed")
    fixture = ServeFixture()
    yield fixture
    fixture.close()


def test_serve_request(serve_seed, serve_fixture):
    """A random request to the OpenAI-compatible server against its
    contract: no 5xx, error objects, the endpoint's shape (tests/fuzz/serve.py)."""
    _fail_with(check_serve_case(serve_case(serve_seed), serve_fixture))


# ---------------------------------------------------------------- the minimal graphs the fuzzer found
# Each under every option combination.


def _attention_inputs(rng, shapes):
    return {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}


def _input_is_output(view: bool) -> Case:
    g = rlx.Graph()
    x, y = g.input("x", (64,)), g.input("y", (64,))
    outs = {"c": g.add(g.tanh(g.exp(y)), x)}
    outs["x_out"] = g.reshape(x, (8, 8)) if view else x
    g.set_outputs(outs)
    runs = [{"x": np.arange(64, dtype=np.float32), "y": np.full(64, .5, np.float32)},
            {"x": -np.arange(64, dtype=np.float32), "y": np.full(64, -.5, np.float32)}]
    return Case(g, runs, {}, "pytest tests/fuzz/test_fuzz.py -k input_is_output")


def _masked_softmax_scale_after_mask() -> Case:
    b, t, h, d = 1, 4, 2, 8
    g = rlx.Graph()
    q, k, v = (g.input(n, (b, t, h, d)) for n in "qkv")
    m = g.input("m", (1, 1, 1, t))
    heads = (0, 2, 1, 3)
    s = g.mul(g.matmul(g.transpose(q, heads), g.transpose(k, (0, 2, 3, 1))), g.constant(np.float32(0.25)))
    p = g.masked_softmax(g.add(s, m), None, scale=2.0)
    g.set_outputs(y=g.matmul(p, g.transpose(v, heads)))
    rng = np.random.default_rng(0)
    shapes = {"q": (b, t, h, d), "k": (b, t, h, d), "v": (b, t, h, d), "m": (1, 1, 1, t)}
    return Case(g, [_attention_inputs(rng, shapes) for _ in range(2)], {}, "pytest tests/fuzz/test_fuzz.py -k masked")


def _mask_broadcasts_query() -> Case:
    g = rlx.Graph()
    q, k, v = g.input("q", (1, 1, 2, 4)), g.input("k", (1, 4, 2, 4)), g.input("v", (1, 4, 2, 4))
    m = g.input("m", (1, 2, 5, 4))
    heads = (0, 2, 1, 3)
    s = g.matmul(g.transpose(q, heads), g.transpose(k, (0, 2, 3, 1)))       # [1, 2, 1, 4]
    g.set_outputs(y=g.matmul(g.softmax(g.add(s, m)), g.transpose(v, heads)))   # mask broadcasts Tq 1 -> 5
    rng = np.random.default_rng(1)
    shapes = {"q": (1, 1, 2, 4), "k": (1, 4, 2, 4), "v": (1, 4, 2, 4), "m": (1, 2, 5, 4)}
    return Case(g, [_attention_inputs(rng, shapes) for _ in range(2)], {}, "pytest tests/fuzz/test_fuzz.py -k query")


def _weight_is_output() -> Case:
    g = rlx.Graph()
    x, w = g.input("x", (3, 8)), g.param("w", (8, 5))
    g.set_outputs(y=g.matmul(x, w), w=w)
    rng = np.random.default_rng(2)
    return Case(g, [{"x": rng.standard_normal((3, 8)).astype(np.float32)} for _ in range(2)],
                {"w": rng.standard_normal((8, 5)).astype(np.float32)}, "pytest tests/fuzz/test_fuzz.py -k weight")


def _layernorm_of_a_row_scaled_by_a_cancelled_dot() -> Case:
    """Seed 562949's core: each row's dot with a [1, K] weight (the B of a
    matmul, stored in bf16 under precision="bf16") cancels to ~1e-3 of its
    terms, scales a fixed row (an outer product), and a layernorm of its
    gelu keeps little more than the scale's sign. Under bf16 the host gemm
    rounds A as well on CPUs with AVX-512 BF16, so that sign may differ from
    PyTorch's with f32 A: the checker holds such outputs to twice the move
    that rounding every leaf to bf16 makes (check.py), and f32 to the usual
    bound."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 48)).astype(np.float32)
    w = rng.standard_normal((1, 48)).astype(np.float32)
    for r in range(4):   # the last element cancels the row's dot down to ~1e-3 of |x| . |w|
        rest = float(x[r, :-1].astype(np.float64) @ w[0, :-1])
        x[r, -1] = np.float32((-rest + 1e-3 * (r - 1.5) * float(np.abs(x[r]) @ np.abs(w[0]))) / w[0, -1])
    g = rlx.Graph()
    xi, u = g.input("x", (4, 48)), g.input("u", (1, 48))
    row = g.matmul(g.matmul(xi, g.param("w", (1, 48)), transpose_b=True), u)   # [4, 1] @ [1, 48]
    g.set_outputs(y=g.layernorm(g.gelu(row), g.param("gamma", (48,)), g.param("beta", (48,))))
    return Case(g, [{"x": x, "u": rng.standard_normal((1, 48)).astype(np.float32)}],
                {"w": w, "gamma": np.ones(48, np.float32), "beta": np.zeros(48, np.float32)},
                "pytest tests/fuzz/test_fuzz.py -k cancelled_dot")


def _rmsnorm_of_a_cancelled_sum() -> Case:
    """Seed 534179's core: x + neg(x) into add_rmsnorm. Exactly zero in f32
    (so the norm's output is zero); under f16, neg runs on a rounded x
    while the norm reads x itself, and the norm scales the rounding error
    up to O(1): the checker holds f16 and bf16 to nothing here (check.py's
    _norm_rows_ill_conditioned) and f32 to the usual bound. Under "auto"
    neg now stays f32 (its input and its one consumer are f32), so the
    output is exact there (tests/opt/test_optimizer.py)."""
    g = rlx.Graph()
    x = g.input("x", (2, 3, 24))
    g.set_outputs(y=g.add_rmsnorm(x, g.neg(x), g.param("w", (24,))))
    rng = np.random.default_rng(3)
    return Case(g, [{"x": rng.standard_normal((2, 3, 24)).astype(np.float32)} for _ in range(2)],
                {"w": rng.standard_normal(24).astype(np.float32)}, "pytest tests/fuzz/test_fuzz.py -k cancelled")


def _layernorm_of_a_row_cancelled_to_one_value() -> Case:
    """Seed 677889's core: d = x - (x + mean x) is -mean x in every
    element, up to f32 rounding, so a layernorm of 2 d normalizes nothing
    but that rounding (the float64 reference none). With x at 8x the
    generators' scale, f32 and float64 land 1.6e-4 to 4.1e-4 apart (the
    bound is 1e-4): the checker tolerates a failed f32 comparison here
    (check.py F32_ILL_REL) and holds the low precisions to nothing."""
    g = rlx.Graph()
    x = g.input("x", (3, 3, 6))
    m = g.scale_shift(g.sum(x, axis=2, keepdims=True), scale=1.0 / 6.0, shift=0.0)
    d = g.sub(x, g.add(x, m))
    g.set_outputs(y=g.layernorm(g.add(d, d), g.param("w", (6,)), g.param("b", (6,))))
    rng = np.random.default_rng(677889)
    return Case(g, [{"x": (8.0 * rng.standard_normal((3, 3, 6))).astype(np.float32)} for _ in range(2)],
                {"w": rng.standard_normal(6).astype(np.float32), "b": rng.standard_normal(6).astype(np.float32)},
                "pytest tests/fuzz/test_fuzz.py -k cancelled_to_one_value")


MINIMAL = {
    "input_is_output": lambda: _input_is_output(False),
    "input_view_is_output": lambda: _input_is_output(True),
    "masked_softmax_scale_after_mask": _masked_softmax_scale_after_mask,
    "mask_broadcasts_query": _mask_broadcasts_query,
    "weight_is_output": _weight_is_output,
    "rmsnorm_of_a_cancelled_sum": _rmsnorm_of_a_cancelled_sum,
    "layernorm_of_a_row_scaled_by_a_cancelled_dot": _layernorm_of_a_row_scaled_by_a_cancelled_dot,
    "layernorm_of_a_row_cancelled_to_one_value": _layernorm_of_a_row_cancelled_to_one_value,
}


def test_a_norm_row_under_ten_eps_counts_as_ill_conditioned():
    """Seed 582329 (f16 failed by 0.021 against 0.02): a layernorm of three
    values near 0.01, one of them a product that cancels, whose variance is
    under 10 eps. The checker compares such cases in f32 only; the same
    rows at O(1) scale do not count."""
    assert _norm_rows_ill_conditioned(graph_case(582329))
    g = rlx.Graph()
    x = g.input("x", (4, 3))
    g.set_outputs(y=g.layernorm(x, g.param("w", (3,)), g.param("b", (3,))))
    rows = np.array([[0.0, -0.017, 0.0], [0.01, 0.0, -0.012], [1.0, -2.0, 0.5], [3.0, 0.0, -1.0]], np.float32)
    params = {"w": np.ones(3, np.float32), "b": np.zeros(3, np.float32)}
    assert _norm_rows_ill_conditioned(Case(g, [{"x": rows}], params, ""))
    assert not _norm_rows_ill_conditioned(Case(g, [{"x": rows * 100}], params, ""))


def test_a_norm_row_cancelled_to_one_value_counts_as_ill_conditioned_in_f32():
    """Seed 677889 (the float64 reference and PyTorch's f32 1.3e-4 apart):
    the f32 form of the rule flags it; an ordinary layernorm row, and
    seed 582329's small-variance row (f32 rounds it well), are not flagged."""
    assert _norm_rows_ill_conditioned(_layernorm_of_a_row_cancelled_to_one_value(), rel=F32_ILL_REL,
                                      small_power=False)
    assert not _norm_rows_ill_conditioned(graph_case(582329), rel=F32_ILL_REL, small_power=False)
    g = rlx.Graph()
    x = g.input("x", (4, 6))
    g.set_outputs(y=g.layernorm(x, g.param("w", (6,)), g.param("b", (6,))))
    rows = np.random.default_rng(5).standard_normal((4, 6)).astype(np.float32)
    params = {"w": np.ones(6, np.float32), "b": np.zeros(6, np.float32)}
    assert not _norm_rows_ill_conditioned(Case(g, [{"x": rows}], params, ""), rel=F32_ILL_REL, small_power=False)


def test_an_output_ill_conditioned_in_f32_is_held_to_twice_pytorchs_own_gap():
    """Seed 693426: a dot product that cancels feeds a rank-1 chain through
    three rmsnorms written as primitives, and PyTorch's f32 lands 2.7e-4 to
    3.2e-4 from the float64 reference (the bound is 1e-4). The checker
    notes that gap instead of failing, and still compares rlx's f32 under
    twice it (which it meets) under the fixed option sets."""
    case = graph_case(693426)
    outcome = check_case(case, list(FIXED_OPTIONS))
    assert not outcome.failures, outcome.failures[0]
    notes = [t for t in outcome.tolerated if t.startswith("the reference (float64) against PyTorch (f32)")]
    assert len(notes) == 2 and all("held to twice that gap" in t for t in notes), outcome.tolerated
    assert outcome.checked + outcome.unsupported == len(FIXED_OPTIONS)   # on GPUs bf16 is not run
    assert outcome.checked >= len(FIXED_OPTIONS) - 1


@pytest.mark.parametrize("name", list(MINIMAL))
def test_minimal_graph_all_options(name):
    _report(check_case(MINIMAL[name](), ALL_OPTIONS), name)
