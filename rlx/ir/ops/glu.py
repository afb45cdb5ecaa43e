"""Gated linear units: activation(gate) * up (SwiGLU, GeGLU).
"""

from __future__ import annotations

from rlx.errors import GraphError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _float_type, _reg, _same_dtype


def _infer_glu(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("glu", attrs, {"activation": "silu"})
    if attrs["activation"] not in ("silu", "gelu", "gelu_tanh"):
        raise GraphError(f"glu: activation must be 'silu' (SwiGLU), 'gelu' or 'gelu_tanh' (GeGLU), "
                         f"got {attrs['activation']!r}")
    gate, up = types
    _float_type("glu", gate, "gate")
    _same_dtype("glu", types, ["gate", "up"])
    if gate.shape != up.shape:
        raise ShapeError(f"glu: gate {gate.shape!r} and up {up.shape!r} must have the same shape")
    return gate


OPS: tuple[OpDef, ...] = (
    _reg("glu", 2, _infer_glu, "activation(gate) * up: SwiGLU / GeGLU."),
)
