"""What other agents keep reserved under a budget's keys (``Reservations.reserved_by_others``): the same answer from
the in-memory, SQLite and PostgreSQL ledgers (PostgreSQL on a real server, a new database per test)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.ledger import InMemoryLedger
from agent.ledger.postgres import PostgresLedger
from agent.ledger.reservations import ReservationRequest, Reservations
from agent.ledger.sqlite import SqliteLedger
from tests.postgres.fixtures import POSTGRES, Database

T0 = datetime(2024, 2, 1, 0, 5, tzinfo=UTC)
MIN = timedelta(minutes=1)
PERIOD = (datetime(2024, 2, 1, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC))
KEYS = ("team", "team@2024-02-01T00:00:00+00:00")  # the current period's keys: plain, and made before it began


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgresql", marks=POSTGRES)])
def book(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Reservations]:
    if request.param == "memory":
        yield InMemoryLedger()
        return
    if request.param == "postgresql":
        database: Database = request.getfixturevalue("postgres_database")
        with PostgresLedger(database.url, database.password) as postgres:
            yield postgres
        return
    sqlite = SqliteLedger(tmp_path / "ledger.sqlite")
    yield sqlite
    sqlite.close()


def ask(budget: str, holder: str, amount: float, ttl: timedelta = 10 * MIN) -> ReservationRequest:
    return ReservationRequest(budget, ("west", "east"), *PERIOD, 1e9, amount, holder, ttl)


def test_only_other_holders_live_reservations_under_the_keys_count(book: Reservations) -> None:
    grants = book.reserve_many(
        [
            ask("team", "west (units held of west)", 100.0),  # this agent's standing reservation
            ask("team", "west", 7.0),  # this agent's scale-up, named by id
            ask("team", "east (units held of east)", 40.0),
            ask("team@2024-02-01T00:00:00+00:00", "east (units held of east)", 2.0),  # made while February was next
            ask("team", "east", 0.5),  # east's scale-up under way
            ask("team", "north (units held of north)", 9.0, ttl=2 * MIN),  # expired by T0 + 3 minutes
            ask("team@2024-03-01T00:00:00+00:00", "east (units held of east)", 1000.0),  # the next period's
            ask("team/hourly", "east (units held of east)", 3000.0),  # another cap's
        ],
        T0,
    )
    scale_up = grants[1].reservation_id
    assert scale_up is not None
    at = T0 + 3 * MIN
    assert book.reserved_by_others(KEYS, at, "west (units held of west)", [scale_up]) == pytest.approx(42.5)
    assert book.reserved_by_others(KEYS, T0, "west (units held of west)", [scale_up]) == pytest.approx(51.5)
    assert book.reserved_by_others(KEYS, at, "east (units held of east)") == pytest.approx(107.5)
    assert book.reserved_by_others(("other",), at, "west (units held of west)") == 0.0
