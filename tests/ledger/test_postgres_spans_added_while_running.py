"""Span columns the open of a PostgreSQL ledger could not add are added while the agent runs, without a restart.

The open goes on without them when a report or a dump holds the reservations table, or when the agent's role does not
own it (``tests/ledger/test_postgres_spans_not_added.py``). A moment's hold at startup, or the owner given to the role
as the warning asks, must not leave the agent without spans for its lifetime: agents with different commit horizons
would count each other's reservations over their own (east's 8 units over a day read 1,536 USD to the month's end
instead of 30,720). The running ledger tries again before a reservation, at most every ``SPANS_RETRY``."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from agent.ledger.postgres import PostgresLedger
from agent.ledger.postgres_schema import SPANS, SPANS_RETRY
from agent.ledger.reservations import CountedTo, ReservationRequest
from tests.ledger.test_postgres_spans_not_added import (
    SPAN_COLUMNS,
    _as_the_release_before_left_it,
    _columns,
    _data_role,
)
from tests.postgres.fixtures import POSTGRES, Database
from tests.postgres.server import PostgresServer

pytestmark = POSTGRES
NOW = datetime(2024, 2, 10, tzinfo=UTC)
MONTH = (datetime(2024, 2, 1, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC))
DAY = (NOW, NOW + timedelta(hours=24))
TO_MONTH_END = CountedTo(MONTH[1], MONTH[1])
EAST_TO_MONTH_END = 1536.0 / 24 * 480  # 8 units at 8 USD a unit-hour, 480 hours from NOW to the month's end


class Monotonic:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.seconds = 1000.0

    def __call__(self) -> float:
        return self.seconds

    def advance(self, by: timedelta) -> None:
        self.seconds += by.total_seconds()


def _east_over_a_day() -> ReservationRequest:
    return ReservationRequest("team", ("east",), *MONTH, 1e9, 1536.0, "east", timedelta(hours=1), covers=DAY)


def _owner(database: Database) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(database.url, password=database.password, autocommit=True)


def test_spans_held_at_open_are_added_once_the_table_is_free(
    postgres_database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    _as_the_release_before_left_it(postgres_database)
    clock = Monotonic()
    with psycopg.connect(postgres_database.url, password=postgres_database.password) as report:
        report.execute("SELECT count(*) FROM leadtime_budget_reservations").fetchall()  # a report holds the table
        with caplog.at_level(logging.INFO, logger="agent.ledger.postgres_schema"):
            ledger = PostgresLedger(postgres_database.url, postgres_database.password, monotonic=clock)
        report.rollback()  # the report ends a moment later
    try:
        told = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(told) == 1 and SPANS in told[0] and "tries again every 5 minutes" in told[0], told
        # not tried again before SPANS_RETRY: each try may hold every other agent's reads of the table for a second
        clock.advance(SPANS_RETRY - timedelta(seconds=1))
        assert ledger.reserve(_east_over_a_day(), NOW).granted
        assert not SPAN_COLUMNS & _columns(postgres_database)
        assert ledger.reserved_by_others(["team"], NOW, "west", to=TO_MONTH_END) == 1536.0
        with _owner(postgres_database) as db:
            db.execute("DELETE FROM leadtime_budget_reservations")
        # east's next tick, past SPANS_RETRY: the columns come without a reopen and its reservation has its span
        clock.advance(timedelta(seconds=1))
        assert ledger.reserve(_east_over_a_day(), NOW + timedelta(minutes=5)).granted
        assert _columns(postgres_database) >= SPAN_COLUMNS
        assert ledger.reserved_by_others(["team"], NOW, "west", to=TO_MONTH_END) == pytest.approx(EAST_TO_MONTH_END)
        assert EAST_TO_MONTH_END == 30720.0
    finally:
        ledger.close()


def test_a_table_held_at_every_try_is_not_waited_for_and_told_once(
    postgres_server: PostgresServer, postgres_database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    _as_the_release_before_left_it(postgres_database)
    clock = Monotonic()
    with psycopg.connect(postgres_database.url, password=postgres_database.password) as dump:
        dump.execute("SELECT count(*) FROM leadtime_budget_reservations").fetchall()  # a long pg_dump
        with (
            caplog.at_level(logging.INFO, logger="agent.ledger.postgres_schema"),
            PostgresLedger(
                postgres_database.url,
                postgres_database.password,
                monotonic=clock,
                statement_timeout=timedelta(seconds=5),
            ) as ledger,
        ):
            server_log = _ServerLog(postgres_server)  # after the open, which waited its second once
            for tick in range(3):
                clock.advance(SPANS_RETRY)
                assert ledger.reserve(_east_over_a_day(), NOW + tick * SPANS_RETRY).granted
            # no ALTER was sent while the dump held the table: one would queue every other agent's reads behind it
            assert server_log.alters() == [], server_log.alters()
            assert not SPAN_COLUMNS & _columns(postgres_database)
            dump.rollback()  # the dump ends: the next try adds them
            clock.advance(SPANS_RETRY)
            assert ledger.reserve(_east_over_a_day(), NOW + 3 * SPANS_RETRY).granted
            assert _columns(postgres_database) >= SPAN_COLUMNS
    told = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(told) == 1 and "another session holds leadtime_budget_reservations" in told[0], told
    assert any("has its span columns now" in r.getMessage() for r in caplog.records)


def test_a_role_that_does_not_own_the_table_sends_no_alter_it_cannot_run(
    postgres_server: PostgresServer, postgres_database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    _as_the_release_before_left_it(postgres_database)
    url = _data_role(postgres_database)
    server_log = _ServerLog(postgres_server)
    clock = Monotonic()
    with (
        caplog.at_level(logging.INFO, logger="agent.ledger.postgres_schema"),
        PostgresLedger(url, "pw", monotonic=clock) as ledger,
    ):
        for tick in range(3):
            clock.advance(SPANS_RETRY)
            assert ledger.reserve(_east_over_a_day(), NOW + tick * SPANS_RETRY).granted
    # every refused ALTER is an ERROR in the server's log (288 a day per agent at one try every 5 minutes)
    assert server_log.lines("must be owner") == [], server_log.lines("must be owner")
    assert server_log.alters() == [], server_log.alters()
    assert not SPAN_COLUMNS & _columns(postgres_database)
    told = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(told) == 1 and "does not own leadtime_budget_reservations" in told[0], told


class _ServerLog:
    """What the test session's PostgreSQL server logs from the moment this is made (tests run one at a time on it)."""

    def __init__(self, server: PostgresServer) -> None:
        self._path = server.work / "postgres.log"
        self._start = self._path.stat().st_size

    def lines(self, containing: str) -> list[str]:
        with self._path.open("rb") as log:
            log.seek(self._start)
            text = log.read().decode(errors="replace")
        return [line for line in text.splitlines() if containing in line]

    def alters(self) -> list[str]:
        """The statements of the failed ALTERs of the reservations table (each logged under its ERROR)."""
        return self.lines("ALTER TABLE leadtime_budget_reservations")


def test_spans_come_once_the_owner_gives_the_table_to_the_agents_role(
    postgres_database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    _as_the_release_before_left_it(postgres_database)
    url = _data_role(postgres_database)
    role = url.split("//", 1)[1].split("@", 1)[0]
    clock = Monotonic()
    with (
        caplog.at_level(logging.INFO, logger="agent.ledger.postgres_schema"),
        PostgresLedger(url, "pw", monotonic=clock) as ledger,
    ):
        told = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("OWNER TO" in m and "without a restart" in m for m in told), told
        with _owner(postgres_database) as db:  # the operator follows the warning
            db.execute(f'ALTER TABLE leadtime_budget_reservations OWNER TO "{role}"')
        clock.advance(SPANS_RETRY)
        assert ledger.reserve(_east_over_a_day(), NOW).granted
        assert _columns(postgres_database) >= SPAN_COLUMNS
        assert ledger.reserved_by_others(["team"], NOW, "west", to=TO_MONTH_END) == pytest.approx(EAST_TO_MONTH_END)
    assert any("has its span columns now" in r.getMessage() for r in caplog.records)
