"""Fixtures of the op-family tests (the device under test, rng and
assert_matches_reference come from tests/conftest.py)."""

from __future__ import annotations

import pytest

from rlx.lowering import attention as lowering_attention

from .helpers import group_threads_harness, remove_group_threads_harness


@pytest.fixture
def fused_attention_kernel(monkeypatch):
    """The attention and rope tests check the fused attention kernel itself
    (and that it reads views without copies), so the CPU's gemm path stays
    off there; test_attention.py has its own tests of that path."""
    monkeypatch.setattr(lowering_attention, "GEMM_PATH_MIN_TOKENS", 10**9)
    monkeypatch.setattr(lowering_attention, "GEMM_PATH_MIN_TOKENS_CPU", 10**9)
    # ... and so does the split-K decode path (GPUs take it for few rows);
    # test_attention.py's split tests turn it on at chosen chunk sizes.
    monkeypatch.setattr(lowering_attention, "split_keys", lambda lw, rows, tk: 0)
    monkeypatch.setattr(lowering_attention, "gqa_split_keys", lambda lw, b, tq, hq, hkv, tk: 0)


@pytest.fixture(scope="session")
def group_threads_lib():
    """tests/c/group_threads.cpp built once for every group-thread suite
    (splat, norm, FFT); each suite declares the functions it calls."""
    yield group_threads_harness()   # built beside the suite (helpers.GROUP_THREADS_MARK)
    remove_group_threads_harness()
