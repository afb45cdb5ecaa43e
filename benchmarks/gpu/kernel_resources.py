"""Registers, stack and spills of the kernels as NVRTC built them for this
GPU (the shim's disk cache, <rlx.env.cache_dir()>/cuda-kernels, format in
csrc/cuda/device.inc.c: a "RLXCUDA1 cubin N" header, N name lines, then
the cubin), beside what `nvcc -cubin -Xptxas
-v` gives for the same source: session 19's Nsight Compute counted local-
memory spill requests in fft_shared where nvcc reported no stack.

    HEADERS="fft.h" python3 benchmarks/gpu/kernel_resources.py fft_shared

nvcc compiles the prelude and HEADERS (shaders/, default fft.h) alone, a
few seconds where the whole library takes minutes. Run after any cuda
compile has filled the cache (common.sh's warm-up)."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import tempfile

from rlx import env
from rlx.runtime.shader_source import kernel_source


def cached_cubin() -> str | None:
    """The cache's largest cubin entry (the built-in library), written out as a .cubin."""
    root = str(env.cache_dir() / "cuda-kernels")
    for path in sorted(glob.glob(f"{root}/*"), key=os.path.getsize, reverse=True):
        data = open(path, "rb").read()
        head = re.match(rb"RLXCUDA1 cubin (\d+)\n", data)
        if not head:
            continue
        at = head.end()
        for _ in range(int(head.group(1))):
            at = data.index(b"\n", at) + 1
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as cubin:
            cubin.write(data[at:])
        return cubin.name
    return None


def res_usage(cubin: str, names: list[str]) -> list[str]:
    """cuobjdump -res-usage lines (function name, then its resources) for kernels matching names."""
    text = subprocess.run(["cuobjdump", "-res-usage", cubin], capture_output=True, text=True).stdout
    lines, keep = [], False
    for line in text.splitlines():
        if line.strip().startswith("Function"):
            keep = any(n in line for n in names)
            if keep:
                lines.append(line.strip()[:140])
        elif keep and "REG" in line:
            lines.append("    " + line.strip())
    return lines


def nvcc_usage(names: list[str], arch: str) -> list[str]:
    """ptxas -v lines for the same kernels from nvcc on the flattened source."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "rlx.cu")
        headers = os.environ.get("HEADERS", "fft.h").split()
        open(src, "w").write(kernel_source("cuda", "".join(f'#include "{h}"\n' for h in headers)))
        r = subprocess.run(["nvcc", "-cubin", f"-arch={arch}", "-std=c++17", "-Xptxas", "-v", src, "-o",
                            os.path.join(tmp, "rlx.cubin")], capture_output=True, text=True)
    lines, keep = [], False
    for line in r.stderr.splitlines():
        if "Compiling entry function" in line or "Function properties for" in line:
            keep = any(n in line for n in names)
        if keep and ("stack frame" in line or "Used" in line or "Function properties" in line):
            lines.append(line.strip()[:160])
    return lines


def main() -> None:
    names = sys.argv[1:] or ["fft_shared"]
    arch = os.environ.get("ARCH", "sm_90")
    cubin = cached_cubin()
    if not cubin:
        print("== no cubin in", env.cache_dir() / "cuda-kernels", "(a PTX entry: the driver JITs it)")
    if cubin:
        print("== NVRTC (the shim's cache):", cubin)
        print("\n".join(res_usage(cubin, names)))
        os.unlink(cubin)
    print("== nvcc -Xptxas -v:")
    print("\n".join(nvcc_usage(names, arch)))


if __name__ == "__main__":
    main()
