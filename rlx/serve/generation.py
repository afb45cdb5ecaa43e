"""Text generation requests: a bounded FIFO queue and one worker thread that owns the LLM.

An ``rlx.models.llm.LLM`` holds one KV cache, so it generates for one
request at a time; there is no batched decode executable yet to run several
sequences in one step (continuous batching). Requests therefore wait in a
documented queue: ``submit`` appends a job (``QueueFullError`` once
``max_queue`` jobs wait, not counting the running one), the worker takes
them in arrival order and streams each job's text back to the event loop
that submitted it (``GenerationJob.events``, an ``asyncio.Queue``).

A client that goes away calls ``cancel``: a waiting job leaves the queue at
once (its slot is free for the next request), a running one stops at the
next piece of text the LLM yields (a token, or the few tokens held back
while they could still start a stop string) and the worker moves on.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlx.arg_types import is_integer
from rlx.errors import ConfigError
from rlx.serve.limits import BatcherClosedError, QueueFullError

# Per LLM.stats.finish_reason: what OpenAI's finish_reason calls it.
OPENAI_FINISH = {"eos": "stop", "stop": "stop", "length": "length"}


@dataclass(frozen=True)
class GenerationResult:
    """How a finished job ended: OpenAI's finish_reason ("stop" / "length")
    and the token counts of ``usage``."""

    finish_reason: str
    prompt_tokens: int
    completion_tokens: int


class GenerationJob:
    """One request's prompt (token ids, BOS included) and ``LLM.generate``
    keyword arguments. Its ``events`` receive ("text", str) pieces, then
    ("done", GenerationResult) or ("error", exception)."""

    def __init__(self, tokens: Sequence[int], options: Mapping[str, Any], loop: asyncio.AbstractEventLoop) -> None:
        self.tokens = list(tokens)
        self.options = dict(options)
        self.events: asyncio.Queue = asyncio.Queue()
        self.cancelled = threading.Event()
        self.arrived = time.monotonic()
        self.started: float | None = None   # when the worker took it
        self._loop = loop

    def push(self, kind: str, value: Any) -> None:
        """Called on the worker thread; the event loop may be gone at shutdown."""
        try:
            self._loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))
        except RuntimeError:   # the loop is closed: nobody is listening
            pass


# on_finish(job, outcome, result, seconds generating, seconds to the first text or None); outcome is the
# finish_reason, "cancelled" or "error"; result is None for an error and for a job dropped before it ran.
FinishHook = Callable[[GenerationJob, str, "GenerationResult | None", float, "float | None"], None]


class GenerationQueue:
    """Runs ``llm.generate`` for one job at a time, in submission order, on its own thread."""

    def __init__(self, llm: Any, max_queue: int = 64, on_finish: FinishHook | None = None) -> None:
        if not is_integer(max_queue) or max_queue < 1:
            raise ConfigError(f"max_queue must be an integer >= 1, got {max_queue!r}")
        self.llm = llm
        self.max_queue = max_queue
        self._on_finish = on_finish
        self._jobs: deque[GenerationJob] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._running: GenerationJob | None = None
        self._thread: threading.Thread | None = None

    @property
    def queue_depth(self) -> int:
        """Jobs waiting (not counting the one generating)."""
        return len(self._jobs)

    @property
    def busy(self) -> bool:
        return self._running is not None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> GenerationQueue:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rlx-serve-generation", daemon=True)
                self._thread.start()
        return self

    def submit(self, job: GenerationJob) -> None:
        with self._cond:
            if self._closed:
                raise BatcherClosedError("the server is shutting down")
            if len(self._jobs) >= self.max_queue:
                raise QueueFullError(f"{len(self._jobs)} generations are waiting (at most {self.max_queue}); "
                                     "retry later")
            self._jobs.append(job)
            self._cond.notify_all()

    def cancel(self, job: GenerationJob) -> None:
        """The client is gone: drop the job if it still waits, else stop it at its next piece."""
        job.cancelled.set()
        with self._cond:
            try:
                self._jobs.remove(job)
            except ValueError:   # running or finished
                return
        self._finished(job, "cancelled", None, 0.0, None)

    def close(self, timeout: float | None = 5.0) -> None:
        """Stop the worker: waiting jobs fail with BatcherClosedError, the running one stops."""
        with self._cond:
            self._closed = True
            pending = list(self._jobs)
            self._jobs.clear()
            running = self._running
            self._cond.notify_all()
        if running is not None:
            running.cancelled.set()
        for job in pending:
            job.push("error", BatcherClosedError("the server is shutting down"))
        if self._thread is not None:
            self._thread.join(timeout)

    def _next(self) -> GenerationJob | None:
        with self._cond:
            while not self._jobs and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            job = self._jobs.popleft()
            self._running = job
            return job

    def _run(self) -> None:
        while True:
            job = self._next()
            if job is None:
                return
            try:
                self._generate(job)
            finally:
                with self._cond:
                    self._running = None

    def _generate(self, job: GenerationJob) -> None:
        job.started = time.monotonic()
        first: float | None = None
        t0 = time.perf_counter()
        stream = None
        try:
            stream = self.llm.generate(job.tokens, **job.options)
            for piece in stream:
                if job.cancelled.is_set():
                    break
                if first is None:
                    first = time.monotonic() - job.arrived
                job.push("text", piece)
        except Exception as e:   # noqa: BLE001 - one generation's failure must not stop the worker
            job.push("error", e)
            self._finished(job, "error", None, time.perf_counter() - t0, first)
            return
        finally:
            if stream is not None:
                stream.close()   # a generation left early releases its frame (and the LLM) here
        seconds = time.perf_counter() - t0
        stats = self.llm.stats
        if job.cancelled.is_set():
            partial = GenerationResult("cancelled", stats.prompt_tokens, stats.generated_tokens)
            self._finished(job, "cancelled", partial, seconds, first)
            return
        result = GenerationResult(OPENAI_FINISH.get(stats.finish_reason, "stop"), stats.prompt_tokens,
                                  stats.generated_tokens)
        job.push("done", result)
        self._finished(job, result.finish_reason, result, seconds, first)

    def _finished(self, job: GenerationJob, outcome: str, result: GenerationResult | None, seconds: float,
                  first: float | None) -> None:
        if self._on_finish is not None:
            self._on_finish(job, outcome, result, seconds, first)
