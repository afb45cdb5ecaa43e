"""The host shim on ARM64, checked here without an ARM64 machine: built with a
cross compiler (the flags of setup.py's host shim, no -march: ARM64's NEON is
its baseline) and its built-in kernels run through the shim ABI under
qemu-user by tests/c/host_kernels_check.cpp, which compares them with
double-precision answers (NaN rules, GELU's tail, softmax's masked rows,
layernorm, argmax, the shim's own gemm). This checks correctness only: speed
on ARM64 cannot be measured under emulation. scripts/ensure_arm64_tools.sh
(run by scripts/test.sh) installs the tools."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import in_ci

ROOT = Path(__file__).resolve().parents[2]
CXX, QEMU = "aarch64-linux-gnu-g++", "qemu-aarch64"
SYSROOT = Path("/usr/aarch64-linux-gnu")


def _kernel_math_flags() -> list[str]:
    """setup.py's KERNEL_MATH_FLAGS, read from its source (importing it would build)."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "KERNEL_MATH_FLAGS":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no KERNEL_MATH_FLAGS")


@pytest.fixture(scope="module")
def tools() -> tuple[str, str]:
    cxx, qemu = shutil.which(CXX), shutil.which(QEMU)
    if not (cxx and qemu):
        msg = (f"{CXX} and {QEMU} are needed (scripts/ensure_arm64_tools.sh installs them with apt-get); "
               "without them the ARM64 host kernels are not checked (CI=true: a failure, not a skip)")
        if in_ci():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return cxx, qemu


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def test_host_kernels_on_arm64_under_qemu(tools, tmp_path):
    cxx, qemu = tools
    shim = tmp_path / "librlx_host.so"
    built = _run([cxx, "-O3", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden", *_kernel_math_flags(),
                  f"-I{ROOT / 'csrc'}", f"-I{ROOT / 'shaders'}", str(ROOT / "csrc/host/shim.cpp"),
                  str(ROOT / "csrc/host_kernels.cpp"), "-o", str(shim), "-ldl", "-pthread"])
    assert built.returncode == 0, built.stderr[-4000:]
    check = tmp_path / "host_kernels_check"
    built = _run([cxx, "-O1", "-std=c++17", f"-I{ROOT / 'csrc'}", str(ROOT / "tests/c/host_kernels_check.cpp"),
                  "-o", str(check), "-ldl"])
    assert built.returncode == 0, built.stderr[-4000:]
    # The NEON level (the default: the hand-written small-M kernel) and the
    # baseline one (isa=baseline: the portable gemm), each with every check.
    for options, level in (("", "[NEON kernels] [NEON small-M]"), ("isa=baseline", "[baseline kernels]")):
        ran = _run([qemu, "-L", str(SYSROOT), str(check), str(shim), options])
        assert ran.returncode == 0 and "0 failure(s)" in ran.stdout, ran.stdout + ran.stderr
        assert level in ran.stdout and "[ARM64:" in ran.stdout, ran.stdout
        assert ran.stdout.count("\nok") >= 10, ran.stdout
    ran = _run([qemu, "-L", str(SYSROOT), str(check), str(shim), "isa=avx2"])
    assert ran.returncode != 0 and "levels are baseline, neon" in ran.stderr, ran.stdout + ran.stderr


def test_the_neon_small_m_kernel_fails_when_planted_wrong(tools, tmp_path):
    """A NEON small-M kernel whose bf16 widening is wrong (a shift by 15) is
    caught by the bf16 check, so that check runs the NEON code."""
    cxx, qemu = tools
    csrc = tmp_path / "csrc"
    shutil.copytree(ROOT / "csrc", csrc)
    header = csrc / "host_small_m.h"
    text = header.read_text()
    assert "vshll_n_u16(vld1_u16(&p->bits), 16)" in text
    header.write_text(text.replace("vshll_n_u16(vld1_u16(&p->bits), 16)", "vshll_n_u16(vld1_u16(&p->bits), 15)"))
    shim, check = tmp_path / "librlx_host.so", tmp_path / "host_kernels_check"
    assert _run([cxx, "-O1", "-std=c++17", "-shared", "-fPIC", *_kernel_math_flags(), f"-I{csrc}",
                 f"-I{ROOT / 'shaders'}", str(csrc / "host/shim.cpp"), str(csrc / "host_kernels.cpp"),
                 "-o", str(shim), "-ldl", "-pthread"]).returncode == 0
    assert _run([cxx, "-O1", "-std=c++17", f"-I{csrc}", str(ROOT / "tests/c/host_kernels_check.cpp"),
                 "-o", str(check), "-ldl"]).returncode == 0
    ran = _run([qemu, "-L", str(SYSROOT), str(check), str(shim)])
    assert ran.returncode != 0 and "FAIL small-M gemm, f32 A against bf16" in ran.stdout, ran.stdout
    assert "ok   small-M gemm, f32\n" in ran.stdout, ran.stdout


def test_the_check_fails_on_a_wrong_kernel(tools, tmp_path):
    """The harness is not a test that cannot fail: a host shim whose GELU is
    planted wrong (gelu returns x) is caught."""
    cxx, qemu = tools
    bad_shaders = tmp_path / "shaders"
    shutil.copytree(ROOT / "shaders", bad_shaders)
    common = bad_shaders / "prelude" / "common.h"
    text = common.read_text()
    assert "RLX_INLINE float rlx_gelu_erf(float x) {" in text
    common.write_text(text.replace("RLX_INLINE float rlx_gelu_erf(float x) {",
                                   "RLX_INLINE float rlx_gelu_erf(float x) {\n    if (x < 100.0f) return x;"))
    shim, check = tmp_path / "librlx_host.so", tmp_path / "host_kernels_check"
    assert _run([cxx, "-O1", "-std=c++17", "-shared", "-fPIC", *_kernel_math_flags(), f"-I{ROOT / 'csrc'}",
                 f"-I{bad_shaders}", str(ROOT / "csrc/host/shim.cpp"), str(ROOT / "csrc/host_kernels.cpp"),
                 "-o", str(shim), "-ldl", "-pthread"]).returncode == 0
    assert _run([cxx, "-O1", "-std=c++17", f"-I{ROOT / 'csrc'}", str(ROOT / "tests/c/host_kernels_check.cpp"),
                 "-o", str(check), "-ldl"]).returncode == 0
    ran = _run([qemu, "-L", str(SYSROOT), str(check), str(shim)])
    assert ran.returncode != 0 and "FAIL unary_f32" in ran.stdout, ran.stdout
