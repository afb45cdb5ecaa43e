"""Casts between float dtypes.
"""

from __future__ import annotations

from rlx.errors import DTypeError
from rlx.ir.dtype import DType
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _MISSING, _attrs, _float_type, _reg


def _infer_cast(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("cast", attrs, {"dtype": _MISSING})
    (x,) = types
    to = attrs["dtype"] = DType.of(attrs["dtype"])
    _float_type("cast", x)
    if not to.is_float or to.name == "bf16":
        raise DTypeError(f"cast: only float <-> float casts are supported, got {x.dtype} -> {to}")
    return TensorType(x.shape, to)


OPS: tuple[OpDef, ...] = (
    _reg("cast", 1, _infer_cast, "Convert between float dtypes (f32 <-> f16).", precision="fixed"),
)
