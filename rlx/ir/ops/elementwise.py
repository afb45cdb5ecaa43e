"""Elementwise ops: binary with numpy broadcasting (add, sub, mul, div,
maximum, minimum) and unary (gelu, silu, relu, tanh, exp, log, neg, sqrt,
rsqrt, scale_shift). NaN propagates through all of them (README).
"""

from __future__ import annotations

from rlx.errors import GraphError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _float, _float_type, _reg, _same_dtype
from rlx.ir.shape import broadcast_shapes


def _infer_binary(op: str):
    def infer(types: list[TensorType], attrs: dict) -> TensorType:
        _attrs(op, attrs, {})
        a, b = types
        _float_type(op, a, "lhs")
        _float_type(op, b, "rhs")
        _same_dtype(op, [a, b], ["lhs", "rhs"])
        try:
            shape = broadcast_shapes(a.shape, b.shape)
        except ShapeError:
            raise ShapeError(f"{op}: shapes {a.shape!r} and {b.shape!r} do not broadcast") from None
        return TensorType(shape, a.dtype)
    return infer

def _infer_gelu(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("gelu", attrs, {"approximate": "none"})
    if attrs["approximate"] not in ("none", "tanh"):
        raise GraphError(f"gelu: approximate must be 'none' or 'tanh', got {attrs['approximate']!r}")
    _float_type("gelu", types[0])
    return types[0]

def _infer_silu(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("silu", attrs, {})
    _float_type("silu", types[0])
    return types[0]

def _infer_unary(op: str):
    def infer(types: list[TensorType], attrs: dict) -> TensorType:
        _attrs(op, attrs, {})
        _float_type(op, types[0])
        return types[0]
    return infer

def _infer_scale_shift(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("scale_shift", attrs, {"scale": 1.0, "shift": 0.0})
    _float_type("scale_shift", types[0])
    attrs["scale"] = _float("scale_shift", "scale", attrs["scale"])
    attrs["shift"] = _float("scale_shift", "shift", attrs["shift"])
    return types[0]


OPS: tuple[OpDef, ...] = (
    _reg("add", 2, _infer_binary("add"), "Elementwise a + b with numpy broadcasting."),
    _reg("mul", 2, _infer_binary("mul"), "Elementwise a * b with numpy broadcasting."),
    _reg("sub", 2, _infer_binary("sub"), "Elementwise a - b with numpy broadcasting."),
    _reg("div", 2, _infer_binary("div"), "Elementwise a / b with numpy broadcasting."),
    _reg("maximum", 2, _infer_binary("maximum"), "Elementwise max(a, b) with numpy broadcasting."),
    _reg("minimum", 2, _infer_binary("minimum"), "Elementwise min(a, b) with numpy broadcasting."),
    _reg("gelu", 1, _infer_gelu, "GELU, exact (erf) or tanh-approximated."),
    _reg("silu", 1, _infer_silu, "x * sigmoid(x)."),
    _reg("relu", 1, _infer_unary("relu"), 'max(x, 0).'),
    _reg("tanh", 1, _infer_unary("tanh"), 'Hyperbolic tangent.'),
    _reg("exp", 1, _infer_unary("exp"), 'e^x.'),
    _reg("log", 1, _infer_unary("log"), 'Natural logarithm (log 0 = -inf, log of x < 0 = NaN).'),
    _reg("neg", 1, _infer_unary("neg"), '-x.'),
    _reg("sqrt", 1, _infer_unary("sqrt"), 'Square root.'),
    _reg("rsqrt", 1, _infer_unary("rsqrt"), '1 / sqrt(x).'),
    _reg("scale_shift", 1, _infer_scale_shift, "x * scale + shift with scalar attrs."),
)
