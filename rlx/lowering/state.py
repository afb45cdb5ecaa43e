"""Lowering of state: the state leaf gets resident storage of its own
(zeros at compile time, kept across runs, shareable between executables);
set_rows writes into it in place (shaders/state.h) and its value is the
state's own view, so readers read the written buffer. Two set_rows at one
slot with nothing between them that uses the first one's state, values or
slot (a decoder layer's K and V rows) run as one set_rows_pair dispatch,
or inside the rmsnorm_rope that formed the keys (rlx/lowering/rope_cache.py)."""

from __future__ import annotations

import struct
import weakref

from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, ResidentTensor, Work, float_suffix, lowers, untouched
from rlx.lowering.rope_cache import CacheWrite, fold_into_rope
from rlx.runtime.views import RESIDENT, View


@lowers("state")
def _state(lw: Lowering, node: Node) -> View:
    name = node.attrs["name"]
    storage = lw.new_storage(f"state:{name}", node.type.nbytes, RESIDENT)
    lw.resident.append(ResidentTensor(storage, None, name, state=True))
    return View.dense(storage, node.dtype, tuple(node.shape))


# The set_rows thunk a lowering emitted last, with what a later set_rows at
# the same slot needs to take it into one set_rows_pair dispatch.
_LAST_WRITE: weakref.WeakKeyDictionary[Lowering, tuple] = weakref.WeakKeyDictionary()


@lowers("set_rows", kernels=("set_rows", "set_rows_pair", "rmsnorm_rope_cache"))
def _set_rows(lw: Lowering, node: Node) -> View:
    state = lw.view(node.inputs[0])
    values = lw.dense(node.inputs[1])
    slot = lw.dense(node.inputs[2])
    rows = node.shape[0]
    row_elems = state.numel // rows
    n_values = node.inputs[1].shape[0]
    if n_values and row_elems:
        suffix = float_suffix(node, node.dtype)
        shape = (rows, n_values, row_elems, suffix, id(slot.storage), slot.offset)
        earlier = _LAST_WRITE.pop(lw, None)
        if earlier is not None and _pairs_with(lw, earlier, shape, state):
            thunk, first_state, first_values, _ = earlier
            pair = (CacheWrite(first_state, first_values), CacheWrite(state, values))
            if fold_into_rope(lw, repr(node), pair, slot, (rows, n_values, row_elems), suffix, thunk):
                return state
            lw.thunks.remove(thunk)   # its write moves here: no thunk since touched what it touches
            params = struct.pack("<8I", rows, n_values, row_elems, first_state.offset, first_values.offset,
                                 slot.offset, state.offset, values.offset)
            lw.dispatch(f"{thunk.label} + {node!r}", f"set_rows_pair_{suffix}",
                        [(first_state, "w"), (first_values, "r"), (state, "w"), (values, "r"), (slot, "r")], params,
                        lw.target.elementwise_grid(2 * n_values * row_elems, scalar=True), Work("copy"))
            return state
        params = struct.pack("<8I", rows, n_values, row_elems, state.offset, values.offset, slot.offset, 0, 0)
        thunk = lw.dispatch(repr(node), f"set_rows_{suffix}", [(state, "w"), (values, "r"), (slot, "r")], params,
                            lw.target.elementwise_grid(n_values * row_elems, scalar=True), Work("copy"))
        _LAST_WRITE[lw] = (thunk, state, values, shape)
    return state


def _pairs_with(lw: Lowering, earlier: tuple, shape: tuple, state: View) -> bool:
    """Whether the earlier set_rows can move here and run with this one: the
    same slot, rows, row shape and dtype, another state, and no thunk since
    that reads or writes its state or writes its values or the slot (so its
    write lands the same whether it runs there or here)."""
    thunk, first_state, first_values, first_shape = earlier
    if first_shape != shape or first_state.storage is state.storage or thunk not in lw.thunks:
        return False
    held = {id(first_state.storage)}
    return untouched(lw.thunks[lw.thunks.index(thunk) + 1:], held,
                     held | {id(first_values.storage), shape[4]})
