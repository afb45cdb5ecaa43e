"""Random requests to the OpenAI-compatible server (rlx.serve), in process
through Starlette's TestClient, with a real tiny BERT embedder and a real tiny
Gemma 3: valid request bodies with 0-3 fields dropped, retyped or set to an
extreme value (huge and negative integers, 1e-300, NaN and infinities,
empty, NUL, astral and lone-surrogate strings, nested lists and objects),
unknown fields, bodies that are not objects or not JSON, wrong methods and
paths.

``serve_case(seed)`` is a pure function of its seed. The check holds the
server to its contract, not to a list of answers: never a 5xx; a 4xx is an
OpenAI-style error object; a 200 has the endpoint's shape (one embedding of
the model's width per input, finite; base64 of the right length; a
completion's text and usage within its max_tokens; a stream of JSON events
ending in [DONE]); and /health answers 200 after every request.
"""

from __future__ import annotations

import base64
import copy
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .ops import repro_command

EMBED_NAME, LLM_NAME = "tiny-bert", "tiny-gemma"
MAX_TOKENS = 12   # the server's cap: longer requests are refused, so no case generates for long
EXTREMES = (None, True, False, 0, -1, 1, 7, 2**31, 2**63, 2**70, -(2**70), 0.5, 1e-300, 1e300, float("nan"),
            float("inf"), float("-inf"), "", "x", "\u0000", "\u00e9\u6f22\U0001f642", "\ud800", "word " * 400, [],
            [1], ["a"], [[]], ["a", 3], {}, {"a": 1}, {"type": "text", "text": "hi"})
WORDS = ("the", "cat", "sat", "on", "a", "mat", "hello", "world", "<start_of_turn>", "\u00e9t\u00e9", "\U0001f642")


@dataclass
class ServeCase:
    seed: int
    method: str
    path: str
    body: bytes | None = None
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        shown = self.body if self.body is None or len(self.body) < 400 else self.body[:400] + b"..."
        return f"{self.method} {self.path} {shown!r} ({'; '.join(self.notes) or 'as built'})"


def _text(rng: np.random.Generator) -> str:
    return " ".join(rng.choice(WORDS, int(rng.integers(1, 12))))


def _valid_body(rng: np.random.Generator, path: str) -> dict:
    if path == "/v1/embeddings":
        n = int(rng.integers(1, 5))
        body: dict = {"input": _text(rng) if n == 1 and rng.random() < 0.5 else [_text(rng) for _ in range(n)]}
        if rng.random() < 0.5:
            body["model"] = EMBED_NAME
        if rng.random() < 0.5:
            body["encoding_format"] = str(rng.choice(["float", "base64"]))
        return body
    body = {"model": LLM_NAME, "max_tokens": int(rng.integers(1, MAX_TOKENS + 1))}
    if path == "/v1/completions":
        body["prompt"] = _text(rng)
    else:
        roles = ["system", "user", "assistant", "developer"]
        body["messages"] = [{"role": str(rng.choice(roles)), "content": _text(rng)}
                            for _ in range(int(rng.integers(1, 4)))]
    for name, value in (("temperature", float(rng.uniform(0, 2))), ("top_k", int(rng.integers(0, 50))),
                        ("top_p", float(rng.uniform(0.05, 1))), ("min_p", float(rng.uniform(0, 0.5))),
                        ("repetition_penalty", float(rng.uniform(0.5, 2))), ("seed", int(rng.integers(0, 2**31))),
                        ("stop", [_text(rng)[:3]]), ("stream", bool(rng.random() < 0.5))):
        if rng.random() < 0.4:
            body[name] = value
    if body.get("stream") and rng.random() < 0.5:
        body["stream_options"] = {"include_usage": bool(rng.random() < 0.5)}
    return body


def _extreme(rng: np.random.Generator):
    # A copy: a case may mutate what it drew (an input list's item), and cases stay pure functions of their seeds.
    return copy.deepcopy(EXTREMES[int(rng.integers(len(EXTREMES)))])


def serve_case(seed: int) -> ServeCase:
    rng = np.random.default_rng([seed, 29])
    roll = rng.random()
    if roll < 0.06:   # the other routes, and wrong methods
        method, path = [("GET", "/v1/models"), ("GET", "/health"), ("GET", "/metrics"), ("GET", "/v1/embeddings"),
                        ("POST", "/v1/models"), ("POST", "/v1/nothing"), ("DELETE", "/v1/completions")][
            int(rng.integers(7))]
        return ServeCase(seed, method, path, b"{}" if method != "GET" else None)
    path = str(rng.choice(["/v1/embeddings", "/v1/completions", "/v1/chat/completions"]))
    if roll < 0.12:   # not a JSON object at all
        raw = [b"", b"{", b"null", b"[1, 2]", b'"text"', b"\xff\xfe\x00", b"{'a': 1}", b"1e999999",
               b'{"input": "a", "input": 3}', b"[" * 5000 + b"]" * 5000][int(rng.integers(10))]
        return ServeCase(seed, "POST", path, raw, ["raw body"])
    body = _valid_body(rng, path)
    notes = []
    for _ in range(int(rng.integers(0, 4))):
        keys = list(body)
        action = rng.random()
        if action < 0.2 and keys:
            key = keys[int(rng.integers(len(keys)))]
            del body[key]
            notes.append(f"dropped {key}")
        elif action < 0.3:
            body[f"unknown_{int(rng.integers(100))}"] = _extreme(rng)
            notes.append("unknown field")
        elif action < 0.45 and isinstance(body.get("messages"), list) and body["messages"]:
            i = int(rng.integers(len(body["messages"])))
            if isinstance(body["messages"][i], dict):
                body["messages"][i][str(rng.choice(["role", "content", "name"]))] = _extreme(rng)
            else:   # an earlier mutation made the list an extreme one: replace the item
                body["messages"][i] = _extreme(rng)
            notes.append("message field")
        elif action < 0.55 and isinstance(body.get("input"), list) and body["input"]:
            body["input"][int(rng.integers(len(body["input"])))] = _extreme(rng)
            notes.append("input item")
        else:
            key = str(rng.choice(keys + ["max_tokens", "n", "logprobs", "stream_options", "dimensions",
                                         "max_completion_tokens", "repeat_penalty", "presence_penalty"]))
            body[key] = _extreme(rng)
            notes.append(f"{key} extreme")
    return ServeCase(seed, "POST", path, json.dumps(body).encode(), notes)


