"""Backend-aware fusion: rewrite primitive chains into the fused ops a
target can lower. The target's capability set (op names it lowers) decides
what may be emitted; a target without a fused op keeps the primitive chain.

Patterns (root op <- chain), each applied only when every intermediate node
has exactly one consumer and is not a graph output:
- linear:        act(add(matmul(x, W), bias)), add(matmul(x, W), bias), act(matmul(x, W))
- add_layernorm: layernorm(add(x, r), w, b)          (x and r of the same shape)
- add_rmsnorm:   rmsnorm(add(x, r), w)
- rmsnorm_add_rmsnorm: rmsnorm(s, w2) with s = add(x, rmsnorm(o, w1)) (sandwich norms: a
                 post-norm residual, then the next block's pre-norm); s may have other
                 readers: they read the fused op's sum, the norm's readers its normed sum
- rmsnorm_add:   add(x, rmsnorm(o, w))                (a post-norm residual alone)
- rmsnorm_rope:  rope(rmsnorm(q, w), positions)       (per-head query/key norms)
- glu:           mul(act(gate), up)                   (SwiGLU / GeGLU)
- glu_linear:    linear(glu(gate, up), W) with W in a block format (GGUF) and no bias or
                 activation: a gated FFN's down projection, whose decode GEMV forms the glu
                 as it reads x (the glu may itself be the mul chain above). Only block
                 formats: a float W stays a linear for the precision passes, which convert
                 linear weights (block formats they leave alone)
- fused_elementwise: a tree of elementwise ops (binary and unary, rlx/ir/ops/elementwise.py)
                 whose inner nodes have one reader each, at most 4 distinct inputs and 8 ops,
                 all of one dtype: one pass instead of one per op. Planned after every other
                 pattern, so it only takes what they leave (a glu's or a linear's activation
                 stays theirs)
- windowed_rfft: rfft(mul(x, window)) with an f32 window [N] (leading dimensions of one) over
                 x [..., N]: the FFT's load applies the window (a framed signal is read in
                 place, the product never stored)
- windowed_rfft_power: add(mul(real(X), real(X)), mul(imag(X), imag(X))) of a windowed
                 rfft X (rfft(mul(x, window)) as above, or already windowed_rfft) that
                 nothing else reads: the FFT's store writes the power (a spectrogram's
                 power spectrum, the c64 spectrum never stored)
- attention:     matmul(softmax(add(mul(matmul(Q, K^T), scale), mask)), V) with Q, K, V
                 heads-first transposes of [B, T, H, D] tensors (mul and add optional; the
                 add only where no masked_softmax scale follows it, see _match_attention)
Every match is also built once over stand-in inputs and must type-check to the
matched root's shape and dtype; a pattern that does not fit leaves the graph alone.
Narrow/reshape of a packed QKV feeding attention or RoPE needs no pass: the
lowering reads such views through strides.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rlx.errors import RlxError
from rlx.ir.graph import Graph, Node
from rlx.ir.ops.elementwise import CHAIN_BINARY, CHAIN_MAX_INPUTS, CHAIN_MAX_STEPS, CHAIN_UNARY
from rlx.opt.rewrite import SKIP, rebuild
from rlx.runtime.params import MAX_DIMS

FUSED_OPS = frozenset({"fused_elementwise", "linear", "add_layernorm", "add_rmsnorm", "glu", "glu_linear", "attention",
                       "rmsnorm_add_rmsnorm", "rmsnorm_add", "rmsnorm_rope", "windowed_rfft",
                       "windowed_rfft_power"})
_ACT_OF = {("gelu", "none"): "gelu", ("gelu", "tanh"): "gelu_tanh", ("silu", None): "silu", ("relu", None): "relu"}


@dataclass
class FusionReport:
    nodes_before: int
    nodes_after: int = 0
    fused: Counter = field(default_factory=Counter)

    def describe(self) -> str:
        groups = ", ".join(f"{n} {op}" for op, n in sorted(self.fused.items())) or "nothing fused"
        return f"fusion: {self.nodes_before} -> {self.nodes_after} nodes ({groups})"


def _activation(node: Node) -> str | None:
    key = (node.op, node.attrs.get("approximate") if node.op == "gelu" else None)
    return _ACT_OF.get(key)


class _Matcher:
    def __init__(self, graph: Graph):
        self.uses = Counter()
        self.position: dict[Node, int] = {}
        for node in graph.topo_order():
            self.position[node] = len(self.position)
            for x in node.inputs:
                self.uses[x] += 1
        for node in graph.outputs.values():
            self.uses[node] += 1   # an output is a use the pattern cannot absorb

    def private(self, node: Node) -> bool:
        """Only the pattern's root reads it: it can be absorbed."""
        return self.uses[node] == 1

    def built_before(self, node: Node, other: Node) -> bool:
        """The graph rebuild (rlx/opt/rewrite.py) has made ``node`` when it
        reaches ``other``: inputs and params come first, the rest in order."""
        return node.op in ("input", "param") or self.position[node] < self.position[other]


