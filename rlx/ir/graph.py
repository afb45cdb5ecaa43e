"""The graph: nodes built through typed helpers, outputs, ordering and validation.

Every node's type is inferred when it is built, so shape and dtype mistakes
surface at the line of user code that made them, with the node named.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rlx.errors import DTypeError, GraphError, ShapeError
from rlx.ir import ops as _ops  # noqa: F401  (registers the built-in ops, every family)
from rlx.ir.dtype import DType
from rlx.ir.op import OpDef, TensorType, get_op
from rlx.ir.ops.fft import check_complex_operands
from rlx.ir.ops.fp8 import check_fp8_operands
from rlx.ir.ops.quant import check_quantized_operands
from rlx.ir.printer import format_graph
from rlx.ir.shape import Shape

__all__ = ["Graph", "Node", "as_bindings"]

_LEAF_NAMED = ("input", "param", "state")


def as_bindings(value: object, error: type[Exception], what: str) -> dict:
    """Values bound by name to a graph's inputs or params (``run``,
    ``set_params``, ``run_reference``): ``value`` (None, a mapping, or
    (name, value) pairs as ``dict()`` takes them) as a new dict; anything
    else raises ``error``. Pairs must have str names, so a list of arrays is
    not mistaken for pairs of numbers."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    try:
        out = dict(value)
    except (TypeError, ValueError):
        out = None
    if out is None or not all(isinstance(k, str) for k in out):
        raise error(f"{what} must be a mapping of name -> array (or keyword arguments), "
                    f"got a {type(value).__name__}")
    return out



class Node:
    """One value in a graph: the op that makes it, its inputs, attrs and type.

    Nodes compare and hash by identity. ``inputs`` may be reassigned by
    rewriting passes; ``Graph.validate`` re-checks the result.
    """

    __slots__ = ("id", "op", "inputs", "attrs", "type", "name", "graph", "__weakref__")

    def __init__(self, graph: Graph, id: int, op: str, inputs: tuple[Node, ...], attrs: dict,
                 type: TensorType, name: str | None) -> None:
        self.graph = graph
        self.id = id
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.type = type
        self.name = name

    @property
    def shape(self) -> Shape:
        return self.type.shape

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    def _operand(self, other: Any) -> Node:
        if isinstance(other, Node):
            return other
        if isinstance(other, (int, float, np.number)) and not isinstance(other, bool):
            return self.graph.constant(np.asarray(other), dtype=self.dtype)
        return NotImplemented

    def __add__(self, other: Any) -> Node:
        o = self._operand(other)
        return o if o is NotImplemented else self.graph.add(self, o)

    def __radd__(self, other: Any) -> Node:
        o = self._operand(other)
        return o if o is NotImplemented else self.graph.add(o, self)

    def __mul__(self, other: Any) -> Node:
        o = self._operand(other)
        return o if o is NotImplemented else self.graph.mul(self, o)

    def __rmul__(self, other: Any) -> Node:
        o = self._operand(other)
        return o if o is NotImplemented else self.graph.mul(o, self)

    def __repr__(self) -> str:
        args = ", ".join(_ref(i) for i in self.inputs)
        tail = f"  # {self.name}" if self.name else ""
        return f"%{self.id} = {self.op}({args}) : {self.type}{tail}"


def _factors(f: Any) -> Any:
    """rope's freq_factors as a tuple (attributes are hashable); the op's check names anything else."""
    return tuple(f) if isinstance(f, (list, tuple, np.ndarray)) else f


def _ref(x: Any) -> str:
    return f"%{x.id}" if isinstance(x, Node) else f"<not a node: {type(x).__name__}>"


def _ancestors(nodes: Sequence[Node]) -> set[Node]:
    """The nodes and everything they read, transitively."""
    seen: set[Node] = set()
    stack = list(nodes)
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(n.inputs)
    return seen


def _state_name(node: Node) -> str:
    """The name of the state a state node or a chain of set_rows writes."""
    while node.op == "set_rows":
        node = node.inputs[0]
    return node.attrs["name"]


