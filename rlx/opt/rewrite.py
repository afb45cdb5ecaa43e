"""Graph rewriting by rebuilding: passes never mutate a graph; they build a
new one node by node, with a hook that may replace any node. Nodes not
reachable from the outputs are dropped, so a fused-away chain disappears."""

from __future__ import annotations

from collections.abc import Callable

from rlx.ir.graph import Graph, Node

# rewrite(node, mapped, new_graph) -> replacement in new_graph, or None to
# copy the node as it is, or SKIP for a node absorbed into a later fused
# node (it is not built at all). `mapped(old)` gives the new node.
Rewrite = Callable[[Node, Callable[[Node], Node], Graph], "Node | None"]
SKIP = object()


def clone_node(node: Node, new_inputs: list[Node], g: Graph) -> Node:
    attrs = dict(node.attrs)
    if node.op in ("input", "param", "state"):
        return g.op(node.op, (), **attrs)
    if node.name is not None and node.op != "constant":
        attrs["name"] = node.name
    return g.op(node.op, new_inputs, **attrs)


def rebuild(graph: Graph, rewrite: Rewrite | None = None,
            drop_params: frozenset[Node] = frozenset()) -> tuple[Graph, dict[Node, Node]]:
    """A new graph computing the same outputs, with `rewrite` applied in
    topological order. Every input and param of the old graph is kept
    (in declaration order) so run-time bindings do not change, except
    `drop_params`: params a pass replaced (rewrite must not read them)."""
    g = Graph()
    mapping: dict[Node, Node] = {}

    def mapped(old: Node) -> Node:
        new = mapping[old]
        if new is SKIP:
            raise AssertionError(f"{old!r} was absorbed into a fused node but is still read")
        return new

    for node in list(graph.inputs.values()) + list(graph.params.values()):
        mapping[node] = SKIP if node in drop_params else clone_node(node, [], g)
    for node in graph.topo_order():
        if node in mapping:
            continue
        new = rewrite(node, mapped, g) if rewrite is not None else None
        mapping[node] = new if new is not None else clone_node(node, [mapped(i) for i in node.inputs], g)
    g.set_outputs({name: mapping[node] for name, node in graph.outputs.items()})
    return g, mapping
