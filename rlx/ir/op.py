"""Op definitions and the op registry.

An op is a name, an arity and a type-inference function. The registry is global
so that ops registered by users (or later layers) work through ``Graph.op``
exactly like the built-in ones in ``ops.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from rlx.errors import GraphError, UnsupportedOpError
from rlx.ir.dtype import DType
from rlx.ir.shape import Shape, check_extent

__all__ = ["TensorType", "OpDef", "register_op", "get_op", "all_ops"]


@dataclass(frozen=True)
class TensorType:
    """Shape and element type of a value; everything a planner needs to size it."""

    shape: Shape
    dtype: DType

    def __init__(self, shape: Iterable[int], dtype: DType | str | Any) -> None:
        # Coerce here so ``TensorType((2, 3), "f16")`` is as good as the long form.
        # Every node's type is made here, so this is where sizes are bounded.
        shape = Shape(shape)
        check_extent(shape)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", DType.of(dtype))

    @property
    def numel(self) -> int:
        return self.shape.numel

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return self.dtype.nbytes(self.shape.numel, self.shape[-1] if len(self.shape) else None)

    def __str__(self) -> str:
        return f"{self.dtype.name}[{','.join(str(d) for d in self.shape)}]"


InferFn = Callable[[list[TensorType], dict], TensorType]
PRECISION_CLASSES = ("compute", "f32_under_auto", "f32", "fixed", "leaf")


@dataclass(frozen=True)
class OpDef:
    """What the IR knows about an op.

    ``infer(input_types, attrs)`` returns the output type or raises
    ShapeError/DTypeError (GraphError for malformed attrs). It receives the
    node's own attrs dict and may normalize it in place (fill defaults, turn a
    negative axis positive), so later layers read one canonical form.
    ``arity`` is the number of inputs, or -1 for any number.

    The facts later passes need, declared once here rather than in their own
    tables: ``is_view`` (the output is a strided view of input 0: no
    kernel, no bytes of its own) and ``precision``, what a mixed-precision
    policy may do with it (rlx/opt/precision.py): "compute" (it computes in
    the policy's float dtype), "f32_under_auto" (norms, softmax and
    reductions, kept in f32 under "auto"), "f32" (kernels in f32 only, under
    every policy: the FFT family; float inputs are cast to f32), "fixed" (its dtype is not a
    compute choice: views, copies, casts, argmax) or "leaf" (inputs, params,
    constants, whose storage the policy decides).
    """

    name: str
    arity: int
    infer: InferFn
    is_view: bool = False
    doc: str = ""
    precision: str = "compute"

    def __post_init__(self) -> None:
        if self.precision not in PRECISION_CLASSES:
            raise GraphError(f"op {self.name!r}: precision must be one of {PRECISION_CLASSES}, "
                             f"got {self.precision!r}")


_REGISTRY: dict[str, OpDef] = {}


def register_op(opdef: OpDef, *, replace: bool = False) -> OpDef:
    """Add an op to the global registry; re-registering a name needs ``replace=True``."""
    if not isinstance(opdef, OpDef):
        raise GraphError(f"register_op expects an OpDef, got {type(opdef).__name__}")
    if not opdef.name or not isinstance(opdef.name, str):
        raise GraphError(f"op name must be a non-empty string, got {opdef.name!r}")
    if not isinstance(opdef.arity, int) or opdef.arity < -1:
        raise GraphError(f"op {opdef.name!r}: arity must be an int >= 0 or -1, got {opdef.arity!r}")
    if opdef.name in _REGISTRY and not replace:
        raise GraphError(f"op {opdef.name!r} is already registered (pass replace=True to override)")
    _REGISTRY[opdef.name] = opdef
    return opdef


def get_op(name: str) -> OpDef:
    """Look an op up by name; unknown names list what exists, to make typos obvious."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise UnsupportedOpError(
            f"unknown op {name!r}; known ops: {', '.join(sorted(_REGISTRY))}") from None


def all_ops() -> dict[str, OpDef]:
    """A snapshot of the registry, name -> OpDef."""
    return dict(_REGISTRY)
