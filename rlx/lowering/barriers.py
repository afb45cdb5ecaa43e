"""Hazard barriers between thunks: placed from byte-range hazards only, here
and nowhere else (DESIGN section 7)."""

from __future__ import annotations

from rlx.lowering.core import Thunk


def place_barriers(thunks: list[Thunk]) -> int:
    """Mark a barrier before a thunk only when it reads bytes an earlier thunk
    since the last barrier wrote, or writes bytes such a thunk read or wrote.
    Returns the number of barriers. Ranges are absolute (slot, start, end)."""

    def absolute(ranges):
        return [(s.slot, s.offset + a, s.offset + b) for s, a, b in ranges if b > a]

    def overlaps(r, pool):
        return any(slot == r[0] and r[1] < end and start < r[2] for slot, start, end in pool)

    written: list[tuple[int, int, int]] = []
    touched: list[tuple[int, int, int]] = []
    count = 0
    for thunk in thunks:
        reads, writes = absolute(thunk.reads), absolute(thunk.writes)
        hazard = any(overlaps(r, written) for r in reads) or any(overlaps(w, touched) for w in writes)
        thunk.barrier = hazard
        if hazard:
            count += 1
            written, touched = [], []
        written.extend(writes)
        touched.extend(writes + reads)
    return count
