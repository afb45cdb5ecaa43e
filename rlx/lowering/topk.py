"""Lowering of the top-k family (shaders/topk.h): topk and topk_values.

topk picks its kernel by device: the CPU runs topk_select (one group of one
thread per row keeps a sorted list of k), GPUs run topk_tile passes (groups
sort chunks of a row in group memory and keep k candidates each, until one
chunk covers a row). ``tile_chunk`` is the one decision; tests replace it
to run the tiled passes on the CPU and at small chunks."""

from __future__ import annotations

import struct

from rlx.errors import UnsupportedOpError
from rlx.ir.dtype import i32
from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, Work, float_suffix, lowers
from rlx.runtime.views import View

TILE = 2048   # RLX_TOPK_TILE: the most entries one group sorts (2 x 8 KiB of group memory)


def topk_params(rows: int, n: int, k: int, chunk: int, chunks: int, in_offset: int, from_x: bool,
                final: bool) -> bytes:
    return struct.pack("<8I", rows, n, k, chunk, chunks, in_offset, int(from_x), int(final))


def topk_values_params(rows: int, n: int, k: int, in_offset: int, idx_offset: int) -> bytes:
    return struct.pack("<8I", rows, n, k, in_offset, idx_offset, 0, 0, 0)


def tile_chunk(lw: Lowering, rows: int, n: int, k: int) -> int:
    """Entries per group of topk_tile's first pass (a power of two), or 0 for
    topk_select. The CPU's one-thread groups select (a compare an element);
    a GPU group sorts up to TILE entries in parallel."""
    return 0 if lw.target.one_thread_groups else TILE


def _pow2_at_least(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


@lowers("topk", kernels=("topk_select", "topk_tile"))
def _topk(lw: Lowering, node: Node) -> View:
    x = lw.dense(node.inputs[0])
    n, k = x.shape[-1], node.attrs["k"]
    rows = x.numel // n
    out = lw.new_value(node)
    if out.numel == 0:
        return out
    suffix = float_suffix(node, x.dtype)
    tile = tile_chunk(lw, rows, n, k)
    if not tile:
        lw.dispatch(repr(node), f"topk_select_{suffix}", [(x, "r"), (out, "w")],
                    topk_params(rows, n, k, 0, 1, x.offset, True, True), ((rows, 1, 1), (1, 1, 1)), Work("softmax"))
        return out
    if tile & (tile - 1) or not 2 * k <= tile <= TILE:
        # Each pass must shrink a row: a group of `tile` entries keeps k of them.
        raise UnsupportedOpError(f"{node!r}: topk chunk {tile} must be a power of two in [2k, {TILE}] (k={k})")
    cand: View | None = None
    level, pass_no = n, 0
    while True:
        chunk = min(tile, _pow2_at_least(level))
        chunks = -(-level // chunk)
        final = chunks == 1
        dst = out if final else lw.new_value(node, (rows * chunks * k * 2,), i32)
        args = [(x, "r"), (cand if cand is not None else x, "r"), (x if final else dst, "r" if final else "w"),
                (out if final else x, "w" if final else "r")]
        pass_no += 1
        lw.dispatch(f"{node!r} (pass {pass_no}: {rows * chunks} groups of {chunk})", f"topk_tile_{suffix}", args,
                    topk_params(rows, level, k, chunk, chunks, x.offset, cand is None, final),
                    ((rows * chunks, 1, 1), lw.target.row_grid(rows * chunks, max(chunk // 2, 1))[1]),
                    Work("softmax"))
        if final:
            return out
        cand, level = dst, chunks * k


@lowers("topk_values", kernels=("topk_values",))
def _topk_values(lw: Lowering, node: Node) -> View:
    x, idx = lw.dense(node.inputs[0]), lw.dense(node.inputs[1])
    out = lw.new_value(node)
    if out.numel == 0:
        return out
    n, k = x.shape[-1], node.shape[-1]
    lw.dispatch(repr(node), f"topk_values_{float_suffix(node, x.dtype)}", [(x, "r"), (idx, "r"), (out, "w")],
                topk_values_params(out.numel // k, n, k, x.offset, idx.offset),
                lw.target.elementwise_grid(out.numel, scalar=True), Work("copy"))
    return out
