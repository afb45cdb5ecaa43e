"""The built-in ops: their attributes, type inference and validation.

Each infer function checks everything a kernel would otherwise have to trust
(dtypes, ranks, bounds) and normalizes its attrs in place (defaults filled,
axes made positive, reshape's -1 resolved), so every later layer reads one
canonical form. Messages start with the op name and name the offending
shapes; ``Graph`` adds which node was being built.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from rlx.errors import DTypeError, GraphError, ShapeError
from rlx.ir.dtype import DType
from rlx.ir.op import OpDef, TensorType, register_op
from rlx.ir.shape import Shape, broadcast_shapes

__all__ = ["BUILTIN_OPS"]

_MISSING = object()


# ---------------------------------------------------------------- helpers


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


def _float_type(op: str, t: TensorType, what: str = "input") -> None:
    if not t.dtype.is_float or t.dtype.name == "bf16":
        raise DTypeError(f"{op}: {what} must be a float tensor (f32 or f16), got {t}"
                         + (" (bf16 is only the storage of linear/matmul weights)" if t.dtype.name == "bf16" else ""))


def _weight_dtype(op: str, x: TensorType, w: TensorType, what: str) -> None:
    """A matmul's B operand has x's dtype, or is bf16 against f32 x (weights
    stored in bf16 under precision="bf16"; the gemm accumulates in f32)."""
    if w.dtype == x.dtype or (w.dtype.name == "bf16" and x.dtype.name == "f32"):
        return
    raise DTypeError(f"{op}: {what} must have x's dtype (or be bf16 against f32), got {x} and {w}")


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


# ---------------------------------------------------------------- leaves


def _infer_leaf(op: str):
    def infer(types: list[TensorType], attrs: dict) -> TensorType:
        _attrs(op, attrs, {"name": _MISSING, "shape": _MISSING, "dtype": "f32"})
        if not isinstance(attrs["name"], str) or not attrs["name"]:
            raise GraphError(f"{op}: name must be a non-empty string, got {attrs['name']!r}")
        attrs["shape"] = Shape(attrs["shape"])
        attrs["dtype"] = DType.of(attrs["dtype"])
        if op == "input" and attrs["dtype"].name == "bf16":
            raise DTypeError(f"input {attrs['name']!r}: bf16 is only the storage of linear/matmul weights "
                             "(params); declare the input f32")
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


# ---------------------------------------------------------------- elementwise


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


def _infer_gather(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("gather", attrs, {})
    table, idx = types
    _float_type("gather", table, "table")
    if table.rank != 2:
        raise ShapeError(f"gather: table must be 2-D [V, D], got shape {table.shape!r}")
    if idx.dtype.name not in ("i32", "i64"):
        raise DTypeError(f"gather: indices must be i32 or i64, got {idx}")
    return TensorType(tuple(idx.shape) + (table.shape[1],), table.dtype)


def _infer_matmul(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("matmul", attrs, {"transpose_b": False})
    tb = attrs["transpose_b"] = _bool("matmul", "transpose_b", attrs["transpose_b"])
    a, b = types
    _float_type("matmul", a, "a")
    _weight_dtype("matmul", a, b, "b")
    if a.rank < 2:
        raise ShapeError(f"matmul: a must have rank >= 2 ([..., M, K]), got shape {a.shape!r}")
    b_form = "[..., N, K]" if tb else "[..., K, N]"
    if b.rank != 2 and b.rank != a.rank:
        raise ShapeError(f"matmul: b must be 2-D or have a's rank {a.rank} ({b_form}), "
                         f"got a {a.shape!r}, b {b.shape!r}")
    if b.rank > 2 and tuple(b.shape[:-2]) != tuple(a.shape[:-2]):
        raise ShapeError(f"matmul: batch dims differ: a {a.shape!r}, b {b.shape!r}")
    m, k = a.shape[-2], a.shape[-1]
    (n, kb) = (b.shape[-2], b.shape[-1]) if tb else (b.shape[-1], b.shape[-2])
    if k != kb:
        raise ShapeError(f"matmul: inner dims differ: a {a.shape!r} has K={k}, b {b.shape!r} "
                         f"{'(transpose_b) ' if tb else ''}has K={kb}")
    return TensorType(tuple(a.shape[:-2]) + (m, n), a.dtype)


# ---------------------------------------------------------------- views and copies


def _infer_reshape(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("reshape", attrs, {"shape": _MISSING})
    (x,) = types
    raw = attrs["shape"]
    if isinstance(raw, (str, bytes)) or not hasattr(raw, "__iter__"):
        raise ShapeError(f"reshape: shape must be a sequence of ints, got {raw!r}")
    dims = [_int("reshape", "shape entry", d) for d in raw]
    if dims.count(-1) > 1:
        raise ShapeError(f"reshape: at most one -1 allowed in {tuple(dims)!r}")
    if any(d < -1 for d in dims):
        raise ShapeError(f"reshape: invalid dimension in {tuple(dims)!r}")
    known = 1
    for d in dims:
        if d != -1:
            known *= d
    if -1 in dims:
        if known == 0 or x.numel % known:
            raise ShapeError(f"reshape: cannot reshape {x.shape!r} ({x.numel} elements) to {tuple(dims)!r}")
        dims[dims.index(-1)] = x.numel // known
    elif known != x.numel:
        raise ShapeError(f"reshape: cannot reshape {x.shape!r} ({x.numel} elements) to "
                         f"{tuple(dims)!r} ({known} elements)")
    attrs["shape"] = Shape(dims)
    return TensorType(attrs["shape"], x.dtype)


def _infer_transpose(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("transpose", attrs, {"perm": _MISSING})
    (x,) = types
    raw = attrs["perm"]
    if isinstance(raw, (str, bytes)) or not hasattr(raw, "__iter__"):
        raise ShapeError(f"transpose: perm must be a sequence of ints, got {raw!r}")
    perm = tuple(_int("transpose", "perm entry", p) for p in raw)
    if sorted(perm) != list(range(x.rank)):
        raise ShapeError(f"transpose: perm {perm!r} is not a permutation of 0..{x.rank - 1} "
                         f"for shape {x.shape!r}")
    attrs["perm"] = perm
    return TensorType(tuple(x.shape[p] for p in perm), x.dtype)


def _infer_narrow(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("narrow", attrs, {"axis": _MISSING, "start": _MISSING, "length": _MISSING})
    (x,) = types
    if x.rank == 0:
        raise ShapeError("narrow: input must have rank >= 1, got a scalar")
    axis = _axis("narrow", attrs["axis"], x.rank, x.shape)
    start = _int("narrow", "start", attrs["start"])
    length = _int("narrow", "length", attrs["length"])
    dim = x.shape[axis]
    if start < 0 or length < 0 or start + length > dim:
        raise ShapeError(f"narrow: [start={start}, start+length={start + length}) is out of bounds "
                         f"for axis {axis} of size {dim} in shape {x.shape!r}")
    attrs.update(axis=axis, start=start, length=length)
    shape = list(x.shape)
    shape[axis] = length
    return TensorType(shape, x.dtype)


def _infer_copy(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("copy", attrs, {})
    return types[0]


def _infer_cast(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("cast", attrs, {"dtype": _MISSING})
    (x,) = types
    to = attrs["dtype"] = DType.of(attrs["dtype"])
    _float_type("cast", x)
    if not to.is_float or to.name == "bf16":
        raise DTypeError(f"cast: only float <-> float casts are supported, got {x.dtype} -> {to}")
    return TensorType(x.shape, to)


# ---------------------------------------------------------------- registration

BUILTIN_OPS: tuple[OpDef, ...] = (
    _reg("input", 0, _infer_leaf("input"), "A run-time input, bound by name on every run.", precision="leaf"),
    _reg("param", 0, _infer_leaf("param"), "A weight, bound once by name and kept resident.", precision="leaf"),
    _reg("constant", 0, _infer_constant, "A value baked into the graph (written at compile time).",
         precision="leaf"),
    _reg("add", 2, _infer_binary("add"), "Elementwise a + b with numpy broadcasting."),
    _reg("mul", 2, _infer_binary("mul"), "Elementwise a * b with numpy broadcasting."),
    _reg("gelu", 1, _infer_gelu, "GELU, exact (erf) or tanh-approximated."),
    _reg("silu", 1, _infer_silu, "x * sigmoid(x)."),
    _reg("softmax", 1, _infer_softmax, "Numerically stable softmax over the last axis.",
         precision="f32_under_auto"),
    _reg("layernorm", 3, _infer_layernorm,
         "(x - mean) / sqrt(var + eps) * weight + bias over the last axis.", precision="f32_under_auto"),
    _reg("gather", 2, _infer_gather, "Embedding lookup: table[indices] -> indices.shape + (D,)."),
    _reg("matmul", 2, _infer_matmul, "a @ b (or a @ b^T with transpose_b), optionally batched."),
    _reg("reshape", 1, _infer_reshape, "Same elements, new shape (a view when the input is contiguous).",
         is_view=True),
    _reg("transpose", 1, _infer_transpose, "Permute axes (a strided view).", is_view=True),
    _reg("narrow", 1, _infer_narrow, "Slice [start, start+length) along one axis (a view).", is_view=True),
    _reg("copy", 1, _infer_copy,
         "Materialize the input contiguously (for consumers that cannot read views).", precision="fixed"),
    _reg("cast", 1, _infer_cast, "Convert between float dtypes (f32 <-> f16).", precision="fixed"),
)
