"""The PostgreSQL ledger's running spend totals (``agent.ledger.postgres_totals``) against the sum over entries.

A seeded loop of random writes (entries and marks through the ledger, billed intervals imported over them, and
entries changed or deleted by plain SQL as another writer would) and reservations over a few periods: after every
step each (pool, period) total equals the ledger's ``spent`` for that pool and period, which sums the entries and
billed costs themselves, and every reservation's headroom is the cap less that sum and the live reservations.
And a ledger written by the previous schema gets correct totals once the migration that adds them has run.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from agent.ledger.billed import BilledCost
from agent.ledger.postgres import PostgresLedger
from agent.ledger.postgres_schema import MIGRATIONS, SCHEMA_VERSION
from agent.ledger.reservations import ReservationRequest
from agent.ledger.rows import from_us, to_us
from models import LedgerEntry, LedgerUnavailable
from tests.postgres.fixtures import POSTGRES, Database

Connection = psycopg.Connection[tuple[Any, ...]]

pytestmark = POSTGRES

T0 = datetime(2024, 9, 1, tzinfo=UTC)
SLOT = timedelta(minutes=15)
POOLS = ("a100", "h100", "tpu")
# Periods the reservations ask about: a month, two clock hours (one at a half-hour offset, as in a time zone
# five and a half hours from UTC) and a day; the seeded writes land inside, across and outside them.
PERIODS = (
    (T0, T0 + timedelta(days=30)),
    (T0 + timedelta(hours=2), T0 + timedelta(hours=3)),
    (T0 + timedelta(hours=2, minutes=30), T0 + timedelta(hours=3, minutes=30)),
    (T0 + timedelta(days=1), T0 + timedelta(days=2)),
)
NOW = T0 + timedelta(minutes=1)  # before every period ends: none of them is dropped


def slot(rng: random.Random) -> datetime:
    """A start on the 15-minute grid within the first six hours, or late on the first day, or on the next day."""
    return T0 + rng.choice((rng.randrange(24), 90 + rng.randrange(8), 96 + rng.randrange(8))) * SLOT


def write_entries(ledger: PostgresLedger, rng: random.Random) -> None:
    entries = []
    for _ in range(rng.randrange(1, 6)):
        start = slot(rng)
        if rng.random() < 0.3:  # a mark: a later real entry or a larger mark replaces it
            entries.append(LedgerEntry(rng.choice(POOLS), start, start, rng.randrange(1, 5), 0.0))
        else:
            units = rng.randrange(1, 5)
            entries.append(LedgerEntry(rng.choice(POOLS), start, start + SLOT, units, units * rng.uniform(0.5, 3.0)))
    ledger.record_many(entries)


def import_bill(ledger: PostgresLedger, rng: random.Random) -> None:
    start = slot(rng)
    ledger.record_billed([BilledCost(rng.choice(POOLS), start, start + rng.randrange(1, 5) * SLOT, rng.uniform(0, 20))])


def change_by_sql(db: Connection, rng: random.Random) -> None:
    """What another writer's plain SQL does: change one entry's cost, or delete one."""
    rows = db.execute("SELECT pool_id, start_us FROM leadtime_ledger_entries ORDER BY pool_id, start_us").fetchall()
    if not rows:
        return
    row = rng.choice(rows)
    if rng.random() < 0.5:
        db.execute(
            "UPDATE leadtime_ledger_entries SET cost_usd = %s WHERE pool_id = %s AND start_us = %s",
            (rng.uniform(0, 5), *row),
        )
    else:
        db.execute("DELETE FROM leadtime_ledger_entries WHERE pool_id = %s AND start_us = %s", row)


def reserve(ledger: PostgresLedger, rng: random.Random) -> None:
    pools = tuple(sorted(rng.sample(POOLS, rng.randrange(1, len(POOLS) + 1))))
    period = rng.choice(PERIODS)
    budget = f"team-{period[0].isoformat()}"
    cap = rng.uniform(0.0, 200.0)
    reserved = ledger.reserved(budget, NOW)
    expected = cap - sum(ledger.spent([pool], *period) for pool in pools) - reserved
    asked = ReservationRequest(budget, pools, *period, cap, rng.uniform(0.0, 20.0), "agent-a", timedelta(minutes=5))
    grant = ledger.reserve(asked, NOW)
    assert grant.headroom_usd == pytest.approx(expected, abs=1e-6)
    assert grant.granted == (asked.amount_usd <= grant.headroom_usd)
    if grant.reservation_id is not None and rng.random() < 0.7:
        ledger.release([grant.reservation_id])


def connect(database: Database) -> Connection:
    return psycopg.connect(database.url, password=database.password, autocommit=True)


def totals(db: Connection) -> list[tuple[str, datetime, datetime, float]]:
    rows = db.execute("SELECT pool_id, period_start_us, period_end_us, spent_usd FROM leadtime_spend_totals")
    return [(str(p), from_us(s), from_us(e), float(v)) for p, s, e, v in rows.fetchall()]


def assert_totals_are_sums(ledger: PostgresLedger, db: Connection) -> int:
    rows = totals(db)
    for pool, start, end, spent in rows:
        assert spent == pytest.approx(ledger.spent([pool], start, end), abs=1e-6), (pool, start, end)
    return len(rows)


def test_totals_equal_the_sums_over_entries_after_random_writes_bills_and_reservations(
    postgres_database: Database,
) -> None:
    rng = random.Random(20240901)
    steps = (write_entries, import_bill, reserve)
    checked = 0
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger, connect(postgres_database) as db:
        for _ in range(300):
            step = rng.choices((*steps, None), weights=(5, 1, 4, 1))[0]
            if step is None:
                change_by_sql(db, rng)
            else:
                step(ledger, rng)
            checked += assert_totals_are_sums(ledger, db)
        assert len(totals(db)) == len(POOLS) * len(PERIODS)  # every total was kept up, not recomputed
    assert checked > 1000


def test_totals_of_ended_periods_are_dropped_when_a_new_period_is_asked_for(postgres_database: Database) -> None:
    hour = (T0, T0 + timedelta(hours=1))
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger, connect(postgres_database) as db:
        ledger.record(LedgerEntry("a100", T0, T0 + SLOT, 2, 10.0))
        ledger.reserve(ReservationRequest("team", ("a100",), *hour, 100.0, 1.0, "agent-a", timedelta(minutes=5)), T0)
        assert [t[1:3] for t in totals(db)] == [hour]
        later = (hour[1], hour[1] + timedelta(hours=1))
        ask = ReservationRequest("team", ("a100",), *later, 100.0, 1.0, "agent-a", timedelta(minutes=5))
        assert ledger.reserve(ask, hour[1]).headroom_usd == pytest.approx(100.0)
        assert [t[1:3] for t in totals(db)] == [later]
        again = ReservationRequest("team", ("a100",), *hour, 100.0, 1.0, "agent-a", timedelta(minutes=5))
        assert ledger.reserve(again, hour[1]).headroom_usd == pytest.approx(100.0 - 10.0 - 1.0)  # computed again


def test_a_ledger_of_the_previous_schema_gets_its_totals_after_the_migration(postgres_database: Database) -> None:
    previous = SCHEMA_VERSION - 1
    month = (T0, T0 + timedelta(days=30))
    with connect(postgres_database) as db:
        db.execute(
            "CREATE TABLE leadtime_schema_migrations"
            " (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, statements in MIGRATIONS[:previous]:
            for statement in statements:
                db.execute(statement)
            db.execute("INSERT INTO leadtime_schema_migrations (version) VALUES (%s)", (version,))
        rows = [
            ("a100", T0 - SLOT, 40.0),  # the month before
            ("a100", T0, 10.0),
            ("a100", T0 + SLOT, 20.0),  # billed below: its bill replaces it
            ("h100", T0 + timedelta(days=3), 5.0),
            ("tpu", T0, 1000.0),  # not the budget's
        ]
        db.execute(
            "INSERT INTO leadtime_ledger_entries SELECT p, s, s + %s, 1, c"
            " FROM unnest(%s::text[], %s::bigint[], %s::float8[]) AS r (p, s, c)",
            (SLOT // timedelta(microseconds=1), *map(list, zip(*((p, to_us(s), c) for p, s, c in rows), strict=True))),
        )
        db.execute(
            "INSERT INTO leadtime_billed_costs VALUES ('a100', %s, %s, 7.5)", (to_us(T0 + SLOT), to_us(T0 + 2 * SLOT))
        )
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger, connect(postgres_database) as db:
        assert ledger.schema_version() == SCHEMA_VERSION
        ask = ReservationRequest("research", ("a100", "h100"), *month, 100.0, 50.0, "agent-a", timedelta(minutes=5))
        assert ledger.reserve(ask, T0 + timedelta(days=4)).headroom_usd == pytest.approx(100.0 - 10.0 - 7.5 - 5.0)
        ledger.record(LedgerEntry("h100", T0 + timedelta(days=4), T0 + timedelta(days=4) + SLOT, 1, 2.5))
        assert ledger.reserve(ask, T0 + timedelta(days=4)).headroom_usd == pytest.approx(100.0 - 22.5 - 50.0 - 2.5)
        assert {(t[0], t[3]) for t in totals(db)} == {("a100", 17.5), ("h100", 7.5)}


def test_an_entry_that_ends_before_it_starts_is_refused_naming_the_rule(postgres_database: Database) -> None:
    """The ledger copies in entries that start after their pool's newest one ends: that needs every entry to end no
    earlier than it starts."""
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger:
        with pytest.raises(LedgerUnavailable, match="leadtime_ledger_entries_ends_after_start"):
            ledger.record(LedgerEntry("a100", T0 + SLOT, T0, 1, 1.0))
        assert ledger.entries() == []
