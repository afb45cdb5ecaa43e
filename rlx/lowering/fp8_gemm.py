"""The FP8 x FP8 path of scaled_linear: the shim's FP8 gemm (CUDA: cuBLASLt
on FP8 tensor cores, rlx_device_info.gemm_fp8) with unit scales and an f32
result, then one epilogue kernel (shaders/fp8.h fp8_gemm_epilogue) that
applies the per-token x scale, the per-channel or per-tensor weight scale,
the bias and the activation. Where both scales are per tensor and there is
neither bias nor activation (``direct_form``), the gemm takes the two scales
as its scale pointers and writes the output's dtype itself: one call, no f32
intermediate and no epilogue pass (at 4096^3 the epilogue was a third of
the gemm's time, benchmarks/README.md). Where x's scales are per row and
the weight's per channel, the same single call takes them as outer-vector
scales on a target whose gemm has them for the output's dtype.

It is taken for a scaled_linear whose x is the dequantized value of e4m3
codes with per-row or per-tensor scales (what precision="fp8-dynamic" and
``Graph.scaled_linear(x_fp8, x_scale=...)`` build: scaled_dequantize, maybe
followed by a float cast), whose weight is e4m3 with per-row or per-tensor
scales, with more rows than the fused GEMV takes, a shape the shim's FP8
gemm accepts (``fp8_gemm_shape_ok``, the rule of csrc/cuda's
fp8_gemm_check), on a target with the capability, and when the cost model
predicts it faster than the kernel path (``prefer_fp8_gemm``). Everything
else (block scales, e5m2, the host and Metal) keeps the kernel path of
rlx/lowering/fp8.py. The dequantize (and cast) of x that only such
products read is then not lowered at all (``absorbed``): the gemm reads
the codes."""

from __future__ import annotations

import struct

from rlx.ir.dtype import f32
from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, Work, float_suffix
from rlx.lowering.linear import ACTIVATIONS, TRANSCENDENTAL_ACTS
from rlx.lowering.quant import GEMV_MAX_ROWS
from rlx.runtime.views import View

# cuBLASLt's FP8 matmul wants k and the leading dimensions in multiples of
# 16 elements (rlx_shim.h, rlx_gemm_desc); n too here, so C's rows (f32)
# stay 16-byte multiples.
FP8_GEMM_MULTIPLE = 16
_CODES = "f8e4m3"


def _whole_rows(block: tuple[int, int], rows: int, cols: int) -> bool:
    """The scales cover whole rows: one per row, or one for the tensor."""
    br, bc = block
    return bc >= cols and (br == 1 or br >= rows)


def fp8_operands(node: Node) -> tuple[Node, Node] | None:
    """(codes, x_scale) when scaled_linear ``node`` is an FP8 x FP8 product
    the FP8 gemm can take: x is scaled_dequantize of e4m3 codes (through at
    most one float cast) with per-row or per-tensor scales, and the weight
    is e4m3 with per-row or per-tensor scales. None otherwise."""
    if node.op != "scaled_linear" or node.inputs[1].dtype.name != _CODES:
        return None
    n, k = node.inputs[1].shape
    if not _whole_rows(node.attrs["block"], n, k):
        return None
    x = node.inputs[0]
    if x.op == "cast" and x.inputs[0].dtype.is_float and not x.inputs[0].dtype.is_fp8:
        x = x.inputs[0]
    if x.op != "scaled_dequantize" or x.inputs[0].dtype.name != _CODES:
        return None
    codes = x.inputs[0]
    rows = codes.shape.numel // max(int(codes.shape[-1]), 1)
    if not _whole_rows(x.attrs["block"], max(rows, 1), k):
        return None
    return codes, x.inputs[1]


def fp8_gemm_shape_ok(m: int, n: int, k: int) -> bool:
    """A product the FP8 gemm path takes: more rows than the GEMV covers and
    k, n multiples of FP8_GEMM_MULTIPLE (m may be anything)."""
    return m > GEMV_MAX_ROWS and k > 0 and n > 0 and k % FP8_GEMM_MULTIPLE == 0 and n % FP8_GEMM_MULTIPLE == 0


def _mnk(node: Node) -> tuple[int, int, int]:
    n, k = (int(d) for d in node.inputs[1].shape)
    return node.inputs[0].shape.numel // max(k, 1), n, k


def choose_fp8_gemm(target, decider, node: Node) -> bool:
    """True when scaled_linear ``node`` takes the FP8 gemm path on
    ``target`` (capability, operands, shape), as ``decider`` (the cost
    model: prefer_fp8_gemm) predicts it faster than the kernel path. A
    decider without prefer_fp8_gemm keeps the kernel path."""
    if not getattr(target, "gemm_fp8", False) or fp8_operands(node) is None:
        return False
    m, n, k = _mnk(node)
    if not fp8_gemm_shape_ok(m, n, k):
        return False
    prefer = getattr(decider, "prefer_fp8_gemm", None)
    if prefer is None:
        return False
    act = ACTIVATIONS[node.attrs["activation"]]
    return bool(prefer(m, n, k, node.dtype.name, bias=len(node.inputs) == 4,
                       activation=act in TRANSCENDENTAL_ACTS, epilogue=direct_form(node, target) is None))


