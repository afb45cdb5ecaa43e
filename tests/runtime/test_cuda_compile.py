"""Every shader compiles through the CUDA prelude with `nvcc --ptx`, so a
kernel that would not compile for the GPU fails CI even without a GPU. The
same check covers the kernels' f16 instantiations and the registered user
kernel example of docs/kernels.md."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rlx.runtime.shader_source import instantiations, kernel_source

from .ptx_runs import ARCHS, NVCC, RUN_MARKS, finished

needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not installed: the CUDA compile check needs the toolkit")
# Each architecture with the mark that starts its nvcc run beside the suite.
ARCH_RUNS = [pytest.param(arch, marks=RUN_MARKS[arch]) for arch in ARCHS] if NVCC else list(ARCHS)


@needs_nvcc
@pytest.mark.parametrize("arch", ARCH_RUNS)
def test_all_kernels_compile_to_ptx(arch):
    """Each architecture's nvcc run (tests/runtime/ptx_runs.py: run beside
    the suite from the end of collection, or now)."""
    returncode, stderr, ptx_path = finished(arch)
    assert returncode == 0, stderr
    ptx = ptx_path.read_text()
    # One entry per RLX_INSTANTIATE line: nothing silently dropped.
    assert ptx.count(".entry") == len(instantiations(kernel_source("cuda")))


# The static shared memory a CUDA block may declare (cuModuleLoad refuses a
# kernel past it, and with it the whole library: session 46's staged params
# took gemv1i 80 bytes past it, which the PTX alone never reports).
STATIC_SHARED_LIMIT = 48 * 1024


def static_shared_bytes(ptx: str) -> dict[str, int]:
    """Each entry's static shared memory, each array at its alignment: the
    `.shared` arrays declared in its body (its own and its inlined
    helpers') and the module-scope ones its body names (a helper's
    function-scope `__shared__` array, which nvcc emits at module scope)."""
    import re

    decl = r"\.shared\s+\.align\s+(\d+)\s+\.\w+\s+([\w$.]+)\[(\d+)\];"
    module = {name: (int(align), int(size)) for align, name, size in re.findall(r"^" + decl, ptx, re.M)}
    out: dict[str, int] = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\((.*?)\n\}", ptx, re.S):
        body = m.group(2)
        arrays = [(int(align), int(size)) for align, _, size in re.findall(r"^\s+" + decl, body, re.M)]
        arrays += [module[name] for name in module if name in body]
        total = 0
        for align, size in arrays:
            total = -(-total // align) * align + size
        out[m.group(1)] = total
    return out


def test_static_shared_bytes_reads_ptx():
    ptx = """
.shared .align 16 .b8 _ZZ11helper_rawvE3raw[1024];
.shared .align 4 .b8 _ZZ6unusedvE3raw[4096];

.visible .entry k1(
\t.param .u64 k1_param_0
)
{
\t.shared .align 4 .b8 _ZZ6helperE3buf[256];
\t.shared .align 16 .b8 _ZZ2k1E2sp[16];
\t.shared .align 4 .b8 _ZZ2k1E3big[4000];
\tld.shared.u32 %r1, [_ZZ11helper_rawvE3raw+8];
\tret;
}
.visible .entry k2(
)
{
\tret;
}
"""
    assert static_shared_bytes(ptx) == {"k1": 256 + 16 + 4000 + 1024, "k2": 0}


@needs_nvcc
@pytest.mark.parametrize("arch", ARCH_RUNS)
def test_every_kernel_fits_the_static_shared_memory_of_a_block(arch):
    returncode, stderr, ptx_path = finished(arch)
    assert returncode == 0, stderr
    sizes = static_shared_bytes(ptx_path.read_text())
    assert len(sizes) == len(instantiations(kernel_source("cuda")))
    over = {name: size for name, size in sizes.items() if size > STATIC_SHARED_LIMIT}
    assert not over, over


@needs_nvcc
@pytest.mark.parametrize("arch", [ARCH_RUNS[ARCHS.index("sm_90")]])
def test_params_taken_by_value_stay_in_param_space(arch):
    """sm_90 compiles the library's default, params by value
    (`__grid_constant__ rlx_params_value`): a kernel reads the struct's
    fields where the launch put them. A copy into local memory (a helper
    taking the struct by value, a non-const use) would bring back the
    memory round trips by-value params remove; the library uses no local
    memory otherwise, so any local load or store is one."""
    returncode, stderr, ptx_path = finished(arch)
    assert returncode == 0, stderr
    ptx = ptx_path.read_text()
    assert ".param .align 16" in ptx              # the structs travel as 16-byte aligned params
    local = [line.strip() for line in ptx.splitlines() if "ld.local" in line or "st.local" in line]
    assert not local, local[:5]


def test_instantiation_lines_use_the_spellings_the_cuda_shim_reads():
    """The CUDA shim maps host names to NVRTC name expressions by reading
    `RLX_INSTANTIATE(` / `RLX_INSTANTIATE2(` lines (csrc/cuda/device.inc.c,
    parse_instantiations): a kernel instantiated through any other spelling
    compiles but has no name there. Conditional lines go inside #if blocks."""
    import re

    odd = [line for line in kernel_source("cuda").splitlines()
           if line.lstrip().startswith("RLX_INSTANTIATE") and not re.match(r"\s*RLX_INSTANTIATE2?\(", line)]
    assert not odd, odd[:5]


def test_every_kernel_instantiates_f32_and_f16():
    names = {host for host, _ in instantiations(kernel_source("cpu"))}
    for host in names:
        if host.endswith("_f32"):
            assert host[:-4] + "_f16" in names, f"{host} has no f16 sibling"


CUDA_H = next((p for p in (Path("/usr/local/cuda/include/cuda.h"),) if p.exists()), None)
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(CUDA_H is None or shutil.which("gcc") is None, reason="needs the CUDA toolkit's cuda.h and gcc")
def test_shim_launch_structs_match_cuda_h(tmp_path):
    """The CUDA shim declares cuLaunchKernelEx's config itself (it builds
    without the toolkit): csrc/cuda_launch.h must match cuda.h's layout."""
    exe = tmp_path / "layout_check"
    build = subprocess.run(["gcc", f"-I{CUDA_H.parent}", f"-I{ROOT / 'csrc'}",
                            str(ROOT / "benchmarks/gpu/launch_layout_check.c"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0 and "matches" in run.stdout, run.stdout


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_cuda_shim_builds_with_phase_times(tmp_path):
    """benchmarks/gpu/floor_phases.sh builds the shim with
    -DRLX_CUDA_PHASE_TIMES; keep that variant compiling without warnings."""
    out = subprocess.run(["gcc", "-O2", "-std=gnu11", "-Wall", "-Werror", "-fPIC", "-shared", "-DRLX_CUDA_PHASE_TIMES",
                          f"-I{ROOT / 'csrc'}", str(ROOT / "csrc/cuda/shim.c"), "-o", str(tmp_path / "shim.so"),
                          "-ldl", "-pthread"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
