"""Budget spend read from the running per-pool period totals (``agent.ledger.postgres_totals``,
``agent.ledger.sqlite_totals``) against a plain sum, on both database ledgers.

A seeded loop of random steps (entries and marks recorded, billed intervals imported over them, across hours
and the Kolkata budget's half-hour period starts, entries changed or deleted by plain SQL as another writer would,
reservations, and the clock moving across hour and month boundaries, for a budget in UTC and one in a zone offset
by five and a half hours): after every step the meter's spend of each budget for its month and hour, ``spent``
over the same spans and over the previous month (a report's span), and every reservation's headroom equal what
the entries and bills the test itself keeps sum to. Then the
checks catch drift (a trigger dropped), and an existing SQLite file of schema 2 gets its totals once opened.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg
import pytest

from agent.ledger.billed import BilledCost
from agent.ledger.meter import SpendMeter
from agent.ledger.postgres import PostgresLedger
from agent.ledger.reservations import ReservationRequest
from agent.ledger.rows import to_us
from agent.ledger.sqlite import SqliteLedger
from agent.ledger.sqlite_schema import SCHEMA_VERSION
from agent.planning.budget import Budget
from models import LedgerEntry
from tests.postgres.fixtures import POSTGRES, Database

T0 = datetime(2024, 9, 30, 17, 0, tzinfo=UTC)  # the September period ends within the run, in both zones
POOLS = ("a100", "h100", "tpu")
BUDGETS = (
    Budget("utc", frozenset({"a100", "h100"}), monthly_cap_usd=500.0, hourly_cap_usd=60.0),
    Budget("kolkata", frozenset(POOLS), monthly_cap_usd=800.0, hourly_cap_usd=90.0, tz=ZoneInfo("Asia/Kolkata")),
)

SqlWrite = Callable[[str, tuple[object, ...]], None]


@dataclass
class Ledgers:
    """A database ledger, and plain SQL on the same database as another writer would run it."""

    ledger: PostgresLedger | SqliteLedger
    sql: SqlWrite
    drop_insert_trigger: Callable[[], None]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=POSTGRES)])
def ledgers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledgers]:
    if request.param == "postgresql":
        database: Database = request.getfixturevalue("postgres_database")
        with (
            PostgresLedger(database.url, database.password) as postgres,
            psycopg.connect(database.url, password=database.password, autocommit=True) as db,
        ):
            yield Ledgers(
                postgres,
                lambda sql, args: db.execute(sql.replace("?", "%s"), args).close(),
                lambda: db.execute(
                    "DROP TRIGGER leadtime_totals_entries_inserted_insert ON leadtime_ledger_entries"
                ).close(),
            )
        return
    path = tmp_path / "ledger.sqlite"
    with SqliteLedger(path) as sqlite, closing(sqlite3.connect(path, isolation_level=None)) as db:
        yield Ledgers(
            sqlite,
            lambda sql, args: db.execute(sql.replace("leadtime_ledger_entries", "entries"), args).close(),
            lambda: db.execute("DROP TRIGGER spend_totals_entry_inserted").close(),
        )


@dataclass
class Books:
    """What the test wrote, summed in Python: the plain sum the totals must equal."""

    bills: list[BilledCost] = field(default_factory=list)

    def bill(self, cost: BilledCost) -> None:
        """Kept as the ledgers keep a bill: a piece per quarter hour of UTC it touches, with the bill's share for
        its share of the time, each piece replacing the pieces of its pool it overlaps."""
        quarter = timedelta(minutes=15)
        cuts = [cost.start]
        while (
            edge := cuts[-1].replace(minute=cuts[-1].minute // 15 * 15, second=0, microsecond=0) + quarter
        ) < cost.end:
            cuts.append(edge)
        cuts.append(cost.end)
        for lo, hi in itertools.pairwise(cuts):
            self.bills = [b for b in self.bills if not (b.pool_id == cost.pool_id and b.start < hi and b.end > lo)]
            self.bills.append(BilledCost(cost.pool_id, lo, hi, cost.cost_usd * ((hi - lo) / (cost.end - cost.start))))

    def spent(
        self, entries: list[LedgerEntry], pools: frozenset[str] | tuple[str, ...], start: datetime, end: datetime
    ) -> float:
        def estimate(pool_ids: set[str], lo: datetime, hi: datetime) -> float:
            return sum(e.cost_usd for e in entries if e.pool_id in pool_ids and lo <= e.start < hi)

        total = estimate(set(pools), start, end)
        for b in self.bills:
            if b.pool_id in pools and b.end > start and b.start < end:
                total += (b.cost_usd if b.start >= start else 0.0) - estimate(
                    {b.pool_id}, max(b.start, start), min(b.end, end)
                )
        return total


def _minute(rng: random.Random, now: datetime) -> datetime:
    """A start on the minute within three hours before ``now`` and half an hour after it."""
    return now + timedelta(minutes=rng.randrange(-180, 30))


def record(ledgers: Ledgers, rng: random.Random, now: datetime, books: Books) -> None:
    entries = []
    for _ in range(rng.randrange(1, 6)):
        start, pool, units = _minute(rng, now), rng.choice(POOLS), rng.randrange(1, 5)
        if rng.random() < 0.25:  # a mark: a later real entry or a larger mark replaces it
            entries.append(LedgerEntry(pool, start, start, units, 0.0))
        else:
            length = timedelta(minutes=rng.randrange(1, 20))
            entries.append(LedgerEntry(pool, start, start + length, units, units * rng.uniform(0.1, 2.0)))
    ledgers.ledger.record_many(entries)


def bill(ledgers: Ledgers, rng: random.Random, now: datetime, books: Books) -> None:
    start = _minute(rng, now)
    cost = BilledCost(rng.choice(POOLS), start, start + timedelta(minutes=rng.randrange(5, 120)), rng.uniform(0, 30))
    ledgers.ledger.record_billed([cost])
    books.bill(cost)


def change_by_sql(ledgers: Ledgers, rng: random.Random, now: datetime, books: Books) -> None:
    entries = ledgers.ledger.entries()
    if not entries:
        return
    chosen = rng.choice(entries)
    key = (chosen.pool_id, to_us(chosen.start))
    if rng.random() < 0.5:
        ledgers.sql(
            "UPDATE leadtime_ledger_entries SET cost_usd = ? WHERE pool_id = ? AND start_us = ?",
            (rng.uniform(0, 5), *key),
        )
    else:
        ledgers.sql("DELETE FROM leadtime_ledger_entries WHERE pool_id = ? AND start_us = ?", key)


def reserve(ledgers: Ledgers, rng: random.Random, now: datetime, books: Books) -> None:
    entries = ledgers.ledger.entries()
    asks, expected = [], []
    for budget in BUDGETS:
        for key, (_, period, cap) in zip(("month", "hour"), budget.caps(now), strict=True):
            name = f"{budget.name}/{key}"
            asks.append(
                ReservationRequest(
                    name,
                    tuple(sorted(budget.pools)),
                    period.start,
                    period.end,
                    cap,
                    rng.uniform(0, 40),
                    "agent-a",
                    timedelta(minutes=5),
                )
            )
            recorded = books.spent(entries, budget.pools, period.start, period.end)
            expected.append(cap - recorded - ledgers.ledger.reserved(name, now))
    grants = ledgers.ledger.reserve_many(asks, now)
    for ask, grant, headroom in zip(asks, grants, expected, strict=True):
        assert grant.headroom_usd == pytest.approx(headroom, abs=1e-6), ask.budget
    ledgers.ledger.release([g.reservation_id for g in grants if g.reservation_id is not None and rng.random() < 0.7])


def assert_spend_is_the_plain_sum(ledgers: Ledgers, now: datetime, books: Books) -> None:
    ledger = ledgers.ledger
    entries = ledger.entries()
    for spend in SpendMeter(ledger, timedelta(minutes=5)).budget_spend(list(BUDGETS), now):
        budget = spend.budget
        period, hour = budget.period(now), budget.hour(now)
        month_so_far = books.spent(entries, budget.pools, period.start, now)
        hour_so_far = books.spent(entries, budget.pools, hour.start, now)
        assert spend.spent_period_usd == pytest.approx(month_so_far, abs=1e-6), (budget.name, now)
        assert spend.spent_hour_usd == pytest.approx(hour_so_far, abs=1e-6), (budget.name, now)
        pools = sorted(budget.pools)
        assert ledger.spent(pools, period.start, now) == pytest.approx(month_so_far, abs=1e-6)
        before = budget.period(period.start - timedelta(microseconds=1))
        assert ledger.spent(pools, before.start, before.end) == pytest.approx(
            books.spent(entries, budget.pools, before.start, before.end), abs=1e-6
        )


def test_spend_from_the_totals_equals_the_plain_sum_after_every_step(ledgers: Ledgers) -> None:
    rng = random.Random(20240930)
    books = Books()
    now = T0
    steps = (record, bill, change_by_sql, reserve, None)
    for _ in range(160):
        step = rng.choices(steps, weights=(6, 1, 1, 3, 3))[0]
        if step is None:  # the clock moves, across hours and the months' ends (18:30 UTC in Kolkata)
            now += timedelta(minutes=rng.randrange(0, 40))
        else:
            step(ledgers, rng, now, books)
        assert_spend_is_the_plain_sum(ledgers, now, books)
    assert now > datetime(2024, 10, 1, 1, tzinfo=UTC)  # both budgets' months turned


def test_the_check_catches_totals_that_drift(ledgers: Ledgers) -> None:
    """A total no trigger keeps up (here the insert trigger dropped) no longer equals the plain sum."""
    books, now = Books(), T0
    ledgers.ledger.record(LedgerEntry("a100", now - timedelta(minutes=10), now - timedelta(minutes=5), 1, 3.0))
    assert_spend_is_the_plain_sum(ledgers, now, books)  # the totals are added here
    ledgers.drop_insert_trigger()
    ledgers.ledger.record(LedgerEntry("a100", now - timedelta(minutes=5), now, 1, 4.0))
    with pytest.raises(AssertionError):
        assert_spend_is_the_plain_sum(ledgers, now, books)


_SCHEMA_2 = """
CREATE TABLE entries (pool_id TEXT NOT NULL, start_us INTEGER NOT NULL, end_us INTEGER NOT NULL,
    units INTEGER NOT NULL, cost_usd REAL NOT NULL, PRIMARY KEY (pool_id, start_us)) WITHOUT ROWID;
