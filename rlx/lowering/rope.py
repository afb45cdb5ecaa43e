"""Lowering of RoPE (shaders/rope.h) and its params packer. The kernel
reads x through strides with a contiguous feature axis, so head slices of a
packed QKV tensor cost no copy; the inv_freq table is one resident value per
(base, rotary_dim) per compile."""

from __future__ import annotations

import struct
import weakref

from rlx.errors import UnsupportedOpError
from rlx.ir.dtype import f32, i32
from rlx.ir.graph import Node
from rlx.ir.ops.rope import rope_inv_freq
from rlx.lowering.core import Lowering, ResidentTensor, Work, feature_contiguous, float_suffix, lowers
from rlx.runtime import params as P
from rlx.runtime.views import RESIDENT, View

# inv_freq tables, one per (base, rotary_dim) per compile: rope nodes of every
# layer share one resident table.
_TABLES: weakref.WeakKeyDictionary[Lowering, dict[tuple[float, int], View]] = weakref.WeakKeyDictionary()


def rope_params(node: Node, n: int, per_row: int, t: int, h: int, d: int, half: int, interleaved: bool,
                out_offset: int, x_offset: int, x_strides: tuple[int, int, int], p_offset: int,
                p_strides: tuple[int, int]) -> bytes:
    """RopeParams: x_strides = (b, t, h), p_strides = (b, t) in elements."""
    fields = [n, per_row, t, h, d, half, int(interleaved), out_offset, x_offset, *x_strides, p_offset, *p_strides, 0]
    return struct.pack("<16I", *P.u32_fields(node, fields))


def _inv_freq_table(lw: Lowering, base: float, rotary_dim: int) -> View:
    tables = _TABLES.setdefault(lw, {})
    key = (float(base), int(rotary_dim))
    if key not in tables:
        value = rope_inv_freq(base, rotary_dim)
        name = f"rope_inv_freq(base={key[0]:g}, rotary_dim={key[1]})"
        storage = lw.new_storage(f"constant:{name}", value.nbytes, RESIDENT)
        lw.resident.append(ResidentTensor(storage, value, name))
        tables[key] = View.dense(storage, f32, value.shape)
    return tables[key]


def _rows_of(x: View, pos: View) -> tuple[int, int, int, int, tuple[int, int, int], tuple[int, int]]:
    """(B, T, H, D, x's (b, t, h) strides, positions' (b, t) strides); a [T, H,
    D] x is one batch row, and [T] positions serve every batch row (stride 0)."""
    if len(x.shape) == 3:
        b, (t, h, d) = 1, x.shape
        x_strides = (0, *x.strides[:2])
    else:
        b, t, h, d = x.shape
        x_strides = tuple(x.strides[:3])
    p_strides = (0, pos.strides[0]) if len(pos.shape) == 1 else tuple(pos.strides)
    return b, t, h, d, x_strides, p_strides


@lowers("rope", reads={0: "feature"}, kernels=("rope",))
def _rope(lw: Lowering, node: Node) -> View:
    suffix = float_suffix(node, node.dtype)
    x = feature_contiguous(lw, node.inputs[0])
    pos = lw.view(node.inputs[1])
    if pos.dtype != i32:
        raise UnsupportedOpError(f"{node!r}: rope positions must be i32, got {pos.dtype.name}")
    b, t, h, d, x_strides, p_strides = _rows_of(x, pos)
    rotary_dim = node.attrs["rotary_dim"]
    half = rotary_dim // 2
    out = lw.new_value(node)
    per_row = half + (d - rotary_dim)
    n = b * t * h * per_row
    if n:
        table = _inv_freq_table(lw, node.attrs["base"], rotary_dim)
        params = rope_params(node, n, per_row, t, h, d, half, node.attrs["layout"] == "interleaved", out.offset,
                             x.offset, x_strides, pos.offset, p_strides)
        lw.dispatch(repr(node), f"rope_{suffix}", [(x, "r"), (pos, "r"), (table, "r"), (out, "w")],
                    params, lw.target.elementwise_grid(n), Work("unary"))
    return out


@lowers("rmsnorm_rope", reads={0: "feature", 2: "start"}, kernels=("rmsnorm_rope",))
def _rmsnorm_rope(lw: Lowering, node: Node) -> View:
    x = feature_contiguous(lw, node.inputs[0])
    pos = lw.view(node.inputs[1])
    w = lw.dense(node.inputs[2], at_start=True)
    if pos.dtype != i32:
        raise UnsupportedOpError(f"{node!r}: rope positions must be i32, got {pos.dtype.name}")
    b, t, h, d, x_strides, p_strides = _rows_of(x, pos)
    rotary_dim = node.attrs["rotary_dim"]
    half = rotary_dim // 2
    out = lw.new_value(node)
    rows = b * t * h
    if rows and d:
        table = _inv_freq_table(lw, node.attrs["base"], rotary_dim)
        params = rope_params(node, rows, half + (d - rotary_dim), t, h, d, half,
                             node.attrs["layout"] == "interleaved", out.offset, x.offset, x_strides, pos.offset,
                             p_strides)
        # RmsNormRopeParams: RopeParams with add_one in its last word, then eps.
        params = params[:-4] + struct.pack("<I f 3I", int(node.attrs["add_one"]), node.attrs["eps"], 0, 0, 0)
        lw.dispatch(repr(node), f"rmsnorm_rope_{float_suffix(node, node.dtype)}",
                    [(x, "r"), (pos, "r"), (table, "r"), (w, "r"), (out, "w")], params,
                    lw.target.row_grid(rows, d), Work("norm"))
    return out