class Graph:
    """A dataflow graph of typed nodes with named inputs, params and outputs."""

    def __init__(self) -> None:
        self._nodes: list[Node] = []
        self._inputs: dict[str, Node] = {}
        self._params: dict[str, Node] = {}
        self._outputs: dict[str, Node] = {}
        self._states: dict[str, Node] = {}
        # Nodes that write state (set_rows): run even when nothing reads them.
        self._effects: list[Node] = []
        # Nodes that read a state directly (its value as the run found it),
        # each of which the state's write, if any, must depend on.
        self._state_readers: dict[str, list[Node]] = {}
        # Nodes that read a write's result, each of which a later write of
        # the same state (through that result) must depend on.
        self._write_readers: dict[Node, list[Node]] = {}
        self._next_id = 0

    # ------------------------------------------------------------ building

    def op(self, op: str, inputs: Sequence[Node] = (), /, **attrs: Any) -> Node:
        """Build a node of any registered op (built-in or user-registered).

        ``name=`` sets the node's name; for ``input``/``param`` it is the
        binding name and is required.
        """
        opdef = get_op(op)
        if isinstance(inputs, Node):
            inputs = (inputs,)
        inputs = tuple(inputs)
        for i, x in enumerate(inputs):
            if not isinstance(x, Node):
                raise GraphError(f"{op}: input {i} is a {type(x).__name__}, not a Node")
            if x.graph is not self:
                raise GraphError(f"{op}: input {i} ({x!r}) belongs to another graph")
        if opdef.arity != -1 and len(inputs) != opdef.arity:
            raise GraphError(f"{op}: expects {opdef.arity} input(s), got {len(inputs)}")
        name = attrs.get("name") if op in _LEAF_NAMED or op == "constant" else attrs.pop("name", None)
        if name is not None and not isinstance(name, str):
            raise GraphError(f"{op}: node name must be a string, got {name!r}")
        if op in _LEAF_NAMED and (name in self._inputs or name in self._params or name in self._states):
            kind = "an input" if name in self._inputs else "a param" if name in self._params else "a state"
            raise GraphError(f"duplicate name {name!r}: already {kind} of this graph")
        if op == "set_rows":
            self._check_state_write(inputs)
        elif any(x.op == "state" for x in inputs):
            state = next(x for x in inputs if x.op == "state")
            if any(e.inputs[0] is state for e in self._effects):
                raise GraphError(f"{op}: reads state {state.attrs['name']!r} directly after this graph writes it; "
                                 "read the value g.set_rows(...) returns (the state after this run's write)")
        for x in inputs:
            if x.op == "set_rows" and not (op == "set_rows" and x is inputs[0]) and self._superseded(x):
                raise GraphError(f"{op}: reads {x!r}, the state {_state_name(x)!r} before a later write of this "
                                 "graph; read the value that later g.set_rows(...) returns")
        attrs = dict(attrs)
        nid = self._next_id
        ty = self._infer(opdef, inputs, attrs, nid, name)
        node = Node(self, nid, op, inputs, attrs, ty, name)
        self._next_id += 1
        self._nodes.append(node)
        if op == "input":
            self._inputs[name] = node
        elif op == "param":
            self._params[name] = node
        elif op == "state":
            self._states[name] = node
        elif op == "set_rows":
            self._effects.append(node)
        for i, x in enumerate(inputs):
            if x.op == "state" and op != "set_rows":
                self._state_readers.setdefault(x.attrs["name"], []).append(node)
            elif x.op == "set_rows" and not (op == "set_rows" and i == 0):
                self._write_readers.setdefault(x, []).append(node)
        return node

    def _superseded(self, write: Node) -> bool:
        """Whether a later set_rows writes the state through ``write``'s result."""
        return any(e.inputs[0] is write for e in self._effects)

    def _check_state_write(self, inputs: tuple[Node, ...]) -> None:
        """Writes of a state form one chain: the first goes straight into
        the state node, each later one into the result of the one before
        (several decode steps in one graph). The write happens in place, so
        every node that read the value being overwritten (the state node
        itself, or the earlier write's result) must feed this write's values
        or slot, which orders the read before the write; a later read of
        that value is refused in op(). Two writes of one value would see a
        result that depends on the thunk order, so a value is written once."""
        target = inputs[0] if inputs else None
        if target is None or target.op not in ("state", "set_rows"):
            what = f"{target!r}" if target is not None else "nothing"
            raise GraphError(f"set_rows: input 0 must be a state (g.state(...)) or what an earlier set_rows of it "
                             f"returned, got {what}")
        name = _state_name(target)
        if target.op == "state":
            if any(e.inputs[0] is target for e in self._effects):
                raise GraphError(f"set_rows: state {name!r} is already written in this graph; write it again "
                                 "through the value that g.set_rows(...) returned (one chain of writes a state)")
            readers = self._state_readers.get(name, [])
        else:
            if self._superseded(target):
                raise GraphError(f"set_rows: {target!r} (state {name!r}) is already written again in this graph; "
                                 "write through the newest value (one chain of writes a state)")
            readers = self._write_readers.get(target, [])
        if readers:
            ancestors = _ancestors(inputs[1:])
            late = [r for r in readers if r not in ancestors]
            if late:
                raise GraphError(f"set_rows: {late[0]!r} reads state {name!r} as it was before this write but "
                                 "does not feed the write's values or slot, so it could run after the write; "
                                 "read the value g.set_rows(...) returns instead")

    @staticmethod
    def _infer(opdef: OpDef, inputs: tuple[Node, ...], attrs: dict, nid: int, name: str | None) -> TensorType:
        """Run inference, adding the node (id, name, input types) to any error message."""
        try:
            check_quantized_operands(opdef.name, [x.type for x in inputs])
            check_fp8_operands(opdef.name, [x.type for x in inputs])
            check_complex_operands(opdef.name, [x.type for x in inputs])
            ty = opdef.infer([x.type for x in inputs], attrs)
        except (ShapeError, DTypeError, GraphError) as e:
            where = f"node %{nid}" + (f" {name!r}" if name else "")
            ins = ", ".join(f"%{x.id}: {x.type}" for x in inputs)
            raise type(e)(f"{e} [at {where}{'; inputs ' + ins if ins else ''}]") from None
        if not isinstance(ty, TensorType):
            raise GraphError(f"{opdef.name}: infer returned {type(ty).__name__}, not a TensorType")
        return ty

    def input(self, name: str, shape: Iterable[int], dtype: DType | str = "f32") -> Node:
        """A run-time input, bound by name."""
        return self.op("input", (), name=name, shape=shape, dtype=dtype)

    def param(self, name: str, shape: Iterable[int], dtype: DType | str = "f32") -> Node:
        """A weight, bound once by name."""
        return self.op("param", (), name=name, shape=shape, dtype=dtype)

    def state(self, name: str, shape: Iterable[int], dtype: DType | str = "f32") -> Node:
        """A buffer that lives across runs (a KV cache): zeros at compile
        time, written in place by ``set_rows`` and shared by executables
        compiled with ``share_params_with``. Read it through the value
        ``set_rows`` returns; a direct read is the state as the run found
        it, allowed where the graph's write depends on it (a chunk's
        attention over a ring's old rows, then its write) or no write."""
        return self.op("state", (), name=name, shape=shape, dtype=dtype)

    def set_rows(self, state: Node, values: Node, slot: Node) -> Node:
        """Writes rows of ``values`` [T, ...] into ``state`` [R, ...] in place
        and returns the state after the write (``state``: a g.state node, or
        what an earlier set_rows of it returned, to write it again). ``slot`` is i32 [2] run-time
        data (start, count): rows t < count (at most T) go to row
        (start + t) mod R, so a state of R = window rows is a ring buffer;
        when count > R only the last R rows are written. Graphs run their
        set_rows even when nothing reads the result."""
        return self.op("set_rows", (state, values, slot))

    def constant(self, value: Any, name: str | None = None, dtype: DType | str | None = None) -> Node:
        """A value baked into the graph.

        Without ``dtype``, float64 values become f32 (there is no f64),
        complex128 c64, and other dtypes must be supported ones. The value
        is copied and frozen.
        """
        arr = np.asarray(value)
        if dtype is None:
            if arr.dtype.kind == "f" and arr.dtype != np.float16:
                dt = DType.of("f32")
            elif arr.dtype.kind == "c":
                dt = DType.of("c64")
            elif arr.dtype.kind in "iu" and arr.dtype not in (np.int32, np.int64):
                dt = DType.of("i64")
            else:
                dt = DType.of(arr.dtype)
        else:
            dt = DType.of(dtype)
        if arr.dtype.kind not in ("fiuc" if dt.is_complex else "fiu"):
            raise DTypeError(f"constant {name or ''}: values of numpy dtype {arr.dtype} are not supported")
        conv = np.array(arr, dtype=dt.numpy, order="C", copy=True)
        if not (dt.is_float or dt.is_complex) and not np.array_equal(conv, arr):
            raise DTypeError(f"constant {name or ''}: values do not fit in {dt} without change")
        conv.flags.writeable = False
        attrs: dict[str, Any] = {"value": conv}
        if name is not None:
            attrs["name"] = name
        return self.op("constant", (), **attrs)

    def add(self, a: Node, b: Node, *, name: str | None = None) -> Node:
        return self.op("add", (a, b), name=name)

    def mul(self, a: Node, b: Node, *, name: str | None = None) -> Node:
        return self.op("mul", (a, b), name=name)

    def gelu(self, x: Node, approximate: str = "none", *, name: str | None = None) -> Node:
        return self.op("gelu", (x,), approximate=approximate, name=name)

    def silu(self, x: Node, *, name: str | None = None) -> Node:
        return self.op("silu", (x,), name=name)

    def softmax(self, x: Node, axis: int = -1, *, name: str | None = None) -> Node:
        return self.op("softmax", (x,), axis=axis, name=name)

    def layernorm(self, x: Node, weight: Node, bias: Node, eps: float = 1e-5, *,
                  name: str | None = None) -> Node:
        return self.op("layernorm", (x, weight, bias), eps=eps, name=name)

    def gather(self, table: Node, indices: Node, *, name: str | None = None) -> Node:
        return self.op("gather", (table, indices), name=name)

    def matmul(self, a: Node, b: Node, transpose_b: bool = False, *, name: str | None = None) -> Node:
        return self.op("matmul", (a, b), transpose_b=transpose_b, name=name)

    def reshape(self, x: Node, shape: Iterable[int], *, name: str | None = None) -> Node:
        return self.op("reshape", (x,), shape=shape, name=name)

    def transpose(self, x: Node, perm: Iterable[int], *, name: str | None = None) -> Node:
        return self.op("transpose", (x,), perm=perm, name=name)

    def narrow(self, x: Node, axis: int, start: int, length: int, *, name: str | None = None) -> Node:
        return self.op("narrow", (x,), axis=axis, start=start, length=length, name=name)

    def frames(self, x: Node, frame_length: int, hop: int, *, name: str | None = None) -> Node:
        """Overlapping frames of the last axis, as a strided view (no copy):
        [..., L] -> [..., 1 + (L - frame_length) // hop, frame_length], frame
        f = x[..., f * hop : f * hop + frame_length] (librosa.util.frame's
        frames, with the frame axis before the sample axis)."""
        return self.op("frames", (x,), frame_length=frame_length, hop=hop, name=name)

    def copy(self, x: Node, *, name: str | None = None) -> Node:
        return self.op("copy", (x,), name=name)

    def dequantize(self, x: Node, dtype: DType | str = "f32", *, name: str | None = None) -> Node:
        """The float values (f32 or f16) of a quantized (GGUF block format) or bf16 tensor."""
        return self.op("dequantize", (x,), dtype=dtype, name=name)

    def cast(self, x: Node, dtype: DType | str, saturate: bool = True, *, name: str | None = None) -> Node:
        """x in another float dtype: f32 <-> f16, or f32/f16 <-> f8e4m3/f8e5m2
        (round to nearest even; ``saturate`` clamps what overflows an FP8
        format to its largest finite value; rlx/ir/ops/cast.py)."""
        return self.op("cast", (x,), dtype=dtype, saturate=saturate, name=name)

    def scaled_dequantize(self, x: Node, scale: Node, dtype: DType | str = "f32",
                          block: tuple[int, int] | None = None, *, name: str | None = None) -> Node:
        """The values of FP8 x times its f32 scales (per tensor, per row, or
        per ``block`` of a 2-D x; rlx/ir/ops/fp8.py), as f32 or f16."""
        return self.op("scaled_dequantize", (x, scale), dtype=dtype, block=block, name=name)

    def scaled_linear(self, x: Node, weight: Node, weight_scale: Node, bias: Node | None = None,
                      activation: str | None = None, block: tuple[int, int] | None = None,
                      x_scale: Node | None = None, *, name: str | None = None) -> Node:
        """activation(x @ (weight * weight_scale)^T + bias) for an FP8 weight
        [N, K] with f32 scales (per tensor, per output channel [N], or per
        ``block`` [ceil(N / br), ceil(K / bc)]). An FP8 x takes ``x_scale``
        (per tensor or per row) and is dequantized to f32 first: the FP8 x
        FP8 product, accumulated in f32."""
        if x.dtype.is_fp8:
            if x_scale is None:
                raise DTypeError(f"scaled_linear: x is {x.dtype}: pass its x_scale")
            x = self.scaled_dequantize(x, x_scale, "f32")
        elif x_scale is not None:
            raise DTypeError(f"scaled_linear: x_scale is for FP8 x, but x is {x.dtype}")
        inputs = (x, weight, weight_scale) if bias is None else (x, weight, weight_scale, bias)
        return self.op("scaled_linear", inputs, activation=activation, block=block, name=name)

    # ---- the transformer op set (rlx/ir/ops/: norm, linear, glu, rope, attention, ...) ----

    def relu(self, x: Node, *, name: str | None = None) -> Node:
        return self.op("relu", (x,), name=name)

    def tanh(self, x: Node, *, name: str | None = None) -> Node:
        return self.op("tanh", (x,), name=name)

    def exp(self, x: Node, *, name: str | None = None) -> Node:
        return self.op("exp", (x,), name=name)

    def log(self, x: Node, *, name: str | None = None) -> Node:
        """Natural logarithm (log 0 = -inf, log of a negative x = NaN)."""
        return self.op("log", (x,), name=name)

    def neg(self, x: Node, *, name: str | None = None) -> Node:
        return self.op("neg", (x,), name=name)

    def sqrt(self, x: Node, *, name: str | None = None) -> Node:
        return self.op("sqrt", (x,), name=name)

    def rsqrt(self, x: Node, *, name: str | None = None) -> Node:
        return self.op("rsqrt", (x,), name=name)

    def scale_shift(self, x: Node, scale: float = 1.0, shift: float = 0.0, *, name: str | None = None) -> Node:
        """x * scale + shift with scalar scale and shift."""
        return self.op("scale_shift", (x,), scale=scale, shift=shift, name=name)

    def sub(self, a: Node, b: Node, *, name: str | None = None) -> Node:
        return self.op("sub", (a, b), name=name)

    def div(self, a: Node, b: Node, *, name: str | None = None) -> Node:
        return self.op("div", (a, b), name=name)

    def maximum(self, a: Node, b: Node, *, name: str | None = None) -> Node:
        return self.op("maximum", (a, b), name=name)

    def minimum(self, a: Node, b: Node, *, name: str | None = None) -> Node:
        return self.op("minimum", (a, b), name=name)

    def sum(self, x: Node, axis: int = -1, keepdims: bool = False, *, name: str | None = None) -> Node:
        return self.op("sum", (x,), axis=axis, keepdims=keepdims, name=name)

    def mean(self, x: Node, axis: int = -1, keepdims: bool = False, *, name: str | None = None) -> Node:
        return self.op("mean", (x,), axis=axis, keepdims=keepdims, name=name)

    def max(self, x: Node, axis: int = -1, keepdims: bool = False, *, name: str | None = None) -> Node:
        return self.op("max", (x,), axis=axis, keepdims=keepdims, name=name)

    def argmax(self, x: Node, axis: int = -1, keepdims: bool = False, *, name: str | None = None) -> Node:
        """Index of the first maximum along axis, as i32."""
        return self.op("argmax", (x,), axis=axis, keepdims=keepdims, name=name)

    def topk(self, x: Node, k: int, *, name: str | None = None) -> tuple[Node, Node]:
        """The k largest elements of each row of x (last axis): (values in x's
        dtype, i32 indices), both [..., k], by descending value; ties go to
        the lower index and NaN sorts above +inf (rlx/ir/ops/topk.py). 1 <= k
        <= 256 and k <= the row length, else ShapeError here."""
        indices = self.op("topk", (x,), k=k, name=name)
        return self.op("topk_values", (x, indices)), indices

    def repetition_penalty(self, x: Node, history: Node, penalty: Node, *, name: str | None = None) -> Node:
        """llama.cpp's repetition penalty on logits x [..., V]: each distinct
        id of the i32 history ([H] or [..., H], padded with ids outside
        [0, V)) has its logit divided by penalty (f32 [1], run-time data)
        when > 0, else multiplied (rlx/ir/ops/penalty.py)."""
        return self.op("repetition_penalty", (x, history, penalty), name=name)

    def masked_softmax(self, x: Node, mask: Node | None = None, scale: float = 1.0, *,
                       name: str | None = None) -> Node:
        """softmax(x * scale + mask) over the last axis; mask broadcasts to x."""
        inputs = (x,) if mask is None else (x, mask)
        return self.op("masked_softmax", inputs, scale=scale, name=name)

    def rmsnorm(self, x: Node, weight: Node, eps: float = 1e-6, add_one: bool = False, *,
                name: str | None = None) -> Node:
        """x / rms(x) * weight (or * (1 + weight) with add_one, as Gemma does)."""
        return self.op("rmsnorm", (x, weight), eps=eps, add_one=add_one, name=name)

    def add_layernorm(self, x: Node, residual: Node, weight: Node, bias: Node, eps: float = 1e-5, *,
                      name: str | None = None) -> Node:
        """layernorm(x + residual): the fused residual + norm of post-norm encoders."""
        return self.op("add_layernorm", (x, residual, weight, bias), eps=eps, name=name)

    def add_rmsnorm(self, x: Node, residual: Node, weight: Node, eps: float = 1e-6, add_one: bool = False, *,
                    name: str | None = None) -> Node:
        return self.op("add_rmsnorm", (x, residual, weight), eps=eps, add_one=add_one, name=name)

    def rmsnorm_add(self, o: Node, x: Node, weight: Node, eps: float = 1e-6, add_one: bool = False, *,
                    name: str | None = None) -> Node:
        """x + rmsnorm(o, weight): a post-norm residual (Gemma's sandwich norms), fused."""
        return self.op("rmsnorm_add", (o, x, weight), eps=eps, add_one=add_one, name=name)

    def rmsnorm_add_rmsnorm(self, o: Node, x: Node, weight: Node, next_weight: Node, eps: float = 1e-6,
                            add_one: bool = False, next_eps: float = 1e-6, next_add_one: bool = False, *,
                            name: str | None = None) -> tuple[Node, Node]:
        """(s, rmsnorm(s, next_weight)) for s = x + rmsnorm(o, weight), in one
        kernel: a post-norm residual and the next block's pre-norm. The two
        values are the halves of one packed node, returned as views."""
        both = self.op("rmsnorm_add_rmsnorm", (o, x, weight, next_weight), eps=eps, add_one=add_one,
                       next_eps=next_eps, next_add_one=next_add_one, name=name)
        shape = tuple(o.shape)
        return tuple(self.reshape(self.narrow(both, 0, i, 1), shape) for i in (1, 0))   # packed [normed, sum]

    def rmsnorm_rope(self, x: Node, positions: Node, weight: Node, eps: float = 1e-6, add_one: bool = False,
                     base: float = 10000.0, layout: str = "neox", rotary_dim: int | None = None,
                     weight_b: Node | None = None, weight_b_from: int | None = None, *,
                     freq_factors: Sequence[float] | None = None, name: str | None = None) -> Node:
        """rope(rmsnorm(x, weight), positions) in one kernel: the per-head
        query/key norm over D, then RoPE (see ``rope``). With weight_b, the
        heads from weight_b_from on are normed by it instead (a query's and
        a key's heads in one x)."""
        inputs = (x, positions, weight) if weight_b is None else (x, positions, weight, weight_b)
        extra = {} if weight_b is None else {"weight_b_from": weight_b_from}
        return self.op("rmsnorm_rope", inputs, eps=eps, add_one=add_one, base=base, layout=layout,
                       rotary_dim=rotary_dim, freq_factors=_factors(freq_factors), name=name, **extra)

    def linear(self, x: Node, weight: Node, bias: Node | None = None, activation: str | None = None,
               transpose_b: bool = True, *, name: str | None = None) -> Node:
        """activation(x @ W^T + bias) (transpose_b=True: W is [out, in], as
        PyTorch and GGUF store it); activation: None, "gelu", "gelu_tanh",
        "silu", "relu"."""
        inputs = (x, weight) if bias is None else (x, weight, bias)
        return self.op("linear", inputs, activation=activation, transpose_b=transpose_b, name=name)

    def glu(self, gate: Node, up: Node, activation: str = "silu", *, name: str | None = None) -> Node:
        """activation(gate) * up: SwiGLU ("silu") or GeGLU ("gelu", "gelu_tanh")."""
        return self.op("glu", (gate, up), activation=activation, name=name)

    def glu_linear(self, gate: Node, up: Node, weight: Node, activation: str = "silu", *,
                   name: str | None = None) -> Node:
        """glu(gate, up, activation) @ W^T with W [N, K] (a gated FFN's down
        projection): on GPUs a decode step's GEMV forms the glu as it reads
        x, so the glu's own kernel and its round trip through memory go."""
        return self.op("glu_linear", (gate, up, weight), activation=activation, name=name)

    def concat(self, xs: Sequence[Node], axis: int = -1, *, name: str | None = None) -> Node:
        return self.op("concat", tuple(xs), axis=axis, name=name)

    def rope(self, x: Node, positions: Node, base: float = 10000.0, layout: str = "neox",
             rotary_dim: int | None = None, *, freq_factors: Sequence[float] | None = None,
             name: str | None = None) -> Node:
        """Rotary position embedding of x [..., T, H, D] at int32 positions
        [T] or [B, T]; layout "neox" (half-split) or "interleaved"; only the
        first rotary_dim (default D) features rotate; freq_factors (one a
        rotated pair) divide the pairs' frequencies (Llama 3's rope_freqs)."""
        return self.op("rope", (x, positions), base=base, layout=layout, rotary_dim=rotary_dim,
                       freq_factors=_factors(freq_factors), name=name)

    def attention(self, q: Node, k: Node, v: Node, mask: Node | None = None, causal: bool = False,
                  scale: float | None = None, softcap: float | None = None, window: int | None = None, *,
                  length: Node | None = None, name: str | None = None) -> Node:
        """Scaled dot-product attention. q [B, Tq, Hq, D], k [B, Tk, Hkv, D],
        v [B, Tk, Hkv, Dv] with Hq a multiple of Hkv (grouped-query);
        mask: additive, broadcast to [B, Hq, Tq, Tk]; causal aligns the last
        query with the last key; scale defaults to 1/sqrt(D); softcap:
        softcap * tanh(s / softcap); window: only the last `window` keys up
        to each query's position; length: i32 [1] run-time data, the keys
        [0, length) are the active ones (a KV cache's filled rows) and the
        last query sits at the last of them. Returns [B, Tq, Hq, Dv]."""
        if mask is not None and not mask.dtype.is_float:   # an integer there would read as the length
            raise DTypeError(f"attention: mask must be a float tensor, got {mask.dtype.name}")
        inputs = (q, k, v) if mask is None else (q, k, v, mask)
        if length is not None:
            if length.dtype.is_float:   # a float operand in that place would read as a mask
                raise DTypeError(f"attention: length must be i32 [1], got {length.dtype.name}")
            inputs = (*inputs, length)
        return self.op("attention", inputs, causal=causal, scale=scale, softcap=softcap, window=window, name=name)

    # ---- the FFT family (rlx/ir/ops/fft.py): along the last axis, any leading batch ----

    def fft(self, x: Node, norm: str | None = None, *, name: str | None = None) -> Node:
        """DFT of c64 (or real f32) x [..., N] -> c64 [..., N]; norm as
        numpy.fft ("backward" = None, "ortho", "forward")."""
        return self.op("fft", (x,), norm=norm, name=name)

    def ifft(self, x: Node, norm: str | None = None, *, name: str | None = None) -> Node:
        """Inverse DFT of c64 (or real f32) x [..., N] -> c64 [..., N]."""
        return self.op("ifft", (x,), norm=norm, name=name)

    def rfft(self, x: Node, norm: str | None = None, *, name: str | None = None) -> Node:
        """DFT of a real f32 x [..., N]: the c64 [..., N // 2 + 1] non-negative frequencies."""
        return self.op("rfft", (x,), norm=norm, name=name)

    def windowed_rfft(self, x: Node, window: Node, norm: str | None = None, *, name: str | None = None) -> Node:
        """rfft(x * window) for an f32 window [N] over every row of x [..., N],
        in one pass where the FFT's load applies the window (fusion builds it
        from rfft(mul(x, window)))."""
        return self.op("windowed_rfft", (x, window), norm=norm, name=name)

    def windowed_rfft_power(self, x: Node, window: Node, norm: str | None = None, *,
                            name: str | None = None) -> Node:
        """|rfft(x * window)|^2 of each bin, f32 [..., N // 2 + 1]: one pass
        where the FFT's store writes the power (fusion builds it from
        real(X)^2 + imag(X)^2 of a windowed rfft X that nothing else reads)."""
        return self.op("windowed_rfft_power", (x, window), norm=norm, name=name)

    def irfft(self, x: Node, n: int | None = None, norm: str | None = None, *, name: str | None = None) -> Node:
        """The real f32 [..., n] signal of a c64 half spectrum x [..., M]
        (numpy.fft.irfft; n defaults to 2 (M - 1))."""
        return self.op("irfft", (x,), n=n, norm=norm, name=name)

    def real(self, x: Node, *, name: str | None = None) -> Node:
        """The real parts of c64 x, as an f32 view (no copy)."""
        return self.op("real", (x,), name=name)

    def imag(self, x: Node, *, name: str | None = None) -> Node:
        """The imaginary parts of c64 x, as an f32 view (no copy)."""
        return self.op("imag", (x,), name=name)

    def complex(self, re: Node, im: Node, *, name: str | None = None) -> Node:
        """c64 re + i im from two f32 tensors of one shape."""
        return self.op("complex", (re, im), name=name)

    def set_outputs(self, mapping_or_None: Mapping[str, Node] | None = None, **named: Node) -> None:
        """Name the graph's outputs (replacing earlier ones), in the given order."""
        outs: dict[str, Node] = {}
        for k, v in list((mapping_or_None or {}).items()) + list(named.items()):
            if not isinstance(k, str) or not k:
                raise GraphError(f"output names must be non-empty strings, got {k!r}")
            if not isinstance(v, Node):
                raise GraphError(f"output {k!r} is a {type(v).__name__}, not a Node")
            if v.graph is not self:
                raise GraphError(f"output {k!r} ({v!r}) belongs to another graph")
            if k in outs:
                raise GraphError(f"output {k!r} given twice")
            if v.dtype.quantized:
                raise DTypeError(f"output {k!r} ({v!r}) is {v.dtype}, a quantized block format: outputs are "
                                 "values; output dequantize(...) of it")
            outs[k] = v
        if not outs:
            raise GraphError("set_outputs needs at least one output")
        self._outputs = outs

    # ------------------------------------------------------------ views of the graph

    @property
    def nodes(self) -> list[Node]:
        """All nodes, in insertion order (dead ones included)."""
        return list(self._nodes)

    @property
    def inputs(self) -> dict[str, Node]:
        return dict(self._inputs)

    @property
    def params(self) -> dict[str, Node]:
        return dict(self._params)

    @property
    def states(self) -> dict[str, Node]:
        return dict(self._states)

    @property
    def effects(self) -> list[Node]:
        """The set_rows nodes, in creation order (topo_order's extra roots)."""
        return list(self._effects)

    @property
    def constants(self) -> list[Node]:
        """Constant nodes in insertion order (a list: constants need not be named)."""
        return [n for n in self._nodes if n.op == "constant"]

    @property
    def outputs(self) -> dict[str, Node]:
        return dict(self._outputs)

    def topo_order(self) -> list[Node]:
        """Nodes reachable from the outputs, each after its inputs (depth-first, inputs in order)."""
        if not self._outputs:
            raise GraphError("graph has no outputs; call set_outputs(...) first")
        visiting, done = 1, 2
        state: dict[Node, int] = {}
        order: list[Node] = []
        for root in list(self._outputs.values()) + self._effects:
            if root in state:
                continue
            state[root] = visiting
            stack: list[tuple[Node, Any]] = [(root, iter(root.inputs))]
            while stack:
                node, it = stack[-1]
                for x in it:
                    if not isinstance(x, Node) or x.graph is not self:
                        what = "another graph's node" if isinstance(x, Node) else f"a {type(x).__name__}"
                        raise GraphError(f"{node!r} has {what} as an input: {x!r}")
                    s = state.get(x)
                    if s is None:
                        state[x] = visiting
                        stack.append((x, iter(x.inputs)))
                        break
                    if s == visiting:
                        path = [n for n, _ in stack]
                        cyc = path[path.index(x):] + [x]
                        raise GraphError("cycle in graph: " + " -> ".join(f"%{n.id} {n.op}" for n in cyc))
                else:
                    state[node] = done
                    order.append(node)
                    stack.pop()
        return order

    def validate(self) -> None:
        """Re-run inference over the live graph; catches passes that mutated it inconsistently."""
        for node in self.topo_order():
            opdef = get_op(node.op)
            if opdef.arity != -1 and len(node.inputs) != opdef.arity:
                raise GraphError(f"{node!r}: {node.op} expects {opdef.arity} input(s), "
                                 f"has {len(node.inputs)}")
            ty = self._infer(opdef, tuple(node.inputs), dict(node.attrs), node.id, node.name)
            if ty != node.type:
                raise GraphError(f"{node!r}: stored type {node.type} but inference now gives {ty}")
            if node.op in _LEAF_NAMED:
                table = {"input": self._inputs, "param": self._params, "state": self._states}[node.op]
                if table.get(node.attrs["name"]) is not node:
                    raise GraphError(f"{node!r}: {node.op} {node.attrs['name']!r} is not registered "
                                     f"under that name in the graph")

    def consumers(self) -> dict[Node, list[Node]]:
        """For each live node, the live nodes that read it (each listed once, in topo order)."""
        order = self.topo_order()
        out: dict[Node, list[Node]] = {n: [] for n in order}
        for n in order:
            for x in dict.fromkeys(n.inputs):
                out[x].append(n)
        return out

    # ------------------------------------------------------------ printing

    def __str__(self) -> str:
        return format_graph(self)

    def __repr__(self) -> str:
        return (f"<Graph: {len(self._nodes)} nodes, inputs {list(self._inputs)}, "
                f"params {len(self._params)}, outputs {list(self._outputs)}>")