def _scalar_constant(node: Node) -> float | None:
    if node.op == "constant" and int(np.prod(node.shape)) == 1:
        return float(np.asarray(node.attrs["value"]).reshape(()))
    return None


def _peel_transposes(node: Node) -> tuple[Node, tuple[int, ...]]:
    """The first non-transpose ancestor and the composed permutation."""
    perm = tuple(range(len(node.shape)))
    while node.op == "transpose":
        p = node.attrs["perm"]
        perm = tuple(p[i] for i in perm)
        node = node.inputs[0]
    return node, perm


Build = Callable[[Callable[[Node], Node], Graph], Node]
# fused op, absorbed nodes, builder of the root's replacement, and optionally
# {node: builder}: nodes before the root that the fused op's other outputs
# replace (their other readers then read that output).
Match = tuple[str, list[Node], Build] | tuple[str, list[Node], Build, dict[Node, Build]]


def fuse(graph: Graph, capabilities: frozenset[str]) -> tuple[Graph, FusionReport]:
    """Plan fusions consumers-first (so the largest pattern claims its nodes
    before a smaller one could), then rebuild the graph with them."""
    m = _Matcher(graph)
    order = graph.topo_order()
    report = FusionReport(nodes_before=len(order))
    plan: dict[Node, Build] = {}
    absorbed: set[Node] = set()
    matchers = [(op, fn) for op, fn in (("attention", _match_attention), ("linear", _match_linear),
                                        ("add_layernorm", _match_add_norm),
                                        # before add_rmsnorm, which would take the sum and leave the inner norm
                                        ("rmsnorm_add_rmsnorm", _match_rmsnorm_add_rmsnorm),
                                        ("add_rmsnorm", _match_add_norm), ("rmsnorm_add", _match_rmsnorm_add),
                                        ("rmsnorm_rope", _match_rmsnorm_rope),
                                        ("glu_linear", _match_glu_linear),
                                        ("glu", _match_glu),
                                        # before windowed_rfft, which would take the transform alone
                                        ("windowed_rfft_power", _match_windowed_rfft_power),
                                        ("windowed_rfft", _match_windowed_rfft)) if op in capabilities]
    for node in reversed(order):
        if node in absorbed or node in plan:
            continue
        for op, fn in matchers:
            match = fn(node, m)
            if match is None or match[0] != op:
                continue
            replaced = match[3] if len(match) > 3 else {}
            if any(n in absorbed or n in plan for n in (*match[1], *replaced)):
                continue
            if not all(_same_type_when_built(n, build) for n, build in ((node, match[2]), *replaced.items())):
                continue
            plan[node] = match[2]
            plan.update(replaced)
            absorbed.update(match[1])
            report.fused[op] += 1
            break

    if "fused_elementwise" in capabilities:
        for node in reversed(order):
            if node in absorbed or node in plan:
                continue
            match = _match_elementwise_chain(node, m, absorbed | set(plan))
            if match is not None and _same_type_when_built(node, match[2]):
                plan[node] = match[2]
                absorbed.update(match[1])
                report.fused["fused_elementwise"] += 1

    def rewrite(node: Node, mapped, g: Graph):
        if node in plan:
            return plan[node](mapped, g)
        return SKIP if node in absorbed else None

    new, _ = rebuild(graph, rewrite)
    report.nodes_after = len(new.topo_order())
    return new, report


