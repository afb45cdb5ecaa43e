"""Repetition penalty (llama.cpp's rule) on logits rows.

repetition_penalty(x, history, penalty): x f32 / f16 [..., V]; history
  i32 [H] (shared by every row) or [..., H] (one per row), token ids padded
  with any value outside [0, V) (e.g. -1); penalty f32 [1], run-time data.
  Each distinct id in a row's history changes that row's logit once:
  divided by the penalty where it is > 0, else multiplied (a repeated id
  is not penalized twice). Computed in f32 and rounded once to x's dtype;
  other elements are copied unchanged.
"""

from __future__ import annotations

from rlx.errors import DTypeError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _float_type, _reg


def _infer_repetition_penalty(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("repetition_penalty", attrs, {})
    x, history, penalty = types
    _float_type("repetition_penalty", x)
    if x.rank == 0:
        raise ShapeError("repetition_penalty: x must have rank >= 1 [..., V], got a scalar")
    if history.dtype.name != "i32":
        raise DTypeError(f"repetition_penalty: history must be i32 token ids, got {history}")
    shared = history.rank == 1
    if not shared and (history.rank != x.rank or tuple(history.shape[:-1]) != tuple(x.shape[:-1])):
        raise ShapeError(f"repetition_penalty: history {history.shape!r} must be [H] or one row per row of x "
                         f"{x.shape!r}")
    if penalty.dtype.name != "f32" or penalty.numel != 1:
        raise DTypeError(f"repetition_penalty: penalty must be one f32 value (shape (1,)), got {penalty}")
    return x


OPS: tuple[OpDef, ...] = (
    _reg("repetition_penalty", 3, _infer_repetition_penalty,
         "llama.cpp's repetition penalty: each distinct history id's logit divided by the run-time penalty "
         "when > 0, else multiplied.", precision="fixed"),
)
