"""Lowering of the repetition penalty (shaders/penalty.h): a copy of the
logits, then one dispatch over the history entries that rewrites the
penalized ids in place (the hazard tracker puts the barrier between)."""

from __future__ import annotations

import struct

from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, Work, float_suffix, lowers
from rlx.runtime.views import View


def penalty_params(rows: int, vocab: int, hist_len: int, hist_row_stride: int, in_offset: int,
                   hist_offset: int, pen_offset: int) -> bytes:
    return struct.pack("<8I", rows, vocab, hist_len, hist_row_stride, in_offset, hist_offset, pen_offset, 0)


@lowers("repetition_penalty", kernels=("repetition_penalty",))
def _repetition_penalty(lw: Lowering, node: Node) -> View:
    x, hist, pen = (lw.dense(i) for i in node.inputs)
    out = lw.new_value(node)
    if out.numel == 0:
        return out
    lw.emit_copy(f"{node!r} (the logits)", x, out)
    vocab, h = x.shape[-1], hist.shape[-1]
    rows = out.numel // vocab
    if rows * h == 0:
        return out
    stride = 0 if len(hist.shape) == 1 else h
    lw.dispatch(f"{node!r} (the history's ids)", f"repetition_penalty_{float_suffix(node, x.dtype)}",
                [(x, "r"), (hist, "r"), (pen, "r"), (out, "w")],
                penalty_params(rows, vocab, h, stride, x.offset, hist.offset, pen.offset),
                lw.target.elementwise_grid(rows * h, scalar=True), Work("copy"))
    return out
