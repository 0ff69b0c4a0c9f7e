"""Agents sharing a budget's hourly cap reserve the next hour too, not only what is left of this one.

The planner holds an hourly cap over the whole next hour as well (a rate: a scale-up late in an hour, cheap against
the minutes left, would break the next hour the moment it starts), but it counts only this agent's pools there. Two
agents, west and east, share an hourly cap of 100 USD and each wants 8 units at 8 USD a unit-hour (64 USD an hour):
one fleet fits the rate, two do not. At 12:30 both reserved only the half hour left (32 USD each), so both were
granted, and from 13:00 they spent 128 USD an hour. The reservations now cover the following hour too, keyed by
the hour they are for, so that east is granted only what the rate leaves beside west. Run on one in-process ledger
both agents write, and on two connections to one PostgreSQL ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database

START = datetime(2024, 1, 15, 12, 30, tzinfo=UTC)
HOURLY_CAP = 100.0  # USD: room for one fleet of 8 units at 8 USD a unit-hour (64 USD), not two
NEXT_HOUR = (datetime(2024, 1, 15, 13, tzinfo=UTC), datetime(2024, 1, 15, 14, tzinfo=UTC))


def _run(write_trace: TraceWriter, ledgers: rig.Ledgers) -> tuple[float, list[str]]:
    """Both agents demand 64 chips from 12:30, ticking every 5 minutes to 14:00: the spend of the hour from 13:00,
    and the reservation alerts east raised."""
    trace = write_trace({"train": [64.0] * 60}, start=(START - timedelta(hours=2)).isoformat(), step="5min")
    agents = [
        rig.member(rig.shared_budget_config(own, other, hourly_cap_usd=HOURLY_CAP), own, trace, ledger, START)
        for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
    ]
    east_alerts: list[str] = []
    now = START
    while now <= NEXT_HOUR[1]:
        east_alerts += rig.refused(rig.tick(agents, now)["east"])
        now += timedelta(minutes=5)
    return ledgers[0].spent(["west", "east"], *NEXT_HOUR), east_alerts


def test_agents_sharing_an_hourly_cap_reserve_the_next_hour_in_memory(write_trace: TraceWriter) -> None:
    spent, east_alerts = _run(write_trace, rig.memory_ledgers())
    assert spent <= HOURLY_CAP
    assert spent > HOURLY_CAP - rig.UNIT_HOUR_USD  # east was granted the units the rate leaves, not held at none
    assert east_alerts and "team/hourly@2024-01-15T13:00:00+00:00" in east_alerts[0]


@POSTGRES
def test_agents_sharing_an_hourly_cap_reserve_the_next_hour_on_postgresql(
    write_trace: TraceWriter, postgres_database: Database
) -> None:
    with rig.postgres_ledgers(postgres_database) as ledgers:
        spent, east_alerts = _run(write_trace, ledgers)
    assert spent <= HOURLY_CAP
    assert spent > HOURLY_CAP - rig.UNIT_HOUR_USD
    assert east_alerts and "team/hourly@2024-01-15T13:00:00+00:00" in east_alerts[0]
