"""KERNEL_DEFINES for the H200 scripts: an A/B of a kernel's compile-time
switch (a ``#ifndef NAME`` default put in shaders/ for the experiment) in
one call, without a rebuild: ``KERNEL_DEFINES="NAME=0"`` puts ``#define
NAME 0`` in front of the kernel source this process compiles (the shim
caches libraries by their source, so each variant is compiled once).
Session 14 timed the split-K attention's early V rows this way.
Benchmark-only: rlx itself has no such switch."""

from __future__ import annotations

import os

from rlx.runtime import shader_source


def apply_kernel_defines() -> dict[str, str]:
    """Patch the kernel source per KERNEL_DEFINES ("NAME=VALUE ..."); the
    defines applied (empty when unset)."""
    defines = dict(item.split("=", 1) for item in os.environ.get("KERNEL_DEFINES", "").split())
    if defines:
        real = shader_source.kernel_source
        head = "".join(f"#define {name} {value}\n" for name, value in defines.items())

        def kernel_source(target: str, user_source: str | None = None) -> str:
            return head + real(target, user_source)

        shader_source.kernel_source = kernel_source
    return defines
