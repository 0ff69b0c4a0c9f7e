"""What a new leader takes back from the saved scale-ups: one judged within an unbroken watch of its first tick is
waited for from its ask, one judged longer ago is not trusted (its pool's units in flight are waited for from the first
read instead)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.planning.memory import PendingScaleUp
from agent.scale_up_memory import ScaleUpMemory
from models import PoolState

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
READ = T0 + timedelta(minutes=7)
POOL = "a100-spot"
WATCH = timedelta(minutes=2, seconds=45)  # the lease duration (15s), two ticks (1m) and the misfire grace (30s)


def _state(ready: int, target: int) -> PoolState:
    return PoolState(POOL, READ, ready, target)


@pytest.mark.parametrize(("judged", "trusted"), [(WATCH, True), (WATCH + timedelta(seconds=1), False)])
def test_a_saved_scale_up_is_trusted_within_an_unbroken_watch_of_the_first_tick_only(
    judged: timedelta, trusted: bool
) -> None:
    memory = ScaleUpMemory([POOL], unbroken=WATCH)
    memory.restore((PendingScaleUp(POOL, T0, 0, 3, judged_at=READ - judged),))
    (taken,) = memory.take_over(READ, {POOL: _state(0, 3)})
    assert (taken.requested_at, taken.inherited) == ((T0, False) if trusted else (READ, True))
    assert taken.to_units == 3


def test_a_pool_unread_at_the_first_tick_is_judged_on_the_watch_up_to_that_tick() -> None:
    memory = ScaleUpMemory([POOL], unbroken=WATCH)
    memory.restore((PendingScaleUp(POOL, T0, 0, 3, judged_at=READ - WATCH),))
    assert memory.take_over(READ, {}) == []  # the pool cannot be read at the first tick
    (taken,) = memory.take_over(READ + timedelta(minutes=5), {POOL: _state(0, 3)})
    assert (taken.requested_at, taken.inherited) == (T0, False)  # a read that fails breaks no watch
