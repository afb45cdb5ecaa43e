"""Dynamic batching: many requests' texts, one worker thread, one ``encode`` per batch.

Requests are queued whole; the worker takes texts from the head of the queue
(splitting a request across batches when it is larger than what is left of
``max_batch``), waits at most ``max_wait_ms`` after the oldest queued
request arrived for the batch to fill, calls ``embed`` once, and hands each
request its own rows. The wait applies only while traffic is concurrent
(the previous batch held texts of more than one request, or left some
queued): a lone request runs at once, which a fixed 5 ms wait had made 2.3x
slower one at a time on a 2-core CPU and 3.3x on an H200, while under load
the wait let batches fill (32 clients on the H200: 634 against 513 req/s
without it; benchmarks/README.md, "Serving"). A single thread owns the embedder because
``Embedder`` is not documented as thread-safe, and one larger batch is
cheaper than several small ones anyway.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError

import numpy as np

from rlx.arg_types import is_integer, is_real
from rlx.errors import ConfigError
from rlx.serve.limits import BatcherClosedError, QueueFullError

# embed(texts) -> (embeddings [n, dim] float32, token counts [n])
EmbedFn = Callable[[list[str]], tuple[np.ndarray, np.ndarray]]


class _Job:
    """One request: its texts, where the worker has got to, and its rows."""

    __slots__ = ("texts", "future", "arrived", "taken", "filled", "rows", "tokens", "started", "costs", "cost_error")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.future: Future = Future()
        self.arrived = time.monotonic()
        self.taken = 0        # texts handed to a batch so far
        self.filled = 0       # rows written so far
        self.rows: np.ndarray | None = None
        self.tokens = np.zeros(len(texts), np.int64)
        self.started = False  # set_running_or_notify_cancel() was called
        self.costs: list[int] | None = None   # tokens per text, when the batcher has a token budget
        self.cost_error: Exception | None = None


class Batcher:
    """Groups concurrent ``submit`` calls into ``embed`` calls on one thread.

    ``submit(texts)`` returns a ``concurrent.futures.Future`` whose result is
    ``(embeddings, token_counts)`` for exactly those texts, in order. A future
    cancelled while still queued is dropped (its texts are never embedded);
    ``on_batch(size, seconds)`` is called after every ``embed``. With
    ``max_batch_tokens`` and ``cost(texts) -> tokens per text`` (called on the
    worker thread), a batch also stops before rows x its longest text would
    pass ``max_batch_tokens``.
    """

    def __init__(self, embed: EmbedFn, max_batch: int = 64, max_wait_ms: float = 5.0, max_queue: int = 1024,
                 on_batch: Callable[[int, float], None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 max_batch_tokens: int | None = None,
                 cost: Callable[[list[str]], Sequence[int]] | None = None) -> None:
        if not is_integer(max_batch) or max_batch < 1:
            raise ConfigError(f"max_batch must be an integer >= 1, got {max_batch!r}")
        if not is_integer(max_queue) or max_queue < 1:
            raise ConfigError(f"max_queue must be an integer >= 1, got {max_queue!r}")
        if not is_real(max_wait_ms) or max_wait_ms < 0:
            raise ConfigError(f"max_wait_ms must be a finite number >= 0, got {max_wait_ms!r}")
        if max_batch_tokens is not None:
            if not is_integer(max_batch_tokens) or max_batch_tokens < 1:
                raise ConfigError(f"max_batch_tokens must be an integer >= 1 or None, got {max_batch_tokens!r}")
            if cost is None:
                raise ConfigError("max_batch_tokens needs a cost function (tokens per text)")
        self.max_batch_tokens = max_batch_tokens
        self._cost = cost if max_batch_tokens is not None else None
        self._embed = embed
        self.max_batch = max_batch
        self.max_wait = max_wait_ms / 1000.0
        self.max_queue = max_queue
        self._on_batch = on_batch
        self._clock = clock
        self._jobs: deque[_Job] = deque()
        self._queued = 0                 # texts queued and not yet taken
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._concurrent = False   # the last batch held more than one request's texts, or left some queued

    @property
    def queue_depth(self) -> int:
        """Texts waiting for a batch (not counting the batch being embedded)."""
        return self._queued

    @property
    def alive(self) -> bool:
        """Whether the worker thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> Batcher:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rlx-serve-batcher", daemon=True)
                self._thread.start()
        return self

    def close(self, timeout: float | None = 5.0) -> None:
        """Stop the worker; requests still queued fail with BatcherClosedError."""
        with self._cond:
            self._closed = True
            pending = list(self._jobs)
            self._jobs.clear()
            self._queued = 0
            self._cond.notify_all()
        for job in pending:
            if not job.future.done():
                if job.started or job.future.set_running_or_notify_cancel():
                    job.future.set_exception(BatcherClosedError("the server is shutting down"))
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def submit(self, texts: Sequence[str]) -> Future:
        job = _Job(list(texts))
        job.arrived = self._clock()
        with self._cond:
            if self._closed:
                raise BatcherClosedError("the batcher is closed")
            if self._queued + len(job.texts) > self.max_queue:
                raise QueueFullError(f"the queue holds {self._queued} texts; {len(job.texts)} more would pass "
                                     f"max_queue={self.max_queue}")
            if not job.texts:   # nothing to embed: answer at once rather than queue an empty job
                job.future.set_result((np.zeros((0, 0), np.float32), job.tokens))
                return job.future
            self._jobs.append(job)
            self._queued += len(job.texts)
            self._cond.notify_all()
        return job.future

    # ------------------------------------------------------------ worker

    def _next_batch(self) -> list[tuple[_Job, int, int]] | None:
        """Wait for work, then take up to max_batch texts (and at most
        max_batch_tokens padded tokens): [(job, start, stop)]. None when closed."""
        with self._cond:
            while True:
                self._drop_cancelled()
                if self._closed:
                    return None
                if not self._jobs:
                    self._cond.wait()
                    continue
                # While traffic is concurrent, wait for the batch to fill, but never past the oldest
                # request's deadline; a lone request runs at once (no one else would join its batch).
                deadline = self._jobs[0].arrived + (self.max_wait if self._concurrent else 0.0)
                remaining = deadline - self._clock()
                if self._queued >= self.max_batch or remaining <= 0:
                    break
                self._cond.wait(remaining)
            unpriced = self._unpriced()
        if unpriced:
            # Token counts come from the cost function, which may call the embedder's tokenizer: this thread
            # owns the embedder, and the lock is not held, so submitters never wait for tokenizing.
            for job in unpriced:
                try:
                    costs = [int(c) for c in self._cost(job.texts)]
                    if len(costs) != len(job.texts):
                        raise RuntimeError(f"the cost function gave {len(costs)} counts for {len(job.texts)} texts")
                except Exception as e:   # noqa: BLE001 - fails this request, not the worker
                    job.cost_error = e
                    costs = [0] * len(job.texts)
                job.costs = costs
        with self._cond:
            parts: list[tuple[_Job, int, int]] = []
            room = self.max_batch
            rows, longest = 0, 0
            while room and self._jobs:
                job = self._jobs[0]
                if self._cost is not None and job.costs is None:   # arrived after the pricing above
                    break
                if not job.started:
                    job.started = True
                    if not job.future.set_running_or_notify_cancel():   # cancelled meanwhile
                        self._jobs.popleft()
                        self._queued -= len(job.texts) - job.taken
                        continue
                if job.cost_error is not None:   # cannot be priced: fail it rather than guess
                    self._jobs.popleft()
                    self._queued -= len(job.texts) - job.taken
                    if not job.future.done():
                        job.future.set_exception(job.cost_error)
                    continue
                n = min(room, len(job.texts) - job.taken)
                if self._cost is not None:
                    # The batch is padded to its longest text: rows x longest bounds its work and memory.
                    # A batch always takes at least one text, however long.
                    fit = 0
                    for c in job.costs[job.taken:job.taken + n]:
                        if rows and (rows + 1) * max(longest, c) > self.max_batch_tokens:
                            break
                        rows, longest, fit = rows + 1, max(longest, c), fit + 1
                    n = fit
                    if n == 0:
                        break
                parts.append((job, job.taken, job.taken + n))
                job.taken += n
                room -= n
                self._queued -= n
                if job.taken == len(job.texts):
                    self._jobs.popleft()
                else:
                    break   # the rest of this request did not fit (room or budget): the batch is full
            self._concurrent = len({id(job) for job, _, _ in parts}) > 1 or bool(self._jobs)
            return parts

    def _unpriced(self) -> list[_Job]:
        """The queued jobs the next batch may reach that have no token counts yet."""
        if self._cost is None:
            return []
        out, texts = [], 0
        for job in self._jobs:
            if texts >= self.max_batch:
                break
            if job.costs is None:
                out.append(job)
            texts += len(job.texts) - job.taken
        return out

    def _drop_cancelled(self) -> None:
        # Only jobs not yet started can be cancelled (Future.cancel refuses running ones).
        kept = deque(j for j in self._jobs if j.started or not j.future.cancelled())
        if len(kept) != len(self._jobs):
            self._queued = sum(len(j.texts) - j.taken for j in kept)
            self._jobs = kept

    def _run(self) -> None:
        while True:
            parts = self._next_batch()
            if parts is None:
                return
            if not parts:
                continue
            texts = [t for job, a, b in parts for t in job.texts[a:b]]
            t0 = time.perf_counter()
            try:
                emb, tokens = self._embed(texts)
                emb = np.asarray(emb, np.float32)
                tokens = np.asarray(tokens)
                if emb.ndim != 2 or emb.shape[0] != len(texts) or tokens.shape != (len(texts),):
                    raise RuntimeError(f"embed returned {emb.shape} rows and {tokens.shape} counts "
                                       f"for {len(texts)} texts")
            except BaseException as e:   # noqa: BLE001 - the worker must survive any failure of one batch
                self._fail(parts, e)
                continue
            finally:
                if self._on_batch is not None:
                    self._on_batch(len(texts), time.perf_counter() - t0)
            at = 0
            for job, a, b in parts:
                if job.future.done():   # failed by an earlier batch of the same request
                    at += b - a
                    continue
                if job.rows is None:
                    job.rows = np.empty((len(job.texts), emb.shape[1]), np.float32)
                job.rows[a:b] = emb[at:at + b - a]
                job.tokens[a:b] = tokens[at:at + b - a]
                at += b - a
                job.filled += b - a
                if job.filled == len(job.texts):
                    try:
                        job.future.set_result((job.rows, job.tokens))
                    except InvalidStateError:   # close() failed it meanwhile (shutdown): nothing to deliver
                        pass

    def _fail(self, parts: list[tuple[_Job, int, int]], error: BaseException) -> None:
        for job, _, _ in parts:
            if not job.future.done():
                job.future.set_exception(error)
        # A request split across batches fails as a whole: drop what is left of it.
        with self._cond:
            failed = {id(job) for job, _, _ in parts}
            left = [j for j in self._jobs if id(j) in failed]
            for j in left:
                self._queued -= len(j.texts) - j.taken
            self._jobs = deque(j for j in self._jobs if id(j) not in failed)
