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

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database

FEBRUARY = (datetime(2024, 2, 1, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC))
FLEET = 8  # the units each agent's demand (64 chips) asks for
FEBRUARY_HOURS = (FEBRUARY[1] - FEBRUARY[0]) / timedelta(hours=1)
CAP = 1.5 * FLEET * rig.UNIT_HOUR_USD * FEBRUARY_HOURS  # one fleet for the month and half another, not two
END = FEBRUARY[0] + timedelta(hours=1)


def _config(own: str, other: str, horizon: str | None) -> dict[str, Any]:
    horizons = {} if horizon is None else {"commit_horizon": horizon}
    return rig.shared_budget_config(own, other, monthly_cap_usd=CAP, **horizons)


def _run(
    write_trace: TraceWriter, ledgers: rig.Ledgers, start: datetime, horizon: str | None
) -> tuple[float, list[str]]:
    """Both agents demand 64 chips from ``start``, ticking every 5 minutes to 01:00 on February 1: what they committed
    for February (recorded, and their last units to its end), and the reservation alerts east raised."""
    trace = write_trace({"train": [64.0] * 60}, start=(start - timedelta(hours=2)).isoformat(), step="5min")
    agents = [
        rig.member(_config(own, other, horizon), own, trace, ledger, start)
        for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
    ]
    east_alerts: list[str] = []
    now = start
    while now <= END:
        east_alerts += rig.refused(rig.tick(agents, now)["east"])
        now += timedelta(minutes=5)
    ledger = ledgers[0]
    units = 0
    for pool in ("west", "east"):
        entry = ledger.last_entry(pool)
        units += 0 if entry is None else entry.units
    hours_left = (FEBRUARY[1] - END) / timedelta(hours=1)
    return ledger.spent(["west", "east"], FEBRUARY[0], END) + units * rig.UNIT_HOUR_USD * hours_left, east_alerts


# a commit horizon reaches February from 23:30; without one, a unit bought is held 25 minutes at least: from 23:40
CASES = [(datetime(2024, 1, 31, 23, 30, tzinfo=UTC), "30d"), (datetime(2024, 1, 31, 23, 40, tzinfo=UTC), None)]


@pytest.mark.parametrize(("start", "horizon"), CASES)
def test_agents_sharing_a_monthly_cap_reserve_the_next_month_in_memory(
    write_trace: TraceWriter, start: datetime, horizon: str | None
) -> None:
    committed, east_alerts = _run(write_trace, rig.memory_ledgers(), start, horizon)
    assert committed <= CAP
    assert committed > CAP - 2 * rig.UNIT_HOUR_USD * FEBRUARY_HOURS  # east was granted what the cap leaves, not none
    assert east_alerts and "team@2024-02-01T00:00:00+00:00" in east_alerts[0]


@POSTGRES
@pytest.mark.parametrize(("start", "horizon"), CASES)
def test_agents_sharing_a_monthly_cap_reserve_the_next_month_on_postgresql(
    write_trace: TraceWriter, postgres_database: Database, start: datetime, horizon: str | None
) -> None:
    with rig.postgres_ledgers(postgres_database) as ledgers:
        committed, east_alerts = _run(write_trace, ledgers, start, horizon)
    assert committed <= CAP
    assert committed > CAP - 2 * rig.UNIT_HOUR_USD * FEBRUARY_HOURS
    assert east_alerts and "team@2024-02-01T00:00:00+00:00" in east_alerts[0]
