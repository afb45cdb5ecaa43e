"""Element types of tensors in the graph IR.

rlx supports exactly four element types; anything else is rejected at graph
build time, so later layers (kernels, memory planning) never meet a surprise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.errors import DTypeError

__all__ = ["DType", "f32", "f16", "i32", "i64"]


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

    # Keep the four instances unique through pickle/copy, so ``dt is f16`` stays valid.
    def __reduce__(self) -> tuple:
        return (DType.of, (self.name,))

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

_BY_NAME: dict[str, DType] = {
    "f32": f32, "float32": f32,
    "f16": f16, "float16": f16, "half": f16,
    "i32": i32, "int32": i32,
    "i64": i64, "int64": i64,
}
_ACCEPTED: tuple[str, ...] = tuple(_BY_NAME)
_BY_NUMPY: dict[np.dtype, DType] = {d.numpy: d for d in (f32, f16, i32, i64)}
