"""Alert events built from budget snapshots, overspends and stalled scale-ups, and how any alert renders."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.alerts import PendingScaleUp, outstanding, stalled_scale_up_events
from agent.budget_alerts import budget_threshold_events, projected_overspend_event
from agent.notify.slack_message import blocks, fallback_text
from agent.planning.budget import CapKind, Period, ScaleUpCharge
from agent.planning.enforcement import Overspend
from models import (
    AcceleratorFamily,
    ActionResult,
    ActionStatus,
    AlertEvent,
    AlertKind,
    BudgetSnapshot,
    CapacityTier,
    PoolKind,
    PoolSpec,
    PoolState,
    Resize,
    Severity,
)

NOW = datetime(2024, 3, 20, 12, 0, tzinfo=UTC)
PERIOD = Period(datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 4, 1, tzinfo=UTC))


def snapshot(spent: float, cap: float | None = 1000.0) -> BudgetSnapshot:
    return BudgetSnapshot("team-a", PERIOD.start, PERIOD.end, spent, cap, spent * 1.5)


@pytest.mark.parametrize(
    ("previous", "spent", "crossed"),
    [
        pytest.param(400.0, 499.0, [], id="below the first threshold"),
        pytest.param(400.0, 500.0, [50], id="exactly at 50%"),
        pytest.param(790.0, 1010.0, [80, 100], id="two in one tick"),
        pytest.param(820.0, 900.0, [], id="already past 80%"),
        pytest.param(None, 850.0, [80], id="after a restart: only the highest"),
        pytest.param(950.0, 10.0, [], id="a new period"),
    ],
)
def test_budget_thresholds_fire_on_crossing(previous: float | None, spent: float, crossed: list[int]) -> None:
    events = budget_threshold_events(snapshot(spent), previous, (0.5, 0.8, 1.0), NOW)
    assert [e.subject for e in events] == [f"budget team-a: {p}% of cap" for p in crossed]
    assert all(e.kind is AlertKind.BUDGET_THRESHOLD and e.at == NOW for e in events)


def test_threshold_severity_rises_with_the_threshold_and_the_text_says_how_much() -> None:
    events = budget_threshold_events(snapshot(1200.0), 0.0, (0.5, 0.8, 1.0), NOW)
    assert [e.severity for e in events] == [Severity.INFO, Severity.WARNING, Severity.CRITICAL]
    assert "Spent 1,200.00 USD of 1,000.00 USD (120%)" in events[-1].summary
    assert events[-1].details["remaining"] == "0.00 USD"
    assert budget_threshold_events(snapshot(5.0, cap=None), 0.0, (0.5,), NOW) == []


def test_projected_overspend_names_the_scale_ups_that_drove_it_and_what_is_shed() -> None:
    overspend = Overspend("team-a", CapKind.MONTH, PERIOD, 1000.0, 1250.0)
    drivers = [ScaleUpCharge(datetime(2024, 3, 19, 8, 30, tzinfo=UTC), f"pool-{i}", 1, 3, 100.0 - i) for i in range(7)]
    releases = [Resize("pool-0", 3, 1, "budget", "k1"), Resize("pool-1", 1, 2, "forecast", "k2")]
    results = [
        ActionResult("k1", "pool-0", ActionStatus.DONE, NOW),
        ActionResult("k2", "pool-1", ActionStatus.DONE, NOW),
    ]
    event = projected_overspend_event(overspend, NOW, drivers, releases, results)
    assert event.severity is Severity.CRITICAL
    assert event.subject == "budget team-a (monthly)"
    assert "Projected 1,250.00 USD against a monthly cap of 1,000.00 USD by 2024-04-01 00:00 UTC" in event.summary
    lines = event.details["scale-ups that drove it"].splitlines()
    assert lines[0] == "2024-03-19 08:30 UTC pool-0 1->3 units (+100.00 USD to period end)"
    assert lines[-1] == "... and 2 more"
    assert event.details["shedding"] == "pool-0: 3 -> 1 units: done"
    assert "Scale-ups are stopped; burst capacity is being shed." in event.summary
    nothing = projected_overspend_event(overspend, NOW, [], [], [])
    assert "nothing can go safely" in nothing.details["shedding"]
    assert nothing.summary.endswith("Scale-ups are stopped; nothing can be shed.")


def test_a_hard_stop_overspend_says_where_its_projection_ends_and_that_busy_units_go() -> None:
    horizon_end = datetime(2024, 3, 21, 12, tzinfo=UTC)
    overspend = Overspend("team-a", CapKind.MONTH, PERIOD, 1000.0, 1010.0, until=horizon_end)
    releases = [Resize("pool-0", 3, 0, "budget", "k1", forced=True)]
    event = projected_overspend_event(
        overspend, NOW, [], releases, [ActionResult("k1", "pool-0", ActionStatus.STARTED, NOW)]
    )
    assert "against a monthly cap of 1,000.00 USD by 2024-03-21 12:00 UTC" in event.summary
    assert "the hard stop is releasing burst units, busy ones too" in event.summary
    assert event.details["shedding"] == "pool-0: 3 -> 0 units (hard stop: busy units too): under way"


def _spec(pool_id: str, lead_minutes: int) -> PoolSpec:
    return PoolSpec(
        pool_id, PoolKind.TPU_SLICE_GROUP, CapacityTier.ON_DEMAND, AcceleratorFamily.TPU, 32, 0, 8, 38.4,
        timedelta(minutes=lead_minutes), ("c",),
    )  # fmt: skip


def _state(pool_id: str, ready: int, target: int) -> PoolState:
    return PoolState(pool_id, NOW, ready, target)


def test_a_scale_up_is_stalled_after_twice_its_lead_time() -> None:
    pools = {"slow": _spec("slow", 30), "fast": _spec("fast", 30), "done": _spec("done", 30)}
    pending = [
        PendingScaleUp("slow", NOW - timedelta(minutes=60), 1, 3),
        PendingScaleUp("fast", NOW - timedelta(minutes=59), 1, 3),
        PendingScaleUp("done", NOW - timedelta(minutes=90), 1, 3),
    ]
    states = {"slow": _state("slow", 1, 3), "fast": _state("fast", 1, 3), "done": _state("done", 3, 3)}
    events = stalled_scale_up_events(pending, states, pools, NOW)
    assert [e.subject for e in events] == ["pool slow"]
    assert "is still not ready after 1h00m (lead time 30m)" in events[0].summary
    assert events[0].details == {"ready units": "1", "asked": "1 -> 3 units"}


def test_a_scale_up_overtaken_by_a_smaller_target_is_no_longer_owed() -> None:
    pending = [PendingScaleUp("p", NOW, 1, 4), PendingScaleUp("q", NOW, 0, 2)]
    assert outstanding(pending, {"p": _state("p", 1, 2)}) == [PendingScaleUp("q", NOW, 0, 2)]


def test_every_event_renders_within_slacks_limits() -> None:
    long = "x" * 5000
    event = AlertEvent(AlertKind.MISSING_DATA, Severity.WARNING, NOW, long, long, {long: long})
    rendered = blocks(event)
    assert len(rendered[0]["text"]["text"]) <= 150
    assert len(rendered[1]["text"]["text"]) <= 3000
    assert all(len(f["text"]) <= 2000 for f in rendered[2]["fields"])
    assert len(fallback_text(event)) <= 3000
