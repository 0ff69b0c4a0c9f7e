"""A tracker that adopts another's record (a new leader reading its predecessor's planner memory): the adopted
conditions that still hold are told again (nothing says the predecessor's notifier delivered them), and the end of
each is told, with the predecessor's first raise."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.conditions import ConditionTracker
from agent.planning import PlannerMemory
from agent.tick_alerts import with_conditions
from models import AlertEvent, AlertKind, Severity

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WINDOW = timedelta(hours=1)


def _missing(at: datetime, severity: Severity = Severity.WARNING, subject: str = "demand class a") -> AlertEvent:
    return AlertEvent(AlertKind.MISSING_DATA, severity, at, subject, "no sample")


def _successor_of(raised: list[AlertEvent]) -> ConditionTracker:
    first = ConditionTracker(timedelta(minutes=5), WINDOW)
    first.update(T0, raised)
    second = ConditionTracker(timedelta(minutes=5), WINDOW)
    second.adopt(*first.record(), T0)
    return second


def test_an_adopted_condition_raised_again_keeps_its_first_raise_and_is_not_ended() -> None:
    second = _successor_of([_missing(T0)])
    later = _missing(T0 + timedelta(minutes=10))
    assert second.update(later.at, [later]) == []
    (kept,) = second.record()[0].values()
    assert (kept.since, kept.seen) == (T0, later.at)


def test_the_end_of_an_adopted_condition_is_told_with_its_first_raise() -> None:
    second = _successor_of([_missing(T0)])
    assert second.update(T0 + timedelta(minutes=2), []) == []  # gone, not yet for resolve_after
    (end,) = second.update(T0 + timedelta(minutes=6), [])
    assert (end.kind, end.subject, end.resolved) == (AlertKind.MISSING_DATA, "demand class a", True)
    assert end.details["first raised"] == "2026-03-02 09:00 UTC"


def test_an_end_the_predecessor_told_holds_back_the_next_within_the_window() -> None:
    first = ConditionTracker(timedelta(minutes=5), WINDOW)
    first.update(T0, [_missing(T0)])
    (told,) = first.update(T0 + timedelta(minutes=5), [])
    first.update(T0 + timedelta(minutes=10), [_missing(T0 + timedelta(minutes=10))])
    second = ConditionTracker(timedelta(minutes=5), WINDOW)
    second.adopt(*first.record(), T0)
    assert second.update(T0 + timedelta(minutes=20), []) == []  # the predecessor told an end at 09:05
    (end,) = second.update(told.at + WINDOW, [])
    assert end.resolved and end.subject == "demand class a"


def test_a_condition_seen_to_the_last_minute_ends_resolve_after_its_adoption_whatever_last_seen_was_saved() -> None:
    first = ConditionTracker(timedelta(minutes=5), WINDOW)
    memory = PlannerMemory()
    for minute in range(0, 21):  # seen at every tick; saved only when it opened
        at = T0 + timedelta(minutes=minute)
        first.update(at, [_missing(at)])
        memory = with_conditions(memory, first)
    (saved,) = memory.open_conditions.values()
    assert saved.seen == T0
    second = ConditionTracker(timedelta(minutes=5), WINDOW)
    second.adopt(memory.open_conditions, memory.conditions_ended, T0 + timedelta(minutes=21))
    assert second.update(T0 + timedelta(minutes=21), []) == []  # gone; seen at 09:20 by its predecessor
    assert second.update(T0 + timedelta(minutes=25), []) == []
    (end,) = second.update(T0 + timedelta(minutes=26), [])
    assert end.resolved and end.details["last seen"] == "2026-03-02 09:00 UTC"
