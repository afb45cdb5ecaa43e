"""Lowering of the elementwise family (shaders/elementwise.h): binary ops
read both operands through broadcast strides; unary ops share one kernel
whose op code picks the function. With the params packers of both."""

from __future__ import annotations

import struct

from rlx.errors import UnsupportedOpError
from rlx.ir.graph import Node
from rlx.ir.ops.elementwise import CHAIN_MAX_INPUTS, CHAIN_MAX_STEPS
from rlx.lowering.core import Lowering, Work, float_suffix, lowers
from rlx.runtime import params as P
from rlx.runtime.views import View


def binary_params(n: int, op: int, contiguous: bool, a_offset: int, b_offset: int,
           shape: tuple[int, ...], a_strides: tuple[int, ...], b_strides: tuple[int, ...]) -> bytes:
    return struct.pack(f"<8I{3 * P.MAX_DIMS}I", n, len(shape), op, int(contiguous), a_offset, b_offset, 0, 0,
                       *P.dims(shape, 1), *P.dims(a_strides), *P.dims(b_strides))


# Op codes of shaders/elementwise.h and the activation codes of
# shaders/prelude/common.h.
UNARY_OPS = {"gelu": 0, "gelu_tanh": 1, "silu": 2, "relu": 3, "tanh": 4, "exp": 5, "neg": 6, "sqrt": 7,
             "rsqrt": 8, "scale_shift": 9, "log": 10}


BINARY_OPS = {"add": 0, "mul": 1, "sub": 2, "div": 3, "maximum": 4, "minimum": 5}


def unary_params(n: int, op: int, in_offset: int, out_offset: int = 0, scale: float = 1.0, shift: float = 0.0) -> bytes:
    return struct.pack("<4I2f2I", n, op, in_offset, out_offset, scale, shift, 0, 0)


@lowers(*BINARY_OPS, reads={0: "strided", 1: "strided"}, kernels=("binary",))
def _binary(lw: Lowering, node: Node) -> View:
    shape = tuple(node.shape)
    if len(shape) > P.MAX_DIMS:
        raise UnsupportedOpError(f"{node!r}: more than {P.MAX_DIMS} dimensions")
    a = lw.view(node.inputs[0]).broadcast_to(shape)
    b = lw.view(node.inputs[1]).broadcast_to(shape)
    out = lw.new_value(node)
    if out.numel == 0:
        return out
    # A size-1 dimension's stride is never used (is_dense ignores it), so
    # [1, T, C] + broadcast [T, C] takes the contiguous loop; and the strided
    # loop pays an integer division per dimension and element (several ns
    # each on the CPU), so size-1 dimensions are dropped and dimensions contiguous in
    # every operand merged first. Same elements, same math, on every target.
    contiguous = a.is_dense and b.is_dense
    shape, (strides_a, strides_b) = P.merge_dims(shape, (a.strides, b.strides))
    params = binary_params(out.numel, BINARY_OPS[node.op], contiguous, a.offset, b.offset, shape, strides_a, strides_b)
    lw.dispatch(repr(node), f"binary_{float_suffix(node, node.dtype)}", [(a, "r"), (b, "r"), (out, "w")],
                params, lw.target.elementwise_grid(out.numel, scalar=True), Work("elementwise"))
    return out


@lowers("gelu", "silu", "relu", "tanh", "exp", "log", "neg", "sqrt", "rsqrt", "scale_shift", kernels=("unary",))
def _unary(lw: Lowering, node: Node) -> View:
    name = "gelu_tanh" if node.op == "gelu" and node.attrs.get("approximate") == "tanh" else node.op
    x = lw.dense(node.inputs[0])
    out = lw.new_value(node)
    if out.numel:
        params = unary_params(out.numel, UNARY_OPS[name], x.offset, 0, node.attrs.get("scale", 1.0),
                         node.attrs.get("shift", 0.0))
        lw.dispatch(repr(node), f"unary_{float_suffix(node, node.dtype)}", [(x, "r"), (out, "w")],
                    params, lw.target.elementwise_grid(out.numel), Work("unary"))
    return out


# shaders/elementwise.h: RLX_EW_MAX_INPUTS (the kernel's input bindings and
# its first step slot), RLX_EW_MAX_STEPS, and RLX_EW_UNARY (unary op codes
# start there).
CHAIN_INPUTS, CHAIN_STEPS = CHAIN_MAX_INPUTS, CHAIN_MAX_STEPS
CHAIN_UNARY_BASE = 16


def chain_step_code(name: str, a: int, b: int, n_inputs: int) -> int:
    """A step's code word (shaders/elementwise.h EwChainParams.steps), its
    operands in the kernel's slots (inputs 0..3, step t at CHAIN_INPUTS + t;
    the IR numbers steps from n_inputs): a unary op reads its operand twice
    (b = a), so no slot read is undefined."""
    def kernel_slot(slot: int) -> int:
        return slot if slot < n_inputs else CHAIN_INPUTS + slot - n_inputs
    op = BINARY_OPS[name] if name in BINARY_OPS else CHAIN_UNARY_BASE + UNARY_OPS[name]
    return op | kernel_slot(a) << 8 | kernel_slot(a if b < 0 else b) << 16


def chain_params(n: int, contiguous: bool, offsets: list[int], shape: tuple[int, ...],
                 strides: tuple[tuple[int, ...], ...], steps: tuple) -> bytes:
    codes = [chain_step_code(name, a, b, len(offsets)) for name, a, b, _, _ in steps]
    scales = [float(s[3]) for s in steps]
    shifts = [float(s[4]) for s in steps]
    pad = CHAIN_STEPS - len(steps)
    all_strides = [v for i in range(CHAIN_INPUTS) for v in P.dims(strides[i] if i < len(strides) else ())]
    return struct.pack(f"<8I{CHAIN_INPUTS}I{P.MAX_DIMS}I{CHAIN_INPUTS * P.MAX_DIMS}I{CHAIN_STEPS}I"
                       f"{CHAIN_STEPS}f{CHAIN_STEPS}f",
                       n, len(shape), len(offsets), len(steps), int(contiguous), 0, 0, 0,
                       *(offsets + [0] * (CHAIN_INPUTS - len(offsets))), *P.dims(shape, 1), *all_strides,
                       *codes, *[0] * pad, *scales, *[0.0] * pad, *shifts, *[0.0] * pad)


@lowers("fused_elementwise", reads={i: "strided" for i in range(CHAIN_INPUTS)}, kernels=("ew_chain",))
def _fused_elementwise(lw: Lowering, node: Node) -> View:
    shape = tuple(node.shape)
    if len(shape) > P.MAX_DIMS:
        raise UnsupportedOpError(f"{node!r}: more than {P.MAX_DIMS} dimensions")
    views = [lw.view(x).broadcast_to(shape) for x in node.inputs]
    out = lw.new_value(node)
    if out.numel == 0:
        return out
    contiguous = all(v.is_dense for v in views)
    merged, strides = P.merge_dims(shape, tuple(v.strides for v in views))
    params = chain_params(out.numel, contiguous, [v.offset for v in views], merged, strides, node.attrs["steps"])
    # Unused input bindings repeat the first input: every binding names a real buffer.
    bindings = [(v, "r") for v in views] + [(views[0], "r")] * (CHAIN_INPUTS - len(views)) + [(out, "w")]
    lw.dispatch(repr(node), f"ew_chain_{float_suffix(node, node.dtype)}", bindings, params,
                lw.target.elementwise_grid(out.numel, scalar=not contiguous or len(node.attrs["steps"]) > 2),
                Work("elementwise"))
    return out
