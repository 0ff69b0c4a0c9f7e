"""Opening a PostgreSQL ledger whose reservations table lacks the span columns when they cannot be added now.

The columns are added at open (``agent.ledger.postgres_schema.SPANS``), and ``ALTER TABLE`` needs the table's owner
and an exclusive lock. An agent whose role has data rights only (it ran the release before, which alters nothing,
fine), or one opening while a report or a dump holds the table, goes on without the spans, as the release before
does, instead of failing every open (and crash-looping every replica): its reservations are written and read without
them, and it says what to run, or tries again at its next open."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from agent.ledger.postgres import PostgresLedger
from agent.ledger.postgres_schema import SPANS
from agent.ledger.reservations import CountedTo, ReservationRequest
from tests.postgres.fixtures import POSTGRES, Database

pytestmark = POSTGRES
NOW = datetime(2024, 2, 10, tzinfo=UTC)
MONTH = (datetime(2024, 2, 1, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC))
DAY = (NOW, NOW + timedelta(hours=24))
SPAN_COLUMNS = {"covers_from_us", "covers_until_us"}


def _as_the_release_before_left_it(database: Database) -> None:
    """A ledger the release before made: schema 5, no span columns."""
    PostgresLedger(database.url, database.password).close()
    with psycopg.connect(database.url, password=database.password, autocommit=True) as db:
        db.execute("ALTER TABLE leadtime_budget_reservations DROP COLUMN covers_from_us, DROP COLUMN covers_until_us")


def _columns(database: Database) -> set[str]:
    with psycopg.connect(database.url, password=database.password) as db:
        rows = db.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'leadtime_budget_reservations'"
        ).fetchall()
    return {str(name) for (name,) in rows}


def _data_role(database: Database) -> str:
    """A role with data rights on the ledger's tables, not their owner (as the release before needs: its open creates
    the migrations table if missing), and the URL to open the ledger as it."""
    with psycopg.connect(database.url, password=database.password, autocommit=True) as db:
        row = db.execute("SELECT current_database()").fetchone()
        assert row is not None
        name = str(row[0])
        role = f"{name}_agent"
        db.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD 'pw'")
        db.execute(f'GRANT CONNECT ON DATABASE "{name}" TO "{role}"')
        db.execute(f'GRANT USAGE, CREATE ON SCHEMA public TO "{role}"')
        db.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "{role}"')
        db.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
    user = database.url.split("//", 1)[1].split("@", 1)[0]
    return database.url.replace(f"//{user}@", f"//{role}@", 1)


def _request(amount_usd: float) -> ReservationRequest:
    return ReservationRequest("team", ("east",), *MONTH, 1e9, amount_usd, "east", timedelta(hours=1), covers=DAY)


def test_a_role_that_does_not_own_the_table_runs_without_spans_and_is_told_what_to_run(
    postgres_database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    _as_the_release_before_left_it(postgres_database)
    url = _data_role(postgres_database)
    to_month_end = CountedTo(MONTH[1], MONTH[1])
    with caplog.at_level(logging.WARNING, logger="agent.ledger.postgres_schema"), PostgresLedger(url, "pw") as ledger:
        PostgresLedger(url, "pw").close()  # another open of the same process says nothing new
        # east reserves 8 units at 8 USD a unit-hour over a day: written without its span, read at its amount
        assert ledger.reserve(_request(1536.0), NOW).granted
        assert ledger.reserved_by_others(["team"], NOW, "west", to=to_month_end) == 1536.0
        assert not SPAN_COLUMNS & _columns(postgres_database)
        told = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(told) == 1, told
        assert SPANS in told[0] and "OWNER TO" in told[0] and "leadtime_budget_reservations" in told[0]
        # the owner runs the statement it names: the reservations made from then on record their spans
        with psycopg.connect(postgres_database.url, password=postgres_database.password, autocommit=True) as db:
            db.execute(SPANS)
        assert ledger.reserve(_request(1536.0), NOW).granted
        assert ledger.reserved_by_others(["team"], NOW, "west", to=to_month_end) == pytest.approx(1536.0 + 64 * 480)


def test_a_table_held_by_another_session_is_not_waited_for_and_the_spans_come_at_a_later_open(
    postgres_database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    _as_the_release_before_left_it(postgres_database)
    # a report (or pg_dump) reading the table in an open transaction holds it until it ends
    with psycopg.connect(postgres_database.url, password=postgres_database.password) as reader:
        reader.execute("SELECT count(*) FROM leadtime_budget_reservations").fetchall()
        with (
            caplog.at_level(logging.INFO, logger="agent.ledger.postgres_schema"),
            PostgresLedger(
                postgres_database.url, postgres_database.password, statement_timeout=timedelta(seconds=5)
            ) as ledger,
        ):
            assert ledger.reserve(_request(1536.0), NOW).granted
        assert not SPAN_COLUMNS & _columns_in(reader)
        reader.rollback()
    told = [r.getMessage() for r in caplog.records if r.name == "agent.ledger.postgres_schema"]
    assert any(SPANS in m and "tries again every 5 minutes" in m for m in told), told
    PostgresLedger(postgres_database.url, postgres_database.password).close()  # nothing holds it now
    assert _columns(postgres_database) >= SPAN_COLUMNS


def _columns_in(db: psycopg.Connection[tuple[object, ...]]) -> set[str]:
    rows = db.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'leadtime_budget_reservations'"
    ).fetchall()
    return {str(name) for (name,) in rows}
