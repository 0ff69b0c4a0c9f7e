"""A shared monthly cap's snapshot, the projected-spend gauge and the threshold alerts project what the overspend
alert projects: the other agents' reservations included.

West and east each hold 8 units at 8 USD a unit-hour from February 10 under a monthly cap that pays for 14 units to
the period's end (and 500 USD more). Each agent's projected-overspend alert counted the other's reservation and said
'Projected 61,440 ... 7,180 over', but the snapshot the plan carries (the gauge ``leadtime_budget_projected_usd``,
the rule ``LeadtimeBudgetProjectedOverCap`` on it, the daily summary, the threshold alerts and recommend's budget
section) counted the agent's own 8 units only, 30,725 USD against a cap of 54,260: the dashboard showed room and the
rule never fired while scale-ups were stopped. Run on two connections to one PostgreSQL ledger, and on one
in-process ledger both agents write."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from actuators import SimulatedCluster
from agent.budget_alerts import budget_threshold_events
from agent.daemon.adapters import DaemonTickReport
from agent.daemon.metrics import DaemonMetrics
from agent.daemon.summary import DailySummary
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models import AlertKind, BudgetSnapshot
from models.clock import SimulatedClock
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database

START = datetime(2024, 2, 10, tzinfo=UTC)
HOURS_LEFT = (datetime(2024, 3, 1, tzinfo=UTC) - START) / timedelta(hours=1)
FLEET = 8  # the units each agent holds and its demand (64 chips) asks for
CAP = 14 * rig.UNIT_HOUR_USD * HOURS_LEFT + 500  # 54,260 USD: room for 14 of the pair's 16 units
ELSEWHERE = re.compile(r"of which ([\d,]+\.\d\d) USD is reserved by the other agents")


def _tick_pair(write_trace: TraceWriter, ledgers: rig.Ledgers) -> int:
    """Three ticks of the pair; every projected-overspend alert checked against its agent's snapshot and gauges.
    Returns how many alerts were checked."""
    trace = write_trace({"train": [64.0] * 60}, start=(START - timedelta(hours=2)).isoformat())
    agents = [
        rig.member(rig.shared_budget_config(own, other, monthly_cap_usd=CAP), own, trace, ledger, START, units=FLEET)
        for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
    ]
    checked, now = 0, START
    for _ in range(3):
        for report in rig.tick(agents, now).values():
            assert report.plan is not None
            [snapshot] = [b for b in report.plan.budgets if b.budget == "team"]
            for alert in report.alerts:
                if alert.kind is AlertKind.PROJECTED_OVERSPEND and alert.subject == "budget team (monthly)":
                    _assert_agrees(snapshot, alert.summary, now)
                    checked += 1
        now += timedelta(minutes=5)
    return checked


def _assert_agrees(snapshot: BudgetSnapshot, summary: str, now: datetime) -> None:
    assert snapshot.cap_usd is not None and snapshot.cap_usd == pytest.approx(CAP)
    assert snapshot.projected_usd > snapshot.cap_usd
    assert summary.startswith(f"Projected {snapshot.projected_usd:,.2f} USD against a monthly cap of {CAP:,.2f} USD")
    found = ELSEWHERE.search(summary)
    assert found is not None, summary
    elsewhere = float(found.group(1).replace(",", ""))
    assert snapshot.reserved_elsewhere_usd == pytest.approx(elsewhere, abs=0.005)
    # the other agent's 8 units to the period's end, from around now
    assert elsewhere == pytest.approx(FLEET * rig.UNIT_HOUR_USD * HOURS_LEFT, rel=1e-3)
    assert snapshot.spent_usd < snapshot.projected_usd - elsewhere  # their share is not spend

    metrics = DaemonMetrics()
    metrics.record_budgets([snapshot])
    reading = {
        name: metrics.registry.get_sample_value(f"leadtime_budget_{name}_usd", {"budget": "team"})
        for name in ("projected", "spent", "remaining", "reserved_elsewhere")
    }
    assert reading["projected"] == snapshot.projected_usd
    assert reading["reserved_elsewhere"] == snapshot.reserved_elsewhere_usd
    projected, spent, remaining = reading["projected"], reading["spent"], reading["remaining"]
    assert projected is not None and spent is not None and remaining is not None
    # LeadtimeBudgetProjectedOverCap's expression: the projected overspend, above zero
    assert projected - spent - remaining == pytest.approx(snapshot.projected_usd - CAP)
    assert projected - spent - remaining > 0
    metrics.forget_latest_tick()  # a replica that stops leading exports none of it
    assert metrics.registry.get_sample_value("leadtime_budget_reserved_elsewhere_usd", {"budget": "team"}) is None

    [threshold] = budget_threshold_events(snapshot, None, (0.0,), now)
    assert f"projected {snapshot.projected_usd:,.2f} USD by then." in threshold.summary

    summary_of_day = DailySummary(now)
    summary_of_day.add_report(DaemonTickReport((), (), None, (), [snapshot], ()))
    assert summary_of_day.close(now, "west-0", "run").details["budget team"] == (
        f"spent {snapshot.spent_usd:,.2f} of {CAP:,.0f} USD, projected {snapshot.projected_usd:,.2f}, of which "
        f"{elsewhere:,.2f} reserved by the other agents sharing it"
    )


@POSTGRES
def test_shared_cap_snapshot_and_gauge_project_the_overspend_on_postgresql(
    write_trace: TraceWriter, postgres_database: Database
) -> None:
    with rig.postgres_ledgers(postgres_database) as ledgers:
        assert _tick_pair(write_trace, ledgers) >= 2  # both agents alert


def test_shared_cap_snapshot_and_gauge_project_the_overspend_in_one_process(write_trace: TraceWriter) -> None:
    assert _tick_pair(write_trace, rig.memory_ledgers()) >= 2


def test_an_unshared_budget_reports_nothing_reserved_elsewhere(write_trace: TraceWriter) -> None:
    """One agent running both fleets: the same projection, all of it its own."""
    trace = write_trace({"train": [128.0] * 60}, start=(START - timedelta(hours=2)).isoformat())
    config = rig.shared_budget_config("west", "east", monthly_cap_usd=CAP)
    config["pools"].append(dict(config["pools"][0], id="east"))
    config["budgets"][0] = {"name": "team", "pools": ["west", "east"], "monthly_cap_usd": CAP}
    settings = settings_from_mapping(config, source="west config")
    clock = SimulatedClock(START)
    cluster = SimulatedCluster(settings.pool_specs(), clock, {"west": FLEET, "east": FLEET})
    source = TraceSource(read_trace(trace))
    parts = AgentParts(source, build_forecaster(settings.forecast), cluster, InMemoryLedger(), RecordingNotifier())
    report = Agent(settings, parts, holder="west").run_once(START)
    assert report.plan is not None
    [snapshot] = [b for b in report.plan.budgets if b.budget == "team"]
    assert snapshot.reserved_elsewhere_usd is None  # no other agent's units in it, rather than none held
    metrics = DaemonMetrics()
    metrics.record_budgets([snapshot])
    assert metrics.registry.get_sample_value("leadtime_budget_reserved_elsewhere_usd", {"budget": "team"}) is None
    assert snapshot.projected_usd > CAP
