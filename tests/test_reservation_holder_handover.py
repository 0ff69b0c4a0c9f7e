"""The standing reservations of a budget shared with other agents (``remote_pools``) belong to the deployment, not to
the replica that made them: on one PostgreSQL ledger, a new leader's first commit replaces the old leader's standing
reservations instead of adding its own beside them until ``reservation_ttl``, and the standing reservations of
another deployment (which names its Lease the same, as every install does) are left as they are.

The replicas are daemons assembled as the ``run`` command assembles them, each with its own pod name and its own
connection to the ledger; the ticks' money side is driven through their budget watch as the loop drives it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from actuators import SimulatedCluster
from agent.budget_watch import BudgetWatch
from agent.daemon.wiring import DaemonParts, assemble
from agent.ledger import InMemoryLedger
from agent.ledger.postgres import PostgresLedger
from agent.ledger.reservations import ReservationRequest
from agent.notify import RecordingNotifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from forecasting import PersistenceForecaster
from models import CapacityPlan, LedgerEntry, PoolState, Resize
from models.clock import SimulatedClock
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database

pytestmark = POSTGRES
NOW = datetime(2024, 3, 15, 12, tzinfo=UTC)  # 396 hours before the month ends
MONTH_START, MONTH_END = datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 4, 1, tzinfo=UTC)
PRICE = 10.0  # USD a unit-hour: a unit held to the period's end costs 3,960 USD from NOW
CAP, SPENT = 100_000.0, 20_000.0
WEST, EAST = "a100-prod", "b-h100"


def _settings(own: str, other: str) -> dict[str, Any]:
    return {
        "demand_classes": [{"name": "train"}],
        "pools": [{"id": own, "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 40, "lead_time": "10m",
                   "price_per_unit_hour_usd": PRICE, "serves": ["train"]}],
        "budgets": [{"name": "shared", "monthly_cap_usd": CAP, "pools": [own], "remote_pools": [other]}],
        "forecast": {"model": "persistence", "history": "1h", "step": "5m", "max_staleness": "10m"},
        "loop": {"tick_interval": "5m"},
        "daemon": {"leader_election": {"enabled": False}, "endpoints": {"bind_address": "127.0.0.1", "port": 0}},
    }  # fmt: skip


def _replica(raw: dict[str, Any], pod: str, trace: Path, ledger: PostgresLedger) -> BudgetWatch:
    """A replica of the deployment ``raw`` describes, named ``pod``: its agent's budget watch."""
    settings = settings_from_mapping(raw, source=f"{pod} config")
    clock = SimulatedClock(NOW)
    parts = DaemonParts(
        source=TraceSource(read_trace(trace)),
        actuator=SimulatedCluster(settings.pool_specs(), clock),
        ledger=ledger,
        notifier=RecordingNotifier(),
        clock=clock,
        forecaster=PersistenceForecaster(),
    )
    assembled = assemble(settings, "enforce", parts, {"POD_NAME": pod, "POD_NAMESPACE": "leadtime"})
    assembled.endpoints.stop()  # the money side is driven directly: no socket needed
    return assembled.loop.agent.budget_watch


def _holding(watch: BudgetWatch, at: datetime, pool_id: str, units: int) -> None:
    """The end of a tick that carried out nothing, its pool billing ``units``: the units held are reserved."""
    state = PoolState(pool_id, at, ready_units=units, target_units=units)
    watch.acted(at, CapacityPlan(at), [], {pool_id: state})


def _to_month_end(at: datetime, units: int) -> float:
    return units * PRICE * (MONTH_END - at) / timedelta(hours=1)


def _holders(database: Database) -> list[str]:
    with psycopg.connect(database.url, password=database.password) as db:
        return [str(h) for (h,) in db.execute("SELECT holder FROM leadtime_budget_reservations ORDER BY id")]


@pytest.fixture
def ledgers(postgres_database: Database) -> Iterator[list[PostgresLedger]]:
    """One connection per replica, and 20,000 USD already spent this month in the deployment's pool."""
    ledgers = [PostgresLedger(postgres_database.url, postgres_database.password) for _ in range(3)]
    try:
        ledgers[0].record(LedgerEntry(WEST, MONTH_START, NOW, 10, SPENT))
        yield ledgers
    finally:
        for ledger in ledgers:
            ledger.close()


@pytest.fixture
def trace(write_trace: TraceWriter) -> Path:
    return write_trace({"train": [80.0] * 24}, start=(NOW - timedelta(hours=2)).isoformat())


