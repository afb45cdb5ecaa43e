"""Lowering of RoPE (shaders/rope.h) and its params packer. The kernel
reads x through strides with a contiguous feature axis, so head slices of a
packed QKV tensor cost no copy; the inv_freq table is one resident value per
(base, rotary_dim, freq_factors) per compile."""

from __future__ import annotations

import struct
import weakref
from typing import NamedTuple

from rlx.errors import UnsupportedOpError
from rlx.ir.dtype import f32, i32
from rlx.ir.graph import Node
from rlx.ir.ops.rope import rope_inv_freq
from rlx.lowering.core import Lowering, ResidentTensor, Work, feature_contiguous, float_suffix, lowers
from rlx.lowering.rope_cache import RopeDispatch, remember_rope
from rlx.runtime import params as P
from rlx.runtime.views import RESIDENT, View

# inv_freq tables, one per (base, rotary_dim) per compile: rope nodes of every
# layer share one resident table.
_TABLES: weakref.WeakKeyDictionary[Lowering, dict[tuple, View]] = weakref.WeakKeyDictionary()


def rope_params(node: Node, n: int, per_row: int, t: int, h: int, d: int, half: int, interleaved: bool,
                out_offset: int, x_offset: int, x_strides: tuple[int, int, int], p_offset: int,
                p_strides: tuple[int, int]) -> bytes:
    """RopeParams: x_strides = (b, t, h), p_strides = (b, t) in elements."""
    fields = [n, per_row, t, h, d, half, int(interleaved), out_offset, x_offset, *x_strides, p_offset, *p_strides, 0]
    return struct.pack("<16I", *P.u32_fields(node, fields))


def _inv_freq_table(lw: Lowering, node: Node) -> View:
    tables = _TABLES.setdefault(lw, {})
    base, rotary_dim, factors = node.attrs["base"], node.attrs["rotary_dim"], node.attrs.get("freq_factors")
    key = (float(base), int(rotary_dim), factors)
    if key not in tables:
        value = rope_inv_freq(base, rotary_dim, factors)
        scaled = "" if factors is None else f", freq_factors={len(tables)}"
        name = f"rope_inv_freq(base={key[0]:g}, rotary_dim={key[1]}{scaled})"
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


class _RopeRows(NamedTuple):
    """A rope node's inputs as its kernels see them: x (feature axis
    contiguous), the positions, its rows (b * t * h) of d features, and
    the elements a row's threads take (the rotated pairs, then the
    pass-through features)."""

    x: View
    pos: View
    rows: int
    d: int
    per_row: int
    t: int
    h: int
    half: int
    x_strides: tuple[int, int, int]
    p_strides: tuple[int, int]

    def params(self, node: Node, n: int, out: View) -> bytes:
        return rope_params(node, n, self.per_row, self.t, self.h, self.d, self.half,
                           node.attrs["layout"] == "interleaved", out.offset, self.x.offset, self.x_strides,
                           self.pos.offset, self.p_strides)


def _rope_rows(lw: Lowering, node: Node) -> _RopeRows:
    x = feature_contiguous(lw, node.inputs[0])
    pos = lw.view(node.inputs[1])
    if pos.dtype != i32:
        raise UnsupportedOpError(f"{node!r}: rope positions must be i32, got {pos.dtype.name}")
    b, t, h, d, x_strides, p_strides = _rows_of(x, pos)
    rotary_dim = node.attrs["rotary_dim"]
    half = rotary_dim // 2
    return _RopeRows(x, pos, b * t * h, d, half + (d - rotary_dim), t, h, half, x_strides, p_strides)


@lowers("rope", reads={0: "feature"}, kernels=("rope",))
def _rope(lw: Lowering, node: Node) -> View:
    r = _rope_rows(lw, node)
    out = lw.new_value(node)
    n = r.rows * r.per_row
    if n:
        table = _inv_freq_table(lw, node)
        lw.dispatch(repr(node), f"rope_{float_suffix(node, node.dtype)}",
                    [(r.x, "r"), (r.pos, "r"), (table, "r"), (out, "w")], r.params(node, n, out),
                    lw.target.elementwise_grid(n), Work("unary"))
    return out


@lowers("rmsnorm_rope", reads={0: "feature", 2: "start", 3: "start"}, kernels=("rmsnorm_rope",))
def _rmsnorm_rope(lw: Lowering, node: Node) -> View:
    r = _rope_rows(lw, node)
    w = lw.dense(node.inputs[2], at_start=True)
    w_b = lw.dense(node.inputs[3], at_start=True) if len(node.inputs) == 4 else w
    out = lw.new_value(node)
    if r.rows and r.d:
        table = _inv_freq_table(lw, node)
        params = r.params(node, r.rows, out)
        # RmsNormRopeParams: RopeParams with add_one in its last word, then eps and weight_b_from.
        params = params[:-4] + struct.pack("<I f 3I", int(node.attrs["add_one"]), node.attrs["eps"],
                                           node.attrs["weight_b_from"], 0, 0)
        suffix = float_suffix(node, node.dtype)
        args = [(r.x, "r"), (r.pos, "r"), (table, "r"), (w, "r"), (w_b, "r"), (out, "w")]
        grid = lw.target.row_grid(r.rows, r.d)
        thunk = lw.dispatch(repr(node), f"rmsnorm_rope_{suffix}", args, params, grid, Work("norm"))
        remember_rope(lw, RopeDispatch(thunk, args, params, grid, r.d, suffix))
    return out
