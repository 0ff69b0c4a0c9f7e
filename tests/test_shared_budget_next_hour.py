"""Agents sharing a budget's hourly cap reserve the next hour too, not only what is left of this one.

The planner holds an hourly cap over the whole next hour as well (a rate: a scale-up late in an hour, cheap against
the minutes left, would break the next hour the moment it starts), but it counts only this agent's pools there. Two
agents, west and east, share an hourly cap of 100 USD and each wants 8 units at 8 USD a unit-hour (64 USD an hour):
one fleet fits the rate, two do not. At 12:30 both reserved only the half hour left (32 USD each), so both were
granted, and from 13:00 they spent 128 USD an hour. The reservations now cover the following hour too, keyed by
the hour they are for, so that east is granted only what the rate leaves beside west. Run on one in-process ledger
both agents write, and on two connections to one PostgreSQL ledger."""

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

START = datetime(2024, 1, 15, 12, 30, tzinfo=UTC)
HOURLY_CAP = 100.0  # USD: room for one fleet of 8 units at 8 USD a unit-hour (64 USD), not two
UNIT_HOUR_USD = 8.0
NEXT_HOUR = (datetime(2024, 1, 15, 13, tzinfo=UTC), datetime(2024, 1, 15, 14, tzinfo=UTC))

Ledgers = tuple[Ledger, Ledger]  # west's and east's: one ledger, or two connections to one


def _config(own: str, other: str) -> dict[str, Any]:
    return {
        "demand_classes": [{"name": "train"}],
        "pools": [{"id": own, "kind": "gpu-node-pool", "tier": "on-demand", "chips_per_unit": 8, "min_units": 0,
                   "max_units": 16, "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["train"]}],
        "forecast": {"model": "persistence", "history": "1h", "step": "5m", "max_staleness": "10m"},
        "loop": {"tick_interval": "5m"},
        "budgets": [{"name": "team", "pools": [own], "remote_pools": [other], "hourly_cap_usd": HOURLY_CAP}],
    }  # fmt: skip


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


def _run(write_trace: TraceWriter, ledgers: Ledgers) -> tuple[float, list[str]]:
    """Both agents demand 64 chips from 12:30, ticking every 5 minutes to 14:00: the spend of the hour from 13:00,
    and the reservation alerts east raised."""
    trace = write_trace({"train": [64.0] * 60}, start=(START - timedelta(hours=2)).isoformat(), step="5min")
    agents: list[tuple[Agent, SimulatedClock]] = []
    for ledger, (own, other) in zip(ledgers, (("west", "east"), ("east", "west")), strict=True):
        settings = settings_from_mapping(_config(own, other), source=f"{own} config")
        clock = SimulatedClock(START)
        cluster = SimulatedCluster(settings.pool_specs(), clock, {own: 0})
        forecaster = build_forecaster(settings.forecast)
        parts = AgentParts(TraceSource(read_trace(trace)), forecaster, cluster, ledger, RecordingNotifier())
        agents.append((Agent(settings, parts, holder=own), clock))
    east_alerts: list[str] = []
    now = START
    while now <= NEXT_HOUR[1]:
        for agent, clock in agents:
            clock.set(now)
            report = agent.run_once(now)
            if agent is agents[1][0]:
                east_alerts += [a.summary for a in report.alerts if a.kind is AlertKind.BUDGET_RESERVATION_REFUSED]
        now += timedelta(minutes=5)
    return ledgers[0].spent(["west", "east"], *NEXT_HOUR), east_alerts


def test_agents_sharing_an_hourly_cap_reserve_the_next_hour_in_memory(
    write_trace: TraceWriter, memory_ledgers: Ledgers
) -> None:
    spent, east_alerts = _run(write_trace, memory_ledgers)
    assert spent <= HOURLY_CAP
    assert spent > HOURLY_CAP - UNIT_HOUR_USD  # east was granted the units the rate leaves, not held at none
    assert east_alerts and "team/hourly@2024-01-15T13:00:00+00:00" in east_alerts[0]


@POSTGRES
def test_agents_sharing_an_hourly_cap_reserve_the_next_hour_on_postgresql(
    write_trace: TraceWriter, postgres_ledgers: Ledgers
) -> None:
    spent, east_alerts = _run(write_trace, postgres_ledgers)
    assert spent <= HOURLY_CAP
    assert spent > HOURLY_CAP - UNIT_HOUR_USD
    assert east_alerts and "team/hourly@2024-01-15T13:00:00+00:00" in east_alerts[0]
