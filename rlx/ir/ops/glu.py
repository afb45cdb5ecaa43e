"""Gated linear units: activation(gate) * up (SwiGLU, GeGLU), and the
projection that reads one: glu_linear(gate, up, W) = glu(gate, up) @ W^T
(a gated FFN's down projection, which a decode step's GEMV computes with
the glu folded into its read of x).
"""

from __future__ import annotations

from rlx.errors import GraphError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _float_type, _reg, _same_dtype, _weight_dtype
from rlx.ir.ops.quant import check_quantized_weight


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


def _infer_glu_linear(types: list[TensorType], attrs: dict) -> TensorType:
    gate, up, w = types
    x = _infer_glu([gate, up], attrs)
    _weight_dtype("glu_linear", x, w, "weight")
    if w.dtype.quantized:
        check_quantized_weight("glu_linear", w, True, "weight")
    if x.rank < 1 or w.rank != 2:
        raise ShapeError(f"glu_linear: gate must be [..., K] and weight 2-D [N, K], got {x.shape!r} and {w.shape!r}")
    if x.shape[-1] != w.shape[1]:
        raise ShapeError(f"glu_linear: gate {x.shape!r} has K={x.shape[-1]}, weight {w.shape!r} ([N, K]) "
                         f"has K={w.shape[1]}")
    return TensorType(tuple(x.shape[:-1]) + (w.shape[0],), x.dtype)


OPS: tuple[OpDef, ...] = (
    _reg("glu", 2, _infer_glu, "activation(gate) * up: SwiGLU / GeGLU."),
    _reg("glu_linear", 3, _infer_glu_linear, "glu(gate, up) @ W^T (W [N, K], as linear's): a gated FFN's down "
         "projection."),
)