def _same_type_when_built(root: Node, build: Build) -> bool:
    """Build the fused replacement over stand-in inputs of the same types:
    it must type-check and give the root's shape and dtype, or the match is
    dropped and the graph keeps its primitive chain (a pattern that does not
    fit leaves the graph alone rather than failing the compile)."""
    scratch = Graph()
    stand_ins: dict[Node, Node] = {}

    def mapped(n: Node) -> Node:
        if n not in stand_ins:   # a block-format tensor can only be a param
            make = scratch.param if n.dtype.quantized else scratch.input
            stand_ins[n] = make(f"in{len(stand_ins)}", n.shape, n.dtype)
        return stand_ins[n]

    try:
        out = build(mapped, scratch)
    except RlxError:
        return False
    return tuple(out.shape) == tuple(root.shape) and out.dtype == root.dtype


def _match_linear(node: Node, m: _Matcher) -> Match | None:
    act = _activation(node)
    body = node.inputs[0] if act else node
    absorbed = [body] if act else []
    if act and not m.private(body):
        return None
    bias, mm = None, body
    if body.op == "add":
        a, b = body.inputs
        mm, bias = (a, b) if a.op == "matmul" else (b, a)
    if mm.op != "matmul" or len(mm.inputs[1].shape) != 2 or (mm is not node and not m.private(mm)):
        return None
    if mm is not body:
        absorbed.append(mm)
    n = mm.shape[-1]
    if bias is not None and (tuple(bias.shape) != (n,) or bias.dtype != mm.dtype):
        return None
    if bias is None and act is None:
        return None
    x, w, tb = mm.inputs[0], mm.inputs[1], mm.attrs["transpose_b"]
    return "linear", absorbed, lambda mapped, g: g.linear(
        mapped(x), mapped(w), None if bias is None else mapped(bias), activation=act, transpose_b=tb)


def _match_add_norm(node: Node, m: _Matcher) -> Match | None:
    if node.op not in ("layernorm", "rmsnorm"):
        return None
    add = node.inputs[0]
    if add.op != "add" or not m.private(add) or add.inputs[0].shape != add.inputs[1].shape:
        return None
    x, r = add.inputs
    if node.op == "layernorm":
        w, b = node.inputs[1:]
        eps = node.attrs["eps"]
        return "add_layernorm", [add], lambda mapped, g: g.add_layernorm(mapped(x), mapped(r), mapped(w),
                                                                          mapped(b), eps=eps)
    w = node.inputs[1]
    eps, add_one = node.attrs["eps"], node.attrs["add_one"]
    return "add_rmsnorm", [add], lambda mapped, g: g.add_rmsnorm(mapped(x), mapped(r), mapped(w), eps=eps,
                                                                  add_one=add_one)


def _private_rmsnorm_operand(add: Node, m: _Matcher) -> tuple[Node, Node] | None:
    """(x, norm) of ``x + norm`` (either order) where norm is an rmsnorm only
    the add reads, and x, the norm and the sum share shape and dtype (no
    broadcast: the fused kernels add row by row)."""
    if add.op != "add":
        return None
    for x, norm in (add.inputs[::-1], add.inputs):
        if (norm.op == "rmsnorm" and m.private(norm) and x is not norm and tuple(x.shape) == tuple(norm.shape)
                == tuple(add.shape) and x.dtype == norm.dtype == add.dtype):
            return x, norm
    return None


def _match_rmsnorm_add(node: Node, m: _Matcher) -> Match | None:
    split = _private_rmsnorm_operand(node, m)
    if split is None:
        return None
    x, norm = split
    o, w = norm.inputs
    eps, add_one = norm.attrs["eps"], norm.attrs["add_one"]
    return "rmsnorm_add", [norm], lambda mapped, g: g.rmsnorm_add(mapped(o), mapped(x), mapped(w), eps=eps,
                                                                  add_one=add_one)


