"""A pool whose state cannot be read for a tick keeps its standing reservation in a budget shared with other agents.

The units a pool holds are reserved every tick to the end of the budget's period (``BudgetReserver.commit``), in
place of the deployment's previous standing reservations. A tick that cannot read a pool still bills its units: it
is held at the units the tick's spend counted it at (the ledger's last record of it), so another agent never sees
that room free. Two agents, west and east, share one monthly cap with room for one 8-unit fleet to the month's
end; west grows to 8 units first, one read of its pool fails, and east, growing then, must be refused the room.
Run on one in-process ledger both agents write, and on two connections to one PostgreSQL ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.budget_watch import BudgetWatch
from agent.ledger import InMemoryLedger
from config import settings_from_mapping
from models import CapacityPlan, PoolState, TransientActuatorError
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database

START = datetime(2024, 1, 15, 12, tzinfo=UTC)
MONTH_END = datetime(2024, 2, 1, tzinfo=UTC)
FLEET = 8  # the units each agent's demand (64 chips) asks for
HOURS_TO_MONTH_END = (MONTH_END - START) / timedelta(hours=1)
CAP = 1.5 * FLEET * rig.UNIT_HOUR_USD * HOURS_TO_MONTH_END  # one fleet to the month's end, not two
FAILED_READ = START + timedelta(minutes=30)
END = START + timedelta(minutes=40)


def _run(write_trace: TraceWriter, ledgers: rig.Ledgers) -> tuple[list[str], int, float]:
    """West's demand is 64 chips from the start, east's from 12:25; west's pool cannot be read at 12:30. The alerts
    east raised about its reservations, the units east ends with, and the spend both agents committed: recorded,
    and their last units to the month's end."""
    t0 = (START - timedelta(hours=2)).isoformat()
    traces = {
        "west": write_trace({"train": [64.0] * 60}, start=t0, step="5min", name="west.csv"),
        "east": write_trace({"train": [0.0] * 29 + [64.0] * 31}, start=t0, step="5min", name="east.csv"),
    }
    agents = [
        rig.member(rig.shared_budget_config(own, other, monthly_cap_usd=CAP), own, traces[own], ledger, START)
        for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
    ]
    east_alerts: list[str] = []
    now = START
    while now <= END:
        failure = TransientActuatorError("west", "HTTP 503 from the node pool API") if now == FAILED_READ else None
        agents[0].cluster.fail_reads("west", failure)
        east_alerts += rig.refused(rig.tick(agents, now)["east"])
        now += timedelta(minutes=5)
    ledger = ledgers[0]
    last = {p: ledger.last_entry(p) for p in ("west", "east")}
    units = {p: 0 if e is None else e.units for p, e in last.items()}
    hours_left = (MONTH_END - now) / timedelta(hours=1)
    committed = ledger.spent(["west", "east"], START, now) + sum(units.values()) * rig.UNIT_HOUR_USD * hours_left
    return east_alerts, units["east"], committed


def test_an_unread_pool_keeps_its_standing_reservation_in_memory(write_trace: TraceWriter) -> None:
    east_alerts, east_units, committed = _run(write_trace, rig.memory_ledgers())
    assert committed <= CAP
    # west's fleet stays reserved: east is granted only the half fleet the cap leaves beside it, and told so
    assert east_units <= FLEET // 2 and east_alerts


@POSTGRES
def test_an_unread_pool_keeps_its_standing_reservation_on_postgresql(
    write_trace: TraceWriter, postgres_database: Database
) -> None:
    with rig.postgres_ledgers(postgres_database) as ledgers:
        east_alerts, east_units, committed = _run(write_trace, ledgers)
    assert committed <= CAP
    assert east_units <= FLEET // 2 and east_alerts


def test_an_unread_pool_is_kept_reserved_at_its_last_read_units_then_its_record_else_at_nothing() -> None:
    """At the units the agent last read the pool at (``Agent.last_read_units``), else at those the ledger last
    recorded it holding; known by neither (unread since the first tick), at nothing: its max_units to the month's
    end would shut the other agents out of room it may never use."""
    settings = settings_from_mapping(
        rig.shared_budget_config("west", "east", monthly_cap_usd=CAP), source="west config"
    )
    ledger = InMemoryLedger()
    watch = BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, ledger, "west")
    hour = timedelta(hours=1)

    def reserved_units(at: datetime) -> float:
        return ledger.reserved("team", at) / (rig.UNIT_HOUR_USD * ((MONTH_END - at) / hour))

    watch.observe(START, {})
    watch.acted(START, CapacityPlan(START), [], {})
    assert ledger.reserved("team", START) == 0.0
    later = START + timedelta(minutes=5)
    watch.observe(later, {}, last_read={"west": 5})
    watch.acted(later, CapacityPlan(later), [], {})
    assert reserved_units(later) == pytest.approx(5)
    read = later + timedelta(minutes=5)
    watch.observe(read, {"west": PoolState("west", read, 3, 3)})
    watch.acted(read, CapacityPlan(read), [], {"west": PoolState("west", read, 3, 3)})
    unread = read + timedelta(minutes=5)
    watch.observe(unread, {})
    watch.acted(unread, CapacityPlan(unread), [], {})
    assert reserved_units(unread) == pytest.approx(3)
    again = unread + timedelta(minutes=5)
    watch.observe(again, {}, last_read={"west": 4})  # a resize carried out since the read: the agent knows better
    watch.acted(again, CapacityPlan(again), [], {})
    assert reserved_units(again) == pytest.approx(4)
