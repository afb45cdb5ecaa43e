"""Horizontal fusion of sibling projections (QKV fusion).

Linear layers (and plain matmuls against a 2-D weight) that read the same
input with compile-time weights become one wider layer over the
concatenated weights and biases; each original consumer reads a narrow of
the wide output's last axis. In a transformer layer the query, key and
value projections are such siblings (and a decoder's gate and up): three
gemms (and their bias epilogues, where the gemm does not add the bias)
become one, and a wider gemm also uses the machine better.

A group is >= 2 nodes with the same input, op, activation, weight layout
(transpose_b), dtypes and kind of weight (all params or all constants), and
the same kind of bias (all present or all absent). A weight (or bias) is
read by nothing else, or only by groups of the same weights (the steps of
a decode block: each step's query, key and value projections), which then
share one merged weight. A sibling is left alone when a consumer of its
narrowed output would need a dense copy (the table below mirrors which
kernels read strided views; rlx/lowering/), or when it is a graph output.

Merged params are new graph params named after their sources
("a.w+b.w+c.w"); the compiler fills them at bind time from the sources'
values (``param_values``), so precision converts them like any other param
and ``share_params_with`` shares them by that name. The sources stay
settable: ``alias_slots`` makes each one a slot that writes its slice of the
merged param. Constants are concatenated here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from rlx.errors import ParameterError
from rlx.ir.graph import Graph, Node
from rlx.ir.op import get_op
from rlx.lowering.core import READS, rows_readable
from rlx.opt.rewrite import rebuild
from rlx.runtime.views import Storage, View

CAPABILITY = "linear_siblings"



@dataclass(frozen=True)
class MergedParam:
    """A param the pass made: sources concatenated along ``axis``."""
    name: str
    sources: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    axis: int


@dataclass
class SiblingReport:
    groups: list[tuple[str, list[str], list[int]]] = field(default_factory=list)   # (op, members, widths)
    left_alone: list[tuple[str, str]] = field(default_factory=list)                # (member, why)
    merged: dict[str, MergedParam] = field(default_factory=dict)

    @property
    def nodes_merged(self) -> int:
        return sum(len(members) for _, members, _ in self.groups)

    def describe(self) -> str:
        if not self.groups:
            line = "siblings: nothing merged"
        else:
            line = (f"siblings: {self.nodes_merged} projections -> {len(self.groups)} "
                    f"(one gemm per group, consumers read narrow views)")
        lines = [line]
        lines += [f"  merged {op} {', '.join(m)} -> N={'+'.join(map(str, w))}" for op, m, w in self.groups]
        lines += [f"  left alone {m}: {why}" for m, why in self.left_alone]
        return "\n".join(lines)

    # ---- binding (rlx/runtime/compiler.py) --------------------------------
    def param_values(self, graph: Graph, params: Mapping[str, np.ndarray], shared: Mapping) -> dict:
        """``params`` plus a value for every merged param of ``graph`` that
        is not read from another executable (``shared``) nor given."""
        out = {k: v for k, v in params.items() if k not in self._sources()}
        for name, merged in self.merged.items():
            if name not in graph.params or name in shared or name in out:
                continue
            missing = [s for s in merged.sources if s not in params]
            if missing:
                raise ParameterError(f"missing value for parameter(s) {missing} (merged into {name!r} by the "
                                     f"{CAPABILITY} pass); pass them as rlx.compile(..., params=...)")
            from rlx.runtime.executable import IOSpec, coerce_param, drop_file_pages, unwrap_file_tensor

            parts = []
            dtype = graph.params[name].dtype
            for source, shape in zip(merged.sources, merged.shapes):
                if dtype.quantized:   # raw blocks (or a GGUF tensor): rows concatenate as bytes
                    parts.append(coerce_param(IOSpec(source, shape, dtype), params[source]))
                    continue
                # Values as given (the bind converts the whole to the param's dtype, with its
                # scales for FP8); an rlx.gguf tensor as its array (np.asarray would make a
                # 0-d object of it).
                value = np.asarray(unwrap_file_tensor(params[source], dtype))
                if value.shape != shape:
                    raise ParameterError(f"parameter '{source}': shape {value.shape}, expected {shape}")
                parts.append(value)
            out[name] = np.concatenate(parts, axis=merged.axis)
            for source in merged.sources:   # their bytes are in the merged value now
                drop_file_pages(params[source])
        return out

    def _sources(self) -> set[str]:
        return {s for merged in self.merged.values() for s in merged.sources}

    def alias_slots(self, slots: dict) -> dict:
        """Param slots (name -> (IOSpec, buffer, offset)) plus one per
        merged source, writing that source's slice of the merged param."""
        from rlx.runtime.executable import IOSpec

        out = dict(slots)
        for name, merged in self.merged.items():
            if name not in slots:
                continue
            spec, buffer, offset = slots[name]
            if spec.dtype.is_fp8:
                # precision="fp8" quantized the merged weight with one scale per
                # row: a source's float values would need its rows of the scale
                # rewritten too, so set_params takes the merged param only.
                continue
            start = 0
            for source, shape in zip(merged.sources, merged.shapes):
                alias = IOSpec(source, shape, spec.dtype)
                if merged.axis == 0:   # rows of the merged param: one contiguous range (block formats too)
                    row = spec.dtype.nbytes(int(np.prod(shape[1:], dtype=np.int64)), shape[-1])
                    out[source] = (alias, SourceSlice(buffer), offset + start * row)
                else:                  # columns of a [K, N] weight (never a block format: those are [N, K])
                    item = spec.dtype.itemsize
                    out[source] = (alias, SourceSlice(buffer, (shape[0], spec.shape[1] * item, shape[1] * item)),
                                   offset + start * item)
                start += shape[merged.axis]
        return out


