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
