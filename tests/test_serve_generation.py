"""``rlx serve --llm``: /v1/completions and /v1/chat/completions on a real
server process (127.0.0.1) with the official openai client and httpx, and
the generation queue in process.

The model is a tiny random Gemma 3 GGUF (tests/models/tiny_llm.py) loaded
by the server and by this process; every answer is compared with
``LLM.generate`` / ``LLM.chat`` here for the same parameters. Both run the
same compiled CPU executables on the same machine and sampling draws from
numpy's seeded generator, so the texts must be equal, character for
character (no tolerance).
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from models.tiny_llm import write_tiny_gemma
from serve_harness import api_error as _error
from serve_harness import running_server

httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

NAME = "tiny"
CONTEXT = 4096
CAP = 4000          # --max-tokens
PROMPT = "the quick brown fox jumps over"
GREEDY = {"temperature": 0.0}
SAMPLED = [{"temperature": 0.8, "seed": 11}, {"temperature": 1.0, "top_k": 20, "top_p": 0.9, "seed": 5},
           {"temperature": 0.7, "min_p": 0.05, "repetition_penalty": 1.3, "seed": 2}]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return write_tiny_gemma(tmp_path_factory.mktemp("tiny_llm") / "tiny.gguf")


@pytest.fixture(scope="module")
def llm(model_path):
    from rlx.models.llm import load_llm

    return load_llm(model_path, max_context=CONTEXT)


@pytest.fixture(scope="module")
def server(model_path):
    with running_server(["--llm", str(model_path), "--llm-name", NAME, "--device", "cpu",
                         "--max-context", str(CONTEXT), "--max-tokens", str(CAP), "--max-gen-queue", "16"]) as url:
        yield url


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0, timeout=60)


def _expected(llm, prompt: str, max_tokens: int, **kwargs) -> tuple[str, str, int, int]:
    """(text, OpenAI finish_reason, prompt tokens, completion tokens) of LLM.generate here."""
    text = "".join(llm.generate(prompt, max_tokens, **kwargs))
    s = llm.stats
    return text, "length" if s.finish_reason == "length" else "stop", s.prompt_tokens, s.generated_tokens


def _expected_chat(llm, messages, max_tokens: int, **kwargs) -> tuple[str, str, int, int]:
    text = "".join(llm.chat(messages, max_tokens=max_tokens, **kwargs))
    s = llm.stats
    return text, "length" if s.finish_reason == "length" else "stop", s.prompt_tokens, s.generated_tokens


def _llama_extras(params: dict) -> tuple[dict, dict]:
    """The openai client's own arguments, and llama-server's extensions (sent through extra_body)."""
    own = {k: v for k, v in params.items() if k in ("temperature", "top_p", "seed")}
    extra = {k: v for k, v in params.items() if k not in own}
    return own, extra


@pytest.mark.parametrize("params", [GREEDY, *SAMPLED])
def test_completion_equals_generate(client, llm, params):
    own, extra = _llama_extras(params)
    resp = client.completions.create(model=NAME, prompt=PROMPT, max_tokens=40, extra_body=extra, **own)
    text, finish, n_prompt, n_gen = _expected(llm, PROMPT, 40, **params)
    assert resp.object == "text_completion" and resp.model == NAME and resp.id.startswith("cmpl-")
    assert len(resp.choices) == 1 and resp.choices[0].index == 0
    assert resp.choices[0].text == text and text
    assert resp.choices[0].finish_reason == finish
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (n_prompt, n_gen)
    assert resp.usage.total_tokens == n_prompt + n_gen


@pytest.mark.parametrize("params", [GREEDY, SAMPLED[0]])
def test_chat_equals_chat(client, llm, params):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello world"},
                {"role": "assistant", "content": "hello"}, {"role": "user", "content": "the lazy dog"}]
    own, extra = _llama_extras(params)
    resp = client.chat.completions.create(model=NAME, messages=messages, max_tokens=30, extra_body=extra, **own)
    text, finish, n_prompt, n_gen = _expected_chat(llm, messages, 30, **params)
    assert resp.object == "chat.completion" and resp.id.startswith("chatcmpl-")
    assert resp.choices[0].message.role == "assistant" and resp.choices[0].message.content == text
    assert resp.choices[0].finish_reason == finish
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (n_prompt, n_gen)
    # max_completion_tokens is chat's newer name for the same limit.
    resp = client.chat.completions.create(model=NAME, messages=messages, max_completion_tokens=30,
                                          extra_body=extra, **own)
    assert resp.choices[0].message.content == text


def test_streaming_chunks_concatenate_to_the_text(client, llm):
    params = SAMPLED[1]
    own, extra = _llama_extras(params)
    text, finish, n_prompt, n_gen = _expected(llm, PROMPT, 50, **params)
    chunks = list(client.completions.create(model=NAME, prompt=PROMPT, max_tokens=50, stream=True,
                                            stream_options={"include_usage": True}, extra_body=extra, **own))
    assert all(c.object == "text_completion" and c.id == chunks[0].id for c in chunks)
    assert len(chunks) > 3   # pieces, not one blob
    assert "".join(c.choices[0].text for c in chunks if c.choices) == text
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == finish and all(f is None for f in finishes[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == n_gen
    assert chunks[-1].usage.prompt_tokens == n_prompt

    messages = [{"role": "user", "content": "quartz sphinx"}]
    text, finish, _, _ = _expected_chat(llm, messages, 40, **GREEDY)
    chunks = list(client.chat.completions.create(model=NAME, messages=messages, max_tokens=40, stream=True,
                                                 temperature=0))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"   # the first chunk carries the role, as OpenAI's
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == text
    assert chunks[-1].choices[0].finish_reason == finish and chunks[-1].usage is None


def test_stream_is_server_sent_events(server):
    with httpx.stream("POST", f"{server}/v1/completions", timeout=60,
                      json={"model": NAME, "prompt": PROMPT, "max_tokens": 5, "temperature": 0, "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        raw = r.read().decode()
    events = raw.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    assert all(e.startswith("data: {") for e in events[:-2])
    assert json.loads(events[-3][6:])["choices"][0]["finish_reason"] == "length"


def test_stop_strings_and_finish_reasons(client, llm):
    full, finish, _, _ = _expected(llm, PROMPT, 30, **GREEDY)
    assert finish == "length"
    stop = full[8:11]
    want, finish, _, n_gen = _expected(llm, PROMPT, 30, stop=[stop], **GREEDY)
    assert finish == "stop" and stop not in want and full.startswith(want)
    for s in (stop, [stop, "never appears"]):
        resp = client.completions.create(model=NAME, prompt=PROMPT, max_tokens=30, temperature=0, stop=s)
        assert resp.choices[0].text == want and resp.choices[0].finish_reason == "stop"
        assert resp.usage.completion_tokens == n_gen
    streamed = list(client.completions.create(model=NAME, prompt=PROMPT, max_tokens=30, temperature=0, stop=stop,
                                              stream=True))
    assert "".join(c.choices[0].text for c in streamed) == want and streamed[-1].choices[0].finish_reason == "stop"


def test_end_of_generation_token_is_finish_reason_stop(client, llm):
    """A seed whose sampled text reaches <eos> before max_tokens (found here; the tiny model's random
    weights give <eos> about once in 300 tokens)."""
    for seed in range(200):
        text, _, _, n_gen = _expected(llm, "hello world", 64, temperature=1.0, seed=seed)
        if llm.stats.finish_reason == "eos":
            break
    else:
        pytest.fail("no seed in 0..199 ends at <eos> within 64 tokens")
    resp = client.completions.create(model=NAME, prompt="hello world", max_tokens=64, temperature=1.0, seed=seed)
    assert resp.choices[0].text == text and resp.choices[0].finish_reason == "stop"
    assert resp.usage.completion_tokens == n_gen < 64


def test_max_tokens_default_and_the_context_end(server, llm):
    """Without max_tokens a request may generate up to the cap; a prompt near the context's end stops there."""
    prompt = "x" * 1000   # "x" pairs are no token: about one token a character
    n_prompt = len(llm.tokenizer.encode(prompt))
    assert CONTEXT - CAP < n_prompt < CONTEXT
    r = httpx.post(f"{server}/v1/completions", timeout=120, json={"prompt": prompt, "temperature": 0})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == CONTEXT - n_prompt
    text, _, _, _ = _expected(llm, prompt, CAP, **GREEDY)
    assert body["choices"][0]["text"] == text


