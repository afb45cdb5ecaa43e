"""The shared parts of packing kernel params structs exactly as shaders/*.h
declares them (every field 4 bytes, so the layout is the same on every
target): dimension padding and merging, the range check of 32-bit fields,
and the strided copy's struct, which the lowering core itself emits. Each
op family packs its own structs in rlx/lowering/<family>.py. The
conformance tests run these through the kernels, so a mismatch fails."""

from __future__ import annotations

import struct

from rlx.errors import UnsupportedOpError
from rlx.ir.graph import Node

U32_END = 1 << 32


MAX_DIMS = 6  # RLX_MAX_DIMS in shaders/all.h


def dims(values: tuple[int, ...] | list[int], fill: int = 0) -> list[int]:
    values = list(values)
    if len(values) > MAX_DIMS:
        raise ValueError(f"more than {MAX_DIMS} dimensions")
    return values + [fill] * (MAX_DIMS - len(values))


def merge_dims(shape: tuple[int, ...], strides: tuple[tuple[int, ...], ...]
                ) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """The same row-major walk over fewer dimensions: size-1 dimensions
    dropped, and a dimension merged into the next one when every operand's
    stride steps over the next one exactly (an output is dense, so its own
    layout always merges)."""
    dims = [(d, [s[i] for s in strides]) for i, d in enumerate(shape) if d != 1]
    if not dims:
        return (1,), tuple((0,) for _ in strides)
    merged = [dims[0]]
    for d, st in dims[1:]:
        pd, pst = merged[-1]
        if all(ps == s * d for ps, s in zip(pst, st)):
            merged[-1] = (pd * d, st)
        else:
            merged.append((d, st))
    return tuple(d for d, _ in merged), tuple(tuple(st[k] for _, st in merged) for k in range(len(strides)))


def copy(n: int, in_offset: int, out_offset: int, shape: tuple[int, ...], in_strides: tuple[int, ...],
         out_strides: tuple[int, ...]) -> bytes:
    return struct.pack(f"<4I{3 * MAX_DIMS}I", n, len(shape), in_offset, out_offset,
                       *dims(shape, 1), *dims(in_strides), *dims(out_strides))


def u32_fields(node: Node, values: list[int]) -> list[int]:
    for v in values:
        if not 0 <= v < U32_END:
            raise UnsupportedOpError(f"{node!r}: offset, stride or size {v} does not fit the kernel's 32-bit params")
    return values
