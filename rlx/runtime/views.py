"""Views: where a value's elements live, as strides over a storage.

Reshape, narrow and transpose produce views and cost nothing; a kernel that
reads through strides takes the view as it is, others get a dense copy."""

from __future__ import annotations

from dataclasses import dataclass

from rlx._core import ARENA, RESIDENT
from rlx.ir.dtype import DType
from rlx.ir.shape import contiguous_strides

# ARENA ("arena": activations, inputs, outputs, kernel params) and RESIDENT
# ("resident": weights, constants) are binding names of rlx._core.Bindings;
# a storage's slot is the binding whose buffer holds it (the compiler adds
# names for params shared from another executable).
__all__ = ["ARENA", "RESIDENT", "Storage", "View"]


@dataclass(eq=False)
class Storage:
    """A dense run of bytes the memory plan places (arena) or the resident
    buffer holds (params and constants). ``slot`` is the name of the
    binding (rlx._core.Bindings) whose buffer holds it."""

    key: str
    nbytes: int
    slot: str = ARENA
    offset: int | None = None   # bytes, set by the memory plan / resident layout

    def __repr__(self) -> str:
        return f"Storage({self.key}, {self.nbytes} B, {self.slot}, @{self.offset})"


@dataclass(frozen=True)
class View:
    storage: Storage
    dtype: DType
    shape: tuple[int, ...]
    strides: tuple[int, ...]     # elements
    offset: int = 0              # elements from the storage's start

    @staticmethod
    def dense(storage: Storage, dtype: DType, shape: tuple[int, ...]) -> View:
        return View(storage, dtype, tuple(shape), contiguous_strides(shape), 0)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def is_dense(self) -> bool:
        """Row-major contiguous (size-1 dimensions may have any stride)."""
        expected = contiguous_strides(self.shape)
        return all(s == e or d == 1 for s, e, d in zip(self.strides, expected, self.shape))

    @property
    def byte_offset(self) -> int:
        return self.dtype.nbytes(self.offset, self.shape[-1] if self.shape else None)

    def byte_range(self) -> tuple[int, int]:
        """[start, end) in bytes relative to the storage, covering every
        element the view can touch (used for hazard tracking)."""
        if self.numel == 0:
            return self.byte_offset, self.byte_offset
        if self.dtype.quantized:   # block formats are only ever whole dense tensors (the graph's checks)
            return self.byte_offset, self.byte_offset + self.dtype.nbytes(self.numel, self.shape[-1])
        last = self.offset + sum((d - 1) * s for d, s in zip(self.shape, self.strides))
        return self.byte_offset, (last + 1) * self.dtype.itemsize

    def reshape(self, shape: tuple[int, ...]) -> View | None:
        """The same elements under a new shape, or None if that needs a copy.

        Strided views reshape without a copy when every group of old
        dimensions that maps onto a group of new ones is itself contiguous
        (numpy's no-copy reshape rule): e.g. a narrow of the last axis of a
        packed QKV tensor can still be split into heads."""
        shape = tuple(shape)
        if self.is_dense:
            return View(self.storage, self.dtype, shape, contiguous_strides(shape), self.offset)
        if self.numel == 0:
            return View(self.storage, self.dtype, shape, contiguous_strides(shape), self.offset)
        old = [(d, s) for d, s in zip(self.shape, self.strides) if d != 1]
        new_dims = [d for d in shape]
        strides = [0] * len(new_dims)
        i = j = 0
        while i < len(old) or j < len(new_dims):
            if j < len(new_dims) and new_dims[j] == 1:
                strides[j] = 0
                j += 1
                continue
            if i >= len(old) or j >= len(new_dims):
                return None
            # Grow the two groups until their element counts match.
            i0, j0 = i, j
            po, pn = old[i][0], new_dims[j]
            i, j = i + 1, j + 1
            while po != pn:
                if po < pn:
                    if i >= len(old):
                        return None
                    po *= old[i][0]
                    i += 1
                else:
                    if j >= len(new_dims):
                        return None
                    pn *= new_dims[j]
                    j += 1
            for k in range(i0, i - 1):   # the old group must be one contiguous run
                if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                    return None
            stride = old[i - 1][1]
            for k in range(j - 1, j0 - 1, -1):
                strides[k] = stride
                stride *= new_dims[k]
        return View(self.storage, self.dtype, shape, tuple(strides), self.offset)

    def transpose(self, perm: tuple[int, ...]) -> View:
        return View(self.storage, self.dtype, tuple(self.shape[p] for p in perm),
                    tuple(self.strides[p] for p in perm), self.offset)

    def narrow(self, axis: int, start: int, length: int) -> View:
        shape = list(self.shape)
        shape[axis] = length
        return View(self.storage, self.dtype, tuple(shape), self.strides,
                    self.offset + start * self.strides[axis])

    def frames(self, frame_length: int, hop: int) -> View:
        """Overlapping frames of the last axis (the ``frames`` op): [..., L]
        -> [..., 1 + (L - frame_length) // hop, frame_length], the frame axis
        stepping hop elements of the last axis."""
        step = self.strides[-1]
        count = 1 + (self.shape[-1] - frame_length) // hop
        return View(self.storage, self.dtype, self.shape[:-1] + (count, frame_length),
                    self.strides[:-1] + (hop * step, step), self.offset)

    def broadcast_to(self, shape: tuple[int, ...]) -> View:
        """Numpy broadcasting as stride 0 on the new and size-1 dimensions."""
        pad = len(shape) - len(self.shape)
        old_shape = (1,) * pad + self.shape
        old_strides = (0,) * pad + self.strides
        strides = tuple(0 if o == 1 and n != 1 else s for o, n, s in zip(old_shape, shape, old_strides))
        return View(self.storage, self.dtype, tuple(shape), strides, self.offset)
