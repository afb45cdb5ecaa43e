"""rlx.serve's batcher alone, with a fake embed function: order, no mixing
between requests, max_batch, max_wait, cancellation, failures, queue limit."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from rlx.errors import ConfigError, RlxError
from rlx.serve import Batcher, BatcherClosedError, QueueFullError


def _vec(text: str) -> list[float]:
    """A row that identifies its text (so a mixed-up row is visible)."""
    return [float(len(text)), float(sum(map(ord, text)) % 9973), float(sum(map(ord, text[::2])))]


def _rows(texts: list[str]) -> np.ndarray:
    return np.array([_vec(t) for t in texts], np.float32)


class FakeEmbed:
    def __init__(self, fail_on: str | None = None, gate: threading.Event | None = None) -> None:
        self.batches: list[list[str]] = []
        self.fail_on = fail_on
        self.gate = gate

    def __call__(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        if self.gate is not None:
            self.gate.wait(5)
        self.batches.append(list(texts))
        if self.fail_on in texts:
            raise ValueError("boom")
        return _rows(texts), np.array([len(t) for t in texts])


def test_max_batch_takes_texts_in_arrival_order_and_splits_requests():
    fake = FakeEmbed()
    b = Batcher(fake, max_batch=4, max_wait_ms=10_000)   # not started yet: everything queues first
    jobs = [[f"r{r}t{i}" for i in range(n)] for r, n in enumerate((5, 5, 6))]   # 16 texts: four full batches
    futures = [b.submit(texts) for texts in jobs]
    assert b.queue_depth == 16
    b.start()
    results = [f.result(timeout=5) for f in futures]   # full batches never wait for max_wait
    b.close()
    flat = [t for texts in jobs for t in texts]
    assert fake.batches == [flat[i:i + 4] for i in range(0, 16, 4)]
    for texts, (rows, tokens) in zip(jobs, results):
        np.testing.assert_array_equal(rows, _rows(texts))
        np.testing.assert_array_equal(tokens, [len(t) for t in texts])
    assert b.queue_depth == 0


def test_a_lone_request_never_waits_but_concurrent_traffic_waits_max_wait():
    fake = FakeEmbed()
    b = Batcher(fake, max_batch=8, max_wait_ms=300).start()
    try:
        for _ in range(2):      # one request at a time: nobody would join its batch, so it runs at once
            t0 = time.monotonic()
            rows, _ = b.submit(["a", "bb"]).result(timeout=5)
            assert time.monotonic() - t0 < 0.2
            np.testing.assert_array_equal(rows, _rows(["a", "bb"]))
    finally:
        b.close()
    # Two requests in one batch: traffic is concurrent, so the next partial batch waits for others.
    fake = FakeEmbed()
    b = Batcher(fake, max_batch=8, max_wait_ms=300)
    first = [b.submit(["x"]), b.submit(["yy"])]
    b.start()
    for f in first:
        f.result(timeout=5)
    try:
        t0 = time.monotonic()
        rows, _ = b.submit(["a", "bb"]).result(timeout=5)
        waited = time.monotonic() - t0
        assert waited >= 0.29, waited
        assert fake.batches == [["x", "yy"], ["a", "bb"]]
        np.testing.assert_array_equal(rows, _rows(["a", "bb"]))
        # That batch held one request and left none queued: the next runs at once again.
        t0 = time.monotonic()
        b.submit(["c"]).result(timeout=5)
        assert time.monotonic() - t0 < 0.2
    finally:
        b.close()


def test_concurrent_requests_get_their_own_rows():
    fake = FakeEmbed()
    b = Batcher(fake, max_batch=7, max_wait_ms=2).start()
    rng = np.random.default_rng(0)
    requests = [[f"c{c}-q{q}-" + "x" * int(rng.integers(0, 30)) for _ in range(int(rng.integers(1, 6)))]
                for c in range(16) for q in range(10)]

    def client(c: int) -> list[bool]:
        ok = []
        for texts in requests[c * 10:(c + 1) * 10]:
            rows, tokens = b.submit(texts).result(timeout=10)
            ok.append(np.array_equal(rows, _rows(texts)) and list(tokens) == [len(t) for t in texts])
        return ok

    try:
        with ThreadPoolExecutor(16) as pool:
            outcome = [x for ok in pool.map(client, range(16)) for x in ok]
    finally:
        b.close()
    assert outcome == [True] * 160
    assert max(len(x) for x in fake.batches) <= 7
    assert sum(len(x) for x in fake.batches) == sum(len(r) for r in requests)


def test_a_cancelled_request_is_never_embedded():
    fake = FakeEmbed()
    b = Batcher(fake, max_batch=4, max_wait_ms=0)
    gone = b.submit(["gone"])
    assert gone.cancel()
    kept = b.submit(["kept"])
    b.start()
    try:
        np.testing.assert_array_equal(kept.result(timeout=5)[0], _rows(["kept"]))
    finally:
        b.close()
    assert fake.batches == [["kept"]]


def test_a_failing_batch_fails_its_requests_and_the_worker_goes_on():
    fake = FakeEmbed(fail_on="bad")
    b = Batcher(fake, max_batch=2, max_wait_ms=10_000)
    first = b.submit(["ok", "bad", "rest of it"])   # split over two batches: it fails as a whole
    b.start()
    try:
        with pytest.raises(ValueError, match="boom"):
            first.result(timeout=5)
        rows, _ = b.submit(["fine", "too"]).result(timeout=5)
        np.testing.assert_array_equal(rows, _rows(["fine", "too"]))
    finally:
        b.close()
    assert ["rest of it"] not in fake.batches


def test_queue_limit_and_close():
    gate = threading.Event()
    b = Batcher(FakeEmbed(gate=gate), max_batch=1, max_wait_ms=0, max_queue=3)
    b.submit(["a", "b"])
    b.submit(["c"])
    with pytest.raises(QueueFullError) as info:
        b.submit(["d"])
    assert isinstance(info.value, RlxError)
    b.close()
    with pytest.raises(BatcherClosedError):
        b.submit(["e"])


def test_close_fails_queued_requests():
    b = Batcher(FakeEmbed(), max_batch=4, max_wait_ms=10_000)
    waiting = b.submit(["x"])
    b.close()
    with pytest.raises(BatcherClosedError):
        waiting.result(timeout=1)


@pytest.mark.parametrize("kwargs", [{"max_batch": 0}, {"max_queue": 0}, {"max_wait_ms": -1}, {"max_batch": True},
                                    {"max_wait_ms": float("nan")}, {"max_wait_ms": float("inf")},
                                    {"max_wait_ms": True}])
def test_bad_settings_are_config_errors(kwargs):
    with pytest.raises(ConfigError):
        Batcher(FakeEmbed(), **kwargs)


def test_token_budget_bounds_rows_times_longest():
    fake = FakeEmbed()
    priced = []

    def cost(texts):
        priced.append(threading.current_thread().name)
        return [len(t) for t in texts]

    b = Batcher(fake, max_batch=4, max_wait_ms=100, max_batch_tokens=12, cost=cost)
    jobs = [["aaa", "bbb"], ["cccccc", "dd"], ["e" * 20], ["f", "g", "h", "i"]]
    futures = [b.submit(texts) for texts in jobs]
    b.start()
    results = [f.result(timeout=5) for f in futures]
    b.close()
    # 3+3: 2x3=6, then "cccccc" would make 3x6=18 > 12 -> new batch; 6,2: 2x6=12; the 20-character text is
    # over the budget alone and goes alone; then 4 x 1.
    assert fake.batches == [["aaa", "bbb"], ["cccccc", "dd"], ["e" * 20], ["f", "g", "h", "i"]]
    for texts, (rows, _) in zip(jobs, results):
        np.testing.assert_array_equal(rows, _rows(texts))
    assert set(priced) == {"rlx-serve-batcher"}   # the cost function runs on the worker only


def test_a_request_the_cost_function_cannot_price_fails_alone():
    def cost(texts):
        if "unpriceable" in texts:
            raise ValueError("no tokens for you")
        return [1] * len(texts)

    b = Batcher(FakeEmbed(), max_batch=4, max_wait_ms=0, max_batch_tokens=100, cost=cost).start()
    try:
        with pytest.raises(ValueError, match="no tokens"):
            b.submit(["unpriceable"]).result(timeout=5)
        rows, _ = b.submit(["fine"]).result(timeout=5)
        np.testing.assert_array_equal(rows, _rows(["fine"]))
    finally:
        b.close()


def test_a_token_budget_needs_a_cost_function():
    with pytest.raises(ConfigError):
        Batcher(FakeEmbed(), max_batch_tokens=10)
