"""Arena memory plan: one byte offset per value inside one device buffer.

The planner is graph-agnostic. The lowering turns its schedule into a list of
``Lifetime`` records and gets back a ``MemoryPlan`` of 128-byte aligned
offsets. Steps are thunk indices of the schedule:

* ``start`` is the step that first writes the value (inputs, constants and
  params may use 0 or -1), ``end`` the last step that reads it, inclusive.
  A value written and read by the same step overlaps every other value that
  step touches, so a kernel never reads and writes the same bytes through two
  different values.
* A kernel's scratch region is just a ``Lifetime`` with
  ``start == end == its step``: it may reuse bytes of anything dead at that
  step and its bytes are free again for the next step.
* ``pinned`` values (output ancestors, by default) are treated as live until
  the end of the schedule, so a debugger or a partial run can still read them.
  The pin is dropped (and ``MemoryPlan.pinned`` is False) when it makes the
  arena larger than the device allows.
* ``fixed`` values (inputs, constants, the params region, outputs) are live for
  the whole schedule and never share bytes with anything.
* Size 0 values get offset 0 and occupy nothing.

Two values share bytes only if their (effective) intervals do not overlap.
Offsets come from the "greedy by size" heuristic of TFLite's arena planner:
values in descending size order, each at the lowest aligned offset that does
not collide with an already-placed value whose interval overlaps. It is
O(n^2) at worst; the inner loop is vectorised with numpy so thousands of values
plan in well under a second.

``RLX_ARENA_NO_REUSE=1`` (``rlx.env.arena_no_reuse()``) gives every value its
own slot, for bisecting memory bugs: if a wrong result goes away with it, a
lifetime is too short somewhere.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from rlx import env
from rlx.arg_types import is_integer
from rlx.errors import MemoryPlanError

ALIGNMENT = 128

# Effective interval bounds for "live for ever" (fixed values, pinned ends).
# Far outside any schedule index but safe in int64 arithmetic.
_MINUS_INF = -(2**62)
_PLUS_INF = 2**62


class InvalidLifetimeError(MemoryPlanError, ValueError):
    """The lifetimes handed to the planner are malformed (a caller bug, not a device limit)."""


@dataclass(frozen=True)
class Lifetime:
    key: Hashable
    size: int
    start: int
    end: int
    pinned: bool = False
    fixed: bool = False


@dataclass
class MemoryPlan:
    offsets: dict[Hashable, int]
    total_bytes: int
    pinned: bool
    reuse: bool
    naive_bytes: int
    alignment: int = ALIGNMENT

    def describe(self) -> str:
        """One line for ``RLX_VERBOSE`` / ``rlx info``."""
        if self.reuse:
            saved = 0 if self.naive_bytes == 0 else round(100 * (1 - self.total_bytes / self.naive_bytes))
            head = f"arena {_human(self.total_bytes)} (no reuse {_human(self.naive_bytes)}, {saved}% saved)"
        else:
            head = f"arena {_human(self.total_bytes)} (reuse off)"
        return f"{head}, {'pinned outputs' if self.pinned else 'outputs not pinned'}"


def plan_memory(
    lifetimes: Sequence[Lifetime],
    *,
    max_bytes: int | None = None,
    reuse: bool | None = None,
    pin: bool = True,
    alignment: int = ALIGNMENT,
) -> MemoryPlan:
    """Assign every lifetime an aligned offset in one arena.

    ``reuse=None`` follows ``RLX_ARENA_NO_REUSE``. If the pinned plan exceeds
    ``max_bytes`` it is re-planned without the pin; if that still does not fit,
    ``MemoryPlanError`` says how many bytes were needed.
    """
    if not is_integer(alignment) or alignment <= 0:
        raise InvalidLifetimeError(f"alignment must be a positive integer, got {alignment!r}")
    if max_bytes is not None and not is_integer(max_bytes):
        raise InvalidLifetimeError(f"max_bytes must be an integer or None, got {max_bytes!r}")
    _validate(lifetimes)
    if reuse is None:
        reuse = not env.arena_no_reuse()

    plan = _plan(lifetimes, reuse=reuse, pin=pin, alignment=alignment)
    if max_bytes is None or plan.total_bytes <= max_bytes:
        return plan
    # Without reuse every value has its own slot whatever the pin says, so
    # re-planning could not shrink anything; nor could it with nothing pinned.
    pin_dropped = pin and reuse and any(lt.pinned and not lt.fixed for lt in lifetimes)
    if pin_dropped:
        plan = _plan(lifetimes, reuse=reuse, pin=False, alignment=alignment)
        if plan.total_bytes <= max_bytes:
            return plan
    if reuse:
        why = (
            "reuse by liveness was on"
            + (" and the output pin was dropped" if pin_dropped else "")
            + ", so the graph's peak live memory itself does not fit: use smaller shapes or batch"
        )
    else:
        why = "reuse by liveness was off (RLX_ARENA_NO_REUSE=1 or reuse=False): unset it to share slots"
    raise MemoryPlanError(
        f"the memory plan needs an arena of {plan.total_bytes} bytes ({_human(plan.total_bytes)}) but the "
        f"device allows at most {max_bytes} bytes ({_human(max_bytes)}); {why}"
    )


def check_plan(lifetimes: Sequence[Lifetime], plan: MemoryPlan) -> None:
    """Raise AssertionError if ``plan`` is not a valid plan for ``lifetimes``.

    Checks: every value has an aligned offset, lies inside the arena, and no two
    values live at the same step share a byte. Without reuse, no two values
    share a byte at all.
    """
    a = plan.alignment
    assert plan.total_bytes >= 0 and plan.total_bytes % a == 0, f"arena size {plan.total_bytes} not aligned"
    keys = [lt.key for lt in lifetimes]
    missing = [k for k in keys if k not in plan.offsets]
    assert not missing, f"no offset for {missing[:5]!r}"
    for lt in lifetimes:
        off = plan.offsets[lt.key]
        assert off >= 0 and off % a == 0, f"{lt.key!r}: offset {off} not a non-negative multiple of {a}"
        assert off + lt.size <= plan.total_bytes, (
            f"{lt.key!r}: [{off}, {off + lt.size}) past the arena end {plan.total_bytes}"
        )
    live = [lt for lt in lifetimes if lt.size > 0]
    if not live:
        return
    lo = np.array([plan.offsets[lt.key] for lt in live], dtype=np.int64)
    hi = lo + np.array([lt.size for lt in live], dtype=np.int64)
    starts, ends = _intervals(live, pin=plan.pinned)
    for i in range(len(live) - 1):
        j = slice(i + 1, None)
        clash = (lo[j] < hi[i]) & (lo[i] < hi[j])
        if plan.reuse:
            clash &= (starts[j] <= ends[i]) & (starts[i] <= ends[j])
        if clash.any():
            other = live[i + 1 + int(np.flatnonzero(clash)[0])]
            raise AssertionError(
                f"{live[i].key!r} and {other.key!r} share bytes "
                f"[{max(lo[i], plan.offsets[other.key])}, ...) while both live "
                f"({live[i]} vs {other})"
            )


def _validate(lifetimes: Sequence[Lifetime]) -> None:
    seen: set[Hashable] = set()
    for lt in lifetimes:
        if not isinstance(lt, Lifetime):
            raise InvalidLifetimeError(f"expected Lifetime, got {type(lt).__name__}: {lt!r}")
        try:
            dup = lt.key in seen
        except TypeError:
            raise InvalidLifetimeError(f"lifetime key {lt.key!r} is not hashable") from None
        if dup:
            raise InvalidLifetimeError(f"duplicate lifetime key {lt.key!r}")
        seen.add(lt.key)
        for name in ("size", "start", "end"):
            v = getattr(lt, name)
            # A True size is a bug upstream, not one byte: is_integer refuses bools.
            if not is_integer(v):
                raise InvalidLifetimeError(f"{lt.key!r}: {name} must be an integer, got {v!r}")
        if lt.size < 0:
            raise InvalidLifetimeError(f"{lt.key!r}: negative size {lt.size}")
        if lt.end < lt.start:
            raise InvalidLifetimeError(f"{lt.key!r}: end {lt.end} is before start {lt.start}")


def _intervals(lifetimes: Sequence[Lifetime], *, pin: bool) -> tuple[np.ndarray, np.ndarray]:
    """Effective inclusive [start, end] per value: fixed spans everything, a pinned end is +inf."""
    starts = np.array([_MINUS_INF if lt.fixed else lt.start for lt in lifetimes], dtype=np.int64)
    ends = np.array(
        [_PLUS_INF if lt.fixed or (pin and lt.pinned) else lt.end for lt in lifetimes], dtype=np.int64
    )
    return starts, ends


def _round_up(n: int, a: int) -> int:
    return -(-n // a) * a


def _plan(lifetimes: Sequence[Lifetime], *, reuse: bool, pin: bool, alignment: int) -> MemoryPlan:
    sizes = [_round_up(int(lt.size), alignment) for lt in lifetimes]
    naive = sum(sizes)
    offsets: dict[Hashable, int] = {}

    if not reuse:
        # Slots in input order: the layout is then easy to read in a debugger.
        cursor = 0
        for lt, size in zip(lifetimes, sizes, strict=True):
            offsets[lt.key] = cursor
            cursor += size
        return MemoryPlan(offsets, cursor, pin, False, naive, alignment)

    starts, ends = _intervals(lifetimes, pin=pin)
    # Largest first (ties: earlier start, then input order so the plan is
    # deterministic for a given schedule): big blocks constrain the layout most,
    # small ones then fill the holes between them.
    order = sorted(
        (i for i, s in enumerate(sizes) if s > 0),
        key=lambda i: (-sizes[i], int(starts[i]), i),
    )
    n = len(order)
    # Placed values, in placement order, as parallel arrays so the collision
    # test against all of them is one vectorised expression.
    p_start = np.empty(n, dtype=np.int64)
    p_end = np.empty(n, dtype=np.int64)
    p_lo = np.empty(n, dtype=np.int64)
    p_hi = np.empty(n, dtype=np.int64)
    total = 0
    for k, i in enumerate(order):
        size, s, e = sizes[i], starts[i], ends[i]
        overlap = (p_start[:k] <= e) & (s <= p_end[:k])
        lo, hi = p_lo[:k][overlap], p_hi[:k][overlap]
        offset = 0
        if lo.size:
            idx = np.argsort(lo, kind="stable")
            lo, hi = lo[idx], hi[idx]
            # top[j]: highest byte used by the blocks below block j (0 for the
            # first); a gap fits if block j starts at least `size` above it.
            # Lowest fitting gap wins, else we stack on top of everything.
            top = np.empty_like(hi)
            top[0] = 0
            np.maximum.accumulate(hi[:-1], out=top[1:])
            fits = np.flatnonzero(lo - top >= size)
            offset = int(top[fits[0]]) if fits.size else int(max(top[-1], hi[-1]))
        p_start[k], p_end[k], p_lo[k], p_hi[k] = s, e, offset, offset + size
        offsets[lifetimes[i].key] = offset
        total = max(total, offset + size)

    for lt, size in zip(lifetimes, sizes, strict=True):
        if size == 0:
            offsets[lt.key] = 0
    # Input order for the dict, so printing a plan follows the schedule.
    offsets = {lt.key: offsets[lt.key] for lt in lifetimes}
    return MemoryPlan(offsets, total, pin, True, naive, alignment)


def _human(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
