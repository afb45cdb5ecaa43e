"""The nvcc PTX compiles behind tests/runtime/test_cuda_compile.py. Each
takes about two minutes of a core; waited for when their tests come, they
held both of CI's two cores while nothing else ran. tests/conftest.py starts
them when collection ends, at the lowest CPU priority, so they compile on
whatever the rest of the suite leaves idle (most tests run on one thread),
and the tests collect them."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

NVCC = shutil.which("nvcc") or next((str(p) for p in (Path("/usr/local/cuda/bin/nvcc"),) if p.exists()), None)
ARCHS = ("sm_80", "sm_90")
# Compile-time switches each architecture's run sets, so that both arms of
# a switch are compiled without a third nvcc run: sm_80 stages the decode
# kernels' params in shared memory (RLX_PARAMS_STAGE, prelude/cuda.h; off
# by default), sm_90 compiles the defaults the library ships.
ARCH_DEFINES = {"sm_80": ("-DRLX_PARAMS_STAGE=1",), "sm_90": ()}

_runs: dict[str, tuple[subprocess.Popen, Path]] = {}
_dirs: list[str] = []


def start_once() -> dict[str, tuple[subprocess.Popen, Path]]:
    """Each architecture's nvcc run (started now unless it was already):
    arch -> (process, the PTX file it writes)."""
    if _runs or NVCC is None:
        return _runs
    from rlx.runtime.shader_source import kernel_source

    out_dir = Path(tempfile.mkdtemp(prefix="rlx-ptx-"))
    _dirs.append(str(out_dir))
    src = out_dir / "rlx_kernels.cu"
    src.write_text(kernel_source("cuda"))
    for arch in ARCHS:
        ptx = out_dir / f"{arch}.ptx"
        cmd = [NVCC, "--ptx", f"-arch={arch}", "-std=c++17", "-Werror", "all-warnings", *ARCH_DEFINES[arch],
               str(src), "-o", str(ptx)]
        _runs[arch] = (subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        preexec_fn=lambda: os.nice(19)), ptx)
    return _runs


_done: dict[str, tuple[int, str]] = {}


def finished(arch: str) -> tuple[int, str, Path]:
    """Wait for ``arch``'s run: (return code, stderr, the PTX file)."""
    proc, ptx = start_once()[arch]
    if arch not in _done:
        _, stderr = proc.communicate()
        _done[arch] = (proc.returncode, stderr)
    return (*_done[arch], ptx)


def stop() -> None:
    """Kill what still runs and remove the PTX (the session's end)."""
    for proc, _ in _runs.values():
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    _runs.clear()
    _done.clear()
    while _dirs:
        shutil.rmtree(_dirs.pop(), ignore_errors=True)
