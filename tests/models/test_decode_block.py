"""Decode blocks (LLM(decode_block=n), LLM.step_block): n greedy steps in
one launch, each step's argmax fed to the next on the device. On the tiny
random Gemma 3 (tests/models/tiny_llm.py) with a 6-row sliding-window ring
(so blocks write across its wrap), the ids and the text generate()
streams equal those of one step a launch, exactly (the same kernels in
the same order); a generation that stops inside a block (EOS, a stop
string, a closed stream) leaves the model where one step a launch leaves
it: the position, the context and the next turn's text equal the
sequential model's, and the caches' rows within 1e-5 (where a ring
wrapped, the kept tokens are prefilled again)."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.errors import InputError
from rlx.models.llm import LLM

from .tiny_llm import write_tiny_gemma

WINDOW, CONTEXT = 6, 96
PROMPT = "the quick brown fox jumps over a lazy dog while seven wizards"


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    """Greedy from PROMPT, this random model writes 30 tokens and more (seed 0)."""
    return write_tiny_gemma(tmp_path_factory.mktemp("decode_block") / "tiny.gguf", seed=0, sliding_window=WINDOW)


@pytest.fixture(scope="module")
def models(tiny_path):
    """The same model, one step a launch and in blocks of 4 and 3."""
    return {n: LLM(tiny_path, max_context=CONTEXT, decode_block=n) for n in (1, 4, 3)}


@pytest.fixture(scope="module")
def eos_models(tmp_path_factory):
    """A model that ends at EOS two tokens after PROMPT (seed 1): inside a block."""
    path = write_tiny_gemma(tmp_path_factory.mktemp("decode_block_eos") / "tiny.gguf", seed=1, sliding_window=WINDOW)
    return {n: LLM(path, max_context=CONTEXT, decode_block=n) for n in (1, 4)}


def _caches(llm: LLM) -> dict:
    exe = llm._first
    return {s.name: exe.read_state(s.name) for s in exe.state_specs}


def _kept_rows_equal(a: LLM, b: LLM) -> None:
    """The cache rows the context's positions own (the newest `rows` of a
    ring), once a's rows written past its position (a block's ids that
    generate() did not take) are settled, as its next use settles them:
    where a ring wrapped that prefills the kept tokens again, whose K/V
    rows come from the prefill's kernels and differ from the decode
    steps' by float32 rounding (1e-5)."""
    assert a.position == b.position and a.context == b.context
    a._settle()
    ca, cb = _caches(a), _caches(b)
    for name, value in ca.items():
        rows = value.shape[0]
        held = [p % rows for p in range(max(0, a.position - rows), a.position)]
        np.testing.assert_allclose(value[held], cb[name][held], rtol=1e-5, atol=1e-5, err_msg=name)


def test_step_block_equals_single_steps(models):
    one, block = models[1], models[4]
    first = int(one.prefill(one.tokenizer.encode(PROMPT), output="token"))
    assert int(block.prefill(block.tokenizer.encode(PROMPT), output="token")) == first
    want, token = [], first
    for _ in range(12):   # positions past the ring's wrap
        token = int(one.step(token, output="token"))
        want.append(token)
    got, token = [], first
    for _ in range(3):
        ids = block.step_block(token)
        got += ids
        token = ids[-1]
    assert got == want
    _kept_rows_equal(block, one)


@pytest.mark.parametrize("max_tokens", [1, 2, 4, 5, 9, 23])
@pytest.mark.parametrize("n", [4, 3])
def test_generate_in_blocks_streams_the_same_text(models, n, max_tokens):
    want = list(models[1].generate(PROMPT, max_tokens=max_tokens))
    got = list(models[n].generate(PROMPT, max_tokens=max_tokens))
    assert "".join(got) == "".join(want)
    assert models[n].stats.generated_tokens == models[1].stats.generated_tokens
    assert models[n].stats.finish_reason == models[1].stats.finish_reason
    _kept_rows_equal(models[n], models[1])
    assert models[n]._unfed == models[1]._unfed


def test_an_eos_inside_a_block_leaves_the_sequential_state(eos_models):
    one, block = eos_models[1], eos_models[4]
    want = "".join(one.generate(PROMPT, max_tokens=30))
    assert one.stats.finish_reason == "eos" and 1 <= one.stats.generated_tokens < 4
    assert "".join(block.generate(PROMPT, max_tokens=30)) == want
    assert block.stats.finish_reason == "eos" and block.stats.generated_tokens == one.stats.generated_tokens
    _kept_rows_equal(block, one)
    assert block._unfed == one._unfed
    assert "".join(block.generate(" hello", max_tokens=12, keep_context=True)) == \
        "".join(one.generate(" hello", max_tokens=12, keep_context=True))
    _kept_rows_equal(block, one)


@pytest.mark.parametrize("stop_at", [1, 2, 3, 6, 10])
def test_a_stop_inside_a_block_leaves_the_sequential_state(models, stop_at):
    """A stop string that first completes with the stop_at-th generated
    token (the text up to it: inside a block of 4 for most); the next turn
    (keep_context, across the ring's wrap) streams what the sequential
    model streams."""
    one, block = models[1], models[4]
    stop = "".join(one.generate(PROMPT, max_tokens=stop_at))
    assert one.stats.generated_tokens == stop_at and stop, stop
    want = "".join(one.generate(PROMPT, max_tokens=30, stop=[stop]))
    got = "".join(block.generate(PROMPT, max_tokens=30, stop=[stop]))
    assert got == want and block.stats.finish_reason == one.stats.finish_reason == "stop"
    assert block.position == one.position and block.context == one.context
    want_next = "".join(one.generate(" and then", max_tokens=11, keep_context=True))
    got_next = "".join(block.generate(" and then", max_tokens=11, keep_context=True))
    assert got_next == want_next
    _kept_rows_equal(block, one)


def test_a_closed_stream_leaves_the_sequential_state(models):
    one, block = models[1], models[4]
    for llm in (one, block):
        stream = llm.generate(PROMPT, max_tokens=40)
        for _ in range(3):
            next(stream)
        stream.close()
    assert block.position == one.position and block.context == one.context
    assert "".join(block.generate(" so", max_tokens=9, keep_context=True)) == \
        "".join(one.generate(" so", max_tokens=9, keep_context=True))
    assert int(block.step(5, output="token")) == int(one.step(5, output="token"))   # the step after a settle


def test_decode_block_arguments(tiny_path, models):
    for bad in (0, 17, 2.0, "4"):
        with pytest.raises(InputError, match="decode_block"):
            LLM(tiny_path, max_context=CONTEXT, decode_block=bad)
    assert LLM(tiny_path, max_context=CONTEXT).decode_block == 1   # the CPU: one step a launch
    block = models[4]
    block.reset()
    block.prefill([2, 10], output="token")
    block.position = CONTEXT - 2
    with pytest.raises(InputError, match="passes max_context"):
        block.step_block(5)
    block.reset()


def test_a_decode_block_replays_without_encoding_or_patching(models):
    block = models[4]
    block.reset()
    token = block.step_block(int(block.prefill([2, 10], output="token")))[-1]
    exe = block._executable("block", 4, "token")
    before = exe.program.counters()
    for _ in range(20):   # 80 tokens, across the ring's wrap
        token = block.step_block(token)[-1]
    after = exe.program.counters()
    assert exe.program.replaying
    assert after["thunks_encoded"] == before["thunks_encoded"], (before, after)
    assert after["patches_written"] == before["patches_written"]
    assert after["schedules_run"] - before["schedules_run"] >= 20
    block.reset()
