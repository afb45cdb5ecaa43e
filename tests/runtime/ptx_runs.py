"""The nvcc PTX compiles behind tests/runtime/test_cuda_compile.py, run
beside the suite (background_runs.py says why): ``finished(arch)`` gives
one's return code, stderr and PTX file."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from . import background_runs

NVCC = shutil.which("nvcc") or next((str(p) for p in (Path("/usr/local/cuda/bin/nvcc"),) if p.exists()), None)
ARCHS = ("sm_80", "sm_90")
# Compile-time switches each architecture's run sets, so that both arms of
# a switch are compiled without a third nvcc run: sm_80 takes params
# through a pointer (RLX_PARAMS_BY_VALUE=0, what the shim compiles where the
# driver cannot report parameter sizes); sm_90 compiles the defaults the
# library ships (params by value).
ARCH_DEFINES = {"sm_80": ("-DRLX_PARAMS_BY_VALUE=0",), "sm_90": ()}

_dirs: list[Path] = []


def _source() -> Path:
    """The kernel library's CUDA source, written once for both runs."""
    if not _dirs:
        from rlx.runtime.shader_source import kernel_source

        out_dir = Path(tempfile.mkdtemp(prefix="rlx-ptx-"))
        (out_dir / "rlx_kernels.cu").write_text(kernel_source("cuda"))
        _dirs.append(out_dir)
    return _dirs[0] / "rlx_kernels.cu"


def _ptx(arch: str) -> Path:
    return _source().with_name(f"{arch}.ptx")


# NVVM's optimizer at -O0: the front end parses, type-checks, instantiates
# and warns exactly as at -O3, and each run takes ~30 s of a core instead of
# ~140 (session 47, the 356 entries at sm_90). Each entry's static shared
# memory is the same or a few bytes more (two attention_split_merge
# instantiations: 8,836 against 8,832), so the size check stays on the safe
# side. The optimized build is what the CUDA shim's NVRTC makes on a GPU.
FAST_NVVM = ("-Xcicc", "-O0")


def _argv(arch: str):
    return lambda: [NVCC, "--ptx", f"-arch={arch}", "-std=c++17", "-Werror", "all-warnings", *FAST_NVVM,
                    *ARCH_DEFINES[arch], str(_source()), "-o", str(_ptx(arch))]


# The marks tying each architecture's run to the tests that read its PTX.
RUN_MARKS = {arch: background_runs.declare(f"ptx-{arch}", _argv(arch), timeout=900) for arch in ARCHS}


def finished(arch: str) -> tuple[int | None, str, Path]:
    """Wait for ``arch``'s run: (return code, stderr, the PTX file)."""
    ran = background_runs.result(f"ptx-{arch}")
    return ran.returncode, ran.output_tail() if ran.returncode is None else ran.stderr, _ptx(arch)


def remove_files() -> None:
    """Remove the source and the PTX (the session's end)."""
    while _dirs:
        shutil.rmtree(_dirs.pop(), ignore_errors=True)
