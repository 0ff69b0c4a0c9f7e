"""A tracker that adopts another's record (a new leader reading its predecessor's planner memory): an event of an
adopted condition is held back while the predecessor's telling of it holds (same severity or lower, within the
window), a higher severity is told at once, and so is the condition once the window has passed; the tracker's own
conditions are never held back, and an adopted condition's end is told."""

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


def test_an_adopted_condition_is_not_told_again_within_the_predecessors_window() -> None:
    second = _successor_of([_missing(T0)])
    later = _missing(T0 + timedelta(minutes=10))
    assert second.told_before([later]) == [later]
    second.update(later.at, [later])
    again = _missing(T0 + timedelta(minutes=11))
    assert second.told_before([again]) == [again]


def test_a_higher_severity_of_an_adopted_condition_is_told_at_once() -> None:
    second = _successor_of([_missing(T0)])
    critical = _missing(T0 + timedelta(minutes=10), Severity.CRITICAL)
    assert second.told_before([critical]) == []


def test_an_adopted_condition_is_told_again_once_the_window_has_passed_and_then_left_to_the_notifier() -> None:
    second = _successor_of([_missing(T0)])
    for minute in range(10, 60, 10):
        event = _missing(T0 + timedelta(minutes=minute))
        second.update(event.at, [event])
    due = _missing(T0 + WINDOW)
    assert second.told_before([due]) == []
    second.update(due.at, [due])
    after = _missing(T0 + WINDOW + timedelta(minutes=1))
    assert second.told_before([after]) == []  # told by this replica: its own notifier de-duplicates it


def test_a_condition_the_successor_raised_itself_is_never_held_back() -> None:
    second = _successor_of([_missing(T0)])
    own = _missing(T0 + timedelta(minutes=10), subject="demand class b")
    assert second.told_before([own]) == []


def test_the_end_of_an_adopted_condition_is_told_with_its_first_raise() -> None:
    second = _successor_of([_missing(T0)])
    assert second.update(T0 + timedelta(minutes=2), []) == []  # gone, not yet for resolve_after
    (end,) = second.update(T0 + timedelta(minutes=6), [])
    assert (end.kind, end.subject, end.resolved) == (AlertKind.MISSING_DATA, "demand class a", True)
    assert end.details["first raised"] == "2026-03-02 09:00 UTC"
