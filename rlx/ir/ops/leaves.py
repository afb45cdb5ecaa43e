"""Graph leaves: run-time inputs, resident params and baked-in constants.
"""

from __future__ import annotations

import numpy as np

from rlx.errors import DTypeError, GraphError, ShapeError
from rlx.ir.dtype import DType
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _MISSING, _attrs, _reg
from rlx.ir.shape import Shape


def _infer_leaf(op: str):
    def infer(types: list[TensorType], attrs: dict) -> TensorType:
        _attrs(op, attrs, {"name": _MISSING, "shape": _MISSING, "dtype": "f32"})
        if not isinstance(attrs["name"], str) or not attrs["name"]:
            raise GraphError(f"{op}: name must be a non-empty string, got {attrs['name']!r}")
        attrs["shape"] = Shape(attrs["shape"])
        attrs["dtype"] = DType.of(attrs["dtype"])
        # FP8 inputs are allowed: cast and the scaled ops read them.
        if op == "input" and attrs["dtype"].storage_only and not attrs["dtype"].is_fp8:
            raise DTypeError(f"input {attrs['name']!r}: {attrs['dtype']} is only the storage of weights "
                             "(params); declare the input f32")
        if attrs["dtype"].quantized:
            attrs["dtype"].storage_shape(attrs["shape"])   # rows of whole blocks, or a DTypeError
        return TensorType(attrs["shape"], attrs["dtype"])
    return infer

def _infer_constant(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("constant", attrs, {"value": _MISSING, "name": None, "shape": None, "dtype": None})
    value = attrs["value"]
    if not isinstance(value, np.ndarray):
        raise GraphError(f"constant: value must be a numpy array, got {type(value).__name__}")
    dt = DType.of(value.dtype)
    if attrs["dtype"] is not None and DType.of(attrs["dtype"]) != dt:
        raise DTypeError(f"constant: dtype attribute {attrs['dtype']} does not match the value's dtype {dt}")
    if attrs["shape"] is not None and Shape(attrs["shape"]) != value.shape:
        raise ShapeError(f"constant: shape attribute {Shape(attrs['shape'])!r} does not match "
                         f"the value's shape {value.shape!r}")
    attrs["shape"], attrs["dtype"] = Shape(value.shape), dt
    return TensorType(value.shape, dt)


OPS: tuple[OpDef, ...] = (
    _reg("input", 0, _infer_leaf("input"), "A run-time input, bound by name on every run.", precision="leaf"),
    _reg("param", 0, _infer_leaf("param"), "A weight, bound once by name and kept resident.", precision="leaf"),
    _reg("constant", 0, _infer_constant, "A value baked into the graph (written at compile time).",
         precision="leaf"),
)
