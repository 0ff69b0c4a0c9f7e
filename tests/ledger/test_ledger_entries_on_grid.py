"""An entry given to a ledger that spans several 15-minute cells of the grid (``record``, ``record_many``, or what an
``update`` derives) counts in each cell, hour and budget period for its share of the time, as accrual's own entries
do: a month or an hour that starts inside it is charged for its part only, and the entry's cost is kept whole."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agent.ledger import InMemoryLedger
from agent.ledger.accrual import GRID
from agent.ledger.postgres import PostgresLedger
from agent.ledger.sqlite import SqliteLedger
from agent.planning.budget import Budget
from models import LedgerEntry
from tests.postgres.fixtures import POSTGRES, Database

Store = InMemoryLedger | SqliteLedger | PostgresLedger
NEW_MONTH = datetime(2026, 2, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgresql", marks=POSTGRES)])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "memory":
        yield InMemoryLedger()
        return
    if request.param == "sqlite":
        with SqliteLedger(tmp_path / "ledger.sqlite") as sqlite:
            yield sqlite
        return
    database: Database = request.getfixturevalue("postgres_database")
    with PostgresLedger(database.url, database.password) as postgres:
        yield postgres


def rows(store: Store, pool: str) -> list[LedgerEntry]:
    if isinstance(store, InMemoryLedger):
        return [e for e in store.entries() if e.pool_id == pool]
    return store.entries(pool)


def test_an_entry_across_a_month_start_is_charged_to_each_month_for_its_time(ledger: Store) -> None:
    """4 units at 10 USD a unit-hour from 23:30 on January 31 to 00:30 UTC: 20 USD in each month."""
    ledger.record(LedgerEntry("a100", NEW_MONTH - HOUR / 2, NEW_MONTH + HOUR / 2, 4, 40.0))
    assert ledger.spent(["a100"], NEW_MONTH - timedelta(days=31), NEW_MONTH) == pytest.approx(20.0)
    assert ledger.spent(["a100"], NEW_MONTH, NEW_MONTH + timedelta(days=28)) == pytest.approx(20.0)
    cells = [ledger.spent(["a100"], NEW_MONTH + i * GRID, NEW_MONTH + (i + 1) * GRID) for i in range(-2, 2)]
    assert cells == pytest.approx([10.0, 10.0, 10.0, 10.0])


def test_a_budget_in_a_half_hour_zone_counts_its_hour_and_month_of_an_hourly_entry(ledger: Store) -> None:
    """An entry of a whole UTC hour holds the start of a month and of an hour at UTC-03:30 (St. John's)."""
    zone = ZoneInfo("America/St_Johns")
    budget = Budget("b", frozenset({"a100"}), monthly_cap_usd=1e9, hourly_cap_usd=1e9, tz=zone)
    start = datetime(2026, 2, 1, 3, 0, tzinfo=UTC)  # 23:30 on January 31 in St. John's
    ledger.record_many([LedgerEntry("a100", start, start + HOUR, 2, 60.0)])
    now = start + HOUR
    period, hour = budget.period(now), budget.hour(now)
    assert period.start == start + HOUR / 2 and hour.start == start + HOUR / 2
    assert ledger.spent(["a100"], period.start, now) == pytest.approx(30.0)
    assert ledger.spent(["a100"], hour.start, now) == pytest.approx(30.0)
    earlier = budget.period(period.start - timedelta(microseconds=1))
    assert ledger.spent(["a100"], earlier.start, earlier.end) == pytest.approx(30.0)


def test_an_entry_a_derive_gives_across_cells_is_charged_to_each_cell(ledger: Store) -> None:
    """``update`` stores what ``derive`` gives: an entry longer than a cell is cut as ``record`` cuts it, and the
    pool's newest entry is where accrual resumes, at the same units."""
    start = NEW_MONTH - GRID - timedelta(minutes=5)
    derived = [
        LedgerEntry("v5e", start, start, 8, 0.0),
        LedgerEntry("v5e", start, start + 3 * GRID, 8, 36.0),
        LedgerEntry("v5e", start + 3 * GRID, start + 3 * GRID, 8, 0.0),
    ]
    ledger.update(["v5e"], lambda newest: derived)
    assert ledger.spent(["v5e"], NEW_MONTH - timedelta(days=31), NEW_MONTH) == pytest.approx(36.0 * 20 / 45)
    assert ledger.spent(["v5e"], NEW_MONTH, NEW_MONTH + timedelta(days=1)) == pytest.approx(36.0 * 25 / 45)
    assert ledger.last_entry("v5e") == LedgerEntry("v5e", start + 3 * GRID, start + 3 * GRID, 8, 0.0)
    charged = [e for e in rows(ledger, "v5e") if e.end > e.start]
    assert all(_cell(e.start) == _cell(e.end - timedelta(microseconds=1)) for e in charged)
    assert [e.units for e in charged] == [8] * 4


def test_the_pieces_of_an_entry_add_up_to_its_cost_and_recording_it_again_adds_nothing(ledger: Store) -> None:
    """Off-grid edges, a cost no share divides exactly, a week long: the pieces keep the entry's total."""
    start = datetime(2026, 3, 2, 9, 7, 13, 250_000, tzinfo=UTC)
    entry = LedgerEntry("h100", start, start + timedelta(days=7, minutes=3, seconds=1), 3, 12_345.678901)
    ledger.record(entry)
    ledger.record(entry)
    whole = ledger.spent(["h100"], start - timedelta(days=1), start + timedelta(days=9))
    assert whole == pytest.approx(entry.cost_usd, rel=1e-12)
    charged = [e for e in rows(ledger, "h100") if e.end > e.start]
    assert (charged[0].start, charged[-1].end) == (entry.start, entry.end)
    assert len(charged) == 7 * 96 + 1  # the first and last cells in part
    assert sum(e.cost_usd for e in charged) == pytest.approx(entry.cost_usd, rel=1e-12)
    full = [e.cost_usd for e in charged[1:-1]]
    assert full == pytest.approx([entry.cost_usd * (GRID / (entry.end - entry.start))] * len(full), rel=1e-9)


def test_an_opening_mark_is_stored_as_given(ledger: Store) -> None:
    ledger.record(LedgerEntry("a100", NEW_MONTH, NEW_MONTH, 5, 0.0))
    assert rows(ledger, "a100") == [LedgerEntry("a100", NEW_MONTH, NEW_MONTH, 5, 0.0)]


def _cell(at: datetime) -> datetime:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + ((at - epoch) // GRID) * GRID
