"""Tensor shapes: validated tuples of non-negative ints, plus broadcasting."""

from __future__ import annotations

import operator
from collections.abc import Iterable

from rlx.errors import ShapeError

__all__ = ["MAX_ELEMENTS", "Shape", "broadcast_shapes", "check_extent", "contiguous_strides"]

# The most elements one tensor may span. Kernel params (rlx/runtime/params.py,
# shaders/*.h) carry element counts, offsets and strides as uint32, and the
# strictest consumers read sizes as int32: the gemm ABI takes m, n, k in
# [0, 2^31) (csrc/rlx_gemm_check.h), gather compares row numbers as int and
# attention casts its sequence lengths to int. Byte sizes and offsets are
# 64-bit, so this is the one limit; every tensor type is checked against it
# when its node is built (TensorType), before anything reaches a kernel.
MAX_ELEMENTS = 2**31 - 1


def _dim(d: object, dims: object) -> int:
    if isinstance(d, bool):
        raise ShapeError(f"shape {dims!r}: dimension {d!r} is a bool, expected an int >= 0")
    try:
        v = operator.index(d)  # accepts int and numpy integers, rejects floats
    except TypeError:
        raise ShapeError(f"shape {dims!r}: dimension {d!r} is not an int") from None
    if v < 0:
        raise ShapeError(f"shape {dims!r}: dimension {v} is negative")
    return v


def check_extent(shape: Shape) -> None:
    """Raise ShapeError when a tensor of ``shape`` would exceed MAX_ELEMENTS.

    Empty dimensions count as 1, as they do in ``contiguous_strides``: a
    (0, 2**40) tensor holds nothing but its outer stride would still be
    2**40, which no kernel params field can hold."""
    span = 1
    for d in shape:
        span *= d or 1
    if span > MAX_ELEMENTS:
        what = "elements" if 0 not in shape else "elements (empty dimensions counted as 1, as strides count them)"
        raise ShapeError(f"shape {shape!r} spans {span} {what}, more than rlx.ir.shape.MAX_ELEMENTS = "
                         f"{MAX_ELEMENTS} (2**31 - 1) per tensor: kernels encode element counts, offsets "
                         f"and strides in 32 bits")


class Shape(tuple):
    """An immutable tuple of ints >= 0; checked once here so nothing downstream re-checks."""

    __slots__ = ()

    def __new__(cls, dims: Iterable[int] = ()) -> Shape:
        if isinstance(dims, Shape):
            return dims
        if isinstance(dims, (str, bytes)) or not isinstance(dims, Iterable):
            raise ShapeError(f"shape must be a sequence of ints, got {dims!r}")
        dims = tuple(dims)
        return super().__new__(cls, (_dim(d, dims) for d in dims))

    @property
    def numel(self) -> int:
        """Number of elements (1 for a scalar shape ())."""
        n = 1
        for d in self:
            n *= d
        return n

    @property
    def rank(self) -> int:
        return len(self)

    def __repr__(self) -> str:
        return tuple.__repr__(self)


def broadcast_shapes(a: Iterable[int], b: Iterable[int]) -> Shape:
    """Numpy broadcasting of two shapes (align on the right, 1 stretches)."""
    a, b = Shape(a), Shape(b)
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ShapeError(f"shapes {a!r} and {b!r} do not broadcast")
    return Shape(out)


def contiguous_strides(shape: Iterable[int]) -> tuple[int, ...]:
    """Row-major strides in elements (not bytes), as kernels index buffers."""
    shape = Shape(shape)
    strides = [1] * len(shape)
    acc = 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = acc
        acc *= max(shape[i], 1)  # as numpy: an empty dim does not zero outer strides
    return tuple(strides)
