"""softmax and masked_softmax over the last axis.
"""

from __future__ import annotations

from rlx.errors import GraphError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _axis, _float, _float_type, _reg, _same_dtype
from rlx.ir.shape import broadcast_shapes


def _infer_softmax(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("softmax", attrs, {"axis": -1})
    (x,) = types
    _float_type("softmax", x)
    if x.rank == 0:
        raise ShapeError("softmax: input must have rank >= 1, got a scalar")
    axis = _axis("softmax", attrs["axis"], x.rank, x.shape)
    if axis != x.rank - 1:
        raise ShapeError(f"softmax: only the last axis is supported (axis=-1 or {x.rank - 1} for "
                         f"shape {x.shape!r}), got axis={attrs['axis']}; transpose first")
    attrs["axis"] = axis
    return x

def _infer_masked_softmax(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("masked_softmax", attrs, {"scale": 1.0})
    x = types[0]
    _float_type("masked_softmax", x)
    if x.rank == 0:
        raise ShapeError("masked_softmax: input must have rank >= 1, got a scalar")
    if len(types) not in (1, 2):
        raise GraphError(f"masked_softmax: takes x and an optional mask, got {len(types)} inputs")
    if len(types) == 2:
        mask = types[1]
        _float_type("masked_softmax", mask, "mask")
        _same_dtype("masked_softmax", [x, mask], ["x", "mask"])
        try:
            fits = mask.rank <= x.rank and broadcast_shapes(mask.shape, x.shape) == x.shape
        except ShapeError:
            fits = False
        if not fits:
            raise ShapeError(f"masked_softmax: mask {mask.shape!r} does not broadcast to x {x.shape!r}")
    attrs["scale"] = _float("masked_softmax", "scale", attrs["scale"])
    return x


OPS: tuple[OpDef, ...] = (
    _reg("softmax", 1, _infer_softmax, "Numerically stable softmax over the last axis.",
         precision="f32_under_auto"),
    _reg("masked_softmax", -1, _infer_masked_softmax,
         "softmax(x * scale + mask) over the last axis; the additive mask broadcasts to x.",
         precision="f32_under_auto"),
)
