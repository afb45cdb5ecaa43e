"""Lowering of cast: the strided copy (shaders/movement.h) with a dtype
change, f32 <-> f16."""

from __future__ import annotations

from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, lowers
from rlx.runtime.views import View


@lowers("cast")
def _cast(lw: Lowering, node: Node) -> View:
    out = lw.new_value(node)
    lw.emit_copy(repr(node), lw.view(node.inputs[0]), out)
    return out
