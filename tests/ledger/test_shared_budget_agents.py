"""Two clusters, two agents, one budget on one PostgreSQL ledger: each asks at the same moment for a scale-up costing
more than half of what is left of the cap. The reservations decide: exactly one agent carries out its scale-up in
full, the other trims it to what is left (or holds) with a budget skip and an alert, and what both clusters then
run never costs more than the cap allows. A ledger that cannot reserve fails the tick: nothing is carried out until
it can again.

Each round is seeded: the spend already recorded this month and how much of a second scale-up the cap has room
for. The agents are the real loop (planner, reservation, executor) on simulated pools and a trace source."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from actuators import SimulatedCluster
from agent.ledger import InMemoryLedger, Ledger
from agent.ledger.postgres import PostgresLedger
from agent.loop import Agent, AgentParts, TickReport
from agent.notify import RecordingNotifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models import AlertKind, LedgerEntry, LedgerUnavailable, SkipReason
from models.clock import SimulatedClock
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database

pytestmark = POSTGRES
NOW = datetime(2024, 1, 15, 12, 0, tzinfo=UTC)
MONTH = (datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 2, 1, tzinfo=UTC))
CHIPS, PRICE_PER_CHIP = 8, 1.0
UNIT_TO_MONTH_END = CHIPS * PRICE_PER_CHIP * (MONTH[1] - NOW) / timedelta(hours=1)  # what one more unit adds
ROUNDS = 8


def config(cluster: str, other: str, round_: int, cap: float | None) -> dict[str, Any]:
    budgets = (
        []
        if cap is None
        else [
            {
                "name": f"team-{round_}",
                "pools": [f"{cluster}-{round_}"],
                "remote_pools": [f"{other}-{round_}"],
                "monthly_cap_usd": cap,
            }
        ]
    )
    return {
        "demand_classes": [{"name": "train"}],
        "pools": [{"id": f"{cluster}-{round_}", "kind": "gpu-node-pool", "tier": "on-demand",
                   "chips_per_unit": CHIPS, "min_units": 0, "max_units": 16,
                   "price_per_chip_hour_usd": PRICE_PER_CHIP, "lead_time": "10m", "serves": ["train"]}],
        "forecast": {"model": "persistence", "history": "1h", "step": "5m", "max_staleness": "10m"},
        "loop": {"tick_interval": "5m"},
        "budgets": budgets,
    }  # fmt: skip


def agent(raw: dict[str, Any], trace: Path, ledger: Ledger, holder: str) -> Agent:
    settings = settings_from_mapping(raw, source=f"{holder} config")
    cluster = SimulatedCluster(
        settings.pool_specs(), SimulatedClock(NOW), dict.fromkeys((p.id for p in settings.pools), 0)
    )
    parts = AgentParts(
        TraceSource(read_trace(trace)), build_forecaster(settings.forecast), cluster, ledger, RecordingNotifier()
    )
    return Agent(settings, parts, holder=holder)


def at_once(agents: list[Agent]) -> list[TickReport]:
    """One tick of every agent, each in its own thread, released together."""
    start = threading.Barrier(len(agents))

    def tick(one: Agent) -> TickReport:
        start.wait(timeout=60)
        return one.run_once(NOW)

    with ThreadPoolExecutor(max_workers=len(agents)) as pool:
        return list(pool.map(tick, agents, timeout=120))


def added_units(report: TickReport) -> int:
    return sum(r.to_units - r.from_units for r in report.plan.resizes if r.is_scale_up)


def test_two_agents_racing_for_one_budget_never_both_get_the_last_dollars(
    postgres_database: Database, write_trace: TraceWriter
) -> None:
    trace = write_trace({"train": [64.0] * 36}, start=(NOW - timedelta(hours=2)).isoformat(), step="5min")
    wanted = added_units(agent(config("west", "east", 0, None), trace, InMemoryLedger(), "probe").run_once(NOW))
    assert wanted > 0
    ask = wanted * UNIT_TO_MONTH_END
    ledgers = [PostgresLedger(postgres_database.url, postgres_database.password) for _ in range(2)]
    try:
        for round_ in range(ROUNDS):
            seeded = random.Random(round_)
            recorded = round(seeded.uniform(8.0, 2_000.0), 2)  # one unit of west's, up to now: no gap to charge
            left = ask * seeded.uniform(1.0, 1.95)  # room for one whole scale-up, never for both
            cap = recorded + left
            ran = timedelta(hours=recorded / (CHIPS * PRICE_PER_CHIP))
            ledgers[0].record(LedgerEntry(f"west-{round_}", NOW - ran, NOW, 1, recorded))
            west = agent(config("west", "east", round_, cap), trace, ledgers[0], "west")
            east = agent(config("east", "west", round_, cap), trace, ledgers[1], "east")
            reports = at_once([west, east])

            added = [added_units(r) for r in reports]
            assert sorted(added)[1] == wanted, f"round {round_}: nobody was granted its whole scale-up: {added}"
            loser = reports[added.index(min(added))]
            assert min(added) == int((left - ask) // UNIT_TO_MONTH_END + 1e-9), f"round {round_}: {added}"
            assert any(
                s.reason is SkipReason.BUDGET and "shared with other agents" in s.detail for s in loser.plan.skips
            )
            assert [a.kind for a in loser.alerts if a.kind is AlertKind.BUDGET_RESERVATION_REFUSED]
            committed = sum(added) * UNIT_TO_MONTH_END
            reserved = ledgers[0].reserved(f"team-{round_}", NOW)
            assert recorded + committed <= cap + 1e-6
            assert ledgers[0].spent([f"west-{round_}", f"east-{round_}"], *MONTH) + reserved <= cap + 1e-6
            assert reserved == pytest.approx(committed)
    finally:
        for ledger in ledgers:
            ledger.close()


def test_a_ledger_that_cannot_reserve_holds_the_pools_until_it_can(
    postgres_database: Database, write_trace: TraceWriter
) -> None:
    trace = write_trace({"train": [64.0] * 36}, start=(NOW - timedelta(hours=2)).isoformat(), step="5min")
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger:
        west = agent(config("west", "east", 0, 1_000_000.0), trace, ledger, "west")
        with psycopg.connect(postgres_database.url, password=postgres_database.password, autocommit=True) as admin:
            # the server refuses reserving (reading the reservations still works)
            admin.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused';"
                " END $$; CREATE TRIGGER refuse BEFORE INSERT ON leadtime_budget_reservations"
                " FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
            with pytest.raises(LedgerUnavailable, match="cannot reserve in the PostgreSQL ledger"):
                west.run_once(NOW)
            assert [p.target_units for p in west.parts.actuator.list_pools()] == [0]  # held: nothing carried out
            admin.execute("DROP TRIGGER refuse ON leadtime_budget_reservations")
        later = NOW + timedelta(minutes=5)
        report = west.run_once(later)
        assert added_units(report) > 0 and [p.target_units for p in west.parts.actuator.list_pools()] != [0]
        assert ledger.reserved("team-0", later) == pytest.approx(
            added_units(report) * CHIPS * PRICE_PER_CHIP * (MONTH[1] - later) / timedelta(hours=1)
        )
