"""A tracker that adopts another's record (a new leader reading its predecessor's planner memory): the adopted
conditions that still hold are told again (nothing says the predecessor's notifier delivered them), and the end of
each is told, with the predecessor's first raise."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.conditions import ConditionTracker
from models import AlertEvent, AlertKind, Severity

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WINDOW = timedelta(hours=1)


def _missing(at: datetime, severity: Severity = Severity.WARNING, subject: str = "demand class a") -> AlertEvent:
    return AlertEvent(AlertKind.MISSING_DATA, severity, at, subject, "no sample")


def _successor_of(raised: list[AlertEvent]) -> ConditionTracker:
    first = ConditionTracker(timedelta(minutes=5), WINDOW)
    first.update(T0, raised)
    second = ConditionTracker(timedelta(minutes=5), WINDOW)
    second.adopt(*first.record())
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
    second.adopt(*first.record())
    assert second.update(T0 + timedelta(minutes=20), []) == []  # the predecessor told an end at 09:05
    (end,) = second.update(told.at + WINDOW, [])
    assert end.resolved and end.subject == "demand class a"
