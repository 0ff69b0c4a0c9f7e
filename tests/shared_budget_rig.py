"""Two agents, west and east, sharing one budget: the set-up of the shared-budget tests.

Each agent owns one pool (8 chips a unit at 1 USD a chip-hour: 8 USD a unit-hour, a persistence forecast on a
5-minute tick) and counts the other's as a remote pool of the budget ``team``, whose caps each test chooses. The
agents write one in-process ledger, or each its own connection to one PostgreSQL ledger; each runs on its own
simulated clock and cluster, and they tick in turn at the same times."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from actuators import SimulatedCluster
from agent.ledger import InMemoryLedger
from agent.ledger.base import Ledger
from agent.ledger.postgres import PostgresLedger
from agent.loop import Agent, AgentParts, TickReport
from agent.notify import RecordingNotifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models import AlertKind
from models.clock import SimulatedClock
from tests.postgres.fixtures import Database

UNIT_HOUR_USD = 8.0  # 8 chips at 1 USD a chip-hour
PAIRS = (("west", "east"), ("east", "west"))  # each agent's own pool and the other's, west first

Ledgers = tuple[Ledger, Ledger]  # west's and east's: one ledger, or two connections to one


def shared_budget_config(own: str, other: str, **caps: Any) -> dict[str, Any]:
    """The configuration of the agent owning ``own``, in the budget ``team`` shared with ``other``, with ``caps``
    (``hourly_cap_usd``, ``monthly_cap_usd``, ``commit_horizon``) as the budget's."""
    return {
        "demand_classes": [{"name": "train"}],
        "pools": [{"id": own, "kind": "gpu-node-pool", "tier": "on-demand", "chips_per_unit": 8, "min_units": 0,
                   "max_units": 16, "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["train"]}],
        "forecast": {"model": "persistence", "history": "1h", "step": "5m", "max_staleness": "10m"},
        "loop": {"tick_interval": "5m"},
        "budgets": [{"name": "team", "pools": [own], "remote_pools": [other], **caps}],
    }  # fmt: skip


def memory_ledgers() -> Ledgers:
    """One in-process ledger both agents write."""
    ledger = InMemoryLedger()
    return ledger, ledger


@contextmanager
def postgres_ledgers(database: Database) -> Iterator[Ledgers]:
    """Two connections to one PostgreSQL ledger, closed on leaving."""
    west = PostgresLedger(database.url, database.password)
    east = PostgresLedger(database.url, database.password)
    try:
        yield west, east
    finally:
        west.close()
        east.close()


@dataclass(frozen=True)
class Member:
    """One agent of the pair, with the simulated clock and cluster it runs on."""

    name: str
    agent: Agent
    clock: SimulatedClock
    cluster: SimulatedCluster


def member(config: dict[str, Any], own: str, trace: Path, ledger: Ledger, start: datetime, units: int = 0) -> Member:
    """The agent of ``config``, holder ``own``, replaying ``trace``, its pool holding ``units`` at ``start``."""
    settings = settings_from_mapping(config, source=f"{own} config")
    clock = SimulatedClock(start)
    cluster = SimulatedCluster(settings.pool_specs(), clock, {own: units})
    forecaster = build_forecaster(settings.forecast)
    parts = AgentParts(TraceSource(read_trace(trace)), forecaster, cluster, ledger, RecordingNotifier())
    return Member(own, Agent(settings, parts, holder=own), clock, cluster)


def tick(members: Sequence[Member], now: datetime) -> dict[str, TickReport]:
    """Every agent's tick at ``now``, in order, each on its clock set to ``now``: the reports by agent."""
    reports = {}
    for one in members:
        one.clock.set(now)
        reports[one.name] = one.agent.run_once(now)
    return reports


def refused(report: TickReport) -> list[str]:
    """The summaries of the tick's alerts that a budget reservation was refused."""
    return [a.summary for a in report.alerts if a.kind is AlertKind.BUDGET_RESERVATION_REFUSED]
