"""Lowering of the reductions (shaders/reduce.h): sum, mean, max, argmax."""

from __future__ import annotations

import struct
from math import prod

from rlx.ir.dtype import f32
from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, Work, float_suffix, lowers
from rlx.runtime.views import View

REDUCE_OPS = {"sum": 0, "mean": 1, "max": 2}


def reduce_params(outer: int, length: int, inner: int, op: int, in_offset: int) -> bytes:
    return struct.pack("<8I", outer, length, inner, op, in_offset, 0, 0, 0)


# The argmax of fewer rows than a GPU has cores, each of at least
# ARGMAX_SPLIT_MIN_LEN elements (a decode step's logits), runs as
# argmax_chunks + argmax_merge (shaders/reduce.h) in chunks of
# ARGMAX_CHUNK_GPU: one group a row read a 262,144-logit row in 138 us on
# the H200 (benchmarks/README.md, session 9). Not on the CPU by default,
# where one thread's vector loop already reads the row at memory speed:
# split in two it ran slower (exe.run of that row 223-224 us against
# 206-211 us, Intel Xeon, 2 threads); ARGMAX_SPLIT_CPU turns it on there
# (one chunk per core the rows leave free, at least two), as the tests do
# to run the split kernels on the CPU.
ARGMAX_SPLIT_MIN_LEN = 16384
ARGMAX_CHUNK_GPU = 2048
ARGMAX_SPLIT_CPU = False


def argmax_chunks(lw: Lowering, rows: int, length: int) -> int:
    """Chunks per row of the split argmax, or 0 for the one-pass kernel."""
    target = lw.target
    if length < ARGMAX_SPLIT_MIN_LEN:
        return 0
    if target.one_thread_groups:
        return max(target.compute_units // rows, 2) if ARGMAX_SPLIT_CPU else 0
    if rows >= target.compute_units:
        return 0
    return -(-length // ARGMAX_CHUNK_GPU)


@lowers("sum", "mean", "max", "argmax", kernels=("reduce", "argmax", "argmax_chunks", "argmax_merge"))
def _reduce(lw: Lowering, node: Node) -> View:
    x = lw.dense(node.inputs[0])
    axis = node.attrs["axis"]
    shape = x.shape
    outer, length, inner = prod(shape[:axis]), shape[axis], prod(shape[axis + 1:])
    out = lw.new_value(node)
    if out.numel == 0:
        return out
    suffix = float_suffix(node, x.dtype)
    kernel = f"argmax_{suffix}" if node.op == "argmax" else f"reduce_{suffix}"
    op = 0 if node.op == "argmax" else REDUCE_OPS[node.op]
    chunks = argmax_chunks(lw, outer * inner, length) if node.op == "argmax" else 0
    if chunks:
        chunk_len = -(-length // chunks)
        params = struct.pack("<8I", outer, length, inner, 0, x.offset, chunks, chunk_len, 0)
        part = lw.new_value(node, (outer * inner * chunks * 2,), f32)
        lw.dispatch(f"{node!r} ({chunks} chunks)", f"argmax_chunks_{suffix}", [(x, "r"), (part, "w")], params,
                    lw.target.row_grid(outer * inner * chunks, chunk_len), Work("softmax"))
        lw.dispatch(f"{node!r} (merge the chunks)", f"argmax_merge_{suffix}", [(part, "r"), (out, "w")], params,
                    lw.target.row_grid(outer * inner, chunks), Work("softmax"))
        return out
    lw.dispatch(repr(node), kernel, [(x, "r"), (out, "w")], reduce_params(outer, length, inner, op, x.offset),
                lw.target.row_grid(outer * inner, length), Work("softmax"))   # a row pass, like softmax
    return out
