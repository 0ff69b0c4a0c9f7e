"""What a new leader takes back from the saved scale-ups: one judged within an unbroken watch of its first tick is
waited for from its ask, one judged longer ago is not trusted; and the units in flight no trusted saved scale-up
explains are waited for from its first read of the pool, never the units the pool reports being recreated (a repair)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from agent.alerts import outstanding
from agent.planning.memory import PendingScaleUp
from agent.scale_up_memory import CLOCK_SKEW, ScaleUpMemory, unexplained
from models import PoolState

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
READ = T0 + timedelta(minutes=7)
POOL = "a100-spot"
WATCH = timedelta(minutes=2, seconds=45)  # the lease duration (15s), two ticks (1m) and the misfire grace (30s)


def _state(ready: int, target: int, recreating: int = 0) -> PoolState:
    return PoolState(POOL, READ, ready, target, recreating_units=recreating)


def _asked(from_units: int, to_units: int) -> PendingScaleUp:
    return PendingScaleUp(POOL, T0, from_units, to_units, judged_at=READ - timedelta(minutes=1))


@pytest.mark.parametrize(("judged", "trusted"), [(WATCH, True), (WATCH + timedelta(seconds=1), False)])
def test_a_saved_scale_up_is_trusted_within_an_unbroken_watch_of_the_first_tick_only(
    judged: timedelta, trusted: bool
) -> None:
    memory = ScaleUpMemory([POOL], unbroken=WATCH)
    memory.restore((PendingScaleUp(POOL, T0, 0, 3, judged_at=READ - judged),))
    (taken,) = memory.take_over(READ, {POOL: _state(0, 3)})
    assert (taken.requested_at, taken.inherited) == ((T0, False) if trusted else (READ, True))
    assert taken.to_units == 3


@pytest.mark.parametrize(
    ("ahead", "trusted"),
    [(CLOCK_SKEW, True), (CLOCK_SKEW + timedelta(seconds=1), False), (timedelta(hours=1), False)],
)
def test_a_saved_scale_up_judged_later_than_the_first_tick_is_trusted_within_the_clock_skew_only(
    ahead: timedelta, trusted: bool, caplog: pytest.LogCaptureFixture
) -> None:
    memory = ScaleUpMemory([POOL], unbroken=WATCH)
    memory.restore((PendingScaleUp(POOL, T0, 0, 3, judged_at=READ + ahead),))
    with caplog.at_level(logging.WARNING, logger="agent.scale_up_memory"):
        (taken,) = memory.take_over(READ, {POOL: _state(0, 3)})
        assert memory.take_over(READ + timedelta(minutes=1), {POOL: _state(0, 3)}) == []
    assert (taken.requested_at, taken.inherited) == ((T0, False) if trusted else (READ, True))
    warned = [r.getMessage() for r in caplog.records]  # once, at the pool's first read, naming the saved time
    assert [(READ + ahead).isoformat() in w for w in warned] == ([] if trusted else [True])


def test_a_trusted_saved_ask_is_never_taken_from_later_than_the_read() -> None:
    memory = ScaleUpMemory([POOL], unbroken=WATCH)
    later = READ + CLOCK_SKEW  # asked and judged by a clock a few seconds ahead
    memory.restore((PendingScaleUp(POOL, later, 0, 3, judged_at=later),))
    (taken,) = memory.take_over(READ, {POOL: _state(0, 3)})
    assert (taken.requested_at, taken.inherited) == (READ, False)


def test_a_pool_unread_at_the_first_tick_is_judged_on_the_watch_up_to_that_tick() -> None:
    memory = ScaleUpMemory([POOL], unbroken=WATCH)
    memory.restore((PendingScaleUp(POOL, T0, 0, 3, judged_at=READ - WATCH),))
    assert memory.take_over(READ, {}) == []  # the pool cannot be read at the first tick
    (taken,) = memory.take_over(READ + timedelta(minutes=5), {POOL: _state(0, 3)})
    assert (taken.requested_at, taken.inherited) == (T0, False)  # a read that fails breaks no watch


@pytest.mark.parametrize(
    ("state", "saved", "found"),
    [
        (_state(0, 3), (), (0, 3)),  # an ask that never reached the memory: from this read
        (_state(2, 3, recreating=1), (), None),  # a node being repaired is not a scale-up
        (_state(2, 4, recreating=1), (), (3, 4)),  # a repair and an unsaved ask: only the ask's unit
        (_state(0, 3), (_asked(0, 3),), None),  # the saved scale-up explains every unit in flight
        (_state(1, 4), (_asked(0, 3),), (3, 4)),  # a unit above its size: someone else's, or an unsaved ask
        (_state(3, 4, recreating=1), (_asked(0, 3),), None),
        (_state(3, 3), (), None),  # nothing in flight
    ],
)
def test_the_units_in_flight_no_saved_scale_up_explains_are_waited_for_from_the_first_read(
    state: PoolState, saved: tuple[PendingScaleUp, ...], found: tuple[int, int] | None
) -> None:
    waited = unexplained(READ, {POOL: state}, saved)
    assert [(p.from_units, p.to_units) for p in waited] == ([] if found is None else [found])
    assert all(p.requested_at == READ and p.judged_at == READ and p.inherited for p in waited)


def test_a_new_leader_takes_a_trusted_saved_scale_up_and_the_units_it_does_not_explain() -> None:
    memory = ScaleUpMemory([POOL], unbroken=WATCH)
    memory.restore((_asked(0, 3),))
    taken = memory.take_over(READ, {POOL: _state(1, 4)})
    assert [(p.requested_at, p.from_units, p.to_units, p.inherited) for p in taken] == [
        (T0, 0, 3, False),  # from when it was asked
        (READ, 3, 4, True),  # the fourth unit from this read
    ]
    assert memory.take_over(READ + timedelta(minutes=1), {POOL: _state(1, 4)}) == []  # its first read only


@pytest.mark.parametrize(
    ("state", "taken"),
    [
        (_state(2, 3, recreating=1), []),  # the asked unit came while another is repaired: nothing waited for
        (_state(1, 3, recreating=1), [(T0, 2, 3)]),  # the asked unit has not come: its wait goes on from the ask
        (_state(2, 4, recreating=1), [(READ, 3, 4)]),  # the asked unit came; the fourth is an unsaved ask
    ],
)
def test_a_repair_never_holds_a_trusted_saved_scale_up_s_wait_open(
    state: PoolState, taken: list[tuple[datetime, int, int]]
) -> None:
    memory = ScaleUpMemory([POOL], unbroken=WATCH)
    memory.restore((_asked(2, 3),))
    waited = memory.take_over(READ, {POOL: state})
    assert [(p.requested_at, p.from_units, p.to_units) for p in waited] == taken


def test_a_unit_in_flight_found_beside_a_repair_is_waited_for_until_it_comes() -> None:
    (found,) = unexplained(READ, {POOL: _state(2, 4, recreating=1)})
    assert outstanding([found], {POOL: _state(2, 4, recreating=1)}) == [found]  # the next tick still waits
    assert outstanding([found], {POOL: _state(3, 4)}) == [found]  # the repaired node is back, the other not
    assert outstanding([found], {POOL: _state(3, 4, recreating=1)}) == []  # it came, another node is repaired


def test_a_dry_run_agent_carries_the_saved_record_through_untouched() -> None:
    memory = ScaleUpMemory([POOL], unbroken=WATCH)
    memory.acts = False
    saved = (_asked(0, 3),)
    memory.restore(saved)
    assert memory.take_over(READ, {POOL: _state(0, 3)}) == []
    assert memory.waited(()) == saved
    memory.stand_by()
    memory.restore(None)  # a memory that kept none stays so
    assert memory.waited(()) is None
