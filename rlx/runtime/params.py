"""Kernel params structs, packed in Python exactly as shaders/*.h declares
them (every field 4 bytes, so the layout is the same on every target).
The conformance tests run these through the kernels, so a mismatch fails."""

from __future__ import annotations

import struct

MAX_DIMS = 6  # RLX_MAX_DIMS in shaders/all.h


def _dims(values: tuple[int, ...] | list[int], fill: int = 0) -> list[int]:
    values = list(values)
    if len(values) > MAX_DIMS:
        raise ValueError(f"more than {MAX_DIMS} dimensions")
    return values + [fill] * (MAX_DIMS - len(values))


def binary(n: int, op: int, contiguous: bool, a_offset: int, b_offset: int,
           shape: tuple[int, ...], a_strides: tuple[int, ...], b_strides: tuple[int, ...]) -> bytes:
    return struct.pack(f"<8I{3 * MAX_DIMS}I", n, len(shape), op, int(contiguous), a_offset, b_offset, 0, 0,
                       *_dims(shape, 1), *_dims(a_strides), *_dims(b_strides))


def unary(n: int, op: int, in_offset: int, out_offset: int = 0) -> bytes:
    return struct.pack("<4I", n, op, in_offset, out_offset)


def softmax(rows: int, cols: int, in_offset: int, out_offset: int = 0) -> bytes:
    return struct.pack("<4I", rows, cols, in_offset, out_offset)


def layernorm(rows: int, cols: int, in_offset: int, out_offset: int, eps: float) -> bytes:
    return struct.pack("<4If3I", rows, cols, in_offset, out_offset, eps, 0, 0, 0)


def gather(n_indices: int, dim: int, rows: int, index_is_i64: bool) -> bytes:
    return struct.pack("<4I", n_indices, dim, rows, int(index_is_i64))


def copy(n: int, in_offset: int, out_offset: int, shape: tuple[int, ...], in_strides: tuple[int, ...]) -> bytes:
    return struct.pack(f"<4I{2 * MAX_DIMS}I", n, len(shape), in_offset, out_offset,
                       *_dims(shape, 1), *_dims(in_strides))
