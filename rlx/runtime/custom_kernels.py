"""User kernels: ``rlx.register_kernel`` makes a new op out of portable
kernel source (the shaders/ style, behind the same prelude), a shape rule
and a numpy reference, and compiles it for whichever device runs it.

Binding convention of a registered kernel: its inputs (dense) in order, then
the output, then the params struct (whatever ``params(node)`` packs)."""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable

import numpy as np

from rlx.errors import GraphError
from rlx.ir.graph import Node
from rlx.ir.op import OpDef, TensorType, register_op
from rlx.lowering import LOWERINGS, Lowering, Work, float_suffix
from rlx.reference import register_reference
from rlx.runtime.target import Target
from rlx.runtime.views import View

_cache: dict[tuple[int, str], object] = {}
_cache_lock = threading.Lock()

Grid = tuple[tuple[int, int, int], tuple[int, int, int]]


def library_for(device, source: str):
    """The device's compiled library for a user kernel source (cached)."""
    key = (id(device), source)
    with _cache_lock:
        lib = _cache.get(key)
        if lib is None:
            lib = _cache[key] = device.compile_library(source)
    return lib


def _default_params(node: Node) -> bytes:
    return struct.pack("<I", int(np.prod(node.shape, dtype=np.int64)))


def _grid(kind: str | Callable[[Node, Target], Grid], node: Node, target: Target) -> Grid:
    if callable(kind):
        return kind(node, target)
    numel = int(np.prod(node.shape, dtype=np.int64))
    if kind == "elementwise":
        return target.elementwise_grid(numel)
    if kind == "rows":
        cols = node.shape[-1] if node.shape else 1
        return target.row_grid(numel // max(cols, 1), cols)
    raise GraphError(f"grid must be 'elementwise', 'rows' or a callable, got {kind!r}")


def register_kernel(op: str, source: str, *,
                    reference: Callable[[list[np.ndarray], dict, TensorType], np.ndarray],
                    infer: Callable[[list[TensorType], dict], TensorType] | None = None,
                    params: Callable[[Node], bytes] | None = None,
                    kernel: str = "{op}_{dtype}",
                    grid: str | Callable[[Node, Target], Grid] = "elementwise",
                    arity: int = -1, doc: str = "", replace: bool = False) -> OpDef:
    """Register a custom op backed by a user kernel.

    op: the new op's name (use it with ``graph.op(op, inputs, **attrs)``).
    source: kernel source in the portable style (RLX_KERNEL, RLX_BUF,
        RLX_PARAMS, RLX_IDS, RLX_FOR_RANGE, RLX_INSTANTIATE, ...).
    reference: numpy semantics ``(inputs, attrs, out_type) -> array``.
    infer: shape rule ``(input_types, attrs) -> TensorType``; default: the
        first input's type.
    params: packs the params struct for a node (default: one uint32, the
        output's element count).
    kernel: host name of the instantiation to run; ``{op}`` and ``{dtype}``
        (f32 / f16 of the output) are filled in.
    grid: "elementwise" (a range loop over the output), "rows" (one group
        per row of the last axis) or ``(node, target) -> (groups, threads)``.
    """
    if not isinstance(source, str) or "RLX_INSTANTIATE" not in source:
        raise GraphError(f"register_kernel({op!r}): source must be kernel text with RLX_INSTANTIATE lines")
    if not callable(reference):
        raise GraphError(f"register_kernel({op!r}): reference must be callable")
    infer_fn = infer or (lambda types, attrs: types[0])
    opdef = register_op(OpDef(name=op, arity=arity, infer=infer_fn, doc=doc or f"user kernel {op}"),
                        replace=replace)
    register_reference(op, reference)
    pack = params or _default_params

    def lower(lw: Lowering, node: Node) -> View:
        inputs = [lw.dense(x, at_start=True) for x in node.inputs]
        out = lw.new_value(node)
        name = kernel.format(op=op, dtype=float_suffix(node, node.dtype))
        lw.dispatch(repr(node), name, [*((v, "r") for v in inputs), (out, "w")], pack(node),
                    _grid(grid, node, lw.target), Work("elementwise"), source=source)   # most user kernels are
        return out

    LOWERINGS[op] = lower
    return opdef
