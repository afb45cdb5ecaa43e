"""Every instruction-set variant of the host kernels this CPU runs passes the
kernel suites: RLX_HOST_ISA forces each level in a child pytest over
tests/ops (the kernels against the reference on odd shapes, f32 and f16).
The build compiles the kernels once per level (csrc/host_kernels_<isa>.cpp)
and the shim takes the best the CPU has (csrc/host_cpu.h); the default run
of the suite covers that best level."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlx.runtime import shim

ROOT = Path(__file__).resolve().parents[2]
LEVEL_NAMES = {"baseline": "[baseline kernels]", "avx2": "[AVX2 kernels]", "avx512": "[AVX-512 kernels]"}


def _best_level() -> str:
    name = shim.open_device("host", 0).info.name
    return next((level for level, mark in LEVEL_NAMES.items() if mark in name), "baseline")


def test_the_device_names_its_level_and_the_env_var_caps_it():
    best = _best_level()
    order = list(LEVEL_NAMES)
    for level in order[: order.index(best) + 1]:
        dev = shim.Device("host", 0, options_override={"isa": level})
        assert LEVEL_NAMES[level] in dev.info.name, dev.info.name
        assert ("[AVX-512 small-M]" in dev.info.name) == (level == "avx512"), dev.info.name
    with pytest.raises(Exception, match="isa"):
        shim.Device("host", 0, options_override={"isa": "sse9"})


@pytest.mark.parametrize("level", ["baseline", "avx2"])
def test_kernel_suites_pass_at_a_forced_lower_level(level):
    order = list(LEVEL_NAMES)
    if order.index(level) >= order.index(_best_level()):
        pytest.skip(f"this CPU's best level is {_best_level()}: the default run covers it")
    env = dict(os.environ, RLX_HOST_ISA=level, RLX_CALIBRATE="0")
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/ops"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