class _BothOutputs:
    """Builds one rmsnorm_add_rmsnorm per graph and hands out its two
    outputs: the sum replaces the add, the normed sum the outer rmsnorm."""

    def __init__(self, x: Node, inner: Node, outer: Node):
        self.x, self.inner, self.outer = x, inner, outer
        self.graph: Graph | None = None
        self.pair: tuple[Node, Node] | None = None

    def outputs(self, mapped, g: Graph) -> tuple[Node, Node]:
        if self.graph is not g:
            (o, w), w_next = self.inner.inputs, self.outer.inputs[1]
            a, b = self.inner.attrs, self.outer.attrs
            self.graph = g
            self.pair = g.rmsnorm_add_rmsnorm(mapped(o), mapped(self.x), mapped(w), mapped(w_next), eps=a["eps"],
                                              add_one=a["add_one"], next_eps=b["eps"], next_add_one=b["add_one"])
        return self.pair


def _match_rmsnorm_add_rmsnorm(node: Node, m: _Matcher) -> Match | None:
    if node.op != "rmsnorm":
        return None
    add, w_next = node.inputs
    split = _private_rmsnorm_operand(add, m)
    # The sum is built where the add was, so the next weight must exist by then.
    if split is None or not m.built_before(w_next, add):
        return None
    both = _BothOutputs(split[0], split[1], node)
    return ("rmsnorm_add_rmsnorm", [split[1]], lambda mapped, g: both.outputs(mapped, g)[1],
            {add: lambda mapped, g: both.outputs(mapped, g)[0]})


def _match_rmsnorm_rope(node: Node, m: _Matcher) -> Match | None:
    if node.op != "rope" or node.inputs[0].op != "rmsnorm" or not m.private(node.inputs[0]):
        return None
    norm, positions = node.inputs
    (x, w), n, r = norm.inputs, norm.attrs, node.attrs
    return "rmsnorm_rope", [norm], lambda mapped, g: g.rmsnorm_rope(
        mapped(x), mapped(positions), mapped(w), eps=n["eps"], add_one=n["add_one"], base=r["base"],
        layout=r["layout"], rotary_dim=r["rotary_dim"], freq_factors=r.get("freq_factors"))


def _windowed_signal(node: Node, m: _Matcher) -> tuple[Node, Node] | None:
    """(x, window) where node is rfft(mul(x, window)), the product read by
    the rfft alone, with an f32 window [N] (leading dimensions of one)."""
    if node.op != "rfft" or node.inputs[0].op != "mul" or not m.private(node.inputs[0]):
        return None
    product, n = node.inputs[0], node.inputs[0].shape[-1]
    for x, window in (product.inputs, product.inputs[::-1]):
        if (tuple(x.shape) == tuple(product.shape) and window.shape and window.shape[-1] == n
                and all(d == 1 for d in window.shape[:-1]) and len(window.shape) <= len(x.shape)):
            return x, window
    return None


def _match_windowed_rfft(node: Node, m: _Matcher) -> Match | None:
    found = _windowed_signal(node, m)
    if found is None:
        return None
    x, window = found
    return "windowed_rfft", [node.inputs[0]], lambda mapped, g: g.windowed_rfft(mapped(x), mapped(window),
                                                                               norm=node.attrs["norm"])


def _square_of(node: Node, m: _Matcher, part: str) -> Node | None:
    """X where node is mul(part(X), part(X)) read by its root alone."""
    if node.op != "mul" or not m.private(node) or node.inputs[0] is not node.inputs[1]:
        return None
    view = node.inputs[0]
    return view.inputs[0] if view.op == part and m.uses[view] == 2 else None


def _match_windowed_rfft_power(node: Node, m: _Matcher) -> Match | None:
    if node.op != "add":
        return None
    for sq_re, sq_im in (node.inputs, node.inputs[::-1]):
        spec = _square_of(sq_re, m, "real")
        if spec is None or spec is not _square_of(sq_im, m, "imag") or m.uses[spec] != 2:
            continue
        norm = spec.attrs.get("norm")
        if spec.op == "windowed_rfft":
            (x, window), absorbed = spec.inputs, [spec]
        else:
            found = _windowed_signal(spec, m)
            if found is None:
                return None
            (x, window), absorbed = found, [spec, spec.inputs[0]]
        absorbed += [sq_re, sq_im, sq_re.inputs[0], sq_im.inputs[0]]
        return "windowed_rfft_power", absorbed, lambda mapped, g, x=x, window=window, norm=norm: (
            g.windowed_rfft_power(mapped(x), mapped(window), norm=norm))
    return None


