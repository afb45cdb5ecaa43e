"""Registers and stack of kernels as the shim's NVRTC builds them, for a
flattened source alone (rlx.runtime.shader_source.kernel_source output),
with and without --split-compile=0 (the shim passes it: the whole library
compiles on every core): kernel_resources.py reads the shim's cached
library, this isolates one header and one option in seconds.

    python3 benchmarks/gpu/nvrtc_resources.py fft_shared SOURCE.cu [...]"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import tempfile

from kernel_resources import res_usage  # benchmarks/gpu/kernel_resources.py

from rlx.runtime.shim import _cuda_options


def nvrtc() -> ctypes.CDLL:
    for d in _cuda_options().get("nvrtc", "").split(":") + ["/usr/local/cuda/lib64"]:
        for path in sorted(glob.glob(os.path.join(d, "libnvrtc.so*"))):
            if "builtins" not in path:
                return ctypes.CDLL(path)
    raise SystemExit("no libnvrtc")


def compile_cubin(lib: ctypes.CDLL, src: str, opts: list[str]) -> bytes:
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"rlx.cu", 0, None, None) == 0
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    if rc != 0:
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        raise SystemExit(f"nvrtc rc {rc}: {log.value.decode()[-2000:]}")
    size = ctypes.c_size_t()
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetCUBIN(prog, buf)
    return buf.raw


def main() -> None:
    name, sources = sys.argv[1], sys.argv[2:]
    lib = nvrtc()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    print(f"NVRTC {major.value}.{minor.value}")
    incs = [f"-I{d}" for d in _cuda_options().get("include_dir", "").split(":") if d]
    for path in sources:
        src = open(path).read()
        for split in (False, True):
            opts = ["--gpu-architecture=sm_90", "-std=c++17", *incs] + (["--split-compile=0"] if split else [])
            with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
                f.write(compile_cubin(lib, src, opts))
            usage = res_usage(f.name, [name])
            os.unlink(f.name)
            print(f"{os.path.basename(path)} split={int(split)}: {' '.join(u.strip() for u in usage)[:200]}")


if __name__ == "__main__":
    main()
