"""The graph IR: dtypes, shapes, ops and graphs.

Imports nothing of rlx except ``rlx.errors``, so every other layer can depend
on it without cycles.
"""

from rlx.ir.dtype import DType, f8e4m3, f8e5m2, f16, f32, i32, i64
from rlx.ir.graph import Graph, Node
from rlx.ir.op import OpDef, TensorType, all_ops, get_op, register_op
from rlx.ir.printer import format_graph
from rlx.ir.shape import MAX_ELEMENTS, Shape, broadcast_shapes, contiguous_strides

__all__ = [
    "Graph", "Node", "DType", "f32", "f16", "f8e4m3", "f8e5m2", "i32", "i64", "Shape", "TensorType", "OpDef",
    "register_op", "get_op", "all_ops", "broadcast_shapes", "contiguous_strides", "format_graph", "MAX_ELEMENTS",
]