@pytest.mark.parametrize("route, body, status, code", [
    ("completions", b"{not json", 400, "invalid_json"),
    ("chat/completions", b"\xff", 400, "invalid_json"),
    ("completions", b"[1]", 400, None),
    ("completions", b'{"model": "tiny"}', 400, "missing_prompt"),
    ("completions", b'{"prompt": 5}', 400, "invalid_type"),
    ("completions", b'{"prompt": ["a", "b"]}', 400, "invalid_type"),
    ("completions", b'{"prompt": [1, 2, 3]}', 400, "invalid_type"),
    ("completions", b'{"prompt": "x", "model": "gpt-4"}', 404, "model_not_found"),
    ("completions", b'{"prompt": "x", "n": 2}', 400, "unsupported_value"),
    ("completions", b'{"prompt": "x", "max_tokens": 4001}', 400, "max_tokens_too_large"),
    ("completions", b'{"prompt": "x", "max_tokens": 0}', 400, "invalid_value"),
    ("completions", b'{"prompt": "x", "max_tokens": "9"}', 400, "invalid_value"),
    ("completions", b'{"prompt": "x", "temperature": "hot"}', 400, "invalid_type"),
    ("completions", b'{"prompt": "x", "temperature": 3}', 400, "invalid_value"),
    ("completions", b'{"prompt": "x", "top_p": 0}', 400, "invalid_value"),
    ("completions", b'{"prompt": "x", "top_k": -1}', 400, "invalid_value"),
    ("completions", b'{"prompt": "x", "seed": 1.5}', 400, "invalid_type"),
    ("completions", b'{"prompt": "x", "stop": 7}', 400, "invalid_type"),
    ("completions", b'{"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}', 400, "invalid_value"),
    ("completions", b'{"prompt": "x", "stream": "yes"}', 400, "invalid_type"),
    ("completions", b'{"prompt": "x", "logprobs": 2}', 400, "unsupported_parameter"),
    ("completions", b'{"prompt": "x", "presence_penalty": 0.5}', 400, "unsupported_value"),
    ("completions", b'{"prompt": "x", "repeat_penalty": 1.1, "repetition_penalty": 1.2}', 400, "invalid_value"),
    ("chat/completions", b'{"model": "tiny"}', 400, "missing_messages"),
    ("chat/completions", b'{"messages": []}', 400, "invalid_type"),
    ("chat/completions", b'{"messages": ["hi"]}', 400, "invalid_type"),
    ("chat/completions", b'{"messages": [{"role": "robot", "content": "x"}]}', 400, "invalid_value"),
    ("chat/completions", b'{"messages": [{"role": "user", "content": 3}]}', 400, "invalid_type"),
    ("chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 9999}',
     400, "max_tokens_too_large"),
])
def test_bad_requests_get_openai_errors(server, route, body, status, code):
    r = httpx.post(f"{server}/v1/{route}", content=body, headers={"content-type": "application/json"})
    _error(r, status, code)


