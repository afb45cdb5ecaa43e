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

NVCC = shutil.which("nvcc") or next((str(p) for p in (Path("/usr/local/cuda/bin/nvcc"),) if p.exists()), None)
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not installed: the CUDA compile check needs the toolkit")


ARCHS = ("sm_80", "sm_90")


@pytest.fixture(scope="module")
def ptx_compiles(tmp_path_factory):
    """Both architectures' nvcc runs started at once: each takes about two
    minutes on one core, and CI's machines have two."""
    out_dir = tmp_path_factory.mktemp("ptx")
    src = out_dir / "rlx_kernels.cu"
    src.write_text(kernel_source("cuda"))
    runs = {arch: (subprocess.Popen([NVCC, "--ptx", f"-arch={arch}", "-std=c++17", "-Werror", "all-warnings",
                                     str(src), "-o", str(out_dir / f"{arch}.ptx")],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
                   out_dir / f"{arch}.ptx") for arch in ARCHS}
    yield runs
    for proc, _ in runs.values():
        proc.kill()
        proc.communicate()


@needs_nvcc
@pytest.mark.parametrize("arch", ARCHS)
def test_all_kernels_compile_to_ptx(ptx_compiles, arch):
    proc, ptx_path = ptx_compiles[arch]
    _, stderr = proc.communicate()
    assert proc.returncode == 0, stderr
    ptx = ptx_path.read_text()
    # One entry per RLX_INSTANTIATE line: nothing silently dropped.
    assert ptx.count(".entry") == len(instantiations(kernel_source("cuda")))


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
