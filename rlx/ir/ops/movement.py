"""Data movement: gather (embedding lookup), concat, copy, and the view ops
reshape, transpose, narrow and frames (no kernel where the consumer reads
strides).
"""

from __future__ import annotations

from rlx.errors import DTypeError, GraphError, ShapeError
from rlx.ir.dtype import f32
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _MISSING, _attrs, _axis, _float_type, _int, _reg
from rlx.ir.shape import Shape


def _infer_gather(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("gather", attrs, {})
    table, idx = types
    if not table.dtype.storage_only:
        _float_type("gather", table, "table")
    if table.rank != 2:
        raise ShapeError(f"gather: table must be 2-D [V, D], got shape {table.shape!r}")
    if idx.dtype.name not in ("i32", "i64"):
        raise DTypeError(f"gather: indices must be i32 or i64, got {idx}")
    # A quantized (or bf16) table's rows come out as f32 (an f16 graph casts them).
    out = f32 if table.dtype.storage_only else table.dtype
    return TensorType(tuple(idx.shape) + (table.shape[1],), out)

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

def _infer_frames(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("frames", attrs, {"frame_length": _MISSING, "hop": _MISSING})
    (x,) = types
    if x.rank == 0:
        raise ShapeError("frames: input must have rank >= 1 (frames are cut along the last axis), got a scalar")
    n = attrs["frame_length"] = _int("frames", "frame_length", attrs["frame_length"])
    hop = attrs["hop"] = _int("frames", "hop", attrs["hop"])
    if n < 1 or hop < 1:
        raise ShapeError(f"frames: frame_length and hop must be >= 1, got {n} and {hop}")
    length = x.shape[-1]
    if length < n:
        raise ShapeError(f"frames: the last axis of {x.shape!r} ({length}) is shorter than one frame ({n})")
    return TensorType(tuple(x.shape[:-1]) + (1 + (length - n) // hop, n), x.dtype)

def _infer_copy(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("copy", attrs, {})
    return types[0]

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


OPS: tuple[OpDef, ...] = (
    _reg("gather", 2, _infer_gather, "Embedding lookup: table[indices] -> indices.shape + (D,)."),
    _reg("reshape", 1, _infer_reshape, "Same elements, new shape (a view when the input is contiguous).",
         is_view=True),
    _reg("transpose", 1, _infer_transpose, "Permute axes (a strided view).", is_view=True),
    _reg("narrow", 1, _infer_narrow, "Slice [start, start+length) along one axis (a view).", is_view=True),
    _reg("frames", 1, _infer_frames, "Overlapping frames of the last axis: [..., L] -> [..., 1 + (L - n) // hop, n], "
         "frame f = x[..., f * hop : f * hop + n] (a strided view).", is_view=True),
    _reg("copy", 1, _infer_copy,
         "Materialize the input contiguously (for consumers that cannot read views).", precision="fixed"),
    _reg("concat", -1, _infer_concat, "Join tensors along one axis."),
)