def _match_glu(node: Node, m: _Matcher) -> Match | None:
    if node.op != "mul":
        return None
    for gate_act, up in (node.inputs, node.inputs[::-1]):
        act = _activation(gate_act)
        if act in ("silu", "gelu", "gelu_tanh") and m.private(gate_act) and gate_act.shape == up.shape:
            gate = gate_act.inputs[0]
            return "glu", [gate_act], lambda mapped, g, gate=gate, up=up, act=act: g.glu(mapped(gate), mapped(up),
                                                                                           act)
    return None


def _match_glu_linear(node: Node, m: _Matcher) -> Match | None:
    if (node.op != "linear" or len(node.inputs) != 2 or node.attrs["activation"] is not None
            or not node.attrs["transpose_b"] or not node.inputs[1].dtype.quantized or not m.private(node.inputs[0])):
        return None
    x, w = node.inputs
    if x.op == "glu":
        (gate, up), act, absorbed = x.inputs, x.attrs["activation"], [x]
    else:
        glu = _match_glu(x, m)
        if glu is None:
            return None
        gate_act = glu[1][0]
        gate, up = gate_act.inputs[0], next(i for i in x.inputs if i is not gate_act)
        act, absorbed = _activation(gate_act), [x, gate_act]
    return "glu_linear", absorbed, lambda mapped, g: g.glu_linear(mapped(gate), mapped(up), mapped(w), act)


def _match_attention(node: Node, m: _Matcher) -> Match | None:
    """matmul(P, V_h) with P = softmax(X) or masked_softmax(X, M, scale=s)
    (= softmax(X * s + M)), where X is Q_h @ K_h, optionally times or over a
    scalar constant c, optionally plus an additive mask. Each step is
    absorbed only where the fused op computes exactly what the graph says:

    - a mask added before the softmax is absorbed only when nothing scales it
      afterwards (s == 1), since attention computes softmax(qk * scale + mask)
      and the graph would mean softmax((qk * c + mask) * s);
    - an elementwise step is absorbed only when its output has the shape of
      the scores side, so the mask (or constant) broadcasts into the scores,
      never the scores into a larger mask;
    - the fused node's inferred type must equal the matched root's, checked
      in ``fuse`` for every pattern.
    """
    if node.op != "matmul" or node.attrs["transpose_b"] or len(node.shape) != 4:
        return None
    probs, v_h = node.inputs
    if probs.op not in ("softmax", "masked_softmax") or not m.private(probs):
        return None
    absorbed = [probs]
    scores, mask, scale = probs.inputs[0], None, 1.0
    if probs.op == "masked_softmax":
        scale = probs.attrs["scale"]
        mask = probs.inputs[1] if len(probs.inputs) == 2 else None
    if scores.op == "add" and m.private(scores) and mask is None and scale == 1.0:
        split = _scores_and_mask(scores)
        if split is None:
            return None
        absorbed.append(scores)
        scores, mask = split
    if scores.op in ("mul", "div") and m.private(scores):
        split = _scores_and_scalar(scores)
        if split is None:
            return None
        absorbed.append(scores)
        scores, c = split
        scale *= c
    if scores.op != "matmul" or not m.private(scores):
        return None
    absorbed.append(scores)
    q_h, k_side = scores.inputs
    q4, q_perm = _peel_transposes(q_h)
    v4, v_perm = _peel_transposes(v_h)
    k4, k_perm = _peel_transposes(k_side)
    want_k = (0, 2, 1, 3) if scores.attrs["transpose_b"] else (0, 2, 3, 1)
    if q_perm != (0, 2, 1, 3) or v_perm != (0, 2, 1, 3) or k_perm != want_k:
        return None
    if mask is not None and (len(mask.shape) > 4 or mask.dtype != node.dtype):
        return None

    def build(mapped, g: Graph) -> Node:
        out = g.attention(mapped(q4), mapped(k4), mapped(v4), None if mask is None else mapped(mask), scale=scale)
        return g.transpose(out, (0, 2, 1, 3))   # the matched root was heads-first [B, H, T, D]

    return "attention", absorbed, build


