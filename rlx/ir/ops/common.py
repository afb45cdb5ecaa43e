"""Helpers every op family's type inference shares: attr checking, ints, bools,
floats, axes, dtype rules, and registration (``_reg``).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from rlx.arg_types import is_real
from rlx.errors import DTypeError, GraphError, ShapeError
from rlx.ir.op import OpDef, TensorType, register_op
from rlx.ir.shape import Shape

_MISSING = object()

def _attrs(op: str, attrs: dict, spec: dict[str, Any]) -> None:
    """Reject unknown attrs (catches typos like ``transposeb``), fill defaults, require the rest."""
    unknown = sorted(set(attrs) - set(spec))
    if unknown:
        raise GraphError(f"{op}: unknown attribute(s) {', '.join(unknown)}; "
                         f"accepted: {', '.join(spec) or 'none'}")
    for k, default in spec.items():
        if k not in attrs:
            if default is _MISSING:
                raise GraphError(f"{op}: missing required attribute {k!r}")
            attrs[k] = default

def _int(op: str, what: str, v: Any) -> int:
    if isinstance(v, bool):
        raise GraphError(f"{op}: {what} must be an int, got {v!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise GraphError(f"{op}: {what} must be an int, got {v!r}") from None

def _bool(op: str, what: str, v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise GraphError(f"{op}: {what} must be a bool, got {v!r}")

def _float(op: str, what: str, v: Any, minimum: float | None = None) -> float:
    """A finite number attribute (>= ``minimum`` when given) as a float."""
    if not is_real(v, finite=False):
        raise GraphError(f"{op}: {what} must be a number, got {v!r}")
    if not is_real(v):   # NaN, an infinity, or an int beyond every float (10**400)
        raise GraphError(f"{op}: {what} must be finite, got {v!r}")
    if minimum is not None and not v >= minimum:
        raise GraphError(f"{op}: {what} must be >= {minimum}, got {v!r}")
    return float(v)

def _number(op: str, what: str, v: Any) -> float:
    """A finite number attribute as a float (``_float`` without a bound)."""
    return _float(op, what, v)

def _float_type(op: str, t: TensorType, what: str = "input") -> None:
    if not t.dtype.is_float or t.dtype.storage_only:
        raise DTypeError(f"{op}: {what} must be a float tensor (f32 or f16), got {t}"
                         + (" (bf16 is only the storage of linear/matmul weights)" if t.dtype.name == "bf16" else ""))

def _weight_dtype(op: str, x: TensorType, w: TensorType, what: str) -> None:
    """A matmul's B operand has x's dtype, or is bf16 (weights stored in bf16
    under precision="bf16", or a GGUF file's; accumulated in f32), or is a
    quantized block format (rlx/ir/ops/quant.py checks its layout)."""
    if w.dtype == x.dtype or w.dtype.name == "bf16" or w.dtype.quantized:
        return
    raise DTypeError(f"{op}: {what} must have x's dtype (or be bf16 or a quantized block format), "
                     f"got {x} and {w}")

def _same_dtype(op: str, types: list[TensorType], names: list[str]) -> None:
    first = types[0].dtype
    for t, n in zip(types[1:], names[1:], strict=True):
        if t.dtype != first:
            raise DTypeError(f"{op}: {names[0]} and {n} must have the same dtype, "
                             f"got {types[0]} and {t}")

def _axis(op: str, axis: Any, rank: int, shape: Shape) -> int:
    a = _int(op, "axis", axis)
    if not -rank <= a < rank:
        raise ShapeError(f"{op}: axis {a} is out of range for shape {shape!r} (rank {rank})")
    return a % rank

def _reg(name: str, arity: int, infer, doc: str, is_view: bool = False, precision: str = "compute") -> OpDef:
    if is_view:
        precision = "fixed"
    return register_op(OpDef(name=name, arity=arity, infer=infer, is_view=is_view, doc=doc, precision=precision))
