"""rlx: an ML graph compiler and runtime for Apple GPUs, NVIDIA GPUs and the CPU.

Build a graph with ``rlx.Graph``, compile it with ``rlx.compile(graph,
device="cpu")`` and call ``run`` on the executable. See README.md.
"""

from __future__ import annotations

from typing import Any

from rlx.errors import (
    CapacityError,
    ConfigError,
    DeviceError,
    DeviceUnavailableError,
    DTypeError,
    GraphError,
    InputError,
    KernelCompileError,
    MemoryPlanError,
    ModelLoadError,
    ParameterError,
    RlxError,
    ScheduleError,
    ShapeError,
    UnsupportedOpError,
    UnsupportedPrecisionError,
)

__version__ = "0.1.0"

# The graph API and the runtime are imported on first use, so `import rlx`
# stays cheap and `rlx.errors` / `rlx.env` never pull in the compiled core.
_LAZY = {
    "Graph": ("rlx.ir", "Graph"),
    "DType": ("rlx.ir", "DType"),
    "f32": ("rlx.ir", "f32"),
    "f16": ("rlx.ir", "f16"),
    "f8e4m3": ("rlx.ir", "f8e4m3"),
    "f8e5m2": ("rlx.ir", "f8e5m2"),
    "i32": ("rlx.ir", "i32"),
    "i64": ("rlx.ir", "i64"),
    "compile": ("rlx.api", "compile"),
    "Executable": ("rlx.runtime.executable", "Executable"),
    "devices": ("rlx.runtime.devices", "devices"),
    "run_reference": ("rlx.reference", "run_reference"),
    "register_kernel": ("rlx.runtime.custom_kernels", "register_kernel"),
    "load_safetensors": ("rlx.safetensors", "load_safetensors"),
    "save_safetensors": ("rlx.safetensors", "save_safetensors"),
}


def __getattr__(name: str) -> Any:
    if name in ("models", "fp8", "signal", "splat"):   # `rlx.models.load_embedder(...)` etc. without an extra import
        import importlib

        return importlib.import_module(f"rlx.{name}")
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlx' has no attribute {name!r}")


__all__ = [
    "CapacityError", "ConfigError", "DeviceError", "DeviceUnavailableError", "DTypeError", "GraphError", "InputError",
    "KernelCompileError", "MemoryPlanError", "ModelLoadError", "ParameterError", "RlxError", "ScheduleError",
    "ShapeError", "UnsupportedOpError", "UnsupportedPrecisionError", *_LAZY,
]


def get_include() -> list[str]:
    """Directories holding ``_core.pxd``'s C headers, for Cython extensions
    that ``cimport rlx._core`` (like ``numpy.get_include()``)."""
    from pathlib import Path

    here = Path(__file__).resolve().parent
    installed = here / "include"
    return [str(installed if installed.is_dir() else here.parent / "csrc")]
