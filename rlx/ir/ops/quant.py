"""Quantized (GGUF block-format) tensors: the explicit dequantize op, and
where a block-format tensor may appear at all.

A quantized tensor is storage, not something ops compute on: it is accepted
as the weight of linear / matmul / glu_linear (transpose_b, [N, K] with K in whole
blocks), the table of a gather, and the input of dequantize. Graph.op checks
every other use against ``QUANTIZED_OPERANDS`` and refuses it with a
DTypeError, whatever the op's own inference says (user ops included).
"""

from __future__ import annotations

from rlx.errors import DTypeError, ShapeError
from rlx.ir.dtype import DType
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _reg

# (op, input position) pairs that may read a block-format tensor.
QUANTIZED_OPERANDS = frozenset({("linear", 1), ("matmul", 1), ("glu_linear", 2), ("gather", 0), ("dequantize", 0)})


def check_quantized_operands(op: str, types: list[TensorType]) -> None:
    """Refuse a block-format input anywhere but QUANTIZED_OPERANDS."""
    for i, t in enumerate(types):
        if t.dtype.quantized and (op, i) not in QUANTIZED_OPERANDS:
            allowed = ", ".join(f"{o} input {p}" for o, p in sorted(QUANTIZED_OPERANDS))
            raise DTypeError(f"{op}: input {i} is {t.dtype} (a quantized block format), which only {allowed} "
                             "accept; dequantize it first")


def check_quantized_weight(op: str, w: TensorType, transpose_b: bool, what: str) -> None:
    """A block-format weight: 2-D [N, K] read with transpose_b, K in whole blocks."""
    if not transpose_b:
        raise DTypeError(f"{op}: a {w.dtype} {what} must be [N, K] (transpose_b=True): its blocks run along K")
    if w.rank != 2:
        raise ShapeError(f"{op}: a {w.dtype} {what} must be 2-D [N, K], got shape {w.shape!r}")
    if w.shape[1] % w.dtype.block:
        raise ShapeError(f"{op}: {what} {w.shape!r} in {w.dtype}: K={w.shape[1]} is not a multiple of its "
                         f"block of {w.dtype.block}")


def _infer_dequantize(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("dequantize", attrs, {"dtype": "f32"})
    (x,) = types
    to = attrs["dtype"] = DType.of(attrs["dtype"])
    if not x.dtype.quantized and x.dtype.name != "bf16":
        raise DTypeError(f"dequantize: input must be a quantized block format or bf16, got {x}")
    if to.name not in ("f32", "f16"):
        raise DTypeError(f"dequantize: dtype must be f32 or f16, got {to}")
    if x.rank < 1 or (x.dtype.quantized and x.shape[-1] % x.dtype.block):
        raise ShapeError(f"dequantize: rows of {x.shape!r} in {x.dtype} must be whole blocks of {x.dtype.block}")
    return TensorType(x.shape, to)


OPS: tuple[OpDef, ...] = (
    _reg("dequantize", 1, _infer_dequantize, "The float values of a quantized (GGUF block) or bf16 tensor.",
         precision="fixed"),
)
