"""Layer and RMS norms over the last axis, and their fused residual forms.
"""

from __future__ import annotations

import numpy as np

from rlx.errors import GraphError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _bool, _float, _float_type, _reg, _same_dtype


def _infer_layernorm(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("layernorm", attrs, {"eps": 1e-5})
    x, w, b = types
    for t, what in ((x, "x"), (w, "weight"), (b, "bias")):
        _float_type("layernorm", t, what)
    _same_dtype("layernorm", [x, w, b], ["x", "weight", "bias"])
    if x.rank == 0:
        raise ShapeError("layernorm: x must have rank >= 1, got a scalar")
    d = x.shape[-1]
    for t, what in ((w, "weight"), (b, "bias")):
        if t.shape != (d,):
            raise ShapeError(f"layernorm: {what} shape {t.shape!r} must be ({d},) to match the last "
                             f"axis of x {x.shape!r}")
    eps = attrs["eps"]
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating, np.integer)) or not eps >= 0:
        raise GraphError(f"layernorm: eps must be a float >= 0, got {eps!r}")
    attrs["eps"] = float(eps)
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


OPS: tuple[OpDef, ...] = (
    _reg("layernorm", 3, _infer_layernorm,
         "(x - mean) / sqrt(var + eps) * weight + bias over the last axis.", precision="f32_under_auto"),
    _reg("rmsnorm", 2, _infer_rmsnorm("rmsnorm", False),
         "x / sqrt(mean(x^2) + eps) * weight (or * (1 + weight) with add_one).", precision="f32_under_auto"),
    _reg("add_rmsnorm", 3, _infer_rmsnorm("add_rmsnorm", True), "rmsnorm(x + residual), fused.",
         precision="f32_under_auto"),
    _reg("add_layernorm", 4, _infer_add_layernorm, "layernorm(x + residual), fused.",
         precision="f32_under_auto"),
)
