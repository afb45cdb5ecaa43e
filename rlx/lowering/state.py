"""Lowering of state: the state leaf gets resident storage of its own
(zeros at compile time, kept across runs, shareable between executables);
set_rows writes into it in place (shaders/state.h) and its value is the
state's own view, so readers read the written buffer."""

from __future__ import annotations

import struct

from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, ResidentTensor, Work, float_suffix, lowers
from rlx.runtime.views import RESIDENT, View


@lowers("state")
def _state(lw: Lowering, node: Node) -> View:
    name = node.attrs["name"]
    storage = lw.new_storage(f"state:{name}", node.type.nbytes, RESIDENT)
    lw.resident.append(ResidentTensor(storage, None, name, state=True))
    return View.dense(storage, node.dtype, tuple(node.shape))


@lowers("set_rows", kernels=("set_rows",))
def _set_rows(lw: Lowering, node: Node) -> View:
    state = lw.view(node.inputs[0])
    values = lw.dense(node.inputs[1])
    slot = lw.dense(node.inputs[2])
    rows = node.shape[0]
    row_elems = state.numel // rows
    n_values = node.inputs[1].shape[0]
    if n_values and row_elems:
        params = struct.pack("<8I", rows, n_values, row_elems, state.offset, values.offset, slot.offset, 0, 0)
        lw.dispatch(repr(node), f"set_rows_{float_suffix(node, node.dtype)}",
                    [(state, "w"), (values, "r"), (slot, "r")], params,
                    lw.target.elementwise_grid(n_values * row_elems, scalar=True), Work("copy"))
    return state
