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


def binary(n: int, op: int, contiguous: bool, a_offset: int, b_offset: int,
           shape: tuple[int, ...], a_strides: tuple[int, ...], b_strides: tuple[int, ...]) -> bytes:
    return struct.pack(f"<8I{3 * MAX_DIMS}I", n, len(shape), op, int(contiguous), a_offset, b_offset, 0, 0,
                       *_dims(shape, 1), *_dims(a_strides), *_dims(b_strides))


# Op codes of shaders/elementwise.h and the activation codes of
# shaders/prelude/common.h.
UNARY_OPS = {"gelu": 0, "gelu_tanh": 1, "silu": 2, "relu": 3, "tanh": 4, "exp": 5, "neg": 6, "sqrt": 7,
             "rsqrt": 8, "scale_shift": 9}
BINARY_OPS = {"add": 0, "mul": 1, "sub": 2, "div": 3, "maximum": 4, "minimum": 5}
ACTIVATIONS = {None: 0, "gelu": 1, "gelu_tanh": 2, "silu": 3, "relu": 4}
REDUCE_OPS = {"sum": 0, "mean": 1, "max": 2}


def unary(n: int, op: int, in_offset: int, out_offset: int = 0, scale: float = 1.0, shift: float = 0.0) -> bytes:
    return struct.pack("<4I2f2I", n, op, in_offset, out_offset, scale, shift, 0, 0)


def softmax(rows: int, cols: int, in_offset: int, out_offset: int = 0) -> bytes:
    return struct.pack("<4I", rows, cols, in_offset, out_offset)


def layernorm(rows: int, cols: int, in_offset: int, out_offset: int, eps: float) -> bytes:
    return struct.pack("<4If3I", rows, cols, in_offset, out_offset, eps, 0, 0, 0)


def gather(n_indices: int, dim: int, rows: int, index_is_i64: bool) -> bytes:
    return struct.pack("<4I", n_indices, dim, rows, int(index_is_i64))


def copy(n: int, in_offset: int, out_offset: int, shape: tuple[int, ...], in_strides: tuple[int, ...],
         out_strides: tuple[int, ...]) -> bytes:
    return struct.pack(f"<4I{3 * MAX_DIMS}I", n, len(shape), in_offset, out_offset,
                       *_dims(shape, 1), *_dims(in_strides), *_dims(out_strides))


def reduce(outer: int, length: int, inner: int, op: int, in_offset: int) -> bytes:
    return struct.pack("<8I", outer, length, inner, op, in_offset, 0, 0, 0)


def masked_softmax(rows: int, cols: int, in_offset: int, has_mask: bool, scale: float, mask_offset: int,
                   mask_col_stride: int, lead_shape: tuple[int, ...], mask_lead_strides: tuple[int, ...]) -> bytes:
    # Each row finds its mask row with a division per leading dimension, so
    # they are merged first: attention's (batch, head, query) over a
    # [batch, 1, 1, keys] mask is (batch, head x query), strides (keys, 0).
    lead_shape, (mask_lead_strides,) = merge_dims(tuple(lead_shape), (tuple(mask_lead_strides),))
    return struct.pack(f"<4If3I{2 * MAX_DIMS}I", rows, cols, in_offset, int(has_mask), scale, mask_offset,
                       mask_col_stride, len(lead_shape), *_dims(lead_shape, 1), *_dims(mask_lead_strides))


NO_RESIDUAL = 0xFFFFFFFF


def norm(rows: int, cols: int, x_offset: int, r_offset: int, eps: float, add_one: bool = False) -> bytes:
    return struct.pack("<4If3I", rows, cols, x_offset, r_offset, eps, int(add_one), 0, 0)


def glu(rows: int, cols: int, gate_offset: int, gate_row_stride: int, up_offset: int, up_row_stride: int,
        act: int) -> bytes:
    return struct.pack("<8I", rows, cols, gate_offset, gate_row_stride, up_offset, up_row_stride, act, 0)


def linear(m: int, n: int, k: int, a_offset: int, transpose_b: bool, has_bias: bool, act: int) -> bytes:
    return struct.pack("<8I", m, n, k, a_offset, int(transpose_b), int(has_bias), act, 0)
