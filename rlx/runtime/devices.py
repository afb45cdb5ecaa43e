"""Device discovery and names: "cpu" is the host shim, "cuda[:N]" the CUDA
shim, "metal" the Metal shim. ``rlx.devices()`` lists every backend, usable
or not, with the reason when it is not."""

from __future__ import annotations

from dataclasses import dataclass

from rlx import env
from rlx.errors import ConfigError, DeviceUnavailableError
from rlx.runtime import shim
from rlx.runtime.target import Target

_BACKEND_OF = {"cpu": "host", "host": "host", "cuda": "cuda", "metal": "metal"}
_PUBLIC_NAME = {"host": "cpu", "cuda": "cuda", "metal": "metal"}


@dataclass(frozen=True)
class DeviceDesc:
    name: str               # what rlx.compile(device=...) takes
    backend: str
    available: bool
    reason: str | None      # why not, when not available
    info: dict | None       # shim.DeviceInfo.as_dict() when available


def parse_device(name: str | None) -> tuple[str, int]:
    """'cpu' -> ('host', 0); 'cuda:1' -> ('cuda', 1). Unknown -> ConfigError."""
    name = name or env.default_device()
    if not isinstance(name, str):
        raise ConfigError(f"device must be a string (cpu, cuda[:N], metal or auto), got {name!r}")
    name = name.strip().lower()
    base, _, index = name.partition(":")
    if base not in _BACKEND_OF:
        raise ConfigError(f"unknown device {name!r}: expected one of cpu, cuda[:N], metal")
    # isdigit, not int(): int() takes "-1", " 1" and "1_0", none of them a device index.
    if index and not (index.isascii() and index.isdigit()):
        raise ConfigError(f"device {name!r}: the index after ':' must be a non-negative integer")
    return _BACKEND_OF[base], int(index) if index else 0


def _dtype_names(bits: int) -> frozenset[str]:
    """The dtype names of a mask of (1 << rlx_dtype) bits."""
    names = {shim.DTYPE_F32: "f32", shim.DTYPE_F16: "f16", shim.DTYPE_BF16: "bf16"}
    return frozenset(name for code, name in names.items() if bits >> code & 1)


def open_device(name: str | None) -> tuple[shim.Device, Target]:
    backend, index = parse_device(name)
    device = shim.open_device(backend, index)
    info = device.info
    target = Target(
        backend=backend,
        compute_units=max(1, info.compute_units),
        max_threads_per_group=max(1, info.max_threads_per_group),
        simd_width=max(1, info.simd_width),
        max_buffer_length=info.max_buffer_length,
        params_alignment=256 if backend == "metal" else 16,
        gemm_bias=bool(info.gemm_bias),
        gemm_fp8=bool(getattr(info, "gemm_fp8", False)) and env.cuda_fp8_gemm(),
        gemm_fp8_outer=_dtype_names(getattr(info, "gemm_fp8_outer", 0)) if env.cuda_fp8_gemm() else frozenset(),
    )
    return device, target


def devices() -> list[DeviceDesc]:
    """Every backend rlx knows, with whether it can run here and why not."""
    out: list[DeviceDesc] = []
    for backend, status in shim.shim_status().items():
        name = _PUBLIC_NAME[backend]
        if not status["loaded"]:
            out.append(DeviceDesc(name, backend, False, status["reason"], None))
            continue
        try:
            device = shim.open_device(backend, 0)
        except DeviceUnavailableError as exc:
            out.append(DeviceDesc(name, backend, False, str(exc), None))
            continue
        out.append(DeviceDesc(name, backend, True, None, device.info.as_dict()))
    return out
