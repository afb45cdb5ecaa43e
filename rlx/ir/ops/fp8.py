"""FP8 tensors with scales (shaders/fp8.h): the float values of FP8 codes
times their scales, and the linear layer whose weight is FP8.

A scaled tensor is an FP8 tensor v [..., cols] (f8e4m3 or f8e5m2) and an
f32 scale s; its values are v * s, with one of three granularities
(``block`` is normalized to the block each scale covers, in rows of the
flattened [rows, cols] form and columns):

- per tensor: s has one element (shape (), (1,) or (1, 1));
- per row (per output channel of a weight [N, K], per token of
  activations): s is [rows] or [rows, 1] (v's leading shape);
- per block: 2-D v [R, C] with ``block=(br, bc)`` and s [ceil(R / br),
  ceil(C / bc)] (DeepSeek-style 128 x 128 weight blocks; edge blocks may be
  partial).

The checkpoints' convention: ``weight_scale`` multiplies (dequantized =
code * scale), as in safetensors FP8 checkpoints and torch._scaled_mm.
"""

from __future__ import annotations

import math

from rlx.errors import DTypeError, GraphError, ShapeError
from rlx.ir.dtype import DType
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _float_type, _reg, _same_dtype
from rlx.ir.ops.linear import ACTIVATIONS


def scale_blocks(op: str, shape: tuple[int, ...], scale: TensorType, block) -> tuple[int, int]:
    """The (rows, cols) each scale element covers in the [rows, cols] form
    of ``shape``; checks the scale's dtype and shape against the granularity."""
    if scale.dtype.name != "f32":
        raise DTypeError(f"{op}: the scale must be f32, got {scale}")
    cols = int(shape[-1]) if shape else 1
    rows = math.prod(int(d) for d in shape[:-1])
    numel = math.prod(int(d) for d in scale.shape)
    if block is not None:
        try:
            br, bc = (int(b) for b in block)
        except (TypeError, ValueError):
            raise GraphError(f"{op}: block must be a pair of positive ints (rows, cols), got {block!r}") from None
        if br < 1 or bc < 1:
            raise GraphError(f"{op}: block must be a pair of positive ints (rows, cols), got {block!r}")
        want = (-(-rows // br), -(-cols // bc))
        # One block column: the per-tensor and per-row forms (also what the
        # inference normalizes them to, so a validated graph re-infers).
        whole_rows = want[1] == 1 and numel == want[0] and scale.rank <= max(len(shape), 1)
        if not whole_rows and len(shape) != 2:
            raise ShapeError(f"{op}: block scales need a 2-D tensor, got shape {tuple(shape)!r}")
        if not whole_rows and tuple(scale.shape) != want:
            raise ShapeError(f"{op}: block {br}x{bc} scales of {tuple(shape)!r} must have shape {want}, "
                             f"got {tuple(scale.shape)!r}")
        return br, bc
    if numel == 1 and scale.rank <= 2:
        return max(rows, 1), max(cols, 1)
    if tuple(scale.shape) in (tuple(shape[:-1]), tuple(shape[:-1]) + (1,)):
        return 1, max(cols, 1)
    raise ShapeError(f"{op}: scale shape {tuple(scale.shape)!r} fits no granularity of {tuple(shape)!r}: one "
                     f"element (per tensor), {tuple(shape[:-1])!r} (per row), or 2-D blocks with block=(br, bc)")


# (op, input position) pairs that may read an FP8 tensor; Graph.op refuses the rest.
FP8_OPERANDS = frozenset({("cast", 0), ("scaled_dequantize", 0), ("scaled_linear", 1)})


def check_fp8_operands(op: str, types: list[TensorType]) -> None:
    """Refuse an FP8 input anywhere but FP8_OPERANDS (no kernel reads 8-bit floats elsewhere)."""
    for i, t in enumerate(types):
        if t.dtype.is_fp8 and (op, i) not in FP8_OPERANDS:
            raise DTypeError(f"{op}: input {i} is {t.dtype}, which only cast, scaled_dequantize and the weight "
                             "of scaled_linear accept; cast or scaled_dequantize it first")


def _fp8_input(op: str, t: TensorType, what: str) -> None:
    if not t.dtype.is_fp8:
        raise DTypeError(f"{op}: {what} must be f8e4m3 or f8e5m2, got {t}")


def _infer_scaled_dequantize(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("scaled_dequantize", attrs, {"dtype": "f32", "block": None})
    v, scale = types
    _fp8_input("scaled_dequantize", v, "input")
    to = attrs["dtype"] = DType.of(attrs["dtype"])
    if to.name not in ("f32", "f16"):
        raise DTypeError(f"scaled_dequantize: dtype must be f32 or f16, got {to}")
    if v.rank < 1:
        raise ShapeError("scaled_dequantize: the input needs at least one dimension")
    attrs["block"] = scale_blocks("scaled_dequantize", tuple(v.shape), scale, attrs["block"])
    return TensorType(v.shape, to)


def _infer_scaled_linear(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("scaled_linear", attrs, {"activation": None, "block": None})
    if len(types) not in (3, 4):
        raise GraphError(f"scaled_linear: takes x, weight, weight scale and an optional bias, got {len(types)} "
                         "inputs")
    if attrs["activation"] not in ACTIVATIONS:
        raise GraphError(f"scaled_linear: activation must be one of {ACTIVATIONS}, got {attrs['activation']!r}")
    x, w, scale = types[:3]
    _float_type("scaled_linear", x, "x")
    _fp8_input("scaled_linear", w, "weight")
    if x.rank < 1 or w.rank != 2:
        raise ShapeError(f"scaled_linear: x must be [..., K] and weight [N, K], got {x.shape!r} and {w.shape!r}")
    n, k = w.shape
    if x.shape[-1] != k:
        raise ShapeError(f"scaled_linear: x {x.shape!r} has K={x.shape[-1]}, weight {w.shape!r} ([N, K]) has K={k}")
    attrs["block"] = scale_blocks("scaled_linear", tuple(w.shape), scale, attrs["block"])
    if len(types) == 4:
        _same_dtype("scaled_linear", [x, types[3]], ["x", "bias"])
        if types[3].shape != (n,):
            raise ShapeError(f"scaled_linear: bias shape {types[3].shape!r} must be ({n},)")
    return TensorType(tuple(x.shape[:-1]) + (n,), x.dtype)


OPS: tuple[OpDef, ...] = (
    _reg("scaled_dequantize", 2, _infer_scaled_dequantize,
         "The float values (f32 or f16) of FP8 codes times their scales.", precision="fixed"),
    _reg("scaled_linear", -1, _infer_scaled_linear,
         "activation(x @ (w * scale)^T + bias) for an FP8 weight w [N, K] and its scales."),
)