def test_a_new_leader_replaces_the_standing_reservations_of_the_one_before(
    ledgers: list[PostgresLedger], trace: Path, postgres_database: Database
) -> None:
    old = _replica(_settings(WEST, EAST), "leadtime-7f9c-a", trace, ledgers[0])
    _holding(old, NOW, WEST, 10)
    assert ledgers[0].reserved("shared", NOW) == pytest.approx(_to_month_end(NOW, 10))  # 39,600

    # the old leader stops renewing (its pod is gone); a minute later the other replica leads and holds the same units
    later = NOW + timedelta(minutes=1)
    new = _replica(_settings(WEST, EAST), "leadtime-7f9c-b", trace, ledgers[1])
    _holding(new, later, WEST, 10)

    reserved = ledgers[2].reserved("shared", later)
    assert reserved == pytest.approx(_to_month_end(later, 10))  # 39,598.33, not 79,198.33 with the old leader's
    assert _holders(postgres_database) == [f"leadtime (units held of {WEST})"]  # the deployment's, no pod's name

    # 10 -> 15: 40,401.67 USD of room fits the 5 units (3,959.83 each); with the old leader's units counted twice
    # only 801.67 was left, and the scale-up was held
    resize = Resize(WEST, 10, 15, "forecast", f"{WEST}@{later.isoformat()}->15")
    granted = new.reserve(later, CapacityPlan(later, resizes=(resize,), targets={WEST: 15})).plan
    assert [(r.from_units, r.to_units) for r in granted.resizes] == [(10, 15)]
    assert not granted.skips
    assert ledgers[2].reserved("shared", later) == pytest.approx(_to_month_end(later, 15))
    assert SPENT + ledgers[2].reserved("shared", later) <= CAP


def test_two_deployments_sharing_the_budget_still_add_up(
    ledgers: list[PostgresLedger], trace: Path, postgres_database: Database
) -> None:
    west = _replica(_settings(WEST, EAST), "leadtime-west-a", trace, ledgers[0])
    east = _replica(_settings(EAST, WEST), "leadtime-east-a", trace, ledgers[1])  # the same Lease name, `leadtime`
    _holding(west, NOW, WEST, 10)
    _holding(east, NOW, EAST, 4)
    assert ledgers[2].reserved("shared", NOW) == pytest.approx(_to_month_end(NOW, 14))

    # each deployment's next tick (west's on its other replica) replaces its own standing reservations only
    later = NOW + timedelta(minutes=5)
    _holding(_replica(_settings(WEST, EAST), "leadtime-west-b", trace, ledgers[2]), later, WEST, 8)
    assert ledgers[2].reserved("shared", later) == pytest.approx(_to_month_end(later, 8) + _to_month_end(NOW, 4))
    _holding(east, later, EAST, 6)
    assert ledgers[2].reserved("shared", later) == pytest.approx(_to_month_end(later, 8 + 6))
    assert sorted(_holders(postgres_database)) == [
        f"leadtime (units held of {WEST})",
        f"leadtime (units held of {EAST})",
    ]

    # and the cap holds both: 100,000 - 20,000 - 55,428.33 leaves 24,571.67, room for 6 more units at 3,959.17
    resize = Resize(EAST, 6, 14, "forecast", f"{EAST}@{later.isoformat()}->14")
    granted = east.reserve(later, CapacityPlan(later, resizes=(resize,), targets={EAST: 14})).plan
    assert [(r.from_units, r.to_units) for r in granted.resizes] == [(6, 12)]
    assert SPENT + ledgers[2].reserved("shared", later) <= CAP


def test_the_book_of_a_single_writer_replaces_a_holders_reservations_too() -> None:
    ledger = InMemoryLedger()

    def ask(holder: str, amount: float) -> ReservationRequest:
        return ReservationRequest("shared", (WEST,), MONTH_START, MONTH_END, CAP, amount, holder, timedelta(hours=1))

    ledger.reserve_many([ask("west (units held)", 30_000.0), ask("east (units held)", 10_000.0)], NOW)
    ledger.reserve_many([ask("west (units held)", 31_000.0)], NOW, replacing_holder="west (units held)")
    assert ledger.reserved("shared", NOW) == pytest.approx(41_000.0)
    assert ledger.reserve_many([], NOW, replacing_holder="east (units held)") == []
    assert ledger.reserved("shared", NOW) == pytest.approx(31_000.0)
