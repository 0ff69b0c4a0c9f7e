"""Another agent's reservation is counted from where its pools' recorded spend ends, so a tick is counted once.

An agent records its tick's spend at the start of the tick and replaces its standing reservation at the end of it. A
reader in between found the tick recorded and the old reservation still counted from its start: the tick twice (8
units of 8 USD a unit-hour for 5 minutes: 5.33 USD). Each reservation now counts from the latest end of the entries
of the pools its holder names (the earliest of them where one pool's record lags: a pool its agent could not read);
one whose holder names no pool, or that has no span, counts as before. On one real PostgreSQL ledger (the
reservations and entries on one connection, read on another) and on the in-process ledgers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.ledger import InMemoryLedger, Ledger
from agent.ledger.postgres import PostgresLedger
from agent.ledger.reservation_spans import named_pools, recorded_to
from agent.ledger.reservations import CountedTo, ReservationRequest, Reservations
from agent.ledger.sqlite import SqliteLedger
from models import LedgerEntry
from tests.postgres.fixtures import POSTGRES, Database

pytestmark = POSTGRES

TICK = timedelta(minutes=5)
START = datetime(2024, 2, 10, 12, tzinfo=UTC)  # east's last tick: its reservations are from here
NOW = START + TICK  # east's next tick, recorded and not yet replaced by its commit
HOUR_END = START + timedelta(hours=1)
UNIT_HOUR_USD = 8.0
TO_HOUR_END = CountedTo(HOUR_END, HOUR_END)
READER = "leadtime (units held of west)"


def _reserve(ledger: Reservations, holder: str, units: int) -> None:
    request = ReservationRequest(
        "team/hourly", ("west", "east"), START, HOUR_END, 1e9, units * UNIT_HOUR_USD, holder, timedelta(minutes=10),
        covers=(START, HOUR_END),
    )  # fmt: skip
    assert ledger.reserve(request, START).granted


def _tick(ledger: Ledger, pool: str, units: int, start: datetime = START, end: datetime = NOW) -> None:
    ledger.record(LedgerEntry(pool, start, end, units, units * UNIT_HOUR_USD * ((end - start) / timedelta(hours=1))))


@contextmanager
def _ledgers(kind: str, database: Database, tmp_path: Path) -> Iterator[tuple[Ledger, Reservations]]:
    """The ledger east writes and the one west reads it through (two connections on PostgreSQL)."""
    if kind == "memory":
        memory = InMemoryLedger()
        yield memory, memory
    elif kind == "sqlite":
        with SqliteLedger(tmp_path / "ledger.db") as sqlite:
            yield sqlite, sqlite
    else:
        with (
            PostgresLedger(database.url, database.password) as east,
            PostgresLedger(database.url, database.password) as west,
        ):
            yield east, west


def _read(ledger: Reservations) -> float:
    return ledger.reserved_by_others(["team/hourly"], NOW, READER, to=TO_HOUR_END)


@pytest.mark.parametrize("kind", ["postgres", "memory", "sqlite"])
def test_a_tick_recorded_before_its_reservation_is_replaced_is_counted_once(
    kind: str, postgres_database: Database, tmp_path: Path
) -> None:
    with _ledgers(kind, postgres_database, tmp_path) as (east, west):
        assert isinstance(east, Reservations)
        _tick(east, "east", 8, START - TICK, START)  # east's last tick, then its reservation of 8 units from then
        _reserve(east, "leadtime (units held of east)", 8)
        # read before east records its next tick: from 12:00, its spend since not recorded (64 USD to the hour's end)
        assert _read(west) == pytest.approx(8 * UNIT_HOUR_USD)
        _tick(east, "east", 8)  # east records 12:00-12:05: 5.33 USD
        # read before its commit replaces the reservation: from 12:05 (58.67 USD; 64 before, the tick twice)
        assert _read(west) == pytest.approx(8 * UNIT_HOUR_USD * 55 / 60)
        assert west.reserved_by_others(["team/hourly"], NOW, READER) == 8 * UNIT_HOUR_USD  # no span asked: its amount


@pytest.mark.parametrize("kind", ["postgres", "memory"])
def test_each_reservation_counts_from_its_own_pools_record(
    kind: str, postgres_database: Database, tmp_path: Path
) -> None:
    with _ledgers(kind, postgres_database, tmp_path) as (east, west):
        assert isinstance(east, Reservations)
        _tick(east, "east", 8)
        _tick(east, "north", 2, START - TICK, START)  # north not read at 12:05: its record ends at 12:00
        _reserve(east, "leadtime (scale-up of east to 10)", 2)  # a scale-up of east: from east's record
        _reserve(east, "leadtime (units held of east, north)", 2)  # north's units: from the earlier of the two ends
        _reserve(east, "south (units held of south)", 1)  # south has no record: from its start
        _reserve(east, "an earlier release's agent", 1)  # no pool named: from its start
        expected = UNIT_HOUR_USD * (2 * 55 / 60 + 2 + 1 + 1)
        assert _read(west) == pytest.approx(expected)


def test_the_pools_a_holder_names() -> None:
    assert named_pools("leadtime (units held of east, north)") == ("east", "north")
    assert named_pools("team-a (scale-up of pool-1 to 12)") == ("pool-1",)
    assert named_pools("team-a (scale-up of pool-1 to many)") == ()
    assert named_pools("leadtime") == ()
    ends = {"east": NOW, "north": START}
    assert recorded_to(("east", "north"), ends) == START
    assert recorded_to(("east", "south"), ends) == NOW
    assert recorded_to(("south",), ends) is None
