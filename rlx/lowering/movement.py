"""Lowering of data movement (shaders/movement.h): the view ops (no thunk
where the consumer reads strides), copy, gather and concat."""

from __future__ import annotations

import struct

from rlx.errors import UnsupportedOpError
from rlx.ir.dtype import QUANTIZED, i32, i64
from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, Work, float_suffix, lowers
from rlx.runtime.views import View


def gather_params(n_indices: int, dim: int, rows: int, index_is_i64: bool) -> bytes:
    return struct.pack("<4I", n_indices, dim, rows, int(index_is_i64))


@lowers("reshape")
def _reshape(lw: Lowering, node: Node) -> View:
    src = lw.view(node.inputs[0])
    view = src.reshape(tuple(node.shape))
    if view is None:
        view = lw.dense(node.inputs[0]).reshape(tuple(node.shape))
    return view


@lowers("transpose")
def _transpose(lw: Lowering, node: Node) -> View:
    return lw.view(node.inputs[0]).transpose(tuple(node.attrs["perm"]))


@lowers("narrow")
def _narrow(lw: Lowering, node: Node) -> View:
    axis = node.attrs["axis"] % len(node.inputs[0].shape)
    return lw.view(node.inputs[0]).narrow(axis, node.attrs["start"], node.attrs["length"])


@lowers("frames")
def _frames(lw: Lowering, node: Node) -> View:
    """Frames as strides over the input: the frame axis steps hop samples,
    so frames overlap when hop < frame_length (readers only read them)."""
    return lw.view(node.inputs[0]).frames(node.attrs["frame_length"], node.attrs["hop"])


@lowers("copy")
def _copy(lw: Lowering, node: Node) -> View:
    out = lw.new_value(node)
    lw.emit_copy(repr(node), lw.view(node.inputs[0]), out)
    return out


@lowers("gather", reads={0: "start"}, kernels=("gather", *(f"gather_{fmt}" for fmt in (*QUANTIZED, "bf16"))))
def _gather(lw: Lowering, node: Node) -> View:
    """Rows of a float table, or of a quantized one (shaders/quant.h decodes
    each row's blocks as it copies them)."""
    table = lw.dense(node.inputs[0], at_start=True)
    idx = lw.view(node.inputs[1])
    if idx.dtype not in (i32, i64):
        raise UnsupportedOpError(f"{node!r}: gather indices must be int32 or int64")
    if not idx.is_dense or idx.offset:
        raise UnsupportedOpError(f"{node!r}: gather indices must be a dense tensor, not a strided view")
    out = lw.new_value(node)
    rows, dim = table.shape
    fmt = f"{table.dtype.name}_" if table.dtype.storage_only else ""
    lw.dispatch(repr(node), f"gather_{fmt}{float_suffix(node, node.dtype)}", [(table, "r"), (idx, "r"), (out, "w")],
                gather_params(idx.numel, dim, rows, idx.dtype == i64),
                lw.target.elementwise_grid(out.numel, scalar=True), Work("copy"))
    return out


@lowers("concat")
def _concat(lw: Lowering, node: Node) -> View:
    """One strided copy per input into its slice of the output."""
    out = lw.new_value(node)
    axis = node.attrs["axis"]
    start = 0
    for i, src in enumerate(node.inputs):
        length = src.shape[axis]
        lw.emit_copy(f"{node!r} part {i}", lw.view(src), out.narrow(axis, start, length))
        start += length
    return out
