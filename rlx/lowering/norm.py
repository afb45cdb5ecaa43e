"""Lowering of the norm family (shaders/norm.h): layernorm, rmsnorm and the
fused residual forms."""

from __future__ import annotations

import struct

from rlx.errors import UnsupportedOpError
from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, Work, float_suffix, lowers
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