def test_oversize_prompt_and_n_with_the_openai_client(client, server):
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=NAME, prompt=" ".join(["fox"] * 5000), max_tokens=5)
    assert info.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=NAME, messages=[{"role": "user", "content": "x"}], n=2)
    assert info.value.code == "unsupported_value"
    assert httpx.get(f"{server}/health").json()["status"] == "ok"


def test_models_lists_the_llm(client):
    assert [m.id for m in client.models.list().data] == [NAME]


def test_a_client_leaving_mid_stream_stops_its_generation(server, llm):
    body = {"model": NAME, "prompt": PROMPT, "max_tokens": 3000, "temperature": 0, "stream": True}
    with httpx.stream("POST", f"{server}/v1/completions", json=body, timeout=60) as r:
        lines = r.iter_lines()
        got = [next(lines) for _ in range(6)]   # three events and their blank lines
        assert got[0].startswith("data: {")
    # Gone after the first pieces of a ~1 s generation: the worker stops it at its next piece.
    deadline = time.monotonic() + 30
    while True:
        metrics = httpx.get(f"{server}/metrics").text
        if 'rlx_serve_generations_total{outcome="cancelled"}' in metrics or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert 'rlx_serve_generations_total{outcome="cancelled"}' in metrics
    generated = _metric(metrics, "rlx_serve_generated_tokens_total")
    # The next request is served, correctly (the LLM's cache state did not leak into it).
    r = httpx.post(f"{server}/v1/completions", json={"prompt": "quartz sea", "max_tokens": 20, "temperature": 0},
                   timeout=60)
    assert r.status_code == 200 and r.json()["choices"][0]["text"] == _expected(llm, "quartz sea", 20, **GREEDY)[0]
    after = _metric(httpx.get(f"{server}/metrics").text, "rlx_serve_generated_tokens_total")
    assert after - generated == 20
    assert 'status="500"' not in httpx.get(f"{server}/metrics").text


