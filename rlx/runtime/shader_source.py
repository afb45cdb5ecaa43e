"""Kernel source text for a target, flattened into one string.

Metal's newLibraryWithSource and NVRTC compile a string with no include
path of ours, so the prelude, the common helpers and every kernel file are
inlined here, above the shim; system headers (<metal_stdlib>,
<cuda_fp16.h>) are left for the target compiler. The host device compiles
its built-in kernels at build time and only uses this for inspection and
for user kernels."""

from __future__ import annotations

import re
from pathlib import Path

from rlx.errors import RlxError

TARGETS = ("cpu", "cuda", "metal")
_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)
_INSTANTIATE = re.compile(r"^\s*RLX_INSTANTIATE(2?)\(([^)]*)\)", re.M)
# The host-only instantiations (shaders/prelude/cpu.h RLX_HOST_INSTANTIATE2),
# which the CUDA shim's scan must not see.
_HOST_INSTANTIATE = re.compile(r"^\s*RLX_HOST_INSTANTIATE(2)\(([^)]*)\)", re.M)


def shader_dir() -> Path:
    """rlx/shaders (copied into the package by setup.py) or <repo>/shaders."""
    here = Path(__file__).resolve().parent.parent
    installed = here / "shaders"
    return installed if installed.is_dir() else here.parent / "shaders"


def _flatten(path: Path, root: Path, seen: set[Path]) -> str:
    path = path.resolve()
    if path in seen:
        return ""          # every header here is include-once
    seen.add(path)
    text = path.read_text()

    def include(match: re.Match) -> str:
        name = match.group(1)
        for base in (path.parent, root, root / "prelude"):
            candidate = base / name
            if candidate.is_file():
                return f"// ---- {name}\n" + _flatten(candidate, root, seen)
        raise RlxError(f"{path.name}: #include \"{name}\" not found under {root}")

    return _LOCAL_INCLUDE.sub(include, text)


def kernel_source(target: str, user_source: str | None = None) -> str:
    """The whole source a target compiles: prelude + built-in kernels, or
    prelude + user_source for a custom kernel library."""
    if target not in TARGETS:
        raise RlxError(f"unknown shader target {target!r}: expected one of {', '.join(TARGETS)}")
    root = shader_dir()
    seen: set[Path] = set()
    prelude = _flatten(root / "prelude" / f"{target}.h", root, seen)
    if user_source is None:
        body = _flatten(root / "all.h", root, seen)
    else:
        body = _LOCAL_INCLUDE.sub(lambda m: _flatten(root / m.group(1), root, seen), user_source)
    return f"// rlx kernels for target '{target}' (generated; edit shaders/ instead)\n{prelude}\n{body}"


def instantiations(source: str, host_only: bool = False) -> list[tuple[str, str]]:
    """(host name, C++ name expression) for every RLX_INSTANTIATE line, e.g.
    ("binary_f32", "binary<float>"): what NVRTC's name expressions need.
    host_only: also the RLX_HOST_INSTANTIATE2 lines (the host's own kernels,
    inside #ifdef RLX_TARGET_CPU)."""
    out = []
    found = _INSTANTIATE.findall(source) + (_HOST_INSTANTIATE.findall(source) if host_only else [])
    for two, args in found:
        parts = [p.strip() for p in args.split(",")]
        if (two and len(parts) != 4) or (not two and len(parts) != 3):
            continue  # the macro definitions themselves
        kernel, types, host = parts[0], parts[1:-1], parts[-1]
        out.append((host, f"{kernel}<{', '.join(types)}>"))
    return out
