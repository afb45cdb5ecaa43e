"""Lowering of glu (shaders/glu.h), reading both halves of a packed
projection through row strides."""

from __future__ import annotations

import struct

from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, Work, float_suffix, lowers, rows_view
from rlx.lowering.linear import ACTIVATIONS
from rlx.runtime.views import View


def glu_params(rows: int, cols: int, gate_offset: int, gate_row_stride: int, up_offset: int, up_row_stride: int,
        act: int) -> bytes:
    return struct.pack("<8I", rows, cols, gate_offset, gate_row_stride, up_offset, up_row_stride, act, 0)


@lowers("glu", reads={0: "rows", 1: "rows"}, kernels=("glu",))
def _glu(lw: Lowering, node: Node) -> View:
    gate, gate_stride = rows_view(lw, node.inputs[0])
    up, up_stride = rows_view(lw, node.inputs[1])
    out = lw.new_value(node)
    cols = node.shape[-1] if node.shape else 1
    rows = out.numel // max(cols, 1)
    if out.numel:
        params = glu_params(rows, cols, gate.offset, gate_stride, up.offset, up_stride,
                       ACTIVATIONS[node.attrs["activation"]])
        lw.dispatch(repr(node), f"glu_{float_suffix(node, node.dtype)}", [(gate, "r"), (up, "r"), (out, "w")],
                    params, lw.target.row_grid(rows, cols), Work("unary"))
    return out
