"""Lowering of matmul and linear (shaders/linear.h): the shim's gemm, or for
small M the row kernel, as the injected decider chooses per shape; the
bias/activation epilogue."""

from __future__ import annotations

import struct

from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, Work, float_suffix, lowers
from rlx.lowering.quant import LINEAR_KERNELS, is_block_weight, quantized_linear
from rlx.runtime.views import View

ACTIVATIONS = {None: 0, "gelu": 1, "gelu_tanh": 2, "silu": 3, "relu": 4}
# Activations of exp or erf: per byte far dearer than a bias add or relu (their own cost family).
TRANSCENDENTAL_ACTS = frozenset(ACTIVATIONS[a] for a in ("gelu", "gelu_tanh", "silu"))


def linear_params(m: int, n: int, k: int, a_offset: int, transpose_b: bool, has_bias: bool, act: int) -> bytes:
    return struct.pack("<8I", m, n, k, a_offset, int(transpose_b), int(has_bias), act, 0)


def use_row_kernel(lw: Lowering, m: int, n: int, k: int, dtype_name: str = "f32", *, epilogue: bool = True,
                   activation: bool = False, transpose_b: bool = False) -> bool:
    return lw.decider.prefer_row_kernel(m, n, k, dtype_name, epilogue=epilogue, activation=activation,
                                        transpose_b=transpose_b)


@lowers("matmul", kernels=LINEAR_KERNELS)
def _matmul(lw: Lowering, node: Node) -> View:
    float_suffix(node, node.dtype)
    a = lw.dense(node.inputs[0])
    if is_block_weight(node.inputs[1].dtype, a.dtype, lw.target):   # [N, K] in a block format (transpose_b)
        return quantized_linear(lw, node, a, lw.dense(node.inputs[1], at_start=True), None, 0)[0]
    b = lw.dense(node.inputs[1])
    out = lw.new_value(node)
    trans_b = bool(node.attrs.get("transpose_b", False))
    k = a.shape[-1]
    n = node.shape[-1]
    ldb = k if trans_b else n
    if len(b.shape) == 2:
        # Every leading dimension of A folds into M: one gemm.
        m = a.numel // max(k, 1)
        if m and n:
            lw.gemm(repr(node), a, b, out, m, n, k, k, ldb, n, trans_b)
        return out
    m = a.shape[-2]
    batch = out.numel // max(m * n, 1)
    if m and n and batch:
        lw.gemm(f"{node!r} [batch {batch}]", a, b, out, m, n, k, k, ldb, n, trans_b,
                batch=batch, strides=(m * k, k * n, m * n))
    return out


@lowers("linear", reads={1: "start", 2: "start"},
        kernels=("matmul_rows", "bias_act", *LINEAR_KERNELS))
def _linear(lw: Lowering, node: Node) -> View:
    bias = lw.dense(node.inputs[2], at_start=True) if len(node.inputs) == 3 else None
    return linear_of(lw, node, lw.dense(node.inputs[0]), lw.dense(node.inputs[1], at_start=True), bias,
                     ACTIVATIONS[node.attrs["activation"]], node.attrs["transpose_b"])


def linear_of(lw: Lowering, node: Node, x: View, w: View, bias: View | None, act: int, trans_b: bool) -> View:
    """node's value, act(x @ op(w) + bias), from dense views of its operands
    (w and bias at their storage's start): linear's lowering, and glu_linear's
    where its GEMV cannot form the glu itself."""
    suffix = float_suffix(node, node.dtype)
    k = x.shape[-1]
    n = node.shape[-1]
    m = x.numel // max(k, 1)
    if is_block_weight(w.dtype, x.dtype, lw.target):   # GGUF block formats (and bf16 where the gemm lacks it)
        out, pending = quantized_linear(lw, node, x, w, bias, act)
        if pending:
            linear_epilogue(lw, node, out, bias, act, m, n, k)
        return out
    out = lw.new_value(node)
    if out.numel == 0:
        return out
    # bf16 weights (precision="bf16") go to the shim's gemm, which reads them; the row kernel reads x's dtype.
    # The gemm side's epilogue kernel: an activation, or a bias the shim's gemm does not add itself.
    epilogue = bool(act) or (bias is not None and not lw.target.gemm_bias)
    if w.dtype == x.dtype and use_row_kernel(lw, m, n, k, suffix, epilogue=epilogue,
                                             activation=act in TRANSCENDENTAL_ACTS, transpose_b=trans_b):
        lw.dispatch(repr(node), f"matmul_rows_{suffix}",
                    [(x, "r"), (w, "r"), (bias or w, "r"), (out, "w")],
                    linear_params(m, n, k, x.offset, trans_b, bias is not None, act),
                    lw.target.row_grid(n, k), Work("matmul_rows", 2.0 * m * n * k, (m, n, k), bool(trans_b)))
        return out
    # The bias rides in the gemm where the shim takes one (one kernel less per
    # linear); an activation still takes the epilogue kernel.
    gemm_bias = bias if bias is not None and lw.target.gemm_bias else None
    lw.gemm(repr(node), x, w, out, m, n, k, k, k if trans_b else n, n, trans_b, bias=gemm_bias)
    linear_epilogue(lw, node, out, None if gemm_bias is not None else bias, act, m, n, k)
    return out


def linear_epilogue(lw: Lowering, node: Node, out: View, bias: View | None, act: int, m: int, n: int,
                    k: int) -> None:
    """out = act(out + bias) in place after a gemm (bias: None when the gemm added it or there is none)."""
    if not act and bias is None:
        return
    lw.dispatch(f"{node!r} epilogue", f"bias_act_{float_suffix(node, out.dtype)}", [(out, "w"), (bias or out, "r")],
                linear_params(m, n, k, 0, True, bias is not None, act), lw.target.row_grid(m, n),
                Work("epilogue_act" if act in TRANSCENDENTAL_ACTS else "epilogue"))
