"""Tensor shapes: validated tuples of non-negative ints, plus broadcasting."""

from __future__ import annotations

import operator
from collections.abc import Iterable

from rlx.errors import ShapeError

__all__ = ["Shape", "broadcast_shapes", "contiguous_strides"]


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
