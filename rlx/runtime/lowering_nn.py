"""Lowering of the transformer op set (rlx/ir/ops/): reductions,
masked softmax, RMSNorm, fused residual + norm, fused linear, gated linear
units and concat."""

from __future__ import annotations

from math import prod

from rlx.errors import UnsupportedOpError
from rlx.ir.graph import Node
from rlx.runtime import params as P
from rlx.runtime.lowering import Lowering, float_suffix, lowers
from rlx.runtime.views import View

# Small-M matmuls may run on matmul_rows (one group per output column)
# instead of the shim's gemm. The decider the compile was given (the cost
# model, rlx/tune/cost.py) decides per shape from calibrated numbers (row
# kernel and gemm probed at small-M shape classes inside a replay); a
# compile without a calibrated model (the calibration's own probes) is
# given the model of the backend's defaults.


def use_row_kernel(lw: Lowering, m: int, n: int, k: int, dtype_name: str = "f32", *, epilogue: bool = True,
                   activation: bool = False, transpose_b: bool = False) -> bool:
    return lw.decider.prefer_row_kernel(m, n, k, dtype_name, epilogue=epilogue, activation=activation,
                                        transpose_b=transpose_b)


def rows_view(lw: Lowering, node: Node) -> tuple[View, int]:
    """The node as rows of its last axis read with one row stride (no copy
    when the leading dimensions collapse and the last axis is contiguous)."""
    view = lw.view(node)
    shape, strides = view.shape, view.strides
    cols = shape[-1] if shape else 1
    ok = not shape or strides[-1] == 1 or cols == 1
    lead = [(d, s) for d, s in zip(shape[:-1], strides[:-1]) if d != 1]
    for (_, s0), (d1, s1) in zip(lead, lead[1:]):
        ok &= s0 == s1 * d1
    if not ok:
        view = lw.dense(node)
        return view, cols
    return view, (lead[-1][1] if lead else cols)


@lowers("sum", "mean", "max", "argmax")
def _reduce(lw: Lowering, node: Node) -> View:
    x = lw.dense(node.inputs[0])
    axis = node.attrs["axis"]
    shape = x.shape
    outer, length, inner = prod(shape[:axis]), shape[axis], prod(shape[axis + 1:])
    out = lw.new_value(node)
    if out.numel == 0:
        return out
    suffix = float_suffix(node, x.dtype)
    kernel = f"argmax_{suffix}" if node.op == "argmax" else f"reduce_{suffix}"
    op = 0 if node.op == "argmax" else P.REDUCE_OPS[node.op]
    lw.dispatch(repr(node), kernel, [(x, "r"), (out, "w")], P.reduce(outer, length, inner, op, x.offset),
                lw.target.row_grid(outer * inner, length))
    return out


@lowers("masked_softmax")
def _masked_softmax(lw: Lowering, node: Node) -> View:
    x = lw.dense(node.inputs[0])
    shape = x.shape
    if len(shape) - 1 > P.MAX_DIMS:
        raise UnsupportedOpError(f"{node!r}: more than {P.MAX_DIMS} leading dimensions")
    has_mask = len(node.inputs) == 2
    mask = lw.view(node.inputs[1]).broadcast_to(shape) if has_mask else x
    out = lw.new_value(node)
    cols = shape[-1]
    rows = out.numel // max(cols, 1)
    if out.numel:
        params = P.masked_softmax(rows, cols, x.offset, has_mask, node.attrs["scale"], mask.offset,
                                  mask.strides[-1], shape[:-1], mask.strides[:-1])
        lw.dispatch(repr(node), f"softmax_masked_{float_suffix(node, node.dtype)}",
                    [(x, "r"), (mask, "r"), (out, "w")], params,
                    lw.target.row_grid(rows, cols, stacked=True))
    return out


def _norm(lw: Lowering, node: Node, kernel: str, x: View, r: View | None, weights: list[View],
          eps: float, add_one: bool = False) -> View:
    out = lw.new_value(node)
    cols = node.shape[-1]
    rows = out.numel // max(cols, 1)
    if out.numel:
        params = P.norm(rows, cols, x.offset, P.NO_RESIDUAL if r is None else r.offset, eps, add_one)
        args = [(x, "r"), (x if r is None else r, "r"), *((w, "r") for w in weights), (out, "w")]
        lw.dispatch(repr(node), f"{kernel}_{float_suffix(node, node.dtype)}", args, params,
                    lw.target.row_grid(rows, cols))
    return out