class SourceSlice:
    """The buffer of a merged source's param slot: ``write(offset, array)``
    writes the source's rows (one range) or, with ``columns`` = (rows, row
    stride, width) in bytes, its columns (read the rows they span, patch,
    write back). Not shareable with another executable."""

    def __init__(self, buffer, columns: tuple[int, int, int] | None = None):
        self.buffer, self.columns = buffer, columns

    def write(self, offset: int, data) -> None:
        if self.columns is None:
            self.buffer.write(offset, data)
            return
        rows, stride, width = self.columns
        if rows == 0 or width == 0:
            return
        raw = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8).reshape(rows, width)
        span = np.frombuffer(self.buffer.read(offset, (rows - 1) * stride + width), np.uint8).copy()
        for r in range(rows):
            span[r * stride:r * stride + width] = raw[r]
        self.buffer.write(offset, span)


def shareable(buffer) -> bool:
    """A param slot another executable may read in place (not a source slice)."""
    return not isinstance(buffer, SourceSlice)


# ---------------------------------------------------------------- the pass


@dataclass
class _Member:
    node: Node
    weight: Node
    bias: Node | None


def _projection(node: Node) -> _Member | None:
    if node.op == "linear":
        return _Member(node, node.inputs[1], node.inputs[2] if len(node.inputs) == 3 else None)
    if node.op == "matmul" and len(node.inputs[1].shape) == 2 and node.inputs[1] is not node.inputs[0]:
        return _Member(node, node.inputs[1], None)
    return None


def _no_copy(node: Node, view: View, consumers: dict[Node, list[Node]], outputs: set[Node]) -> str | None:
    """Why reading ``node`` as ``view`` (a narrow of the wide output) would
    make the lowering copy, or None when every consumer reads it in place."""
    if node in outputs and not (view.is_dense and view.offset == 0):
        return "it is a graph output (outputs are copied out densely)"
    for user in consumers.get(node, []):
        positions = [i for i, x in enumerate(user.inputs) if x is node]
        if get_op(user.op).is_view:
            a = user.attrs
            if user.op == "reshape":
                nxt = view.reshape(tuple(user.shape))
                if nxt is None:
                    return f"{user.op} %{user.id} cannot view it without a copy"
            elif user.op == "transpose":
                nxt = view.transpose(tuple(a["perm"]))
            elif user.op == "narrow":
                nxt = view.narrow(a["axis"], a["start"], a["length"])
            elif user.op == "frames":
                nxt = view.frames(a["frame_length"], a["hop"])
            else:
                return f"{user.op} %{user.id} is a view this pass does not follow"
            why = _no_copy(user, nxt, consumers, outputs)
            if why:
                return why
            continue
        if all(_reads_without_copy(READS.get(user.op, {}).get(p, "dense"), view) for p in positions):
            continue
        return f"{user.op} %{user.id} reads it densely (a copy)"
    return None


def _reads_without_copy(kind: str, view: View) -> bool:
    """Whether a lowering that reads an input the way ``kind`` says
    (rlx/lowering/core.py READS) takes ``view`` as it is."""
    if kind == "strided":
        return True
    if kind == "feature":
        return view.shape[-1] <= 1 or view.strides[-1] == 1
    if kind == "rows":
        return rows_readable(view)
    return view.is_dense and not (kind == "start" and view.offset)


def _key(m: _Member) -> tuple | None:
    node, w, b = m.node, m.weight, m.bias
    if w.op not in ("param", "constant") or (b is not None and b.op not in ("param", "constant")):
        return None
    tb = node.attrs["transpose_b"]
    k = w.shape[1] if tb else w.shape[0]
    return (node.op, node.inputs[0], node.attrs.get("activation"), tb, w.op, w.dtype, k,
            None if b is None else (b.op, b.dtype), node.dtype)


def _weights(members: list[_Member]) -> tuple[Node, ...]:
    """The group's weights and biases, in order."""
    return tuple(n for m in members for n in (m.weight, m.bias) if n is not None)


