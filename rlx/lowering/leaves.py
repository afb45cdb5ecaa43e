"""Lowering of graph leaves: inputs get arena storage, params and constants
resident storage (constants carry their bytes)."""

from __future__ import annotations

import numpy as np

from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, ResidentTensor, lowers
from rlx.runtime.views import RESIDENT, View


@lowers("input")
def _input(lw: Lowering, node: Node) -> View:
    view = lw.new_value(node)
    lw.inputs[node.attrs["name"]] = view.storage
    return view


@lowers("param", "constant")
def _resident(lw: Lowering, node: Node) -> View:
    name = node.attrs.get("name") or f"const{node.id}"
    storage = lw.new_storage(f"{node.op}:{name}", node.type.nbytes, RESIDENT)
    value = None
    if node.op == "constant":
        value = np.ascontiguousarray(np.asarray(node.attrs["value"]), dtype=node.dtype.numpy).reshape(node.shape)
    lw.resident.append(ResidentTensor(storage, value, name))
    return View.dense(storage, node.dtype, tuple(node.shape))
