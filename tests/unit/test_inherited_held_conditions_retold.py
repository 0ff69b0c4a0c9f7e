"""A new leader's tracker tells again, once, an inherited condition raised only when it began and held silently
since (a stockout while its pool backs off): at the first tick that finds it holding, before any end; not one the
tick raises itself, and not one of a pool the tick could not read until a tick finds it holding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.conditions import ConditionTracker
from agent.planning.memory import Condition
from models import AlertEvent, AlertKind, Severity

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
STOCKOUT: Condition = (AlertKind.STOCKOUT, "tpu-pool")


def _stockout(at: datetime) -> AlertEvent:
    return AlertEvent(AlertKind.STOCKOUT, Severity.WARNING, at, "tpu-pool", "2 units of tpu-pool failed.")


def _successor(at: datetime) -> ConditionTracker:
    first = ConditionTracker(timedelta(minutes=5), timedelta(hours=1))
    first.update(T0, [_stockout(T0)], holding={STOCKOUT})
    second = ConditionTracker(timedelta(minutes=5), timedelta(hours=1))
    second.adopt(*first.record(), at)
    return second


def _told(events: list[AlertEvent]) -> list[tuple[str, str, str]]:
    return [(e.at.strftime("%H:%M"), e.subject, "end" if e.resolved else "raised") for e in events]


def test_an_inherited_held_condition_is_told_again_once_then_its_end() -> None:
    second = _successor(T0 + timedelta(minutes=10))
    ticks = [(10, {STOCKOUT}), (15, {STOCKOUT}), (20, set())]
    told = [e for m, holding in ticks for e in second.update(T0 + timedelta(minutes=m), [], holding)]
    assert _told(told) == [("09:10", "tpu-pool", "raised"), ("09:20", "tpu-pool", "end")]
    retold = told[0]
    assert (retold.kind, retold.severity) == (AlertKind.STOCKOUT, Severity.WARNING)
    assert retold.summary.startswith("2 units of tpu-pool failed.")
    assert retold.details["first raised"] == "2026-03-02 09:00 UTC by the previous leader"


def test_an_inherited_condition_raised_by_the_tick_is_told_by_its_own_event_only() -> None:
    second = _successor(T0 + timedelta(minutes=10))
    assert second.update(T0 + timedelta(minutes=10), [_stockout(T0 + timedelta(minutes=10))], {STOCKOUT}) == []
    assert second.update(T0 + timedelta(minutes=15), [], {STOCKOUT}) == []


def test_an_inherited_condition_of_an_unread_pool_is_told_again_at_the_first_tick_that_finds_it_holding() -> None:
    second = _successor(T0 + timedelta(minutes=10))
    assert second.update(T0 + timedelta(minutes=10), [], unknown={STOCKOUT}) == []
    assert _told(second.update(T0 + timedelta(minutes=15), [], {STOCKOUT})) == [("09:15", "tpu-pool", "raised")]
