"""csrc/parallel_memcpy.h, the CUDA shim's multi-threaded copy into and out
of pinned staging: built and run as a small C program (the shim itself needs
a GPU), with workers forced on so the two-core CI machine runs them too."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_parallel_copy_matches_memcpy(tmp_path):
    exe = tmp_path / "pmc_check"
    build = subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-fsanitize=thread", f"-I{ROOT / 'csrc'}",
                            str(ROOT / "tests/c/parallel_memcpy_check.c"), "-o", str(exe), "-pthread"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stdout + run.stderr