class ServeFixture:
    """One app (a tiny BERT embedder and a tiny Gemma 3) for every case of a run."""

    def __init__(self) -> None:
        from starlette.testclient import TestClient

        from rlx.models import load_embedder
        from rlx.models.llm import load_llm
        from rlx.serve import ServeConfig, create_app
        from tests.models.test_bert import make_tiny_bert
        from tests.models.tiny_llm import write_tiny_gemma

        self._dir = tempfile.TemporaryDirectory()
        folder = Path(self._dir.name)
        self.embedder = load_embedder(str(make_tiny_bert(folder / "bert")), device="cpu")
        llm = load_llm(str(write_tiny_gemma(folder / "tiny.gguf")), device="cpu")
        config = ServeConfig(model_name=EMBED_NAME, llm_name=LLM_NAME, max_wait_ms=0, max_tokens=MAX_TOKENS)
        self.client = TestClient(create_app(self.embedder, config, llm=llm), raise_server_exceptions=False)
        self.client.__enter__()

    def close(self) -> None:
        self.client.__exit__(None, None, None)
        self._dir.cleanup()


def _shape_problem(case: ServeCase, response, dim: int) -> str | None:
    """What a 200 answer lacks for its endpoint, or None."""
    body = json.loads(case.body) if case.body else {}
    if case.path == "/v1/embeddings":
        out = response.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if len(out["data"]) != len(texts) or [d["index"] for d in out["data"]] != list(range(len(texts))):
            return f"{len(out['data'])} embeddings for {len(texts)} inputs"
        for d in out["data"]:
            vec = d["embedding"]
            if isinstance(vec, str):
                vec = np.frombuffer(base64.b64decode(vec), np.float32)
            vec = np.asarray(vec, np.float64)
            if vec.shape != (dim,) or not np.isfinite(vec).all():
                return f"an embedding of shape {vec.shape}, finite {bool(np.isfinite(vec).all())}"
        return None
    if case.path in ("/v1/completions", "/v1/chat/completions"):
        # The field the server reads: chat's max_completion_tokens where given, else max_tokens.
        chat_cap = body.get("max_completion_tokens") if case.path == "/v1/chat/completions" else None
        cap = chat_cap if chat_cap is not None else body.get("max_tokens")
        cap = MAX_TOKENS if cap is None else cap
        if body.get("stream"):
            events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
            if not events or events[-1] != "[DONE]":
                return f"a stream that does not end in [DONE]: {response.text[-200:]!r}"
            for e in events[:-1]:
                json.loads(e)
            return None
        out = response.json()
        choice = out["choices"][0]
        text = choice["text"] if case.path == "/v1/completions" else choice["message"]["content"]
        if not isinstance(text, str) or not 0 <= out["usage"]["completion_tokens"] <= cap:
            return f"a completion of {out['usage']['completion_tokens']} tokens for at most {cap}"
        return None
    return None


def check_serve_case(case: ServeCase, fixture: ServeFixture) -> str | None:
    """None when the server kept its contract for ``case``, else why not."""
    client = fixture.client
    headers = {"content-type": "application/json"}
    response = client.request(case.method, case.path, content=case.body, headers=headers)
    problem = None
    if response.status_code >= 500:
        problem = f"status {response.status_code}: {response.text[:300]}"
    elif response.status_code >= 400 and case.path.startswith("/v1/") and case.method == "POST" \
            and case.path != "/v1/nothing" and case.path != "/v1/models":
        try:
            error = response.json()["error"]
            if not isinstance(error["message"], str) or not isinstance(error["type"], str):
                problem = f"an error object without a message and type: {response.text[:300]}"
        except (ValueError, KeyError, TypeError):
            problem = f"a {response.status_code} that is not an OpenAI error object: {response.text[:300]}"
    elif response.status_code == 200 and case.method == "POST":
        try:
            problem = _shape_problem(case, response, fixture.embedder.dim)
        except (ValueError, KeyError, TypeError, IndexError) as e:
            problem = f"a 200 without the endpoint's shape ({type(e).__name__}: {e}): {response.text[:300]}"
    health = client.get("/health").status_code
    if problem is None and health != 200:
        problem = f"/health answered {health} afterwards"
    if problem is None:
        return None
    return (f"serve case seed {case.seed}: {problem}\n  request: {case.describe()}\n"
            f"  re-run: {repro_command('serve', case.seed)}")
