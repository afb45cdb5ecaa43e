"""Lowering of softmax and masked_softmax (shaders/softmax.h)."""

from __future__ import annotations

import struct

from rlx.errors import UnsupportedOpError
from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, Work, float_suffix, lowers
from rlx.runtime import params as P
from rlx.runtime.views import View


def softmax_params(rows: int, cols: int, in_offset: int, out_offset: int = 0) -> bytes:
    return struct.pack("<4I", rows, cols, in_offset, out_offset)


def masked_softmax_params(rows: int, cols: int, in_offset: int, has_mask: bool, scale: float, mask_offset: int,
                   mask_col_stride: int, lead_shape: tuple[int, ...], mask_lead_strides: tuple[int, ...]) -> bytes:
    # Each row finds its mask row with a division per leading dimension, so
    # they are merged first: attention's (batch, head, query) over a
    # [batch, 1, 1, keys] mask is (batch, head x query), strides (keys, 0).
    lead_shape, (mask_lead_strides,) = P.merge_dims(tuple(lead_shape), (tuple(mask_lead_strides),))
    return struct.pack(f"<4If3I{2 * P.MAX_DIMS}I", rows, cols, in_offset, int(has_mask), scale, mask_offset,
                       mask_col_stride, len(lead_shape), *P.dims(lead_shape, 1), *P.dims(mask_lead_strides))


@lowers("softmax", kernels=("softmax",))
def _softmax(lw: Lowering, node: Node) -> View:
    x = lw.dense(node.inputs[0])
    out = lw.new_value(node)
    cols = node.shape[-1] if node.shape else 1
    rows = out.numel // max(cols, 1)
    if out.numel:
        lw.dispatch(repr(node), f"softmax_{float_suffix(node, node.dtype)}", [(x, "r"), (out, "w")],
                    softmax_params(rows, cols, x.offset), lw.target.row_grid(rows, cols), Work("softmax"))
    return out


@lowers("masked_softmax", kernels=("softmax_masked",))
def _masked_softmax(lw: Lowering, node: Node) -> View:
    x = lw.dense(node.inputs[0])
    shape = x.shape
    if len(shape) - 1 > P.MAX_DIMS:
        raise UnsupportedOpError(f"{node!r}: more than {P.MAX_DIMS} leading dimensions")
    has_mask = len(node.inputs) == 2
    mask = lw.view(node.inputs[1]).broadcast_to(shape) if has_mask else x
    out = lw.new_value(node)
    cols = shape[-1]
    rows = out.numel // max(cols, 1)
    if out.numel:
        params = masked_softmax_params(rows, cols, x.offset, has_mask, node.attrs["scale"], mask.offset,
                                  mask.strides[-1], shape[:-1], mask.strides[:-1])
        lw.dispatch(repr(node), f"softmax_masked_{float_suffix(node, node.dtype)}",
                    [(x, "r"), (mask, "r"), (out, "w")], params,
                    lw.target.row_grid(rows, cols, stacked=True), Work("softmax_masked"))
    return out
