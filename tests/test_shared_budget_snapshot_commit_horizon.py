"""A shared monthly cap with a commit_horizon: the snapshot (the projected-spend gauge and the rule
``LeadtimeBudgetProjectedOverCap`` on it) projects the other agents' reservations to the period's end, as it does the
agent's own units.

West and east each hold 8 units at 8 USD a unit-hour from February 10 under a 60,000 USD monthly cap with a 24h
commit horizon. Each reserves its units over the horizon only (8 x 8 x 24 = 1,536 USD), so west's snapshot projected
its own 8 units to the month's end (30,709 USD) but east's over 24 hours: 32,261 against 60,000, where the pair's
units to the month's end come to about 61,435, over the cap; the gauge showed room and the rule stayed silent.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.daemon.metrics import DaemonMetrics
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter

START = datetime(2024, 2, 10, tzinfo=UTC)
MONTH_END = datetime(2024, 3, 1, tzinfo=UTC)
FLEET = 8
CAP = 60_000.0


def test_the_gauge_projects_the_other_agents_units_to_the_period_end_under_a_commit_horizon(
    write_trace: TraceWriter,
) -> None:
    trace = write_trace({"train": [64.0] * 60}, start=(START - timedelta(hours=2)).isoformat())
    agents = [
        rig.member(
            rig.shared_budget_config(own, other, monthly_cap_usd=CAP, commit_horizon="24h"),
            own,
            trace,
            ledger,
            START,
            units=FLEET,
        )
        for ledger, (own, other) in zip(rig.memory_ledgers(), rig.PAIRS, strict=True)
    ]
    now = START
    for _ in range(3):
        reports = rig.tick(agents, now)
        last, now = now, now + timedelta(minutes=5)
    hours_left = (MONTH_END - last) / timedelta(hours=1)
    for name, report in reports.items():
        assert report.plan is not None
        [snapshot] = [b for b in report.plan.budgets if b.budget == "team"]
        # east's (west's) 8 units to the month's end, not over 24 hours (1,536 USD)
        assert snapshot.reserved_elsewhere_usd == pytest.approx(FLEET * rig.UNIT_HOUR_USD * hours_left, rel=1e-3), name
        assert snapshot.projected_usd == pytest.approx(
            snapshot.spent_usd + 2 * FLEET * rig.UNIT_HOUR_USD * hours_left, rel=1e-3
        )
        metrics = DaemonMetrics()
        metrics.record_budgets([snapshot])
        reading = {
            key: metrics.registry.get_sample_value(f"leadtime_budget_{key}_usd", {"budget": "team"})
            for key in ("projected", "spent", "remaining")
        }
        projected, spent, remaining = reading["projected"], reading["spent"], reading["remaining"]
        assert projected is not None and spent is not None and remaining is not None
        # LeadtimeBudgetProjectedOverCap's expression: the projected overspend, above zero
        assert projected - spent - remaining > 0
