"""Starting ``python -m rlx serve`` as a real process on 127.0.0.1 for the
server tests (tests/test_serve.py, tests/test_serve_generation.py), and
the check of an OpenAI-style error answer they share."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_server(flags: Sequence[str], startup_s: float = 120) -> Iterator[str]:
    """``rlx serve`` with ``flags`` on a free port; yields its base URL once
    /health answers 200, and stops it afterwards."""
    import httpx

    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    cmd = [sys.executable, "-m", "rlx", "serve", "--host", "127.0.0.1", "--port", str(port), *flags]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + startup_s
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"rlx serve exited with {proc.returncode}:\n{proc.stdout.read()}")
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"rlx serve did not answer /health within {startup_s:.0f} s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def api_error(r: httpx.Response, status: int, code: str | None = None) -> dict:
    """The response's OpenAI-style error object, after checking its status,
    its message and type, and (given) its code."""
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert isinstance(err["message"], str) and err["message"] and isinstance(err["type"], str)
    if code is not None:
        assert err["code"] == code
    return err
