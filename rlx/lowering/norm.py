"""Lowering of the norm family (shaders/norm.h): layernorm, rmsnorm and the
fused residual forms."""

from __future__ import annotations

import struct
import weakref
from dataclasses import dataclass

from rlx.errors import UnsupportedOpError
from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, Thunk, Work, float_suffix, lowers
from rlx.runtime.views import View


def layernorm_params(rows: int, cols: int, in_offset: int, out_offset: int, eps: float) -> bytes:
    return struct.pack("<4If3I", rows, cols, in_offset, out_offset, eps, 0, 0, 0)


NO_RESIDUAL = 0xFFFFFFFF


def norm_params(rows: int, cols: int, x_offset: int, r_offset: int, eps: float, add_one: bool = False) -> bytes:
    return struct.pack("<4If3I", rows, cols, x_offset, r_offset, eps, int(add_one), 0, 0)


@lowers("layernorm", reads={1: "start", 2: "start"}, kernels=("layernorm",))
def _layernorm(lw: Lowering, node: Node) -> View:
    x = lw.dense(node.inputs[0])
    w, b = (lw.dense(n, at_start=True) for n in node.inputs[1:])
    if not (x.dtype == w.dtype == b.dtype):
        raise UnsupportedOpError(f"{node!r}: x, weight and bias must share a dtype on this device")
    out = lw.new_value(node)
    cols = node.shape[-1]
    rows = out.numel // max(cols, 1)
    if out.numel:
        lw.dispatch(repr(node), f"layernorm_{float_suffix(node, node.dtype)}",
                    [(x, "r"), (w, "r"), (b, "r"), (out, "w")],
                    layernorm_params(rows, cols, x.offset, 0, float(node.attrs.get("eps", 1e-5))),
                    lw.target.row_grid(rows, cols), Work("norm"))
    return out


def _norm(lw: Lowering, node: Node, kernel: str, x: View, r: View | None, weights: list[View],
          eps: float, add_one: bool = False) -> View:
    out = lw.new_value(node)
    cols = node.shape[-1]
    rows = out.numel // max(cols, 1)
    if out.numel:
        params = norm_params(rows, cols, x.offset, NO_RESIDUAL if r is None else r.offset, eps, add_one)
        args = [(x, "r"), (x if r is None else r, "r"), *((w, "r") for w in weights), (out, "w")]
        lw.dispatch(repr(node), f"{kernel}_{float_suffix(node, node.dtype)}", args, params,
                    lw.target.row_grid(rows, cols), Work("norm"))
    return out


@lowers("rmsnorm", reads={1: "start"}, kernels=("rmsnorm",))
def _rmsnorm(lw: Lowering, node: Node) -> View:
    x, w = lw.dense(node.inputs[0]), lw.dense(node.inputs[1], at_start=True)
    return _norm(lw, node, "rmsnorm", x, None, [w], node.attrs["eps"], node.attrs["add_one"])


@lowers("add_rmsnorm", reads={2: "start"}, kernels=("rmsnorm",))   # the rmsnorm kernel with a residual
def _add_rmsnorm(lw: Lowering, node: Node) -> View:
    x, r = lw.dense(node.inputs[0]), lw.dense(node.inputs[1])
    w = lw.dense(node.inputs[2], at_start=True)
    return _norm(lw, node, "rmsnorm", x, r, [w], node.attrs["eps"], node.attrs["add_one"])


@lowers("add_layernorm", reads={2: "start", 3: "start"}, kernels=("add_layernorm",))
def _add_layernorm(lw: Lowering, node: Node) -> View:
    x, r = lw.dense(node.inputs[0]), lw.dense(node.inputs[1])
    w, b = (lw.dense(n, at_start=True) for n in node.inputs[2:])
    return _norm(lw, node, "add_layernorm", x, r, [w, b], node.attrs["eps"])


def rmsnorm_add_params(rows: int, cols: int, o_offset: int, x_offset: int, eps: float, add_one: bool,
                       next_eps: float = 0.0, next_add_one: bool = False, then_norm: bool = False) -> bytes:
    """RmsNormAddParams (shaders/norm.h)."""
    return struct.pack("<4I2f3I3I", rows, cols, o_offset, x_offset, eps, next_eps, int(add_one),
                       int(next_add_one), int(then_norm), 0, 0, 0)


@dataclass(frozen=True)
class NormChain:
    """An rmsnorm_add(_rmsnorm) dispatch of one row, as the decode GEMV after
    it needs it to take the chain into its own x staging (rlx/lowering/
    quant.py norm_gemv): the thunk, its inputs and output, and its params."""
    thunk: Thunk
    o: View
    x: View
    weight: View
    next_weight: View
    out: View
    cols: int
    then_norm: bool
    eps: float
    add_one: bool
    next_eps: float
    next_add_one: bool


# The rmsnorm_add dispatch a lowering emitted last, while it is one row.
LAST_NORM_CHAIN: weakref.WeakKeyDictionary[Lowering, NormChain] = weakref.WeakKeyDictionary()


def _rmsnorm_add_dispatch(lw: Lowering, node: Node, then_norm: bool) -> View:
    o, x = lw.dense(node.inputs[0]), lw.dense(node.inputs[1])
    weights = [lw.dense(n, at_start=True) for n in node.inputs[2:]]
    a = node.attrs
    out = lw.new_value(node)   # rmsnorm_add_rmsnorm: [2, ...], the normed sums then the sums
    cols = node.inputs[0].shape[-1]
    rows = o.numel // max(cols, 1)
    if o.numel:
        params = rmsnorm_add_params(rows, cols, o.offset, x.offset, a["eps"], a["add_one"], a.get("next_eps", 0.0),
                                    a.get("next_add_one", False), then_norm)
        next_weight = weights[1] if then_norm else weights[0]
        thunk = lw.dispatch(repr(node), f"rmsnorm_add_{float_suffix(node, node.dtype)}",
                            [(o, "r"), (x, "r"), (weights[0], "r"), (next_weight, "r"), (out, "w")], params,
                            lw.target.row_grid(rows, cols), Work("norm"))
        if rows == 1:
            LAST_NORM_CHAIN[lw] = NormChain(thunk, o, x, weights[0], next_weight, out, cols, then_norm, a["eps"],
                                            a["add_one"], a.get("next_eps", 0.0), a.get("next_add_one", False))
    return out


@lowers("rmsnorm_add", reads={2: "start"}, kernels=("rmsnorm_add",))
def _rmsnorm_add(lw: Lowering, node: Node) -> View:
    return _rmsnorm_add_dispatch(lw, node, then_norm=False)


@lowers("rmsnorm_add_rmsnorm", reads={2: "start", 3: "start"}, kernels=("rmsnorm_add",))
def _rmsnorm_add_rmsnorm(lw: Lowering, node: Node) -> View:
    return _rmsnorm_add_dispatch(lw, node, then_norm=True)
