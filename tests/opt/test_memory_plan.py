"""Arena memory plan (rlx.opt.memory): validity, reuse, pinning, limits, bad input."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlx.errors import MemoryPlanError
from rlx.opt.memory import ALIGNMENT, Lifetime, MemoryPlan, check_plan, plan_memory


def _aligned(n: int, a: int = ALIGNMENT) -> int:
    return -(-n // a) * a


def _peak_live(lifetimes: list[Lifetime], *, pin: bool, a: int = ALIGNMENT) -> int:
    """Largest sum of aligned sizes live at one step: a lower bound on any valid arena."""
    if not lifetimes:
        return 0
    first = min(lt.start for lt in lifetimes)
    last = max(lt.end for lt in lifetimes)
    peak = 0
    for t in range(first, last + 1):
        live = 0
        for lt in lifetimes:
            end = float("inf") if lt.fixed or (pin and lt.pinned) else lt.end
            if lt.fixed or lt.start <= t <= end:
                live += _aligned(lt.size, a)
        peak = max(peak, live)
    return peak


@st.composite
def lifetimes_strategy(draw: st.DrawFn) -> list[Lifetime]:
    n = draw(st.integers(0, 40))
    out = []
    for i in range(n):
        start = draw(st.integers(-1, 30))
        out.append(
            Lifetime(
                key=f"v{i}",
                size=draw(st.integers(0, 10_000)),
                start=start,
                end=start + draw(st.integers(0, 12)),
                pinned=draw(st.booleans()),
                fixed=draw(st.integers(0, 9)) == 0,  # ~10%: inputs/consts are few
            )
        )
    return out


@settings(max_examples=300, deadline=None)
@given(lts=lifetimes_strategy(), pin=st.booleans(), alignment=st.sampled_from([ALIGNMENT, 1, 16, 256]))
def test_property_valid_and_bounded(lts: list[Lifetime], pin: bool, alignment: int) -> None:
    plan = plan_memory(lts, reuse=True, pin=pin, alignment=alignment)
    check_plan(lts, plan)
    assert plan.reuse and plan.pinned == pin
    assert all(off % alignment == 0 for off in plan.offsets.values())
    assert set(plan.offsets) == {lt.key for lt in lts}
    assert plan.naive_bytes == sum(_aligned(lt.size, alignment) for lt in lts)
    assert _peak_live(lts, pin=pin, a=alignment) <= plan.total_bytes <= plan.naive_bytes
    assert plan.total_bytes % alignment == 0


@settings(max_examples=50, deadline=None)
@given(lts=lifetimes_strategy())
def test_property_no_reuse_is_naive(lts: list[Lifetime]) -> None:
    plan = plan_memory(lts, reuse=False)
    check_plan(lts, plan)
    assert plan.total_bytes == plan.naive_bytes


def _chain(n: int, size: int = 1000) -> list[Lifetime]:
    # v0 -> v1 -> ... : step i reads v{i} and writes v{i+1}.
    return [Lifetime(f"v{i}", size, start=i, end=i + 1) for i in range(n)]


def test_chain_reuses_two_slots() -> None:
    lts = _chain(4)
    plan = plan_memory(lts, reuse=True)
    check_plan(lts, plan)
    slot = _aligned(1000)
    assert plan.total_bytes == 2 * slot
    assert plan.naive_bytes == 4 * slot
    assert plan.offsets["v0"] == plan.offsets["v2"]
    assert plan.offsets["v1"] == plan.offsets["v3"]
    assert "50% saved" in plan.describe()


def test_value_read_and_written_by_same_step_do_not_share() -> None:
    # Inclusive ends: v0 is read at step 1 while v1 is written there.
    lts = [Lifetime("a", 256, 0, 1), Lifetime("b", 256, 1, 2)]
    plan = plan_memory(lts, reuse=True)
    assert plan.offsets["a"] != plan.offsets["b"]


def test_scratch_is_a_one_step_lifetime() -> None:
    # Step 2 reads v1, writes v2 and uses scratch: three slots live there, and
    # the scratch bytes are free again for v3 written at step 3.
    lts = _chain(4, 512) + [Lifetime("scratch2", 512, 2, 2)]
    plan = plan_memory(lts, reuse=True)
    check_plan(lts, plan)
    assert plan.total_bytes == 3 * 512
    assert plan.offsets["scratch2"] not in (plan.offsets["v1"], plan.offsets["v2"])


def test_pinned_not_reused_after_its_end() -> None:
    lts = [Lifetime("p", 512, 0, 1, pinned=True)] + [Lifetime(f"t{i}", 512, i, i) for i in range(2, 6)]
    plan = plan_memory(lts, reuse=True)
    check_plan(lts, plan)
    later = {plan.offsets[f"t{i}"] for i in range(2, 6)}
    assert plan.offsets["p"] not in later
    assert plan.total_bytes == 2 * 512
    # Without the pin its bytes are fair game.
    unpinned = plan_memory(lts, reuse=True, pin=False)
    check_plan(lts, unpinned)
    assert unpinned.total_bytes == 512 and not unpinned.pinned


def test_pinned_may_reuse_bytes_dead_before_its_start() -> None:
    lts = [Lifetime("early", 512, 0, 1), Lifetime("p", 512, 2, 3, pinned=True)]
    plan = plan_memory(lts, reuse=True)
    assert plan.offsets["early"] == plan.offsets["p"] and plan.total_bytes == 512


def test_fixed_never_reused() -> None:
    lts = [Lifetime("in", 512, -1, 0, fixed=True), Lifetime("out", 512, 5, 5, fixed=True)] + [
        Lifetime(f"t{i}", 512, i, i) for i in range(1, 5)
    ]
    plan = plan_memory(lts, reuse=True, pin=False)
    check_plan(lts, plan)
    fixed = {plan.offsets["in"], plan.offsets["out"]}
    assert len(fixed) == 2
    assert not fixed & {plan.offsets[f"t{i}"] for i in range(1, 5)}
    assert plan.total_bytes == 3 * 512


def test_zero_size_gets_valid_offset() -> None:
    lts = [Lifetime("z", 0, 0, 3), Lifetime("a", 100, 0, 3)]
    plan = plan_memory(lts, reuse=True)
    check_plan(lts, plan)
    assert plan.offsets["z"] % ALIGNMENT == 0 and plan.offsets["z"] <= plan.total_bytes
    assert plan.total_bytes == ALIGNMENT
    empty = plan_memory([])
    assert empty.total_bytes == 0 and empty.offsets == {}
    assert "arena 0 B" in empty.describe()


def test_env_no_reuse(monkeypatch: pytest.MonkeyPatch) -> None:
    lts = _chain(6)
    monkeypatch.setenv("RLX_ARENA_NO_REUSE", "1")
    plan = plan_memory(lts)
    check_plan(lts, plan)
    assert not plan.reuse and plan.total_bytes == plan.naive_bytes == 6 * _aligned(1000)
    assert "reuse off" in plan.describe()
    monkeypatch.setenv("RLX_ARENA_NO_REUSE", "0")
    assert plan_memory(lts).total_bytes == 2 * _aligned(1000)


def test_max_bytes_drops_pin() -> None:
    lts = [Lifetime(f"p{i}", 1024, i, i + 1, pinned=True) for i in range(4)]
    pinned = plan_memory(lts, reuse=True)
    assert pinned.pinned and pinned.total_bytes == 4 * 1024
    plan = plan_memory(lts, reuse=True, max_bytes=2 * 1024)
    check_plan(lts, plan)
    assert not plan.pinned and plan.total_bytes == 2 * 1024
    assert "outputs not pinned" in plan.describe()
    # Fits with the pin: pin is kept.
    assert plan_memory(lts, reuse=True, max_bytes=4 * 1024).pinned


def test_max_bytes_impossible_is_readable() -> None:
    lts = [Lifetime(f"p{i}", 1024, i, i + 1, pinned=True) for i in range(4)]
    with pytest.raises(MemoryPlanError) as info:
        plan_memory(lts, reuse=True, max_bytes=1024)
    msg = str(info.value)
    assert "2048 bytes" in msg and "1024 bytes" in msg and "reuse by liveness was on" in msg
    assert "pin was dropped" in msg
    with pytest.raises(MemoryPlanError) as info:
        plan_memory(lts, reuse=False, max_bytes=2048)
    msg = str(info.value)
    assert "4096 bytes" in msg and "2048 bytes" in msg and "reuse by liveness was off" in msg


def test_two_thousand_values_fast() -> None:
    rng = random.Random(0)
    lts = []
    for i in range(2000):
        start = rng.randrange(-1, 1500)
        lts.append(
            Lifetime(
                i,
                rng.randrange(0, 1 << 20),
                start,
                start + rng.choice([0, 1, 1, 2, 3, 10, 100]),
                pinned=rng.random() < 0.02,
                fixed=rng.random() < 0.05,
            )
        )
    t0 = time.perf_counter()
    plan = plan_memory(lts, reuse=True)
    elapsed = time.perf_counter() - t0
    assert elapsed < 2.0, f"planning 2,000 values took {elapsed:.2f} s"
    check_plan(lts, plan)
    assert plan.total_bytes < plan.naive_bytes


def test_deterministic() -> None:
    lts = [Lifetime(i, (i * 7919) % 5000, i % 17, i % 17 + i % 5) for i in range(200)]
    assert plan_memory(lts, reuse=True) == plan_memory(lts, reuse=True)


@pytest.mark.parametrize(
    "lts, match",
    [
        ([Lifetime("a", 1, 0, 1), Lifetime("a", 2, 0, 1)], "duplicate lifetime key 'a'"),
        ([Lifetime("a", -1, 0, 1)], "negative size -1"),
        ([Lifetime("a", 1, 3, 2)], "end 2 is before start 3"),
        ([Lifetime("a", 1.5, 0, 1)], "size must be an integer"),
        ([Lifetime(["unhashable"], 1, 0, 1)], "not hashable"),
        ([("a", 1, 0, 1)], "expected Lifetime"),
    ],
)
def test_bad_input(lts: list, match: str) -> None:
    with pytest.raises(MemoryPlanError, match=match) as info:
        plan_memory(lts)
    assert isinstance(info.value, ValueError)


def test_bad_alignment() -> None:
    with pytest.raises(ValueError, match="alignment"):
        plan_memory([], alignment=0)


def test_check_plan_catches_bad_plans() -> None:
    lts = [Lifetime("a", 256, 0, 2), Lifetime("b", 256, 1, 3)]
    with pytest.raises(AssertionError, match="share bytes"):
        check_plan(lts, MemoryPlan({"a": 0, "b": 128}, 512, True, True, 512))
    with pytest.raises(AssertionError, match="not a non-negative multiple"):
        check_plan(lts, MemoryPlan({"a": 0, "b": 300}, 768, True, True, 512))
    with pytest.raises(AssertionError, match="past the arena end"):
        check_plan(lts, MemoryPlan({"a": 0, "b": 256}, 256, True, True, 512))
    # Sharing across disjoint lifetimes is fine with reuse, not without.
    disjoint = [Lifetime("a", 256, 0, 1), Lifetime("b", 256, 2, 3)]
    check_plan(disjoint, MemoryPlan({"a": 0, "b": 0}, 256, True, True, 512))
    with pytest.raises(AssertionError):
        check_plan(disjoint, MemoryPlan({"a": 0, "b": 0}, 256, True, False, 512))
