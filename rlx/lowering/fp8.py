"""Lowering of the FP8 family (shaders/fp8.h): casts to and from FP8, the
scaled values of FP8 tensors, and linear layers with FP8 weights.

scaled_linear takes the fused GEMV (gemv_f8: the codes decoded and scaled
inside the kernel, the weight streamed once) for up to GEMV_MAX_ROWS rows of
x, as the GGUF formats do; more rows dequantize the weight a tile of rows
at a time into x's dtype and take the shim's gemm (f32 accumulation) with
the bias/activation epilogue. An FP8 x FP8 product (x the dequantized
value of e4m3 codes) on a target whose gemm takes FP8 operands (CUDA,
cuBLASLt) may take the FP8 gemm instead: rlx/lowering/fp8_gemm.py, chosen
by the cost model; the host and Metal always take the kernel path."""

from __future__ import annotations

import math
import struct

from rlx.ir.graph import Node
from rlx.lowering.core import ABSORBERS, Lowering, Work, float_suffix, lowers
from rlx.lowering.fp8_gemm import absorbed, lower_fp8_gemm, takes_fp8_gemm
from rlx.lowering.linear import ACTIVATIONS, linear_epilogue
from rlx.lowering.quant import DEQUANT_TILE_BYTES, GEMV_MAX_ROWS, gemv_grid
from rlx.runtime.views import View

FORMAT_CODES = {"f8e4m3": 0, "f8e5m2": 1}   # shaders/fp8.h fmt


def cast_params(n: int, fmt: str, saturate: bool) -> bytes:
    return struct.pack("<4I", n, FORMAT_CODES[fmt], int(saturate), 0)


def dequant_params(rows: int, cols: int, fmt: str, block: tuple[int, int]) -> bytes:
    br, bc = block
    return struct.pack("<8I", rows, cols, FORMAT_CODES[fmt], br, bc, -(-cols // bc), 0, 0)


def lower_fp8_cast(lw: Lowering, node: Node) -> View:
    """cast to or from an FP8 dtype: one elementwise kernel over the dense
    input, from its storage's first byte (cast_params carry no offset: a
    narrowed input was read from the rows before it until the fuzzer's seed
    2475 showed it)."""
    src = lw.dense(node.inputs[0], at_start=True)
    out = lw.new_value(node)
    n = out.numel
    if n == 0:
        return out
    if node.dtype.is_fp8:
        kernel, fmt = f"cast_to_f8_{float_suffix(node, src.dtype)}", node.dtype.name
    else:
        kernel, fmt = f"cast_from_f8_{float_suffix(node, node.dtype)}", src.dtype.name
    lw.dispatch(repr(node), kernel, [(src, "r"), (out, "w")], cast_params(n, fmt, node.attrs.get("saturate", True)),
                lw.target.elementwise_grid(n), Work("unary"))
    return out


@lowers("scaled_dequantize", reads={1: "start"}, kernels=("dequantize_f8",))
def _scaled_dequantize(lw: Lowering, node: Node) -> View:
    v = lw.dense(node.inputs[0], at_start=True)
    scale = lw.dense(node.inputs[1], at_start=True)
    out = lw.new_value(node)
    n = out.numel
    if n:
        cols = v.shape[-1]
        lw.dispatch(repr(node), f"dequantize_f8_{float_suffix(node, node.dtype)}", [(v, "r"), (scale, "r"), (out, "w")],
                    dequant_params(n // cols, cols, v.dtype.name, node.attrs["block"]),
                    lw.target.elementwise_grid(n), Work("dequantize"))
    return out


ABSORBERS.append(absorbed)


@lowers("scaled_linear", reads={0: "start", 1: "start", 2: "start", 3: "start"},
        kernels=("gemv_f8", "dequantize_f8", "bias_act", "fp8_gemm_epilogue"))
def _scaled_linear(lw: Lowering, node: Node) -> View:
    if takes_fp8_gemm(lw, node):
        return lower_fp8_gemm(lw, node)
    suffix = float_suffix(node, node.dtype)
    w = lw.dense(node.inputs[1], at_start=True)
    scale = lw.dense(node.inputs[2], at_start=True)
    bias = lw.dense(node.inputs[3], at_start=True) if len(node.inputs) == 4 else None
    act = ACTIVATIONS[node.attrs["activation"]]
    fmt, (br, bc) = w.dtype.name, node.attrs["block"]
    n, k = w.shape
    m = math.prod(node.inputs[0].shape[:-1])
    # The GEMV's params carry no offset for x: it reads x from its first
    # byte (a narrowed x was read from the rows before it until the fuzzer
    # showed it); the gemm takes x where it is.
    x = lw.dense(node.inputs[0], at_start=m <= GEMV_MAX_ROWS)
    out = lw.new_value(node)
    if out.numel == 0:
        return out
    if m <= GEMV_MAX_ROWS:
        rows, grid = gemv_grid(lw, n, k)
        params = struct.pack("<12I", m, n, k, FORMAT_CODES[fmt], br, bc, -(-k // bc), rows, k, n,
                             int(bias is not None), act)
        lw.dispatch(repr(node), f"gemv_f8_{suffix}", [(x, "r"), (w, "r"), (scale, "r"), (out, "w"), (bias or out, "r")],
                    params, grid, Work("quant_gemv" if m == 1 else "quant_gemv_m8"))
        return out
    tile = max(1, min(n, DEQUANT_TILE_BYTES // max(k * x.dtype.itemsize, 1)))
    if 1 < br < n:
        tile = max(br, tile // br * br)   # tiles start on a scale block's first row
    tile = min(tile, n)
    scratch = lw.new_value(node, (tile, k), x.dtype)
    for r0 in range(0, n, tile):
        rows = min(tile, n - r0)
        part = w.narrow(0, r0, rows) if rows < n else w
        s_part = scale.narrow(0, r0 // br, -(-rows // br)) if br < n else scale
        wide = View.dense(scratch.storage, x.dtype, (rows, k))
        lw.dispatch(f"{node!r} dequantize rows {r0}:{r0 + rows}", f"dequantize_f8_{suffix}",
                    [(part, "r@"), (s_part, "r@"), (wide, "w")], dequant_params(rows, k, fmt, (br, bc)),
                    lw.target.elementwise_grid(rows * k), Work("dequantize"))
        c = out if r0 == 0 else View(out.storage, out.dtype, (m, rows), (n, 1), r0)
        lw.gemm(f"{node!r} rows {r0}:{r0 + rows}", x, wide, c, m, rows, k, k, k, n, True)
    linear_epilogue(lw, node, out, bias, act, m, n, k)
    return out
