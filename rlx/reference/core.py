"""The numpy oracle: what every kernel's output is checked against.

Float ops compute in float32 (f16 inputs are upcast) and the result is cast to
the node's dtype, matching kernels that accumulate in f32 and store f16.
Transcendentals that numpy lacks (erf) use float64 ``math.erf`` so the oracle
is never the least accurate party in a comparison.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from rlx.errors import GraphError, InputError, ParameterError, ShapeError, UnsupportedOpError
from rlx.ir import Graph, TensorType
from rlx.ir.graph import as_bindings

__all__ = ["REFERENCE", "register_reference", "run_reference", "erf", "erfc"]

RefFn = Callable[[list[np.ndarray], dict, TensorType], np.ndarray]
REFERENCE: dict[str, RefFn] = {}

_erf64 = np.vectorize(math.erf, otypes=[np.float64])
_erfc64 = np.vectorize(math.erfc, otypes=[np.float64])


def erf(x: np.ndarray) -> np.ndarray:
    """Elementwise erf in float64 (exact to double rounding, via math.erf)."""
    x = np.asarray(x, dtype=np.float64)
    return _erf64(x) if x.size else np.zeros(x.shape, np.float64)


def erfc(x: np.ndarray) -> np.ndarray:
    """Elementwise erfc in float64 (math.erfc: accurate in the tail, where 1 - erf cancels)."""
    x = np.asarray(x, dtype=np.float64)
    return _erfc64(x) if x.size else np.zeros(x.shape, np.float64)


def register_reference(op_name: str, fn: RefFn) -> RefFn:
    """Give an op (built-in or user-registered) its numpy semantics."""
    if not callable(fn):
        raise GraphError(f"reference for {op_name!r} must be callable, got {type(fn).__name__}")
    REFERENCE[op_name] = fn
    return fn


def _f32(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def _ref(name: str) -> Callable[[RefFn], RefFn]:
    def deco(fn: RefFn) -> RefFn:
        return register_reference(name, fn)
    return deco


@_ref("add")
def _add(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return _f32(xs[0]) + _f32(xs[1])


@_ref("mul")
def _mul(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return _f32(xs[0]) * _f32(xs[1])


@_ref("gelu")
def _gelu(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x = _f32(xs[0])
    if attrs.get("approximate", "none") == "tanh":
        c = np.float32(math.sqrt(2.0 / math.pi))
        return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(c * (x + np.float32(0.044715) * x * x * x)))
    # x * Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2 in float64: 1 + erf cancels for negative x
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):   # -inf * 0 is NaN, as in the kernels
        return (0.5 * x64 * erfc(-x64 / math.sqrt(2.0))).astype(np.float32)


@_ref("silu")
def _silu(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x = _f32(xs[0])
    with np.errstate(over="ignore"):  # exp(-x) -> inf for very negative x gives the right limit 0
        return x / (np.float32(1.0) + np.exp(-x))


def _softmax_rows(x: np.ndarray) -> np.ndarray:
    """softmax over the last axis; a row that is -inf everywhere gives zeros
    (softmax, masked_softmax and attention alike), a row with a NaN is NaN
    everywhere (torch's softmax)."""
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), np.float32(0), m)
    e = np.exp(x - m)
    s = np.sum(e, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(s == 0, np.float32(0), e / s)   # s > 0 would turn a NaN row into zeros


@_ref("softmax")
def _softmax(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return _softmax_rows(_f32(xs[0]))   # the last axis: the op allows no other


@_ref("layernorm")
def _layernorm(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x, w, b = (_f32(a) for a in xs)
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean(np.square(x - mean), axis=-1, keepdims=True)  # biased, as in BERT/PyTorch
    return (x - mean) / np.sqrt(var + np.float32(attrs.get("eps", 1e-5))) * w + b


@_ref("gather")
def _gather(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    table, idx = xs
    v = table.shape[0]
    if idx.size and (idx.min() < 0 or idx.max() >= v):
        bad = idx[(idx < 0) | (idx >= v)].ravel()[0]
        raise InputError(f"gather: index {int(bad)} is out of range for a table of {v} rows")
    return table[idx]


@_ref("matmul")
def _matmul(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    a, b = _f32(xs[0]), _f32(xs[1])
    if attrs.get("transpose_b", False):
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


@_ref("reshape")
def _reshape(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.reshape(xs[0], tuple(out.shape))


@_ref("transpose")
def _transpose(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.transpose(xs[0], tuple(attrs["perm"]))


@_ref("narrow")
def _narrow(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x = xs[0]
    index = [slice(None)] * x.ndim
    index[attrs["axis"]] = slice(attrs["start"], attrs["start"] + attrs["length"])
    return x[tuple(index)]


@_ref("copy")
def _copy(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.array(xs[0], order="C", copy=True)


@_ref("cast")
def _cast(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return xs[0]  # the runner casts every result to the node's dtype


# ---- the transformer op set (rlx/ir/ops/) ----------------------------------------

_ACTIVATION_REFS: dict[str | None, Callable[[np.ndarray], np.ndarray]] = {
    None: lambda x: x,
    "gelu": lambda x: _gelu([x], {}, None),
    "gelu_tanh": lambda x: _gelu([x], {"approximate": "tanh"}, None),
    "silu": lambda x: _silu([x], {}, None),
    "relu": lambda x: np.maximum(x, np.float32(0)),
}

for _name, _fn in {
    "relu": lambda x: np.maximum(x, np.float32(0)),
    "tanh": np.tanh,
    "exp": np.exp,
    "neg": np.negative,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: np.float32(1) / np.sqrt(x),
}.items():
    register_reference(_name, lambda xs, attrs, out, _fn=_fn: _fn(_f32(xs[0])))

for _name, _fn in {"sub": np.subtract, "div": np.divide, "maximum": np.maximum, "minimum": np.minimum}.items():
    register_reference(_name, lambda xs, attrs, out, _fn=_fn: _fn(_f32(xs[0]), _f32(xs[1])))


@_ref("scale_shift")
def _scale_shift(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return _f32(xs[0]) * np.float32(attrs["scale"]) + np.float32(attrs["shift"])


for _name, _fn in {"sum": np.sum, "mean": np.mean, "max": np.max}.items():
    register_reference(_name, lambda xs, attrs, out, _fn=_fn: _fn(_f32(xs[0]), axis=attrs["axis"],
                                                                  keepdims=attrs["keepdims"]))


@_ref("argmax")
def _argmax(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    r = np.argmax(_f32(xs[0]), axis=attrs["axis"])
    return np.expand_dims(r, attrs["axis"]) if attrs["keepdims"] else r


@_ref("masked_softmax")
def _masked_softmax(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x = _f32(xs[0]) * np.float32(attrs["scale"])
    if len(xs) == 2:
        x = x + _f32(xs[1])
    return _softmax_rows(x)


def _rms(x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    ms = np.mean(np.square(x), axis=-1, keepdims=True)
    scale = (np.float32(1) + w) if attrs["add_one"] else w
    return x / np.sqrt(ms + np.float32(attrs["eps"])) * scale


@_ref("rmsnorm")
def _rmsnorm(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return _rms(_f32(xs[0]), _f32(xs[1]), attrs)


@_ref("add_rmsnorm")
def _add_rmsnorm(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return _rms(_f32(xs[0]) + _f32(xs[1]), _f32(xs[2]), attrs)


@_ref("add_layernorm")
def _add_layernorm(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return _layernorm([_f32(xs[0]) + _f32(xs[1]), xs[2], xs[3]], attrs, out)


@_ref("linear")
def _linear(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    y = _matmul(xs[:2], {"transpose_b": attrs["transpose_b"]}, out)
    if len(xs) == 3:
        y = y + _f32(xs[2])
    return _ACTIVATION_REFS[attrs["activation"]](y)


@_ref("glu")
def _glu(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return _ACTIVATION_REFS[attrs["activation"]](_f32(xs[0])) * _f32(xs[1])


@_ref("concat")
def _concat(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.concatenate(xs, axis=attrs["axis"])


def _bind(kind: str, name: str, value: object, t: TensorType, err: type[Exception]) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError, OverflowError) as exc:   # ragged lists, odd objects
        raise err(f"{kind} {name!r}: cannot convert {type(value).__name__} to an array: {exc}") from None
    if tuple(arr.shape) != tuple(t.shape) or arr.dtype != t.dtype.numpy:
        got = f"{arr.dtype}{list(arr.shape)}"
        raise err(f"{kind} {name!r}: expected {t} ({t.dtype.numpy}{list(t.shape)}), got {got}")
    return arr


def run_reference(graph: Graph, inputs: Mapping[str, np.ndarray],
                  params: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Evaluate ``graph`` with numpy; returns a fresh array per output name."""
    if not isinstance(graph, Graph):
        raise GraphError(f"run_reference expects an rlx.Graph, got a {type(graph).__name__}")
    inputs = as_bindings(inputs, InputError, "inputs")
    params = as_bindings(params, ParameterError, "params")
    for kind, given, declared, err in (("input", inputs, graph.inputs, InputError),
                                       ("param", params, graph.params, ParameterError)):
        unknown = sorted(set(given) - set(declared), key=repr)
        if unknown:
            raise err(f"unknown {kind}(s) {', '.join(map(repr, unknown))}; the graph declares "
                      f"{', '.join(map(repr, declared)) or 'none'}")
    values: dict[object, np.ndarray] = {}
    for node in graph.topo_order():
        if node.op in ("input", "param"):
            given, err = (inputs, InputError) if node.op == "input" else (params, ParameterError)
            name = node.attrs["name"]
            if name not in given:
                raise err(f"missing {node.op} {name!r} (expected {node.type}); given: "
                          f"{', '.join(map(repr, given)) or 'none'}")
            values[node] = _bind(node.op, name, given[name], node.type, err)
            continue
        if node.op == "constant":
            values[node] = np.asarray(node.attrs["value"], dtype=node.dtype.numpy)
            continue
        fn = REFERENCE.get(node.op)
        if fn is None:
            raise UnsupportedOpError(f"op {node.op!r} has no numpy reference (register_reference); "
                                     f"known: {', '.join(sorted(REFERENCE))}")
        with np.errstate(invalid="ignore"):  # NaN in gives NaN out (the semantics), not a warning
            res = np.asarray(fn([values[x] for x in node.inputs], node.attrs, node.type))
        if tuple(res.shape) != tuple(node.shape):
            raise ShapeError(f"reference of {node!r} returned shape {res.shape}, expected {node.shape!r}")
        with np.errstate(over="ignore"):  # f32 -> f16 overflow is inf, as on the device
            values[node] = res.astype(node.dtype.numpy, copy=False)
    return {k: np.array(values[n], copy=True) for k, n in graph.outputs.items()}
