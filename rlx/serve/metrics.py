"""Server metrics in the Prometheus text exposition format (version 0.0.4).

Written by hand rather than with prometheus_client: a dozen metric families
do not justify another dependency. Updated from the event loop, the batcher
thread and the generation thread, hence the lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Histogram:
    """Cumulative buckets, sum and count, as Prometheus histograms are."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(sorted(buckets))
        self.counts = [0] * len(self.buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        for i, edge in enumerate(self.buckets):
            if value <= edge:
                self.counts[i] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str, labels: str = "") -> list[str]:
        sep = "," if labels else ""
        out = [f'{name}_bucket{{{labels}{sep}le="{_num(e)}"}} {c}' for e, c in zip(self.buckets, self.counts)]
        out.append(f'{name}_bucket{{{labels}{sep}le="+Inf"}} {self.count}')
        wrap = f"{{{labels}}}" if labels else ""
        out += [f"{name}_sum{wrap} {_num(self.sum)}", f"{name}_count{wrap} {self.count}"]
        return out


GENERATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class Metrics:
    """Requests by route and status, request latency, batch sizes, batch
    time, queue depths; generations by outcome, their tokens, time waiting,
    time generating and time to the first text."""

    def __init__(self, max_batch: int, queue_depth: Callable[[], int] = lambda: 0,
                 generation_queue_depth: Callable[[], int] = lambda: 0) -> None:
        self._lock = threading.Lock()
        self._queue_depth = queue_depth
        self._generation_queue_depth = generation_queue_depth
        self.generations: dict[str, int] = {}
        self.prompt_tokens = 0
        self.generated_tokens = 0
        self.generation_wait = Histogram(GENERATION_BUCKETS)
        self.generation_seconds = Histogram(GENERATION_BUCKETS)
        self.first_text_seconds = Histogram(GENERATION_BUCKETS)
        self.requests: dict[tuple[str, int], int] = {}
        self.latency: dict[str, Histogram] = {}
        edges, b = [], 1
        while b < max_batch:
            edges.append(b)
            b *= 2
        self.batch_size = Histogram(edges + [max_batch])
        self.batch_seconds = Histogram(LATENCY_BUCKETS)
        self.texts = 0

    def observe_request(self, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(route, status)] = self.requests.get((route, status), 0) + 1
            self.latency.setdefault(route, Histogram(LATENCY_BUCKETS)).observe(seconds)

    def observe_batch(self, size: int, seconds: float) -> None:
        with self._lock:
            self.batch_size.observe(size)
            self.batch_seconds.observe(seconds)
            self.texts += size

    def observe_generation(self, outcome: str, prompt_tokens: int, generated_tokens: int, waited: float | None,
                           seconds: float, first_text: float | None) -> None:
        """One generation ended: outcome is its finish_reason, "cancelled"
        or "error"; waited is None for a job dropped before it started."""
        with self._lock:
            self.generations[outcome] = self.generations.get(outcome, 0) + 1
            self.prompt_tokens += prompt_tokens
            self.generated_tokens += generated_tokens
            if waited is not None:
                self.generation_wait.observe(waited)
                self.generation_seconds.observe(seconds)
            if first_text is not None:
                self.first_text_seconds.observe(first_text)

    def render(self) -> str:
        with self._lock:
            lines = ["# HELP rlx_serve_requests_total HTTP requests by route and status.",
                     "# TYPE rlx_serve_requests_total counter"]
            for (route, status), n in sorted(self.requests.items()):
                lines.append(f'rlx_serve_requests_total{{route="{_esc(route)}",status="{status}"}} {n}')
            lines += ["# HELP rlx_serve_request_seconds Request latency by route.",
                      "# TYPE rlx_serve_request_seconds histogram"]
            for route, h in sorted(self.latency.items()):
                lines += h.lines("rlx_serve_request_seconds", f'route="{_esc(route)}"')
            lines += ["# HELP rlx_serve_queue_depth Texts waiting for a batch.",
                      "# TYPE rlx_serve_queue_depth gauge", f"rlx_serve_queue_depth {self._queue_depth()}",
                      "# HELP rlx_serve_batch_size Texts per encode call.",
                      "# TYPE rlx_serve_batch_size histogram", *self.batch_size.lines("rlx_serve_batch_size"),
                      "# HELP rlx_serve_batch_seconds Time of one encode call.",
                      "# TYPE rlx_serve_batch_seconds histogram",
                      *self.batch_seconds.lines("rlx_serve_batch_seconds"),
                      "# HELP rlx_serve_texts_total Texts embedded.", "# TYPE rlx_serve_texts_total counter",
                      f"rlx_serve_texts_total {self.texts}",
                      "# HELP rlx_serve_generations_total Generations by outcome (stop, length, cancelled, error).",
                      "# TYPE rlx_serve_generations_total counter"]
            for outcome, n in sorted(self.generations.items()):
                lines.append(f'rlx_serve_generations_total{{outcome="{_esc(outcome)}"}} {n}')
            lines += ["# HELP rlx_serve_generation_queue_depth Generations waiting for the LLM.",
                      "# TYPE rlx_serve_generation_queue_depth gauge",
                      f"rlx_serve_generation_queue_depth {self._generation_queue_depth()}",
                      "# HELP rlx_serve_prompt_tokens_total Prompt tokens of generations run (finished or stopped).",
                      "# TYPE rlx_serve_prompt_tokens_total counter",
                      f"rlx_serve_prompt_tokens_total {self.prompt_tokens}",
                      "# HELP rlx_serve_generated_tokens_total Tokens generated (finished or stopped).",
                      "# TYPE rlx_serve_generated_tokens_total counter",
                      f"rlx_serve_generated_tokens_total {self.generated_tokens}",
                      "# HELP rlx_serve_generation_wait_seconds Time a generation waited in the queue.",
                      "# TYPE rlx_serve_generation_wait_seconds histogram",
                      *self.generation_wait.lines("rlx_serve_generation_wait_seconds"),
                      "# HELP rlx_serve_generation_seconds Time generating (prefill and decode) per request.",
                      "# TYPE rlx_serve_generation_seconds histogram",
                      *self.generation_seconds.lines("rlx_serve_generation_seconds"),
                      "# HELP rlx_serve_first_text_seconds Time from arrival to the first text (queue included).",
                      "# TYPE rlx_serve_first_text_seconds histogram",
                      *self.first_text_seconds.lines("rlx_serve_first_text_seconds")]
        return "\n".join(lines) + "\n"


def _num(x: float) -> str:
    return repr(float(x)) if not float(x).is_integer() else str(int(x)) if abs(x) < 1e15 else repr(float(x))


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