@lowers("rmsnorm")
def _rmsnorm(lw: Lowering, node: Node) -> View:
    x, w = lw.dense(node.inputs[0]), lw.dense(node.inputs[1], at_start=True)
    return _norm(lw, node, "rmsnorm", x, None, [w], node.attrs["eps"], node.attrs["add_one"])


@lowers("add_rmsnorm")
def _add_rmsnorm(lw: Lowering, node: Node) -> View:
    x, r = lw.dense(node.inputs[0]), lw.dense(node.inputs[1])
    w = lw.dense(node.inputs[2], at_start=True)
    return _norm(lw, node, "rmsnorm", x, r, [w], node.attrs["eps"], node.attrs["add_one"])


@lowers("add_layernorm")
def _add_layernorm(lw: Lowering, node: Node) -> View:
    x, r = lw.dense(node.inputs[0]), lw.dense(node.inputs[1])
    w, b = (lw.dense(n, at_start=True) for n in node.inputs[2:])
    return _norm(lw, node, "add_layernorm", x, r, [w, b], node.attrs["eps"])


@lowers("linear")
def _linear(lw: Lowering, node: Node) -> View:
    suffix = float_suffix(node, node.dtype)
    x = lw.dense(node.inputs[0])
    w = lw.dense(node.inputs[1], at_start=True)
    bias = lw.dense(node.inputs[2], at_start=True) if len(node.inputs) == 3 else None
    trans_b = node.attrs["transpose_b"]
    act = P.ACTIVATIONS[node.attrs["activation"]]
    k = x.shape[-1]
    n = node.shape[-1]
    m = x.numel // max(k, 1)
    out = lw.new_value(node)
    if out.numel == 0:
        return out
    # bf16 weights (precision="bf16") go to the shim's gemm, which reads them; the row kernel reads x's dtype.
    # The gemm side's epilogue kernel: an activation, or a bias the shim's gemm does not add itself.
    epilogue = bool(act) or (bias is not None and not lw.target.gemm_bias)
    if w.dtype == x.dtype and use_row_kernel(lw, m, n, k, suffix, epilogue=epilogue,
                                             activation=act in (1, 2, 3), transpose_b=trans_b):
        lw.dispatch(repr(node), f"matmul_rows_{suffix}",
                    [(x, "r"), (w, "r"), (bias or w, "r"), (out, "w")],
                    P.linear(m, n, k, x.offset, trans_b, bias is not None, act),
                    lw.target.row_grid(n, k))
        return out
    # The bias rides in the gemm where the shim takes one (one kernel less per
    # linear); an activation still takes the epilogue kernel.
    gemm_bias = bias if bias is not None and lw.target.gemm_bias else None
    lw.gemm(repr(node), x, w, out, m, n, k, k, k if trans_b else n, n, trans_b, bias=gemm_bias)
    if act or (bias is not None and gemm_bias is None):
        epilogue_bias = bias if gemm_bias is None else None
        lw.dispatch(f"{node!r} epilogue", f"bias_act_{suffix}", [(out, "w"), (epilogue_bias or out, "r")],
                    P.linear(m, n, k, 0, trans_b, epilogue_bias is not None, act), lw.target.row_grid(m, n))
    return out


@lowers("glu")
def _glu(lw: Lowering, node: Node) -> View:
    gate, gate_stride = rows_view(lw, node.inputs[0])
    up, up_stride = rows_view(lw, node.inputs[1])
    out = lw.new_value(node)
    cols = node.shape[-1] if node.shape else 1
    rows = out.numel // max(cols, 1)
    if out.numel:
        params = P.glu(rows, cols, gate.offset, gate_stride, up.offset, up_stride,
                       P.ACTIVATIONS[node.attrs["activation"]])
        lw.dispatch(repr(node), f"glu_{float_suffix(node, node.dtype)}", [(gate, "r"), (up, "r"), (out, "w")],
                    params, lw.target.row_grid(rows, cols))
    return out


@lowers("concat")
def _concat(lw: Lowering, node: Node) -> View:
    """One strided copy per input into its slice of the output."""
    out = lw.new_value(node)
    axis = node.attrs["axis"]
    start = 0
    for i, src in enumerate(node.inputs):
        length = src.shape[axis]
        lw.emit_copy(f"{node!r} part {i}", lw.view(src), out.narrow(axis, start, length))
        start += length
    return out
