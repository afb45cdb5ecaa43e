"""Lowering of the reductions (shaders/reduce.h): sum, mean, max, argmax."""

from __future__ import annotations

import struct
from math import prod

from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, Work, float_suffix, lowers
from rlx.runtime.views import View

REDUCE_OPS = {"sum": 0, "mean": 1, "max": 2}


def reduce_params(outer: int, length: int, inner: int, op: int, in_offset: int) -> bytes:
    return struct.pack("<8I", outer, length, inner, op, in_offset, 0, 0, 0)


@lowers("sum", "mean", "max", "argmax", kernels=("reduce", "argmax"))
def _reduce(lw: Lowering, node: Node) -> View:
    x = lw.dense(node.inputs[0])
    axis = node.attrs["axis"]
    shape = x.shape
    outer, length, inner = prod(shape[:axis]), shape[axis], prod(shape[axis + 1:])
    out = lw.new_value(node)
    if out.numel == 0:
        return out
    suffix = float_suffix(node, x.dtype)
    kernel = f"argmax_{suffix}" if node.op == "argmax" else f"reduce_{suffix}"
    op = 0 if node.op == "argmax" else REDUCE_OPS[node.op]
    lw.dispatch(repr(node), kernel, [(x, "r"), (out, "w")], reduce_params(outer, length, inner, op, x.offset),
                lw.target.row_grid(outer * inner, length), Work("softmax"))   # a row pass, like softmax
    return out
