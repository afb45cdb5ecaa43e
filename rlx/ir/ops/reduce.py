"""Reductions over one axis: sum, mean, max, argmax.
"""

from __future__ import annotations

from rlx.errors import ShapeError
from rlx.ir.dtype import DType
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _axis, _bool, _float_type, _reg


def _infer_reduce(op: str):
    def infer(types: list[TensorType], attrs: dict) -> TensorType:
        _attrs(op, attrs, {"axis": -1, "keepdims": False})
        (x,) = types
        _float_type(op, x)
        if x.rank == 0:
            raise ShapeError(f"{op}: input must have rank >= 1, got a scalar")
        axis = attrs["axis"] = _axis(op, attrs["axis"], x.rank, x.shape)
        keep = attrs["keepdims"] = _bool(op, "keepdims", attrs["keepdims"])
        if x.shape[axis] == 0:
            raise ShapeError(f"{op}: cannot reduce an empty axis {axis} of shape {x.shape!r}")
        if op == "argmax" and x.shape[axis] >= 1 << 24:
            raise ShapeError(f"argmax: axis of {x.shape[axis]} elements exceeds 2^24")
        shape = list(x.shape)
        if keep:
            shape[axis] = 1
        else:
            del shape[axis]
        return TensorType(shape, DType.of("i32") if op == "argmax" else x.dtype)
    return infer


OPS: tuple[OpDef, ...] = (
    _reg("sum", 1, _infer_reduce("sum"), "Sum over one axis.", precision="f32_under_auto"),
    _reg("mean", 1, _infer_reduce("mean"), "Mean over one axis.", precision="f32_under_auto"),
    _reg("max", 1, _infer_reduce("max"), "Maximum over one axis.", precision="f32_under_auto"),
    _reg("argmax", 1, _infer_reduce("argmax"), "Index (i32) of the first maximum over one axis.",
         precision="fixed"),
)
