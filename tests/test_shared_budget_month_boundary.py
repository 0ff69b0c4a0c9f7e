"""Agents sharing a monthly cap reserve the next month period too once the units they buy reach into it.

A reservation covered only the current month period (or the commit horizon within it), so two agents growing late
on January 31 were both granted against the minutes left in January, and from February 1 their units went on
spending in a period neither had reserved: west and east, each wanting 8 units at 8 USD a unit-hour, with a cap that
fits one such fleet for a month and half another, committed 16 units (89,088 USD for February) against 66,816. The
next period is now reserved as well, under a key of its own start (``team@2024-02-01T00:00:00+00:00``), as soon as a
unit bought now reaches it: within the budget's commit horizon, or, without one, within the planner's minimum hold
of a unit (the pool's lead time, the idle window, a tick: 25 minutes here), and a request made once February is the
current period counts those reservations with its own. Run on one in-process ledger both agents write, and on two
connections to one PostgreSQL ledger."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actuators import SimulatedCluster
from agent.ledger import InMemoryLedger
from agent.ledger.base import Ledger
from agent.ledger.postgres import PostgresLedger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models import AlertKind
from models.clock import SimulatedClock
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_shared_budget_next_hour import UNIT_HOUR_USD
from tests.test_shared_budget_next_hour import _config as _hourly_config

FEBRUARY = (datetime(2024, 2, 1, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC))
FLEET = 8  # the units each agent's demand (64 chips) asks for
FEBRUARY_HOURS = (FEBRUARY[1] - FEBRUARY[0]) / timedelta(hours=1)
CAP = 1.5 * FLEET * UNIT_HOUR_USD * FEBRUARY_HOURS  # one fleet for the month and half another, not two
END = FEBRUARY[0] + timedelta(hours=1)

Ledgers = tuple[Ledger, Ledger]  # west's and east's: one ledger, or two connections to one


def _config(own: str, other: str, horizon: str | None) -> dict[str, Any]:
    config = _hourly_config(own, other)
    budget: dict[str, Any] = {"name": "team", "pools": [own], "remote_pools": [other], "monthly_cap_usd": CAP}
    if horizon is not None:
        budget["commit_horizon"] = horizon
    config["budgets"] = [budget]
    return config


@pytest.fixture
def memory_ledgers() -> Ledgers:
    ledger = InMemoryLedger()
    return ledger, ledger


@pytest.fixture
def postgres_ledgers(postgres_database: Database) -> Iterator[Ledgers]:
    west = PostgresLedger(postgres_database.url, postgres_database.password)
    east = PostgresLedger(postgres_database.url, postgres_database.password)
    try:
        yield west, east
    finally:
        west.close()
        east.close()


def _run(write_trace: TraceWriter, ledgers: Ledgers, start: datetime, horizon: str | None) -> tuple[float, list[str]]:
    """Both agents demand 64 chips from ``start``, ticking every 5 minutes to 01:00 on February 1: what they committed
    for February (recorded, and their last units to its end), and the reservation alerts east raised."""
    trace = write_trace({"train": [64.0] * 60}, start=(start - timedelta(hours=2)).isoformat(), step="5min")
    agents: list[tuple[Agent, SimulatedClock]] = []
    for ledger, (own, other) in zip(ledgers, (("west", "east"), ("east", "west")), strict=True):
        settings = settings_from_mapping(_config(own, other, horizon), source=f"{own} config")
        clock = SimulatedClock(start)
        cluster = SimulatedCluster(settings.pool_specs(), clock, {own: 0})
        forecaster = build_forecaster(settings.forecast)
        parts = AgentParts(TraceSource(read_trace(trace)), forecaster, cluster, ledger, RecordingNotifier())
        agents.append((Agent(settings, parts, holder=own), clock))
    east_alerts: list[str] = []
    now = start
    while now <= END:
        for agent, clock in agents:
            clock.set(now)
            report = agent.run_once(now)
            if agent is agents[1][0]:
                east_alerts += [a.summary for a in report.alerts if a.kind is AlertKind.BUDGET_RESERVATION_REFUSED]
        now += timedelta(minutes=5)
    ledger = ledgers[0]
    units = 0
    for pool in ("west", "east"):
        entry = ledger.last_entry(pool)
        units += 0 if entry is None else entry.units
    hours_left = (FEBRUARY[1] - END) / timedelta(hours=1)
    return ledger.spent(["west", "east"], FEBRUARY[0], END) + units * UNIT_HOUR_USD * hours_left, east_alerts


# a commit horizon reaches February from 23:30; without one, a unit bought is held 25 minutes at least: from 23:40
CASES = [(datetime(2024, 1, 31, 23, 30, tzinfo=UTC), "30d"), (datetime(2024, 1, 31, 23, 40, tzinfo=UTC), None)]


@pytest.mark.parametrize(("start", "horizon"), CASES)
def test_agents_sharing_a_monthly_cap_reserve_the_next_month_in_memory(
    write_trace: TraceWriter, memory_ledgers: Ledgers, start: datetime, horizon: str | None
) -> None:
    committed, east_alerts = _run(write_trace, memory_ledgers, start, horizon)
    assert committed <= CAP
    assert committed > CAP - 2 * UNIT_HOUR_USD * FEBRUARY_HOURS  # east was granted what the cap leaves, not none
    assert east_alerts and "team@2024-02-01T00:00:00+00:00" in east_alerts[0]


@POSTGRES
@pytest.mark.parametrize(("start", "horizon"), CASES)
def test_agents_sharing_a_monthly_cap_reserve_the_next_month_on_postgresql(
    write_trace: TraceWriter, postgres_ledgers: Ledgers, start: datetime, horizon: str | None
) -> None:
    committed, east_alerts = _run(write_trace, postgres_ledgers, start, horizon)
    assert committed <= CAP
    assert committed > CAP - 2 * UNIT_HOUR_USD * FEBRUARY_HOURS
    assert east_alerts and "team@2024-02-01T00:00:00+00:00" in east_alerts[0]
