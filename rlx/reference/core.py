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


def as_f32(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def reference_for(name: str) -> Callable[[RefFn], RefFn]:
    def deco(fn: RefFn) -> RefFn:
        return register_reference(name, fn)
    return deco


def _bind(kind: str, name: str, value: object, t: TensorType, err: type[Exception]) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError, OverflowError) as exc:   # ragged lists, odd objects
        raise err(f"{kind} {name!r}: cannot convert {type(value).__name__} to an array: {exc}") from None
    want = t.dtype.storage_shape(tuple(t.shape))   # a block format: the bytes of each row
    if tuple(arr.shape) != want or arr.dtype != t.dtype.numpy:
        got = f"{arr.dtype}{list(arr.shape)}"
        raise err(f"{kind} {name!r}: expected {t} ({t.dtype.numpy}{list(want)}), got {got}")
    if t.dtype.quantized or t.dtype.name == "bf16":   # ops see the values (gguf's dequantizer: the oracle;
        # bf16 is stored as its uint16 bits, which no op computes on as integers)
        from rlx.reference.blocks import dequantize_values

        return dequantize_values(t.dtype, arr, tuple(t.shape))
    return arr


def run_reference(graph: Graph, inputs: Mapping[str, np.ndarray],
                  params: Mapping[str, np.ndarray] | None = None,
                  state: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Evaluate ``graph`` with numpy; returns a fresh array per output name.
    ``state``: the states' values by name, updated in place by the run's
    set_rows (missing ones start as zeros and are added), so a dict passed
    to several runs carries the state across them like an executable does."""
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
        if node.op == "state":
            store = state if state is not None else {}
            name = node.attrs["name"]
            if name not in store:
                store[name] = np.zeros(tuple(node.shape), node.dtype.numpy)
            values[node] = store[name]
            continue
        if node.op == "set_rows":
            values[node] = set_rows_in_place(*(values[x] for x in node.inputs))
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


def set_rows_in_place(state: np.ndarray, values: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """set_rows (rlx/ir/ops/state.py): rows t < min(count, T) to row
    (start + t) mod R, only the last R when there are more."""
    rows = state.shape[0]
    start, count = int(slot[0]), max(0, min(int(slot[1]), values.shape[0]))
    for t in range(max(0, count - rows), count):
        state[(start + t) % rows] = values[t]
    return state