def _metric(text: str, name: str) -> float:
    return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")))


def test_concurrent_clients_get_their_own_text(server, llm):
    """8 clients x 3 requests at once (streamed and not, completions and chat), all queued for the one LLM."""
    plan = []
    for c in range(8):
        for i in range(3):
            params = [GREEDY, *SAMPLED][(c + i) % 4]
            plan.append((c, i, f"{PROMPT} {'sea ' * c}{'dog ' * i}", dict(params), (c + i) % 2 == 0, c % 3 == 0))

    def run(c: int) -> list[tuple[str, str]]:
        out = []
        cl = openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0, timeout=120)
        for cc, _, prompt, params, stream, chat in plan:
            if cc != c:
                continue
            own, extra = _llama_extras(params)
            if chat:
                msgs = [{"role": "user", "content": prompt}]
                if stream:
                    chunks = cl.chat.completions.create(model=NAME, messages=msgs, max_tokens=60, stream=True,
                                                        extra_body=extra, **own)
                    text = "".join(ch.choices[0].delta.content or "" for ch in chunks)
                else:
                    text = cl.chat.completions.create(model=NAME, messages=msgs, max_tokens=60, extra_body=extra,
                                                      **own).choices[0].message.content
            elif stream:
                chunks = cl.completions.create(model=NAME, prompt=prompt, max_tokens=60, stream=True,
                                               extra_body=extra, **own)
                text = "".join(ch.choices[0].text for ch in chunks)
            else:
                text = cl.completions.create(model=NAME, prompt=prompt, max_tokens=60, extra_body=extra,
                                             **own).choices[0].text
            out.append((prompt, text))
        return out

    with ThreadPoolExecutor(8) as pool:
        answers = [a for chunk in pool.map(run, range(8)) for a in chunk]
    assert len(answers) == 24
    by_prompt = {p: (params, chat) for _, _, p, params, _, chat in plan}
    texts = set()
    for prompt, text in answers:
        params, chat = by_prompt[prompt]
        want = (_expected_chat(llm, [{"role": "user", "content": prompt}], 60, **params) if chat
                else _expected(llm, prompt, 60, **params))[0]
        assert text == want, prompt
        texts.add(text)
    assert len(texts) > 8   # different prompts and settings gave different texts: a mix-up would show


