"""Empty contractions: a matmul, linear or glu_linear over K = 0 sums nothing.

Its result is zeros (linear: activation(bias) in every row), which BLAS
libraries and the shims' gemm checks treat unevenly (leading dimension 0 is
rejected, a skipped call leaves stale arena bytes). So every device gets the
same answer, the pass rewrites such a node before anything else sees it into
ops that need no contraction: a zeros constant, plus the bias and the
activation for linear. Runs in every compile, whatever the pass switches say:
it is about meaning, not speed.
"""

from __future__ import annotations

import numpy as np

from rlx.ir.graph import Graph, Node
from rlx.opt.rewrite import rebuild

_CONTRACTIONS = ("matmul", "linear", "glu_linear")


def _contracted_dim(node: Node) -> int:
    return node.inputs[0].shape[-1] if node.inputs[0].shape else 1   # glu_linear: the gate's K


def _activation(g: Graph, x: Node, act: str | None) -> Node:
    if act is None:
        return x
    if act in ("gelu", "gelu_tanh"):
        return g.gelu(x, "tanh" if act == "gelu_tanh" else "none")
    return g.silu(x) if act == "silu" else g.relu(x)


def expand_empty_contractions(graph: Graph) -> tuple[Graph, int]:
    """The graph with every K = 0 matmul / linear replaced; the count replaced."""
    empty = [n for n in graph.topo_order() if n.op in _CONTRACTIONS and _contracted_dim(n) == 0]
    if not empty:
        return graph, 0

    def rewrite(node: Node, mapped, g: Graph) -> Node | None:
        if node not in empty:
            return None
        zeros = g.constant(np.zeros(node.shape, node.dtype.numpy), dtype=node.dtype)
        if node.op in ("matmul", "glu_linear"):
            return zeros
        bias = node.inputs[2] if len(node.inputs) == 3 else None
        body = zeros if bias is None else g.add(zeros, mapped(bias))
        return _activation(g, body, node.attrs["activation"])

    new, _ = rebuild(graph, rewrite)
    return new, len(empty)
