"""Lowering of cast: f32 <-> f16 is the strided copy (shaders/movement.h)
with a dtype change; casts to and from FP8 are shaders/fp8.h's kernels."""

from __future__ import annotations

from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, lowers
from rlx.lowering.fp8 import lower_fp8_cast
from rlx.runtime.views import View


# Read "dense" (the default) though the FP8 casts want their input at its
# first byte: a read kind is one per position, and the f32 <-> f16 copy,
# the common cast, reads any strides; lower_fp8_cast copies where it must.
@lowers("cast", kernels=("cast_to_f8", "cast_from_f8"))
def _cast(lw: Lowering, node: Node) -> View:
    if node.dtype.is_fp8 or node.inputs[0].dtype.is_fp8:
        return lower_fp8_cast(lw, node)
    out = lw.new_value(node)
    lw.emit_copy(repr(node), lw.view(node.inputs[0]), out)
    return out
