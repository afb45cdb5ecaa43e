"""The transformer op set beyond the first kernels: more unary and binary
ops, reductions, masked softmax, RMSNorm, fused residual + norm, fused
linear (matmul + bias + activation), gated linear units and concat.

Same conventions as rlx/ir/ops.py: infer validates and normalizes attrs in
place; messages start with the op name and name the offending shapes."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.errors import DTypeError, GraphError, ShapeError
from rlx.ir.dtype import DType
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops import _MISSING, _attrs, _axis, _bool, _float_type, _infer_binary, _reg, _same_dtype, _weight_dtype
from rlx.ir.shape import broadcast_shapes

ACTIVATIONS = (None, "gelu", "gelu_tanh", "silu", "relu")


def _float(op: str, what: str, v: Any, minimum: float | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
        raise GraphError(f"{op}: {what} must be a number, got {v!r}")
    if minimum is not None and not v >= minimum:
        raise GraphError(f"{op}: {what} must be >= {minimum}, got {v!r}")
    return float(v)


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


def _check_norm_weights(op: str, x: TensorType, named: list[tuple[TensorType, str]]) -> None:
    d = x.shape[-1]
    for t, what in named:
        _float_type(op, t, what)
        if t.shape != (d,):
            raise ShapeError(f"{op}: {what} shape {t.shape!r} must be ({d},) to match the last axis of x {x.shape!r}")


def _infer_rmsnorm(op: str, with_residual: bool):
    def infer(types: list[TensorType], attrs: dict) -> TensorType:
        _attrs(op, attrs, {"eps": 1e-6, "add_one": False})
        x = types[0]
        _float_type(op, x, "x")
        if x.rank == 0:
            raise ShapeError(f"{op}: x must have rank >= 1, got a scalar")
        rest = types[1:]
        names = ["x"] + (["residual", "weight"] if with_residual else ["weight"])
        _same_dtype(op, types, names)
        if with_residual and rest[0].shape != x.shape:
            raise ShapeError(f"{op}: residual shape {rest[0].shape!r} must equal x's {x.shape!r}")
        _check_norm_weights(op, x, [(rest[-1], "weight")])
        attrs["eps"] = _float(op, "eps", attrs["eps"], 0.0)
        attrs["add_one"] = _bool(op, "add_one", attrs["add_one"])
        return x
    return infer


def _infer_add_layernorm(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("add_layernorm", attrs, {"eps": 1e-5})
    x, r, w, b = types
    _float_type("add_layernorm", x, "x")
    _same_dtype("add_layernorm", types, ["x", "residual", "weight", "bias"])
    if x.rank == 0:
        raise ShapeError("add_layernorm: x must have rank >= 1, got a scalar")
    if r.shape != x.shape:
        raise ShapeError(f"add_layernorm: residual shape {r.shape!r} must equal x's {x.shape!r}")
    _check_norm_weights("add_layernorm", x, [(w, "weight"), (b, "bias")])
    attrs["eps"] = _float("add_layernorm", "eps", attrs["eps"], 0.0)
    return x


def _infer_linear(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("linear", attrs, {"activation": None, "transpose_b": True})
    if len(types) not in (2, 3):
        raise GraphError(f"linear: takes x, weight and an optional bias, got {len(types)} inputs")
    if attrs["activation"] not in ACTIVATIONS:
        raise GraphError(f"linear: activation must be one of {ACTIVATIONS}, got {attrs['activation']!r}")
    tb = attrs["transpose_b"] = _bool("linear", "transpose_b", attrs["transpose_b"])
    x, w = types[:2]
    _float_type("linear", x, "x")
    _weight_dtype("linear", x, w, "weight")
    if len(types) == 3:
        _same_dtype("linear", [x, types[2]], ["x", "bias"])
    if x.rank < 1 or w.rank != 2:
        raise ShapeError(f"linear: x must be [..., K] and weight 2-D, got {x.shape!r} and {w.shape!r}")
    n, k = (w.shape[0], w.shape[1]) if tb else (w.shape[1], w.shape[0])
    if x.shape[-1] != k:
        raise ShapeError(f"linear: x {x.shape!r} has K={x.shape[-1]}, weight {w.shape!r} "
                         f"{'([N, K]) ' if tb else '([K, N]) '}has K={k}")
    if len(types) == 3 and types[2].shape != (n,):
        raise ShapeError(f"linear: bias shape {types[2].shape!r} must be ({n},)")
    return TensorType(tuple(x.shape[:-1]) + (n,), x.dtype)


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


def _infer_concat(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("concat", attrs, {"axis": _MISSING})
    if not types:
        raise GraphError("concat: needs at least one input")
    first = types[0]
    if first.rank == 0:
        raise ShapeError("concat: inputs must have rank >= 1")
    axis = attrs["axis"] = _axis("concat", attrs["axis"], first.rank, first.shape)
    for i, t in enumerate(types[1:], 1):
        if t.dtype != first.dtype:
            raise DTypeError(f"concat: input {i} is {t}, input 0 is {first}: dtypes must match")
        if t.rank != first.rank or any(a != b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != axis):
            raise ShapeError(f"concat: input {i} shape {t.shape!r} does not match {first.shape!r} "
                             f"outside axis {axis}")
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in types)
    return TensorType(shape, first.dtype)


NN_OPS: tuple[OpDef, ...] = (
    *(_reg(name, 1, _infer_unary(name), doc) for name, doc in (
        ("relu", "max(x, 0)."), ("tanh", "Hyperbolic tangent."), ("exp", "e^x."), ("neg", "-x."),
        ("sqrt", "Square root."), ("rsqrt", "1 / sqrt(x)."))),
    _reg("scale_shift", 1, _infer_scale_shift, "x * scale + shift with scalar attrs."),
    _reg("sub", 2, _infer_binary("sub"), "Elementwise a - b with numpy broadcasting."),
    _reg("div", 2, _infer_binary("div"), "Elementwise a / b with numpy broadcasting."),
    _reg("maximum", 2, _infer_binary("maximum"), "Elementwise max(a, b) with numpy broadcasting."),
    _reg("minimum", 2, _infer_binary("minimum"), "Elementwise min(a, b) with numpy broadcasting."),
    _reg("sum", 1, _infer_reduce("sum"), "Sum over one axis.", precision="f32_under_auto"),
    _reg("mean", 1, _infer_reduce("mean"), "Mean over one axis.", precision="f32_under_auto"),
    _reg("max", 1, _infer_reduce("max"), "Maximum over one axis.", precision="f32_under_auto"),
    _reg("argmax", 1, _infer_reduce("argmax"), "Index (i32) of the first maximum over one axis.",
         precision="fixed"),
    _reg("masked_softmax", -1, _infer_masked_softmax,
         "softmax(x * scale + mask) over the last axis; the additive mask broadcasts to x.",
         precision="f32_under_auto"),
    _reg("rmsnorm", 2, _infer_rmsnorm("rmsnorm", False),
         "x / sqrt(mean(x^2) + eps) * weight (or * (1 + weight) with add_one).", precision="f32_under_auto"),
    _reg("add_rmsnorm", 3, _infer_rmsnorm("add_rmsnorm", True), "rmsnorm(x + residual), fused.",
         precision="f32_under_auto"),
    _reg("add_layernorm", 4, _infer_add_layernorm, "layernorm(x + residual), fused.",
         precision="f32_under_auto"),
    _reg("linear", -1, _infer_linear, "activation(x @ W^T + bias): matmul with a fused epilogue."),
    _reg("glu", 2, _infer_glu, "activation(gate) * up: SwiGLU / GeGLU."),
    _reg("concat", -1, _infer_concat, "Join tensors along one axis."),
)
