"""Lowering of the sort family (shaders/sort.h): sort_by_key as LSD radix
passes of 8 bits, each a histogram, a scan (emit_scan) and a scatter
dispatch.

Passes go from the least significant digit of the last key word to the
most significant of the first (whose top pass may cover fewer bits: the
op's ``bits``). Pass 1 reads the op's input, the last writes its output,
the ones between ping-pong through two arena scratch values. The count of
rows to sort is device data (an input tensor), read by every pass, so one
recorded schedule serves any count up to n. ``sort_blocks`` is the one
decision: the chunks (groups) a pass is cut into.

emit_scan (also splat_offsets'): an exclusive prefix sum in place over
``scan_groups`` groups: scan_reduce (per-group sums), scan_partials (one
group scans those), scan_down (per-group rescans); with one group, the
rescan alone."""

from __future__ import annotations

import struct

from rlx.ir.dtype import i32
from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, Work, lowers
from rlx.runtime.target import Target
from rlx.runtime.views import View

DIGIT_BITS = 8
RADIX = 1 << DIGIT_BITS
MAX_THREADS = 1024     # RLX_SORT_MAX_THREADS: a scan group's segment totals in group memory
ROWS_PER_BLOCK = 4096  # GPU: rows one group of a pass walks
SCAN_GPU_CHUNK = 2048  # GPU: elements one scan group sums and rescans (one RLX_SCAN_STAGE)
SCAN_CPU_CHUNK = 1 << 18   # CPU: a one-thread group walks this many (scans are cheap there)
SCAN_THREADS = 256     # GPU threads of scan_reduce / scan_down
SCAN_KERNELS = ("scan_reduce_u32", "scan_partials_u32", "scan_down_u32")


def radix_passes(keys: int, bits: int) -> list[tuple[int, int, int]]:
    """(key column, shift, mask) per pass, least significant first."""
    passes = []
    for word in reversed(range(keys)):
        width = bits if word == 0 else 32
        for shift in range(0, width, DIGIT_BITS):
            passes.append((word, shift, (1 << min(DIGIT_BITS, width - shift)) - 1))
    return passes


def sort_blocks(target: Target, n: int) -> int:
    """Chunks a pass is cut into: on the CPU a few per worker (each a
    one-thread group that counts and scatters directly), on GPUs one group
    per ROWS_PER_BLOCK rows."""
    if target.one_thread_groups:
        return max(1, min(4 * target.compute_units, -(-n // 8192)))
    return max(1, min(-(-n // ROWS_PER_BLOCK), 4096))


def scan_groups(target: Target, n: int) -> int:
    """Groups (chunks) of a scan of n elements: enough that each group's
    chunk is short, at most MAX_THREADS (the partials are one group's)."""
    chunk = SCAN_CPU_CHUNK if target.one_thread_groups else SCAN_GPU_CHUNK
    cap = 4 * target.compute_units if target.one_thread_groups else MAX_THREADS
    return max(1, min(-(-n // chunk), cap))


def emit_scan(lw: Lowering, node: Node, data: View, n: int, total_at: int | None, label: str) -> None:
    """data's elements [offset, offset + n) (i32 counts, dense) become their
    exclusive prefix sum in place (saturating at 2^31 - 1); with total_at,
    element total_at of data's storage gets the total."""
    groups = scan_groups(lw.target, n)
    one = lw.target.one_thread_groups
    threads = 1 if one else min(SCAN_THREADS, lw.target.max_threads_per_group)
    top_threads = 1 if one else min(MAX_THREADS, lw.target.max_threads_per_group)
    params = struct.pack("<8I", n, data.offset, groups, total_at or 0, int(total_at is not None), 0, 0, 0)
    part = lw.new_value(node, (groups,), i32)
    if groups > 1:
        lw.dispatch(f"{label} scan sums", "scan_reduce_u32", [(data, "r"), (part, "w")], params,
                    ((groups, 1, 1), (threads, 1, 1)), Work("copy"))
        top = lw.dispatch(f"{label} scan of the sums", "scan_partials_u32", [(part, "w")], params,
                          ((1, 1, 1), (top_threads, 1, 1)), Work("copy"))
        top.reads.append((part.storage, *part.byte_range()))
    down = lw.dispatch(f"{label} scan", "scan_down_u32", [(data, "w"), (part, "r")], params,
                       ((groups, 1, 1), (threads, 1, 1)), Work("copy"))
    down.reads.append((data.storage, *data.byte_range()))


def sort_params(n: int, cols: int, src_offset: int, count_offset: int, has_count: bool, word: int, shift: int,
                mask: int, blocks: int) -> bytes:
    return struct.pack("<12I", n, cols, src_offset, count_offset, int(has_count), word, shift, mask, blocks, 0, 0, 0)


def emit_sort(lw: Lowering, node: Node, rec: View, count: View | None, out: View, keys: int, bits: int) -> None:
    """Dispatches that sort rec's rows into out (both i32 [n, cols]; out dense at offset 0)."""
    n, cols = rec.shape
    blocks = sort_blocks(lw.target, n)
    hist = lw.new_value(node, (RADIX * blocks,), i32)
    scratch = [lw.new_value(node, (n, cols), i32) for _ in range(2)]
    cnt = count if count is not None else rec
    cnt_offset = count.offset if count is not None else 0
    passes = radix_passes(keys, bits)
    gpu_threads = 1 if lw.target.one_thread_groups else min(256, lw.target.max_threads_per_group)
    src = rec
    for k, (word, shift, mask) in enumerate(passes):
        dst = out if k == len(passes) - 1 else scratch[k % 2]
        src_offset = src.offset if src is rec else 0
        params = sort_params(n, cols, src_offset, cnt_offset, count is not None, word, shift, mask, blocks)
        label = f"{node!r} (pass {k + 1}/{len(passes)}: word {word} bits {shift}..{shift + mask.bit_length() - 1})"
        lw.dispatch(f"{label} histogram", "sort_histogram_u32", [(src, "r"), (cnt, "r"), (hist, "w")], params,
                    ((blocks, 1, 1), (gpu_threads, 1, 1)), Work("copy"))
        emit_scan(lw, node, hist, RADIX * blocks, None, label)
        lw.dispatch(f"{label} scatter", "sort_scatter_u32", [(src, "r"), (cnt, "r"), (hist, "r"), (dst, "w")],
                    params, ((blocks, 1, 1), (gpu_threads, 1, 1)), Work("copy"))
        src = dst


@lowers("sort_by_key", kernels=("sort_histogram_u32", *SCAN_KERNELS, "sort_scatter_u32"))
def _sort_by_key(lw: Lowering, node: Node) -> View:
    rec = lw.dense(node.inputs[0])
    count = lw.dense(node.inputs[1]) if len(node.inputs) > 1 else None
    out = lw.new_value(node)
    if out.numel == 0:
        return out
    emit_sort(lw, node, rec, count, out, node.attrs["keys"], node.attrs["bits"])
    return out
