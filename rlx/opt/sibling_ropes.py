"""Sibling query/key norms: two rmsnorm_rope nodes over adjacent slices of
one projection become one dispatch.

After the siblings pass (rlx/opt/siblings.py) a decoder's query and key
projections are one GEMV, and its per-head query and key norms (Gemma 3,
Qwen 3) read narrows of that output: rmsnorm_rope(reshape(narrow(P, ...,
0, Hq * D), (T, Hq, D)), positions, w_q) and the same over the next Hk * D
features with w_k. Both are one threadgroup per head doing the same work,
so they become one rmsnorm_rope over the Hq + Hk heads of the wider narrow,
its heads from Hq on normed by w_k (the op's second weight), and each
original reads its heads of the result back as a narrow: one kernel launch
less per layer, which a GPU decode step pays in latency.

A pair merges only when it is exactly that: the same positions node and
attributes (eps, add_one, base, layout, rotary_dim, freq_factors), one weight each (a
param or input), x of
rank 3 read from a rank-2 projection's last axis, the two ranges adjacent,
and neither node a graph output. Everything else is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx.ir.graph import Graph, Node
from rlx.opt.rewrite import rebuild

CAPABILITY = "sibling_ropes"   # a target capability (rlx/runtime/target.py), after the siblings pass
_SAME = ("eps", "add_one", "base", "layout", "rotary_dim", "freq_factors")


@dataclass
class _Slice:
    node: Node            # the rmsnorm_rope
    source: Node          # the rank-2 projection it reads
    start: int            # its first feature in the source's last axis
    heads: int


def _slice_of(node: Node, outputs: set[Node]) -> _Slice | None:
    if node.op != "rmsnorm_rope" or len(node.inputs) != 3 or node in outputs:
        return None
    if node.inputs[2].op not in ("param", "input"):   # built before any node in the rebuild
        return None
    x = node.inputs[0]
    if x.op != "reshape" or len(x.shape) != 3 or x.inputs[0].op != "narrow":
        return None
    narrow = x.inputs[0]
    source = narrow.inputs[0]
    if len(source.shape) != 2 or len(narrow.shape) != 2 or narrow.attrs["axis"] != 1:
        return None
    if narrow.shape[0] != x.shape[0]:   # the reshape splits features into heads, T stays
        return None
    return _Slice(node, source, narrow.attrs["start"], x.shape[1])


def _pairs(graph: Graph) -> list[tuple[_Slice, _Slice]]:
    """(first, second) pairs whose ranges are adjacent in one projection,
    each node in at most one pair, in graph order."""
    outputs = set(graph.outputs.values())
    slices = [s for s in (_slice_of(n, outputs) for n in graph.topo_order()) if s is not None]
    pairs, used = [], set()
    for a in slices:
        for b in slices:
            if a is b or a.node in used or b.node in used or a.source is not b.source:
                continue
            na, nb = a.node, b.node
            d = na.shape[-1]
            if (nb.shape[-1] != d or na.dtype != nb.dtype or na.inputs[1] is not nb.inputs[1]
                    or any(na.attrs[k] != nb.attrs[k] for k in _SAME) or b.start != a.start + a.heads * d):
                continue
            pairs.append((a, b))
            used.update((na, nb))
    return pairs


def merge_sibling_ropes(graph: Graph) -> tuple[Graph, int]:
    """The graph with every sibling pair merged; the number of pairs."""
    pairs = _pairs(graph)
    if not pairs:
        return graph, 0
    role = {}
    for i, (a, b) in enumerate(pairs):
        role[a.node], role[b.node] = (i, 0), (i, 1)
    merged: dict[int, Node] = {}

    def rewrite(node: Node, mapped, g: Graph):
        if node not in role:
            return None
        i, which = role[node]
        a, b = pairs[i]
        if i not in merged:
            # Built at the first of the two: every input of both (the shared
            # source and positions, two params) exists by then.
            d = a.node.shape[-1]
            t, heads = a.node.shape[0], a.heads + b.heads
            x = g.reshape(g.narrow(mapped(a.source), 1, a.start, heads * d), (t, heads, d))
            attrs = {k: a.node.attrs[k] for k in _SAME}
            merged[i] = g.rmsnorm_rope(x, mapped(a.node.inputs[1]), mapped(a.node.inputs[2]),
                                       weight_b=mapped(b.node.inputs[2]), weight_b_from=a.heads, **attrs)
        start, count = (0, a.heads) if which == 0 else (a.heads, b.heads)
        return g.narrow(merged[i], 1, start, count, name=node.name)

    new, _ = rebuild(graph, rewrite)
    return new, len(pairs)
