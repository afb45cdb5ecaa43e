"""rlx.serve's app in process (Starlette's TestClient) with a fake embedder:
the refusals that need a controlled worker (queue full, a failing encode)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from rlx.serve import ServeConfig, create_app  # noqa: E402


class FakeEmbedder:
    dim = 4

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()

    def tokenize(self, texts):
        return [np.zeros(len(t.split()) + 2, np.int32) for t in texts]

    def encode(self, texts, batch_size=32):
        self.gate.wait(5)
        if "explode" in texts:
            raise RuntimeError("the device fell over")
        rows = np.array([[len(t), 1, 0, 0] for t in texts], np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _app(fake: FakeEmbedder, **limits):
    return create_app(fake, ServeConfig(model_name="fake", max_wait_ms=0, **limits))


def test_queue_full_is_429_and_the_server_recovers():
    fake = FakeEmbedder()
    app = _app(fake, max_batch=1, max_queue=2, max_inputs=2)
    with TestClient(app) as client:
        batcher = app.state.batcher
        fake.gate.clear()
        busy = batcher.submit(["held in encode"])
        deadline = time.monotonic() + 5
        while batcher.queue_depth and time.monotonic() < deadline:   # the worker has taken it
            time.sleep(0.01)
        queued = batcher.submit(["a", "b"])                        # the queue is now full
        r = client.post("/v1/embeddings", json={"input": "one more"})
        assert r.status_code == 429
        assert r.json()["error"]["type"] == "rate_limit_error" and r.json()["error"]["code"] == "queue_full"
        fake.gate.set()
        busy.result(timeout=5)
        queued.result(timeout=5)
        r = client.post("/v1/embeddings", json={"input": ["one more", "two"]})
        assert r.status_code == 200 and len(r.json()["data"]) == 2
        assert r.json()["usage"]["prompt_tokens"] == (2 + 2) + (1 + 2)   # words + [CLS] and [SEP]
        metrics = client.get("/metrics").text
        assert 'rlx_serve_requests_total{route="/v1/embeddings",status="429"} 1' in metrics


def test_a_request_larger_than_the_queue_is_413_not_429():
    with TestClient(_app(FakeEmbedder(), max_queue=2, max_inputs=8)) as client:
        r = client.post("/v1/embeddings", json={"input": ["a", "b", "c"]})
        assert r.status_code == 413 and r.json()["error"]["code"] == "too_many_inputs"


def test_a_failing_encode_is_a_json_500_and_the_server_goes_on():
    with TestClient(_app(FakeEmbedder())) as client:
        r = client.post("/v1/embeddings", json={"input": ["fine", "explode"]})
        assert r.status_code == 500
        assert r.json()["error"]["type"] == "server_error" and "fell over" in r.json()["error"]["message"]
        r = client.post("/v1/embeddings", json={"input": "fine"})
        assert r.status_code == 200
        assert client.get("/health").json()["status"] == "ok"


def test_body_limit():
    with TestClient(_app(FakeEmbedder(), max_body_bytes=64)) as client:
        r = client.post("/v1/embeddings", json={"input": "x" * 100})
        assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"


@pytest.mark.parametrize("body", [b'{"input": "ab\\ud800"}', b'{"input": ["ok", "\\udfff"]}',
                                  b'{"input": "x", "user": {"\\ud800": 1}}'])
def test_a_lone_surrogate_anywhere_in_the_body_is_a_400(body):
    # JSON's \ud800 escapes decode to lone surrogates, which the tokenizer
    # refused with a TypeError: a 500 until the body was checked.
    with TestClient(_app(FakeEmbedder())) as client:
        r = client.post("/v1/embeddings", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_unicode", r.text
        assert "lone surrogate" in r.json()["error"]["message"]
        assert client.post("/v1/embeddings", json={"input": "still serving"}).status_code == 200


def test_json_nested_past_the_parsers_recursion_is_a_400():
    with TestClient(_app(FakeEmbedder())) as client:
        r = client.post("/v1/embeddings", content=b"[" * 100_000 + b"]" * 100_000,
                        headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json", r.text


@pytest.mark.parametrize("flags", [["--max-batch", "0"], ["--max-queue", "-1"], ["--max-wait-ms", "-5"]])
def test_cli_refuses_bad_limits_before_loading(flags, capsys):
    from rlx import cli

    assert cli.main(["serve", *flags]) == 2
    assert "must be" in capsys.readouterr().err


def test_model_names_and_limits_validation():
    from rlx.errors import ConfigError
    from rlx.serve.limits import ApiError, parse_embedding_request, served_names

    config = ServeConfig(model_name="sentence-transformers/all-MiniLM-L6-v2")
    assert {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"} <= served_names(config)
    req = parse_embedding_request({"input": "x", "model": "all-MiniLM-L6-v2"}, config, 4)
    assert req.texts == ["x"] and req.encoding_format == "float" and req.model == config.model_name
    with pytest.raises(ApiError) as info:
        parse_embedding_request({"input": True}, config, 4)
    assert info.value.status == 400 and info.value.body()["error"]["code"] == "invalid_type"
    with pytest.raises(ConfigError):
        ServeConfig(max_inputs=0)


@pytest.mark.parametrize("value", [1e-300, 0.0, -1.0, 10.5])
def test_a_repetition_penalty_the_sampler_cannot_apply_is_a_400(value):
    # 1e-300 passed the (0, 10] check as a Python float but is 0 in f32, where
    # the penalty divides: the draw then met NaN probabilities (a 500).
    from rlx.serve.generation_request import parse_generation_request
    from rlx.serve.limits import ApiError

    with pytest.raises(ApiError) as err:
        parse_generation_request({"prompt": "hi", "repetition_penalty": value}, ServeConfig(llm_name="g"), chat=False)
    assert err.value.status == 400 and err.value.param == "repetition_penalty"


@pytest.mark.parametrize("role", [["user"], {"a": 1}, 3, None])
def test_a_message_role_that_is_not_a_string_is_a_400(role):
    # A list or object role was looked up in the role table: TypeError
    # (unhashable), a 500, until the fuzzer's serve cases found it.
    from rlx.serve.generation_request import parse_generation_request
    from rlx.serve.limits import ApiError

    body = {"messages": [{"role": role, "content": "hi"}]}
    with pytest.raises(ApiError) as err:
        parse_generation_request(body, ServeConfig(llm_name="g"), chat=True)
    assert err.value.status == 400 and err.value.param == "messages"


def test_cli_refuses_an_address_it_cannot_listen_on_before_loading(capsys):
    # A port out of range was uvicorn's OverflowError traceback, after the
    # models had loaded; an address in use failed only after loading too.
    import socket

    from rlx import cli

    assert cli.main(["serve", "--port", "99999"]) == 2
    assert "0..65535" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert cli.main(["serve", "--port", str(taken.getsockname()[1])]) == 2
        assert "cannot listen" in capsys.readouterr().err
