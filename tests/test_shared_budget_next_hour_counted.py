"""The next hour's reservations another agent made before it began count in this agent's projection of that hour.

West and east share a cap of 100 USD an hour and each holds 8 busy units at 8 USD a unit-hour. At 12:55 east's
commit reserves its units in what is left of the hour (under ``team/hourly``) and in the next hour (under
``team/hourly@13:00``, made before that hour is the current one). At 13:00 west ticks first, before east has
reserved the new hour under its plain key: the only reservation of east's that pays for 13:00-14:00 is the one keyed
by the hour's start, and west's projection of the hour counts it (``reserved_elsewhere_usd`` 64 USD, east's 8 units
over the hour), not nothing. On PostgreSQL (a real server, each agent its own connection) and on one in-process
ledger both agents write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database

LATE = datetime(2024, 1, 15, 12, 55, tzinfo=UTC)
NEXT_HOUR = datetime(2024, 1, 15, 13, tzinfo=UTC)
FLEET = 8


def _west_counts_at_13(write_trace: TraceWriter, ledgers: rig.Ledgers) -> float | None:
    """East ticks at 12:55, west at 13:00 (first that hour): what west's hourly snapshot counts as east's."""
    trace = write_trace({"train": [64.0] * 60}, start=(LATE - timedelta(hours=2)).isoformat())
    west, east = (
        rig.member(rig.shared_budget_config(own, other, hourly_cap_usd=100.0), own, trace, ledger, LATE, FLEET)
        for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
    )
    rig.tick([east], LATE)
    report = rig.tick([west], NEXT_HOUR)["west"]
    assert report.plan is not None
    [hourly] = [b for b in report.plan.budgets if b.budget == "team/hourly"]
    return hourly.reserved_elsewhere_usd


@POSTGRES
def test_on_postgresql(write_trace: TraceWriter, postgres_database: Database) -> None:
    with rig.postgres_ledgers(postgres_database) as ledgers:
        assert _west_counts_at_13(write_trace, ledgers) == pytest.approx(FLEET * rig.UNIT_HOUR_USD)


def test_in_memory(write_trace: TraceWriter) -> None:
    assert _west_counts_at_13(write_trace, rig.memory_ledgers()) == pytest.approx(FLEET * rig.UNIT_HOUR_USD)
