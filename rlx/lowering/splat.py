"""Lowering of the splat family (shaders/splat.h).

splat_project, splat_depth_keys and splat_bin are range loops over the
Gaussians (one thread each); splat_offsets a range loop that gathers the
tiles touched in depth order, then the multi-group scan of
rlx/lowering/sort.py (emit_scan); splat_ranges a range loop over the
tiles; splat_raster one group per 16x16 tile (256 threads on GPUs, one
pixel each; the CPU's one-thread group walks its 256)."""

from __future__ import annotations

import struct

from rlx.ir.graph import Node
from rlx.ir.ops.splat import TILE, tiles_of
from rlx.lowering.core import Lowering, Work, float_suffix, lowers
from rlx.lowering.sort import SCAN_KERNELS, emit_scan
from rlx.runtime.views import View


def _grid(width: int, height: int) -> tuple[int, int]:
    return -(-width // TILE), -(-height // TILE)


@lowers("splat_project", reads={i: "start" for i in range(6)}, kernels=("splat_project",))
def _project(lw: Lowering, node: Node) -> View:
    ins = [lw.dense(x, at_start=True) for x in node.inputs]
    out = lw.new_value(node)
    n, k = node.inputs[0].shape[0], node.inputs[4].shape[1]
    w, h = node.attrs["width"], node.attrs["height"]
    gx, gy = _grid(w, h)
    params = struct.pack("<8I", n, k, w, h, gx, gy, 0, 0)
    lw.dispatch(repr(node), f"splat_project_{float_suffix(node, ins[0].dtype)}", [*((v, "r") for v in ins),
                (out, "w")], params, lw.target.elementwise_grid(n, scalar=True, cost=64), Work("elementwise"))
    return out


@lowers("splat_depth_keys", reads={0: "start"}, kernels=("splat_depth_keys_rec",))
def _depth_keys(lw: Lowering, node: Node) -> View:
    rec = lw.dense(node.inputs[0], at_start=True)
    out = lw.new_value(node)
    n = rec.shape[0]
    lw.dispatch(repr(node), "splat_depth_keys_rec", [(rec, "r"), (out, "w")], struct.pack("<4I", n, 0, 0, 0),
                lw.target.elementwise_grid(n, scalar=True), Work("copy"))
    return out


@lowers("splat_offsets", reads={0: "start", 1: "start"}, kernels=("splat_order_tiles_rec", *SCAN_KERNELS))
def _offsets(lw: Lowering, node: Node) -> View:
    rec = lw.dense(node.inputs[0], at_start=True)
    order = lw.dense(node.inputs[1], at_start=True)
    out = lw.new_value(node)
    n = rec.shape[0]
    lw.dispatch(f"{node!r} tiles in depth order", "splat_order_tiles_rec", [(rec, "r"), (order, "r"), (out, "w")],
                struct.pack("<4I", n, 0, 0, 0), lw.target.elementwise_grid(n, scalar=True), Work("copy"))
    emit_scan(lw, node, out, n, out.offset + n, repr(node))
    return out


@lowers("splat_bin", reads={0: "start", 1: "start", 2: "start"}, kernels=("splat_bin_rec",))
def _bin(lw: Lowering, node: Node) -> View:
    rec, order, offs = (lw.dense(x, at_start=True) for x in node.inputs)
    out = lw.new_value(node)
    n = rec.shape[0]
    gx, _ = _grid(node.attrs["width"], node.attrs["height"])
    lw.dispatch(repr(node), "splat_bin_rec", [(rec, "r"), (order, "r"), (offs, "r"), (out, "w")],
                struct.pack("<4I", n, node.attrs["capacity"], gx, 0),
                lw.target.elementwise_grid(n, scalar=True, cost=16), Work("copy"))
    return out


@lowers("splat_ranges", reads={0: "start"}, kernels=("splat_ranges_u32",))
def _ranges(lw: Lowering, node: Node) -> View:
    pairs = lw.dense(node.inputs[0], at_start=True)
    count = lw.dense(node.inputs[1])
    out = lw.new_value(node)
    tiles = tiles_of(node.attrs["width"], node.attrs["height"])
    lw.dispatch(repr(node), "splat_ranges_u32", [(pairs, "r"), (count, "r"), (out, "w")],
                struct.pack("<4I", pairs.shape[0], count.offset, tiles, 0),
                lw.target.elementwise_grid(tiles, scalar=True, cost=64), Work("copy"))
    return out


@lowers("splat_raster", reads={0: "start", 1: "start", 2: "start"}, kernels=("splat_raster",))
def _raster(lw: Lowering, node: Node) -> View:
    rec, pairs, ranges = (lw.dense(x, at_start=True) for x in node.inputs)
    out = lw.new_value(node)
    w, h = node.attrs["width"], node.attrs["height"]
    gx, gy = _grid(w, h)
    threads = 1 if lw.target.one_thread_groups else min(TILE * TILE, lw.target.max_threads_per_group)
    params = struct.pack("<4I4f", w, h, gx, node.attrs["channels"], *node.attrs["background"], node.attrs["max_alpha"])
    lw.dispatch(repr(node), f"splat_raster_{float_suffix(node, node.dtype)}", [(rec, "r"), (pairs, "r"),
                (ranges, "r"), (out, "w")], params, ((gx * gy, 1, 1), (threads, 1, 1)), Work("elementwise"))
    return out