def _scores_and_mask(add: Node) -> tuple[Node, Node] | None:
    """(scores side, mask) of ``scores + mask``: the scores side is the
    operand with the add's own shape, built by a scale or a matmul."""
    for a, b in (add.inputs, add.inputs[::-1]):
        if tuple(a.shape) != tuple(add.shape):
            continue
        scaled = _scores_and_scalar(a) if a.op in ("mul", "div") else None
        if a.op == "matmul" or (scaled is not None and scaled[0].op == "matmul"):
            return a, b
    return None


def _scores_and_scalar(node: Node) -> tuple[Node, float] | None:
    """(x, factor) of ``x * c``, ``c * x`` or ``x / c`` for a nonzero scalar
    constant c whose broadcast leaves x's shape unchanged."""
    a, b = node.inputs
    c = _scalar_constant(b)
    if c is None and node.op == "mul":
        c, a = _scalar_constant(a), b
    if c is None or c == 0.0 or not np.isfinite(c) or tuple(a.shape) != tuple(node.shape):
        return None
    return a, (c if node.op == "mul" else 1.0 / c)


# The graph's op names a chain takes (gelu_tanh is a step name only: gelu with approximate="tanh").
_CHAIN_OPS = frozenset(CHAIN_BINARY) | (frozenset(CHAIN_UNARY) - {"gelu_tanh"})


def _chain_step_name(node: Node) -> str:
    return "gelu_tanh" if node.op == "gelu" and node.attrs.get("approximate") == "tanh" else node.op


def _match_elementwise_chain(root: Node, m: _Matcher, taken: set[Node]) -> Match | None:
    """The largest tree of elementwise ops under ``root`` that one
    fused_elementwise pass computes: grown from the root through inputs
    that are elementwise, read only by the tree, of the root's dtype and not
    claimed by another pattern, while the tree keeps within the kernel's
    inputs and steps. None when fewer than two ops would fuse."""
    def chainable(n: Node) -> bool:
        return (n.op in _CHAIN_OPS and n.dtype == root.dtype and n.dtype.is_float
                and len(n.shape) <= MAX_DIMS)

    if not chainable(root):
        return None
    inner: list[Node] = [root]

    def leaves_of(nodes: list[Node]) -> list[Node]:
        inside, seen, out = set(nodes), set(), []
        for n in nodes:
            for x in n.inputs:
                if x not in inside and x not in seen:
                    seen.add(x)
                    out.append(x)
        return out

    grew = True
    while grew:
        grew = False
        for x in leaves_of(inner):
            if chainable(x) and m.private(x) and x not in taken and len(inner) < CHAIN_MAX_STEPS:
                trial = [*inner, x]
                if len(leaves_of(trial)) <= CHAIN_MAX_INPUTS:
                    inner, grew = trial, True
    if len(inner) < 2 or len(leaves_of(inner)) > CHAIN_MAX_INPUTS:
        return None
    leaves, members = leaves_of(inner), set(inner)
    slot: dict[Node, int] = {x: i for i, x in enumerate(leaves)}
    steps: list[tuple] = []

    def emit(n: Node) -> int:   # post-order: operands before the op
        if n not in members:
            return slot[n]
        operands = [emit(x) for x in n.inputs]
        name = _chain_step_name(n)
        scale, shift = float(n.attrs.get("scale", 1.0)), float(n.attrs.get("shift", 0.0))
        steps.append((name, operands[0], operands[1] if len(operands) > 1 else -1, scale, shift))
        slot[n] = len(leaves) + len(steps) - 1
        return slot[n]

    emit(root)
    frozen = tuple(steps)
    return ("fused_elementwise", [n for n in inner if n is not root],
            lambda mapped, g: g.op("fused_elementwise", [mapped(x) for x in leaves], steps=frozen))
