"""State: buffers that live across runs (KV caches), and set_rows, the
in-place write into one.

state(name, shape, dtype): a float buffer [R, ...], zeros when compiled,
  kept between runs and shared by executables compiled with
  ``share_params_with``.
set_rows(state, values, slot): values [T, ...] (the state's row shape and
  dtype), slot i32 [2] run-time data (start, count). Rows t < min(count, T)
  go to row (start + t) mod R; when count > R only the last R of them are
  written (a ring buffer keeps the newest). Returns the state after the
  write: readers read that value, so every reader is ordered after the
  write. A node may read the state node itself (the value before the
  write) only where the write's values or slot depend on that node, which
  orders it before the write (the Graph checks both). A later write of
  the same state takes that returned value as its state (a chain: the
  steps of a decode block), under the same rule for the readers of the
  value it overwrites.
"""

from __future__ import annotations

from rlx.errors import DTypeError, GraphError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _float_type, _reg
from rlx.ir.ops.leaves import _infer_leaf

_infer_state_leaf = _infer_leaf("state")


def _infer_state(types: list[TensorType], attrs: dict) -> TensorType:
    ty = _infer_state_leaf(types, attrs)
    _float_type("state", ty, f"state {attrs['name']!r}")
    if ty.rank < 1:
        raise ShapeError(f"state {attrs['name']!r}: needs rows, a shape of rank >= 1, got {ty.shape!r}")
    return ty


def _infer_set_rows(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("set_rows", attrs, {})
    state, values, slot = types
    if values.dtype != state.dtype:
        raise DTypeError(f"set_rows: values are {values.dtype}, the state is {state.dtype}")
    if values.rank != state.rank or tuple(values.shape[1:]) != tuple(state.shape[1:]):
        raise ShapeError(f"set_rows: values {values.shape!r} must be [T, ...] rows of the state "
                         f"{state.shape!r}")
    if slot.dtype.name != "i32" or tuple(slot.shape) != (2,):
        raise GraphError(f"set_rows: slot must be i32 [2] (start, count), got {slot}")
    if state.shape[0] == 0:
        raise ShapeError(f"set_rows: the state {state.shape!r} has no rows")
    return state


OPS: tuple[OpDef, ...] = (
    _reg("state", 0, _infer_state, "A buffer kept across runs (zeros at compile time), written by set_rows.",
         precision="leaf"),
    _reg("set_rows", 3, _infer_set_rows,
         "Writes rows of values into a state in place at run-time (start, count), ring-buffer style; "
         "returns the state after the write.", precision="fixed"),
)
