"""Lowering of glu (shaders/glu.h), reading both halves of a packed
projection through row strides, and of glu_linear: on GPUs one GEMV that
forms the glu as it stages x (shaders/quant_gemv.h), else the glu kernel and
linear's path."""

from __future__ import annotations

import struct

from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, Work, float_suffix, lowers, rows_view
from rlx.lowering.linear import ACTIVATIONS, linear_of
from rlx.lowering.quant import LINEAR_KERNELS, glu_gemv
from rlx.runtime.views import View


def glu_params(rows: int, cols: int, gate_offset: int, gate_row_stride: int, up_offset: int, up_row_stride: int,
        act: int) -> bytes:
    return struct.pack("<8I", rows, cols, gate_offset, gate_row_stride, up_offset, up_row_stride, act, 0)


def glu_into(lw: Lowering, node: Node, gate: View, gate_stride: int, up: View, up_stride: int, act: int) -> View:
    """act(gate) * up in a new dense value of gate's shape (node's dtype)."""
    out = lw.new_value(node, tuple(gate.shape))
    cols = gate.shape[-1] if gate.shape else 1
    rows = out.numel // max(cols, 1)
    if out.numel:
        lw.dispatch(f"{node!r}" if node.op == "glu" else f"{node!r} glu", f"glu_{float_suffix(node, node.dtype)}",
                    [(gate, "r"), (up, "r"), (out, "w")],
                    glu_params(rows, cols, gate.offset, gate_stride, up.offset, up_stride, act),
                    lw.target.row_grid(rows, cols), Work("unary"))
    return out


@lowers("glu", reads={0: "rows", 1: "rows"}, kernels=("glu",))
def _glu(lw: Lowering, node: Node) -> View:
    gate, gate_stride = rows_view(lw, node.inputs[0])
    up, up_stride = rows_view(lw, node.inputs[1])
    return glu_into(lw, node, gate, gate_stride, up, up_stride, ACTIVATIONS[node.attrs["activation"]])


@lowers("glu_linear", reads={0: "rows", 1: "rows", 2: "start"}, kernels=("glu", "matmul_rows", "bias_act",
                                                                        *LINEAR_KERNELS))
def _glu_linear(lw: Lowering, node: Node) -> View:
    gate, gate_stride = rows_view(lw, node.inputs[0])
    up, up_stride = rows_view(lw, node.inputs[1])
    w = lw.dense(node.inputs[2], at_start=True)
    act = ACTIVATIONS[node.attrs["activation"]]
    fused = glu_gemv(lw, node, gate, up, w, act)
    if fused is not None:
        return fused
    return linear_of(lw, node, glu_into(lw, node, gate, gate_stride, up, up_stride, act), w, None, 0, True)