# ---- the queue in process: a gate holds the LLM so the queue's states can be reached on purpose ----------


class GatedLLM:
    """The tiny LLM, whose generate waits for ``gate`` before its first piece."""

    def __init__(self, llm) -> None:
        self._llm = llm
        self.gate = threading.Event()
        self.started: list[list[int]] = []

    def __getattr__(self, name):
        return getattr(self._llm, name)

    def generate(self, prompt, max_tokens, **kwargs):
        self.started.append(list(prompt))
        self.gate.wait(10)
        yield from self._llm.generate(prompt, max_tokens, **kwargs)


def test_queue_full_is_429_and_queued_clients_that_leave_free_their_slot(llm):
    import asyncio

    from starlette.testclient import TestClient

    from rlx.serve import ServeConfig, create_app
    from rlx.serve.generation import GenerationJob

    gated = GatedLLM(llm)
    app = create_app(None, ServeConfig(llm_name=NAME, max_gen_queue=2, max_tokens=50), llm=gated)
    with TestClient(app) as client:
        queue = app.state.generator
        loop = asyncio.new_event_loop()
        try:
            jobs = [GenerationJob([2, 300 + i], {"max_tokens": 5, "temperature": 0.0}, loop) for i in range(3)]
            queue.submit(jobs[0])
            deadline = time.monotonic() + 5
            while not queue.busy and time.monotonic() < deadline:   # the worker holds job 0 at the gate
                time.sleep(0.01)
            queue.submit(jobs[1])
            queue.submit(jobs[2])
            r = client.post("/v1/completions", json={"prompt": "one more", "max_tokens": 5})
            assert r.status_code == 429 and r.json()["error"]["code"] == "queue_full"
            assert r.json()["error"]["type"] == "rate_limit_error"
            queue.cancel(jobs[1])   # its client left while it waited: the slot is free at once
            assert queue.queue_depth == 1
            gated.gate.set()
            r = client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 10, "temperature": 0})
            assert r.status_code == 200
            assert r.json()["choices"][0]["text"] == _expected(llm, PROMPT, 10, **GREEDY)[0]
            # The cancelled job never reached the LLM; the others ran in arrival order.
            assert [ids[-1] for ids in gated.started[:2]] == [300, 302]
            metrics = client.get("/metrics").text
            assert 'rlx_serve_requests_total{route="/v1/completions",status="429"} 1' in metrics
            assert 'rlx_serve_generations_total{outcome="cancelled"} 1' in metrics
        finally:
            loop.close()


def test_a_failing_generation_is_a_json_500_and_the_worker_goes_on(llm):
    from starlette.testclient import TestClient

    from rlx.serve import ServeConfig, create_app

    class Exploding(GatedLLM):
        def generate(self, prompt, max_tokens, **kwargs):
            if max_tokens == 13:
                raise RuntimeError("the device fell over")
            return self._llm.generate(prompt, max_tokens, **kwargs)

    app = create_app(None, ServeConfig(llm_name=NAME), llm=Exploding(llm))
    with TestClient(app) as client:
        r = client.post("/v1/completions", json={"prompt": "x", "max_tokens": 13})
        assert r.status_code == 500 and "fell over" in r.json()["error"]["message"]
        r = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}],
                                                      "max_tokens": 13, "stream": True})
        assert r.status_code == 200   # the stream had begun: the error is its last event, as OpenAI's
        events = [json.loads(e[6:]) for e in r.text.split("\n\n") if e.startswith("data: {")]
        assert events[0]["choices"][0]["delta"]["role"] == "assistant"
        assert "fell over" in events[-1]["error"]["message"] and events[-1]["error"]["type"] == "server_error"
        r = client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 8, "temperature": 0})
        assert r.status_code == 200 and r.json()["choices"][0]["text"] == _expected(llm, PROMPT, 8, **GREEDY)[0]
