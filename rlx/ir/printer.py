"""Human-readable listing of a graph, for debugging passes and error reports.

Duck-typed on the graph (no import of graph.py) so it can never create an
import cycle.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["format_graph", "format_node", "format_attr"]

_LEAF_HIDDEN = {"name", "shape", "dtype"}  # already visible in the type and the trailing comment
_INLINE_CONSTANT = 8  # constants with at most this many elements print their values


def format_attr(v: Any) -> str:
    """One attr value, compactly: arrays are summarized, dtypes by name."""
    if isinstance(v, np.ndarray):
        if v.size <= _INLINE_CONSTANT:
            return repr(v.tolist())
        return f"<array {v.dtype}{list(v.shape)}>"
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, tuple):  # Shape prints like a tuple too
        return "(" + ", ".join(format_attr(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if hasattr(v, "is_float") and hasattr(v, "itemsize"):  # a DType
        return str(v)
    return repr(v)


def format_node(node: Any) -> str:
    """``%id = op(%a, %b, attr=v) : f16[1,7]  # name``."""
    leaf = not node.inputs and node.op in ("input", "param", "constant")
    parts = [f"%{getattr(x, 'id', '?')}" for x in node.inputs]
    for k, v in node.attrs.items():
        if leaf and k in _LEAF_HIDDEN:
            continue
        parts.append(f"{k}={format_attr(v)}")
    tail = f"  # {node.name}" if node.name else ""
    return f"%{node.id} = {node.op}({', '.join(parts)}) : {node.type}{tail}"


def format_graph(g: Any) -> str:
    """The whole graph: header (inputs, params), one line per node, then outputs.

    Nodes are listed in topological order when the graph has outputs and is
    acyclic (what will run), otherwise all nodes in insertion order.
    """
    try:
        nodes = g.topo_order()
        dead = len(g.nodes) - len(nodes)
    except Exception:  # no outputs yet, or a cycle: still print something useful
        nodes, dead = g.nodes, 0

    def decls(table: dict) -> str:
        return ", ".join(f"{k}: {n.type} (%{n.id})" for k, n in table.items()) or "none"

    lines = ["graph", f"  inputs: {decls(g.inputs)}", f"  params: {decls(g.params)}"]
    lines += ["  " + format_node(n) for n in nodes]
    if dead:
        lines.append(f"  ({dead} unreachable node(s) not shown)")
    outs = g.outputs
    lines.append("  outputs: " + (", ".join(f"{k} = %{n.id}" for k, n in outs.items()) if outs else "none"))
    return "\n".join(lines)