def _settle(candidates: list[list[_Member]], uses: Mapping[Node, int], consumers: dict[Node, list[Node]],
            outputs: set[Node]) -> tuple[list[list[_Member]], dict[str, str]]:
    """The groups that merge, and why each member left alone was: members
    that would make a consumer copy, or whose weight is also read outside
    groups of its set of weights, leave their group, and the rest is checked
    again (a group's narrows move when a member leaves) until it holds."""
    alone: dict[str, str] = {}
    while True:
        checked = []
        for members in candidates:
            width = sum(m.node.shape[-1] for m in members)
            kept, start = [], 0
            for m in members:
                n = m.node.shape[-1]
                wide = View.dense(Storage("wide", 0), m.node.dtype, tuple(m.node.shape[:-1]) + (width,))
                why = _no_copy(m.node, wide.narrow(len(m.node.shape) - 1, start, n), consumers, outputs)
                if why:
                    alone[_label(m)] = why
                else:
                    kept.append(m)
                start += n
            checked.append(kept)
        reads: dict[Node, int] = defaultdict(int)
        sets: dict[Node, set[tuple]] = defaultdict(set)
        for kept in checked:
            for n in _weights(kept):
                reads[n] += 1
                sets[n].add(_weights(kept))
        settled = []
        for kept in checked:
            clean = [m for m in kept if all(reads[n] == uses[n] and len(sets[n]) == 1 for n in _weights([m]))]
            for m in kept:
                if m not in clean:
                    alone[_label(m)] = "its weight is also read outside groups of its weights"
            if len(clean) >= 2:
                settled.append(clean)
        if [list(map(id, c)) for c in settled] == [list(map(id, c)) for c in candidates]:
            return settled, alone
        candidates = settled


def merge_siblings(graph: Graph) -> tuple[Graph, SiblingReport]:
    """The graph with sibling projections merged (see the module docstring)."""
    report = SiblingReport()
    consumers = graph.consumers()
    outputs = set(graph.outputs.values())
    order = graph.topo_order()
    uses: dict[Node, int] = defaultdict(int)
    for node in order:
        for x in node.inputs:
            uses[x] += 1
    for node in outputs:
        uses[node] += 1

    groups: dict[tuple, list[_Member]] = defaultdict(list)
    for node in order:
        m = _projection(node)
        if m is None:
            continue
        key = _key(m)
        if key is not None:
            groups[key].append(m)

    # Members in their weights' order, so that groups of one set of weights
    # (whatever order the steps' projections were made in) merge alike.
    candidates = [sorted(members, key=lambda m: m.weight.id) for members in groups.values() if len(members) >= 2]
    candidates, alone = _settle(candidates, uses, consumers, outputs)
    report.left_alone += list(alone.items())

    taken = set(graph.inputs) | set(graph.params)
    plan: dict[Node, tuple] = {}          # member -> (group id, start, width)
    builds: list[dict] = []
    for kept in candidates:
        gid = len(builds)
        builds.append({"members": kept, "wide": None})
        start = 0
        for m in kept:
            plan[m.node] = (gid, start, m.node.shape[-1])
            start += m.node.shape[-1]
        report.groups.append((kept[0].node.op, [_label(m) for m in kept], [m.node.shape[-1] for m in kept]))

    if not builds:
        return graph, report

    made: dict[tuple, Node] = {}   # merged weights by their sources (groups of one set of weights share one)

    def concat(g: Graph, nodes: list[Node], axis: int) -> Node:
        key = (tuple(nodes), axis)
        if key not in made:
            made[key] = _concat(g, nodes, axis)
        return made[key]

    def _concat(g: Graph, nodes: list[Node], axis: int) -> Node:
        if nodes[0].op == "constant":
            return g.constant(np.concatenate([np.asarray(n.attrs["value"]) for n in nodes], axis=axis),
                              dtype=nodes[0].dtype)
        names = [n.attrs["name"] for n in nodes]
        name = "+".join(names)
        while name in taken:
            name += "'"
        taken.add(name)
        shapes = [tuple(n.shape) for n in nodes]
        shape = list(shapes[0])
        shape[axis] = sum(s[axis] for s in shapes)
        merged = MergedParam(name, tuple(names), tuple(shapes), axis)
        report.merged[name] = merged
        return g.param(name, shape, nodes[0].dtype)

    def rewrite(node: Node, mapped, g: Graph):
        if node not in plan:
            return None
        gid, start, n = plan[node]
        build = builds[gid]
        if build["wide"] is None:
            members: list[_Member] = build["members"]
            first = members[0].node
            tb = first.attrs["transpose_b"]
            w = concat(g, [m.weight for m in members], 0 if tb else 1)
            x = mapped(first.inputs[0])
            if first.op == "matmul":
                build["wide"] = g.matmul(x, w, transpose_b=tb)
            else:
                b = None if members[0].bias is None else concat(g, [m.bias for m in members], 0)
                build["wide"] = g.linear(x, w, b, activation=first.attrs["activation"], transpose_b=tb)
        wide = build["wide"]
        return g.narrow(wide, len(wide.shape) - 1, start, n, name=node.name)

    dropped = frozenset(n for build in builds for m in build["members"] for n in (m.weight, m.bias)
                        if n is not None and n.op == "param")
    new, _ = rebuild(graph, rewrite, drop_params=dropped)
    return new, report


def _label(m: _Member) -> str:
    w = m.weight
    return w.attrs["name"] if w.op == "param" else f"%{m.node.id}"
