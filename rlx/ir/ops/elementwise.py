"""Elementwise ops: binary with numpy broadcasting (add, sub, mul, div,
maximum, minimum) and unary (gelu, silu, relu, tanh, exp, log, neg, sqrt,
rsqrt, scale_shift). NaN propagates through all of them (docs/kernels.md).
"""

from __future__ import annotations

from rlx.errors import GraphError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _MISSING, _attrs, _float, _float_type, _reg, _same_dtype
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

# The ops a fused_elementwise step may be (the codes of shaders/elementwise.h:
# binary ops, then unary ops by name, gelu's tanh form as "gelu_tanh").
CHAIN_BINARY = ("add", "mul", "sub", "div", "maximum", "minimum")
CHAIN_UNARY = ("gelu", "gelu_tanh", "silu", "relu", "tanh", "exp", "neg", "sqrt", "rsqrt", "scale_shift", "log")
CHAIN_MAX_INPUTS = 4   # RLX_EW_MAX_INPUTS
CHAIN_MAX_STEPS = 8    # RLX_EW_MAX_STEPS


def _infer_fused_elementwise(types: list[TensorType], attrs: dict) -> TensorType:
    """steps: ((op, a, b, scale, shift), ...); slot s < len(inputs) is input
    s, slot len(inputs) + t step t's result (operands name earlier slots; b
    is -1 for a unary op); the last step is the output, of the inputs'
    broadcast shape."""
    op = "fused_elementwise"
    _attrs(op, attrs, {"steps": _MISSING})
    if not 1 <= len(types) <= CHAIN_MAX_INPUTS:
        raise GraphError(f"{op}: takes 1 to {CHAIN_MAX_INPUTS} inputs, got {len(types)}")
    for i, t in enumerate(types):
        _float_type(op, t, f"input {i}")
    _same_dtype(op, list(types), [f"input {i}" for i in range(len(types))])
    steps = attrs["steps"]
    if not isinstance(steps, (tuple, list)) or not 1 <= len(steps) <= CHAIN_MAX_STEPS:
        raise GraphError(f"{op}: steps must be 1 to {CHAIN_MAX_STEPS} (op, a, b, scale, shift) tuples")
    clean = []
    for t, step in enumerate(steps):
        if not isinstance(step, (tuple, list)) or len(step) != 5:
            raise GraphError(f"{op}: step {t} must be (op, a, b, scale, shift), got {step!r}")
        name, a, b, scale, shift = step
        slots = len(types) + t
        if name not in CHAIN_BINARY and name not in CHAIN_UNARY:
            raise GraphError(f"{op}: step {t}: unknown op {name!r}")
        if not isinstance(a, int) or not 0 <= a < slots:
            raise GraphError(f"{op}: step {t}: operand {a!r} is not an earlier slot (0..{slots - 1})")
        if name in CHAIN_BINARY and (not isinstance(b, int) or not 0 <= b < slots):
            raise GraphError(f"{op}: step {t}: operand {b!r} is not an earlier slot (0..{slots - 1})")
        if name in CHAIN_UNARY and b != -1:
            raise GraphError(f"{op}: step {t}: unary {name} takes one operand (b = -1), got b = {b!r}")
        clean.append((name, a, b, _float(op, "scale", scale), _float(op, "shift", shift)))
    attrs["steps"] = tuple(clean)
    shape = types[0].shape
    try:
        for t in types[1:]:
            shape = broadcast_shapes(shape, t.shape)
    except ShapeError:
        raise ShapeError(f"{op}: input shapes {[t.shape for t in types]!r} do not broadcast") from None
    return TensorType(shape, types[0].dtype)


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
    _reg("fused_elementwise", -1, _infer_fused_elementwise,
         "A chain of elementwise ops in one pass (made by fusion): attrs steps, computed in f32."),
)
