"""The segmenter: splits a schedule into the units a device replays.

- "replay": a run of dispatches recorded once into an indirect command
  buffer (Metal ICB, CUDA graph, host command list) and replayed every run;
- "gemm": one BLAS call (MPS / cuBLAS / CPU BLAS), which an ICB cannot hold,
  encoded between replay ranges (DESIGN section 4: matmul-interleaved ICB
  schedules);
- "direct": dispatches that cannot be recorded (host fallbacks, ops whose
  shape changes per run), encoded every run.
Each segment lists its boundary: the storages it reads that earlier
segments (or the run's inputs) wrote, and the storages it writes that later
segments (or the run's outputs) read. The device shims replay this plan
(rlx/_core.pyx)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

REPLAY, GEMM, DIRECT = 0, 1, 2   # the codes rlx/_core.pyx takes
_NAMES = {REPLAY: "replay", GEMM: "gemm", DIRECT: "direct"}


@dataclass(frozen=True)
class Step:
    """What the segmenter needs to know about one thunk."""
    is_gemm: bool
    recordable: bool
    reads: frozenset[Hashable]
    writes: frozenset[Hashable]


@dataclass
class Segment:
    kind: int
    start: int
    count: int
    inputs: set[Hashable] = field(default_factory=set)
    outputs: set[Hashable] = field(default_factory=set)

    @property
    def name(self) -> str:
        return _NAMES[self.kind]

    def as_tuple(self) -> tuple[int, int, int]:
        return (self.kind, self.start, self.count)


def segment(steps: Sequence[Step], run_outputs: frozenset[Hashable] = frozenset()) -> list[Segment]:
    segments: list[Segment] = []
    for i, step in enumerate(steps):
        kind = GEMM if step.is_gemm else (REPLAY if step.recordable else DIRECT)
        last = segments[-1] if segments else None
        if last is not None and kind != GEMM and last.kind == kind and last.start + last.count == i:
            last.count += 1
        else:
            segments.append(Segment(kind, i, 1))
    for seg in segments:
        written_inside: set[Hashable] = set()
        for step in steps[seg.start:seg.start + seg.count]:
            seg.inputs |= set(step.reads) - written_inside
            written_inside |= step.writes
        later_reads: set[Hashable] = set(run_outputs)
        for step in steps[seg.start + seg.count:]:
            later_reads |= step.reads
        seg.outputs = written_inside & later_reads
    return segments


def describe(segments: Sequence[Segment]) -> str:
    counts: dict[str, int] = {}
    for s in segments:
        counts[s.name] = counts.get(s.name, 0) + 1
    parts = ", ".join(f"{n} {k}" for k, n in counts.items()) or "empty"
    return f"segments: {len(segments)} ({parts})"
