"""Element types of tensors in the graph IR.

rlx computes in four element types (f32, f16, i32, i64); anything else is
rejected at graph build time, so later layers (kernels, memory planning) never
meet a surprise. A fifth, bf16, is a storage type only: the weights of
``linear`` and ``matmul`` under ``precision="bf16"`` (the host's gemm reads
them and accumulates in f32). Its numpy form is the raw bits as uint16
(``to_bf16`` / ``from_bf16`` convert). ``DType.of`` does not accept it: only
the precision pass makes bf16 params; graph inputs, casts and every other op
reject it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.errors import DTypeError

__all__ = ["DType", "f32", "f16", "bf16", "i32", "i64", "to_bf16", "from_bf16"]


@dataclass(frozen=True)
class DType:
    """One element type: its short name, size in bytes and numpy equivalent."""

    name: str
    itemsize: int
    numpy: np.dtype
    is_float: bool

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"DType({self.name})"

    # Keep the instances unique through pickle/copy, so ``dt is f16`` stays valid.
    def __reduce__(self) -> tuple:
        return (_named, (self.name,))

    def __copy__(self) -> DType:
        return self

    def __deepcopy__(self, memo: dict) -> DType:
        return self

    @staticmethod
    def of(x: Any) -> DType:
        """Coerce a DType, a name ("f32", "float16", "half", ...) or a numpy dtype/type.

        Every user-facing API goes through this, so one spelling of the error
        names the rejected value and what would have been accepted.
        """
        if isinstance(x, DType):
            return x
        if isinstance(x, str):
            found = _BY_NAME.get(x.lower())
            if found is not None:
                return found
        elif isinstance(x, np.dtype) or (isinstance(x, type) and issubclass(x, np.generic)):
            found = _BY_NUMPY.get(np.dtype(x))
            if found is not None:
                return found
        raise DTypeError(f"unsupported dtype {x!r}; accepted: {', '.join(_ACCEPTED)} "
                         "(or the matching numpy dtype)")


f32 = DType("f32", 4, np.dtype(np.float32), True)
f16 = DType("f16", 2, np.dtype(np.float16), True)
i32 = DType("i32", 4, np.dtype(np.int32), False)
i64 = DType("i64", 8, np.dtype(np.int64), False)
# Storage only (see the module docstring): numpy holds the raw bits.
bf16 = DType("bf16", 2, np.dtype(np.uint16), True)

_BY_NAME: dict[str, DType] = {
    "f32": f32, "float32": f32,
    "f16": f16, "float16": f16, "half": f16,
    "i32": i32, "int32": i32,
    "i64": i64, "int64": i64,
}
_ACCEPTED: tuple[str, ...] = tuple(_BY_NAME)


def _named(name: str) -> DType:
    """Any instance by its name, bf16 included (unpickling)."""
    return bf16 if name == "bf16" else DType.of(name)


# bf16's numpy form (uint16 bits) is not a way to spell it: a uint16 array is not bf16.
_BY_NUMPY: dict[np.dtype, DType] = {d.numpy: d for d in (f32, f16, i32, i64)}


def to_bf16(values) -> np.ndarray:
    """float values -> bf16 bits (uint16), rounded to nearest even; NaN stays NaN.
    The same rounding as the host shim's kernels (csrc/host_bf16.h)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    out = np.where(nan, (bits >> np.uint32(16)) | np.uint32(0x40), rounded)
    return out.astype(np.uint16)


def from_bf16(bits) -> np.ndarray:
    """bf16 bits (uint16) -> float32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)
