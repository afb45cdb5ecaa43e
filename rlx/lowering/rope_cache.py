"""The query/key norm and RoPE of a decoder layer folded with its KV cache
writes: a set_rows pair (rlx/lowering/state.py) whose first or second
write takes its values from an rmsnorm_rope's output, whole rope rows of
them, runs inside that rmsnorm_rope's dispatch as rmsnorm_rope_cache
(shaders/state.h). The group that forms a key row also stores it into the
cache, and extra groups copy the other write's rows (V). A decode step
loses one dispatch a layer and a kernel boundary on its critical path.

The fused dispatch runs at the rope's place in the thunk list where the
writes can move back there (no thunk after the rope reads or writes
either cache, or writes the copied values, the slot or the keys), else
at the pair's place where the rope can move on to it (no thunk after the
rope reads or writes its output or writes what it reads: Gemma 3 270M's
V projection, a GEMV of another block format than the query and key
ones, runs after their rope); else the pair stays a set_rows_pair."""

from __future__ import annotations

import struct
import weakref
from typing import NamedTuple

from rlx.lowering.core import Lowering, Thunk, Work, untouched
from rlx.runtime.views import View


class RopeDispatch(NamedTuple):
    """An rmsnorm_rope dispatch as the fold rebuilds it: its arguments in
    binding order (y, the output, last), its params, grid and rows of D."""

    thunk: Thunk
    args: list[tuple[View, str]]
    params: bytes
    grid: tuple[tuple[int, int, int], tuple[int, int, int]]
    d: int
    suffix: str

    @property
    def out(self) -> View:
        return self.args[-1][0]


class CacheWrite(NamedTuple):
    """One set_rows of the pair: the state it writes and the values it reads."""

    state: View
    values: View


CAPABILITY = "rope_cache"   # rlx.runtime.target.Target.capabilities

# Each lowering's rmsnorm_rope dispatches, by the storage they write.
_ROPES: weakref.WeakKeyDictionary[Lowering, dict[int, RopeDispatch]] = weakref.WeakKeyDictionary()


def remember_rope(lw: Lowering, rope: RopeDispatch) -> None:
    _ROPES.setdefault(lw, {})[id(rope.out.storage)] = rope


def fold_into_rope(lw: Lowering, label: str, pair: tuple[CacheWrite, CacheWrite], slot: View,
                   set_rows: tuple[int, int, int], suffix: str, earlier: Thunk) -> bool:
    """Folds the set_rows pair (its `earlier` thunk already emitted) into
    the rmsnorm_rope that wrote one write's values; set_rows: (cache rows,
    value rows, elements a value row). False where it does not apply."""
    if CAPABILITY not in lw.target.capabilities:
        return False
    ropes = _ROPES.get(lw, {})
    for keys, copied in (pair, pair[::-1]):
        rope = ropes.get(id(keys.values.storage))
        if rope is None or not _fits(lw, rope, keys, copied, set_rows, suffix):
            continue
        after = [t for t in lw.thunks[lw.thunks.index(rope.thunk) + 1:] if t is not earlier]
        if _writes_can_move_back(rope, keys, copied, slot, after):
            at_rope = True
        elif _rope_can_move_on(rope, after):
            at_rope = False
        else:
            continue
        break
    else:
        return False
    rows, n_values, row_elems = set_rows
    cache = struct.pack("<8I", rows, n_values, row_elems, keys.state.offset, keys.values.offset, slot.offset,
                        copied.state.offset, copied.values.offset)
    (rope_groups, _, _), threads = rope.grid
    args = [*rope.args, (keys.state, "w"), (copied.state, "w"), (copied.values, "r"), (slot, "r")]
    fused = lw.dispatch(f"{rope.thunk.label} + {label}", f"rmsnorm_rope_cache_{suffix}", args,
                        rope.params + cache, ((rope_groups + n_values, 1, 1), threads), Work("norm"))
    if at_rope:
        lw.thunks.pop()   # dispatch appended it: it runs where the rope ran
        lw.thunks[lw.thunks.index(rope.thunk)] = fused
    else:
        lw.thunks.remove(rope.thunk)   # it runs here, where the pair would have
    lw.thunks.remove(earlier)
    del _ROPES[lw][id(rope.out.storage)]
    return True


def _fits(lw: Lowering, rope: RopeDispatch, keys: CacheWrite, copied: CacheWrite, set_rows: tuple[int, int, int],
          suffix: str) -> bool:
    """The kernel's shape: the same element type, the key values whole rope
    rows inside one value row each, two caches, and copied values that the
    rope does not write (its other groups would race the copy)."""
    row_elems = set_rows[2]
    offset = keys.values.offset - rope.out.offset
    return (rope.suffix == suffix and rope.thunk in lw.thunks and offset >= 0 and offset % rope.d == 0
            and row_elems % rope.d == 0 and keys.state.storage is not copied.state.storage
            and copied.values.storage is not rope.out.storage)


def _writes_can_move_back(rope: RopeDispatch, keys: CacheWrite, copied: CacheWrite, slot: View,
                          after: list[Thunk]) -> bool:
    """The writes can run at the rope's place: nothing after it reads or
    writes either cache, or writes the copied values, the slot or the keys."""
    held = {id(keys.state.storage), id(copied.state.storage)}
    return untouched(after, held, held | {id(copied.values.storage), id(slot.storage), id(rope.out.storage)})


def _rope_can_move_on(rope: RopeDispatch, after: list[Thunk]) -> bool:
    """The rope can run here, after the thunks that followed it (a V
    projection after the keys' rope): none of them reads or writes its
    output or writes what it reads."""
    out = {id(rope.out.storage)}
    return untouched(after, out, out | {id(s) for s, _, _ in rope.thunk.reads})
