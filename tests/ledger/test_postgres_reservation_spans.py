"""The span each budget reservation pays for, on the PostgreSQL ledger, beside agents of the release before.

The span's columns are added to the reservations table without a new schema version: the release before refuses a
schema newer than it knows, so a version bump would stop it the moment an agent of this release opened the shared
ledger. It inserts its rows naming its own columns (its statement below), and those rows, without a span, are
counted at their amount, as it counts every row; this release's rows are carried over each reader's span."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from agent.ledger.postgres import PostgresLedger
from agent.ledger.postgres_schema import SCHEMA_VERSION
from agent.ledger.reservations import CountedTo, ReservationRequest, carried
from agent.ledger.rows import to_us
from tests.postgres.fixtures import POSTGRES, Database

pytestmark = POSTGRES
NOW = datetime(2024, 2, 10, tzinfo=UTC)
MONTH = (datetime(2024, 2, 1, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC))
DAY = (NOW, NOW + timedelta(hours=24))
KEYS = ("team",)
# The release before's insert (agent.ledger.postgres_reservations before spans were recorded).
EARLIER_INSERT = (
    "INSERT INTO leadtime_budget_reservations (budget, holder, amount_usd, created_us, expires_us)"
    " VALUES ('team', 'west (units held of west)', %s, %s, %s)"
)


def _earlier_release_reserves(database: Database, amount_usd: float) -> None:
    with psycopg.connect(database.url, password=database.password, autocommit=True) as db:
        db.execute(EARLIER_INSERT, (amount_usd, to_us(NOW), to_us(NOW + timedelta(hours=1))))


def _columns(database: Database) -> set[str]:
    with psycopg.connect(database.url, password=database.password) as db:
        rows = db.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'leadtime_budget_reservations'"
        ).fetchall()
    return {str(name) for (name,) in rows}


def test_spans_are_recorded_and_carried_beside_an_earlier_releases_rows(postgres_database: Database) -> None:
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger:
        assert {"covers_from_us", "covers_until_us"} <= _columns(postgres_database)
        with psycopg.connect(postgres_database.url, password=postgres_database.password) as db:
            row = db.execute("SELECT max(version) FROM leadtime_schema_migrations").fetchone()
        assert row is not None and row[0] == SCHEMA_VERSION == 5  # what the release before accepts
        # east reserves 8 units at 8 USD a unit-hour over a 24h commit horizon: 1,536 USD
        east = ReservationRequest("team", ("east",), *MONTH, 1e9, 1536.0, "east", timedelta(hours=1), covers=DAY)
        assert ledger.reserve(east, NOW).granted
        _earlier_release_reserves(postgres_database, 30_720.0)  # west, earlier release: 8 units to the month's end
        # read to the month's end: east's 64 USD an hour over 480 hours; west's row, without a span, as it is
        # read to the month's end by an agent without a horizon: east's 64 USD an hour over 480 hours; west's row,
        # without a span, as covering the reader's own span (to the month's end): at its amount
        to_month_end = ledger.reserved_by_others(KEYS, NOW, "nobody", to=CountedTo(MONTH[1], MONTH[1]))
        assert to_month_end == pytest.approx(64.0 * 480 + 30_720.0)
        assert ledger.reserved_by_others(KEYS, NOW, "nobody") == pytest.approx(1536.0 + 30_720.0)  # amounts
        # by an agent with a 24h horizon over its own span: east's 1,536, west's row as covering that day
        assert ledger.reserved_by_others(KEYS, NOW, "nobody", to=CountedTo(DAY[1], DAY[1])) == pytest.approx(32_256.0)


def test_a_ledger_an_earlier_release_made_is_read_and_then_given_the_spans(postgres_database: Database) -> None:
    PostgresLedger(postgres_database.url, postgres_database.password).close()
    with psycopg.connect(postgres_database.url, password=postgres_database.password, autocommit=True) as db:
        db.execute("ALTER TABLE leadtime_budget_reservations DROP COLUMN covers_from_us, DROP COLUMN covers_until_us")
    _earlier_release_reserves(postgres_database, 30_720.0)
    # a dry run reading it before any agent of this release opened it: the row at its amount, nothing written
    with PostgresLedger(postgres_database.url, postgres_database.password, read_only=True) as reader:
        assert reader.reserved_by_others(KEYS, NOW, "east", to=CountedTo(DAY[1], DAY[1])) == 30_720.0
    assert not {"covers_from_us", "covers_until_us"} & _columns(postgres_database)
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger:  # a writer adds them
        assert {"covers_from_us", "covers_until_us"} <= _columns(postgres_database)
        assert ledger.reserved_by_others(KEYS, NOW, "east", to=CountedTo(MONTH[1], MONTH[1])) == 30_720.0
    _earlier_release_reserves(postgres_database, 100.0)  # and the release before still writes beside them


def test_a_reservation_is_carried_at_its_own_rate() -> None:
    month_end, day_end = CountedTo(MONTH[1], DAY[1]), CountedTo(DAY[1], DAY[1])
    assert carried(1536.0, DAY, NOW, month_end) == pytest.approx(64.0 * 480)
    assert carried(30_720.0, (NOW, MONTH[1]), NOW, day_end) == pytest.approx(1536.0)
    # read a tick after it was made: from its start, as its agent has not recorded the spend since yet
    later = NOW + timedelta(minutes=5)
    assert carried(1536.0, DAY, later, CountedTo(later + timedelta(hours=24), DAY[1])) == pytest.approx(
        1536.0 + 64 / 12
    )
    # no span (an earlier release's): taken to pay for the reader's own span, 24 hours here
    assert carried(1536.0, None, NOW, day_end) == 1536.0
    assert carried(1536.0, None, NOW, month_end) == pytest.approx(64.0 * 480)
    assert carried(1536.0, DAY, NOW, None) == 1536.0
