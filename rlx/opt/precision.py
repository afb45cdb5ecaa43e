"""Automatic mixed precision.

Policies:
- "f32": nothing changes.
- "f16": every float op computes in f16 (the kernels still accumulate
  reductions, norms and softmax in f32 internally).
- "auto": matmuls, linear layers, attention and elementwise chains in f16;
  norms, softmax and reductions read and write f32, for models whose
  activations would lose range in f16; an elementwise op between f32
  neighbours only (every float input f32, every consumer computing in f32
  or an output) stays f32 (_elementwise_among_f32).
- "bf16" (host device only, like PyTorch's CPU autocast for weights): the
  weights of linear layers and matmuls (params read only as their B
  operand) are stored in bf16, converted once at compile time (and by
  ``set_params``); activations and every other op stay f32, and the host's
  gemm accumulates in f32 (it rounds A to bf16 on CPUs with AVX-512 BF16,
  csrc/host_bf16.h). No casts are inserted.
- "fp8": the weights of linear layers (f32 params read only as the [N, K]
  weight of ``linear``) are stored as f8e4m3 codes with one f32 scale per
  output channel (param ``<name>.fp8_scale``), quantized once at compile
  time and by ``set_params`` (rlx/fp8.py), and the layers become
  ``scaled_linear``; everything else is then as under "auto" (activations
  f16, norms and softmax f32).
- "fp8-dynamic": "fp8", and each scaled_linear's input is quantized per
  token on the device (e4m3, scale = the row's amax / 448) before the
  product, the rounding an FP8 x FP8 product has.
Under both f16 policies, float params and constants are converted once at
compile time (no cast thunk), inputs are cast once where first needed, and
outputs are cast back to the dtype the graph declared. A value is cast to a
dtype at most once and reused by every consumer, and a cast of a cast back
to the original dtype is the original value, so consecutive f16 ops never
round-trip through f32. The report lists every cast kept, and why.
Ops of precision class "f32" (the FFT family, whose kernels exist in f32
only) compute in f32 under every policy, and c64 values are never cast."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlx.errors import ConfigError, UnsupportedPrecisionError
from rlx.ir.dtype import DType, bf16, f8e4m3, f16, f32
from rlx.ir.graph import Graph, Node
from rlx.ir.op import get_op
from rlx.ir.ops.elementwise import CHAIN_BINARY, CHAIN_UNARY
from rlx.opt.rewrite import clone_node

POLICIES = ("f32", "f16", "auto", "bf16", "fp8", "fp8-dynamic")
# Backends whose gemm takes bf16 B with f32 A and C.
BF16_BACKENDS = frozenset({"host"})


@dataclass
class PrecisionReport:
    policy: str
    casts: list[tuple[str, str, str, str]] = field(default_factory=list)  # (value, from, to, why)
    converted: list[str] = field(default_factory=list)                   # params/constants stored as f16/bf16

    def describe(self) -> str:
        if self.policy == "f32":
            return "precision: f32 (no change)"
        stored = "bf16" if self.policy == "bf16" else "f16"
        lines = [f"precision: {self.policy}, {len(self.converted)} params/constants stored as {stored}, "
                 f"{len(self.casts)} casts kept"]
        lines += [f"  cast {v} {a}->{b}: {why}" for v, a, b, why in self.casts]
        return "\n".join(lines)


def apply_precision(graph: Graph, policy: str, backend: str | None = None) -> tuple[Graph, PrecisionReport]:
    """The graph rewritten for ``policy``; ``backend`` (the target's, when
    known) rejects policies the device cannot run."""
    if policy not in POLICIES:
        raise ConfigError(f"precision {policy!r}: expected one of {', '.join(POLICIES)}")
    report = PrecisionReport(policy)
    if policy == "f32":
        return graph, report
    if policy == "bf16":
        if backend is not None and backend not in BF16_BACKENDS:
            raise UnsupportedPrecisionError(
                f"precision='bf16' runs on the CPU (host) device only, not on {backend}; "
                "use precision='f16' or 'auto' on GPUs")
        return _bf16_weights(graph, report)
    if policy in ("fp8", "fp8-dynamic"):
        graph = _fp8_weights(graph, report, dynamic=policy == "fp8-dynamic")
        policy = "auto"
    order = graph.topo_order()
    consumers = graph.consumers()

    def declared(node: Node) -> DType | None:
        """The float dtype this op computes in by its precision class alone."""
        kind = get_op(node.op).precision   # what the op declares (rlx/ir/op.py OpDef.precision)
        if kind == "f32":   # f32 kernels only (the FFT family), whatever its output (c64 included)
            return f32
        if kind in ("fixed", "leaf") or not node.dtype.is_float:
            return None
        if policy == "auto" and kind == "f32_under_auto":
            return f32
        return f16

    kept_f32 = _elementwise_among_f32(order, consumers, declared) if policy == "auto" else set()

    def wants(node: Node) -> DType | None:
        """The float dtype this op should compute in (None: not our choice)."""
        return f32 if node in kept_f32 else declared(node)

    g = Graph()
    new: dict[Node, Node] = {}
    cast_cache: dict[tuple[Node, str], Node] = {}

    def as_dtype(value: Node, dtype: DType, why: str) -> Node:
        if value.dtype == dtype or not value.dtype.is_float:
            return value
        if value.op == "cast" and value.inputs[0].dtype == dtype:
            return value.inputs[0]          # undo a cast instead of stacking a second one
        key = (value, dtype.name)
        if key not in cast_cache:
            cast_cache[key] = g.cast(value, dtype)
            report.casts.append((repr(value).split(" = ")[0], value.dtype.name, dtype.name, why))
        return cast_cache[key]

    # Params and constants: stored in f16 when every consumer computes in f16
    # (a graph output is a consumer that wants the declared dtype: rounding it
    # to f16 and back would lose the value's low bits).
    outputs = set(graph.outputs.values())

    def storage_dtype(node: Node) -> DType:
        users = consumers.get(node, [])
        if node.dtype != f32 or not users or node in outputs:
            return node.dtype
        if any(u.op in _SCALED_OPS and node in u.inputs[1:3] for u in users):
            return node.dtype   # FP8 codes and their f32 scales keep their dtypes
        if all(wants(u) == f16 or (u.op == "gather" and wants(u) is None and u.inputs[0] is node) for u in users):
            return f16
        return node.dtype

    for node in list(graph.inputs.values()):
        new[node] = clone_node(node, [], g)
    for node in list(graph.params.values()):
        attrs = dict(node.attrs)
        if node.dtype.is_float and storage_dtype(node) == f16:
            attrs["dtype"] = f16
            report.converted.append(attrs["name"])
        new[node] = g.op("param", (), **attrs)
    for node in order:
        if node in new:
            continue
        if node.op == "constant":
            value = np.asarray(node.attrs["value"])
            if node.dtype.is_float and storage_dtype(node) == f16:
                value = value.astype(np.float16)
                report.converted.append(node.name or f"constant %{node.id}")
            new[node] = g.constant(value, name=node.name)
            continue
        target = wants(node)
        if node.op == "gather":
            inputs = [new[node.inputs[0]], new[node.inputs[1]]]   # table keeps its storage dtype
        elif node.op == "set_rows":   # the state keeps its declared dtype: the rows are cast to it
            state = new[node.inputs[0]]
            inputs = [state, as_dtype(new[node.inputs[1]], state.dtype, "a state keeps its dtype"),
                      new[node.inputs[2]]]
        elif node.op == "scaled_dequantize":   # the scale stays f32 whatever computed it
            inputs = [new[node.inputs[0]], as_dtype(new[node.inputs[1]], f32, "an FP8 scale is f32")]
        elif node.op == "scaled_linear" and target is not None:   # codes and scales keep their dtypes
            inputs = [new[i] for i in node.inputs]
            inputs[0] = as_dtype(inputs[0], target, f"{node.op} computes in {target.name}")
            if len(inputs) == 4:
                inputs[3] = as_dtype(inputs[3], target, f"{node.op} computes in {target.name}")
        elif target is None:
            inputs = [new[i] for i in node.inputs]
        else:
            inputs = [as_dtype(new[i], target, f"{node.op} computes in {target.name}") for i in node.inputs]
        new[node] = clone_node(node, inputs, g)
    g.set_outputs({name: as_dtype(new[node], node.dtype, "the output keeps its declared dtype")
                   for name, node in graph.outputs.items()})
    return g, report


_SCALED_OPS = ("scaled_linear", "scaled_dequantize")
_ELEMENTWISE = frozenset(CHAIN_BINARY) | frozenset(CHAIN_UNARY)


def _elementwise_among_f32(order: list[Node], consumers: dict[Node, list[Node]], declared) -> set[Node]:
    """Under "auto": the f32 elementwise ops that stay f32 because every
    float value they read is f32 (inputs, f32 params and constants, ops
    that compute in f32, and such elementwise ops) and everything they feed
    computes in f32 or is a graph output. Rounding them to f16 would only
    lose bits between f32 neighbours (x + neg(x) into an rmsnorm cancels to
    f16 noise: fuzz seed 534179) and cost two casts; ops next to an f16
    computation keep the f16 of "auto". Views pass the question on to the
    value they are views of (inputs) and to their consumers (outputs). The
    largest such set: start from every candidate and drop those that read
    or feed anything else until none does."""
    keep = {n for n in order if n.op in _ELEMENTWISE and n.dtype == f32 and declared(n) == f16}

    def makes_f32(node: Node) -> bool:
        if node.dtype != f32:
            return False
        op = get_op(node.op)
        if op.precision == "leaf" or node in keep or declared(node) == f32:
            return True
        if op.is_view:
            return makes_f32(node.inputs[0])
        return node.op == "cast"   # a cast to f32

    def feeds_f32(node: Node) -> bool:
        for user in consumers.get(node, []):
            if user in keep or declared(user) == f32:
                continue
            if get_op(user.op).is_view and user.inputs[0] is node and feeds_f32(user):
                continue
            return False
        return True   # a graph output among them keeps its declared f32

    changed = bool(keep)
    while changed:
        drop = {n for n in keep
                if not all(makes_f32(i) for i in n.inputs if i.dtype.is_float) or not feeds_f32(n)}
        keep -= drop
        changed = bool(drop)
    return keep


def _weight_params(graph: Graph, accepts) -> set[Node]:
    """The 2-D f32 params read only as the weight (input 1) of consumers
    ``accepts`` takes, against an f32 x; a graph output keeps its f32 bits."""
    consumers = graph.consumers()
    outputs = set(graph.outputs.values())
    return {node for node in graph.params.values()
            if node.dtype == f32 and len(node.shape) == 2 and consumers.get(node) and node not in outputs
            and all(accepts(u) and u.inputs[1] is node and u.inputs[0] is not node and u.inputs[0].dtype == f32
                    for u in consumers[node])}


def _fp8_weights(graph: Graph, report: PrecisionReport, dynamic: bool) -> Graph:
    """linear layers whose weight is an f32 param read only as such become
    scaled_linear over an f8e4m3 param and its per-channel f32 scale; with
    ``dynamic`` their x is quantized per row first."""
    from rlx.fp8 import SCALE_SUFFIX, quantize

    weights = _weight_params(graph, lambda u: u.op == "linear" and u.attrs["transpose_b"])
    g = Graph()
    new: dict[Node, Node] = {}
    scales: dict[Node, Node] = {}
    for node in list(graph.inputs.values()):
        new[node] = clone_node(node, [], g)
    for node in list(graph.params.values()):
        attrs = dict(node.attrs)
        if node in weights:
            attrs["dtype"] = f8e4m3
            report.converted.append(attrs["name"])
            scales[node] = g.param(attrs["name"] + SCALE_SUFFIX, (node.shape[0],), f32)
        new[node] = g.op("param", (), **attrs)
    for node in graph.topo_order():
        if node in new:
            continue
        if node.op == "linear" and node.inputs[1] in scales:
            x = new[node.inputs[0]]
            if dynamic:
                codes, x_scale = quantize(g, x)
                x = g.scaled_dequantize(codes, x_scale, x.dtype)
            bias = new[node.inputs[2]] if len(node.inputs) == 3 else None
            new[node] = g.scaled_linear(x, new[node.inputs[1]], scales[node.inputs[1]], bias,
                                        activation=node.attrs["activation"], name=node.name)
            continue
        new[node] = clone_node(node, [new[i] for i in node.inputs], g)
    g.set_outputs({name: new[node] for name, node in graph.outputs.items()})
    return g


def _bf16_weights(graph: Graph, report: PrecisionReport) -> tuple[Graph, PrecisionReport]:
    """f32 params read only as the 2-D B operand of linear/matmul become bf16
    params; nothing else changes."""
    weights = _weight_params(graph, lambda u: u.op in ("linear", "matmul"))
    g = Graph()
    new: dict[Node, Node] = {}
    for node in list(graph.inputs.values()):
        new[node] = clone_node(node, [], g)
    for node in list(graph.params.values()):
        attrs = dict(node.attrs)
        if node in weights:
            attrs["dtype"] = bf16
            report.converted.append(attrs["name"])
        new[node] = g.op("param", (), **attrs)
    for node in graph.topo_order():
        if node not in new:
            new[node] = clone_node(node, [new[i] for i in node.inputs], g)
    g.set_outputs({name: new[node] for name, node in graph.outputs.items()})
    return g, report
