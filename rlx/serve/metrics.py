"""Server metrics in the Prometheus text exposition format (version 0.0.4).

Written by hand rather than with prometheus_client: four metric families do
not justify another dependency. Updated from the event loop and the batcher
thread, hence the lock.
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


class Metrics:
    """Requests by route and status, request latency, batch sizes, batch time, queue depth."""

    def __init__(self, max_batch: int, queue_depth: Callable[[], int] = lambda: 0) -> None:
        self._lock = threading.Lock()
        self._queue_depth = queue_depth
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
                      f"rlx_serve_texts_total {self.texts}"]
        return "\n".join(lines) + "\n"


def _num(x: float) -> str:
    return repr(float(x)) if not float(x).is_integer() else str(int(x)) if abs(x) < 1e15 else repr(float(x))


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