CREATE INDEX entries_by_end ON entries (pool_id, end_us);
CREATE TABLE billed (pool_id TEXT NOT NULL, start_us INTEGER NOT NULL, end_us INTEGER NOT NULL,
    cost_usd REAL NOT NULL, PRIMARY KEY (pool_id, start_us)) WITHOUT ROWID;
CREATE INDEX billed_by_end ON billed (pool_id, end_us);
PRAGMA application_id = 1279546439;
PRAGMA user_version = 2;
"""


def test_a_sqlite_file_of_schema_2_gets_its_totals_once_opened_and_its_readers_read_the_same(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    now = T0 + timedelta(hours=1, minutes=30)
    rows = [
        ("a100", T0 - timedelta(days=30), 40.0),  # the month before
        ("a100", T0, 10.0),
        ("a100", T0 + timedelta(minutes=15), 20.0),  # billed below: its bill replaces it
        ("h100", T0 + timedelta(minutes=30), 5.0),
        ("tpu", T0, 1000.0),  # not the budget's
    ]
    with sqlite3.connect(path) as db:  # as the previous release left it
        db.executescript(_SCHEMA_2)
        db.executemany(
            "INSERT INTO entries VALUES (?, ?, ?, 1, ?)", [(p, to_us(s), to_us(s) + 60_000_000, c) for p, s, c in rows]
        )
        db.execute(
            "INSERT INTO billed VALUES ('a100', ?, ?, 7.5)",
            (to_us(T0 + timedelta(minutes=15)), to_us(T0 + timedelta(minutes=30))),
        )
    db.close()
    budget = BUDGETS[0]
    with SqliteLedger(path, read_only=True) as reader:  # a standby of the old file sums the entries
        assert SpendMeter(reader, timedelta(minutes=5)).budget_spend([budget], now)[0].spent_period_usd == (
            pytest.approx(10.0 + 7.5 + 5.0)
        )
    with SqliteLedger(path) as writer:
        assert SpendMeter(writer, timedelta(minutes=5)).budget_spend([budget], now)[0].spent_period_usd == (
            pytest.approx(10.0 + 7.5 + 5.0)
        )
        with SqliteLedger(path, read_only=True) as reader:  # a standby of the upgraded file reads the totals
            writer.record(LedgerEntry("h100", now - timedelta(minutes=1), now, 1, 2.5))
            spend = SpendMeter(reader, timedelta(minutes=5)).budget_spend([budget], now)[0]
            assert spend.spent_period_usd == pytest.approx(25.0)
            assert spend.spent_hour_usd == pytest.approx(2.5)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,) == (3,)
        kept = db.execute(
            "SELECT pool_id, spent_usd FROM spend_totals WHERE period_end_us - period_start_us > ?",
            (to_us(T0 + timedelta(days=2)) - to_us(T0),),
        ).fetchall()
        assert sorted(kept) == [("a100", pytest.approx(17.5)), ("h100", pytest.approx(7.5))]
    db.close()