def takes_fp8_gemm(lw: Lowering, node: Node) -> bool:
    """choose_fp8_gemm for this lowering, asked once per node (the absorb
    hook and the lowering must agree)."""
    cache = lw.__dict__.setdefault("_fp8_gemm_choice", {})
    if node not in cache:
        cache[node] = choose_fp8_gemm(lw.target, lw.decider, node)
    return cache[node]


def absorbed(lw: Lowering, order: list[Node]) -> set[Node]:
    """The nodes between e4m3 codes and the FP8 gemm products that read
    them (the dequantize of x, and the cast after it) whose value nothing
    else reads: no thunk computes them."""
    fp8 = {node for node in order if node.op == "scaled_linear" and takes_fp8_gemm(lw, node)}
    if not fp8:
        return set()
    consumers = lw.graph.consumers()
    outputs = set(lw.graph.outputs.values())
    out: set[Node] = set()
    for node in fp8:
        chain = [node.inputs[0]]
        if chain[0].op == "cast":
            chain.append(chain[0].inputs[0])
        for inner in chain:   # x first, then what it reads
            if inner in outputs or not all(u in fp8 or u in out for u in consumers.get(inner, [])):
                break
            out.add(inner)
    return out


def direct_form(node: Node, target=None) -> str | None:
    """How the FP8 gemm alone computes ``node`` (no bias, no activation), or
    None when it needs the epilogue: "tensor" with per-tensor x and weight
    scales (one f32 each: the gemm's scale pointers), "outer" with one x
    scale per row and one weight scale per output channel where ``target``'s
    gemm takes such outer-vector scales for the output's dtype
    (gemm_fp8_outer: cuBLASLt's, the call torch._scaled_mm's rowwise form
    makes)."""
    operands = fp8_operands(node)
    if operands is None or len(node.inputs) == 4 or ACTIVATIONS[node.attrs["activation"]] != 0:
        return None
    x_count, w_count = operands[1].shape.numel, node.inputs[2].shape.numel
    if x_count == 1 and w_count == 1:
        return "tensor"
    m, n, _ = _mnk(node)
    outer_dtypes = getattr(target, "gemm_fp8_outer", frozenset())
    if (x_count, w_count) == (m, n) and m > 1 and n > 1 and node.dtype.name in outer_dtypes:
        return "outer"
    return None


def epilogue_params(m: int, n: int, x_per_row: bool, w_per_row: bool, has_bias: bool, act: int) -> bytes:
    return struct.pack("<8I", m, n, int(x_per_row), int(w_per_row), int(has_bias), act, 0, 0)


def lower_fp8_gemm(lw: Lowering, node: Node) -> View:
    """gemm (e4m3 x e4m3 -> f32, unit scales) then fp8_gemm_epilogue; or,
    in the direct form, the scaled gemm into the output alone."""
    codes_node, xs_node = fp8_operands(node)
    m, n, k = _mnk(node)
    suffix = float_suffix(node, node.dtype)
    codes = lw.dense(codes_node, at_start=True)
    x_scale = lw.dense(xs_node, at_start=True)
    w = lw.dense(node.inputs[1], at_start=True)
    w_scale = lw.dense(node.inputs[2], at_start=True)
    form = direct_form(node, lw.target)
    if form is not None:
        out = lw.new_value(node)
        label = "FP8 gemm, scaled" if form == "tensor" else "FP8 gemm, row and channel scales"
        lw.gemm(f"{node!r} ({label})", codes, w, out, m, n, k, k, k, n, True,
                a_scale=x_scale, b_scale=w_scale, outer_scales=form == "outer")
        return out
    bias = lw.dense(node.inputs[3], at_start=True) if len(node.inputs) == 4 else None
    act = ACTIVATIONS[node.attrs["activation"]]
    out = lw.new_value(node)
    acc = lw.new_value(node, (m, n), f32)
    lw.gemm(f"{node!r} (FP8 gemm)", codes, w, acc, m, n, k, k, k, n, True)
    lw.dispatch(f"{node!r} FP8 epilogue", f"fp8_gemm_epilogue_{suffix}",
                [(acc, "r"), (x_scale, "r"), (w_scale, "r"), (out, "w"), (bias or out, "r")],
                epilogue_params(m, n, x_scale.numel > 1, w_scale.numel > 1, bias is not None, act),
                lw.target.row_grid(m, n), Work("epilogue_act" if act in TRANSCENDENTAL_ACTS else "epilogue"))
    return out
