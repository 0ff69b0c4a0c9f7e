"""A writer whose wall clock is far ahead does not make the ledger's retention remove the current month.

The retention removed the rows ending ``retention`` before the newest end just recorded, of every pool: one reading
stamped 100 days ahead (a node given a bad time by NTP, a pool first read there) removed all but the first entry of
every pool, another agent's on a shared PostgreSQL ledger too, for good. The cutoff is now measured by the ledger's
own clock where the newest end is past it: the PostgreSQL server's clock, and for SQLite the process's wall time
carried on its monotonic clock, so a wall clock stepped forward after the ledger was opened does not move it; and
for SQLite it starts from the newest end the file held when it was opened where that is earlier, so a writer that
opens the ledger with its clock already ahead removes none of the history either."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.ledger.accrual import GRID, PoolReading
from agent.ledger.meter import SpendMeter
from agent.ledger.postgres import PostgresLedger
from agent.ledger.retention import MINIMUM
from agent.ledger.sqlite import SqliteLedger
from tests.postgres.fixtures import POSTGRES, Database

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The PostgreSQL server's clock is the real one: the history ends now, on the grid.
END = _EPOCH + ((datetime.now(UTC) - _EPOCH) // GRID) * GRID
START = END - timedelta(days=3)
TICK = timedelta(minutes=15)
AHEAD = timedelta(days=100)


class _NodeClock:
    """The writer's clocks: the wall time, which may be stepped, and a monotonic time that only runs."""

    def __init__(self, start: datetime) -> None:
        self.wall, self.seconds = start, 0.0

    def now(self) -> datetime:
        return self.wall

    def monotonic(self) -> float:
        return self.seconds

    def run(self, by: timedelta) -> None:
        self.wall += by
        self.seconds += by.total_seconds()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=POSTGRES)])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _store(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, clock: _NodeClock
) -> SqliteLedger | PostgresLedger:
    if kind == "sqlite":
        return SqliteLedger(tmp_path / "ledger.sqlite", retention=MINIMUM, clock=clock)
    database: Database = request.getfixturevalue("postgres_database")
    return PostgresLedger(database.url, database.password, retention=MINIMUM)


@pytest.fixture
def history(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[SqliteLedger | PostgresLedger, _NodeClock]]:
    """Three days of h100 (8 units at 10 USD a unit-hour) read every 15 minutes by a writer whose clocks agree."""
    clock = _NodeClock(START)
    with _store(kind, request, tmp_path, clock) as store:
        ours = SpendMeter(store, timedelta(minutes=30))
        while clock.wall < END:
            ours.observe([PoolReading("h100", clock.wall, 8, 10.0, clock.seconds)])
            clock.run(TICK)
        ours.observe([PoolReading("h100", clock.wall, 8, 10.0, clock.seconds)])
        yield store, clock


def test_a_pool_first_read_with_the_clock_100_days_ahead_removes_no_other_pools_spend(
    history: tuple[SqliteLedger | PostgresLedger, _NodeClock], caplog: pytest.LogCaptureFixture
) -> None:
    """The wall clock steps 100 days forward (the monotonic clock runs 15 minutes) and a pool is first read then: a
    meter has no earlier reading of it to measure the step by, and records it at its wall time. h100's three days
    (5,760 USD) stay whole; before, all but its first entry were removed (20 USD left)."""
    store, clock = history
    before = store.spent(["h100"], START, END)
    assert before == pytest.approx(8 * 10.0 * 72)
    clock.run(TICK)
    clock.wall += AHEAD
    with caplog.at_level(logging.WARNING, logger="agent.ledger.retention"):
        SpendMeter(store, timedelta(minutes=30)).observe([PoolReading("a100", clock.wall, 1, 1.0, clock.seconds)])
        SpendMeter(store, timedelta(minutes=30)).observe([PoolReading("a100", clock.wall + TICK, 1, 1.0, 1.0)])
    assert store.spent(["h100"], START, END) == pytest.approx(before)
    warned = [r.getMessage() for r in caplog.records if "ledger retention" in r.getMessage()]
    assert len(warned) == 1, warned  # told once, not at every write while the clock stays ahead
    # 100 days past the ledger's clock, give or take the minutes between the test's grid and PostgreSQL's real clock
    assert "ahead" in warned[0] and re.search(r"(99|100) days, \d+:\d\d:\d\d(\.\d+)? past", warned[0])


def test_a_writer_opening_the_ledger_100_days_ahead_removes_none_of_its_history(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The SQLite ledger opened by a writer whose wall clock is 100 days ahead from the start (an agent restarted on a
    node set wrong, a replica taking over the shared file), which records two readings of a new pool: the ledger's
    clock starts from the newest end the file held (h100's last, 100 days before), not the writer's wall clock.
    h100's three days (5,760 USD) stay whole, and the clock ahead is told once; before, all but h100's first entry
    were removed (20 USD left), with no warning."""
    path = tmp_path / "ledger.sqlite"
    clock = _NodeClock(START)
    with SqliteLedger(path, retention=MINIMUM, clock=clock) as store:
        ours = SpendMeter(store, timedelta(minutes=30))
        while clock.wall <= END:
            ours.observe([PoolReading("h100", clock.wall, 8, 10.0, clock.seconds)])
            clock.run(TICK)
    ahead = _NodeClock(END + AHEAD)
    with (
        caplog.at_level(logging.WARNING, logger="agent.ledger.retention"),
        SqliteLedger(path, retention=MINIMUM, clock=ahead) as store,
    ):
        theirs = SpendMeter(store, timedelta(minutes=30))
        theirs.observe([PoolReading("a100", ahead.wall, 1, 1.0, ahead.seconds)])
        ahead.run(TICK)
        theirs.observe([PoolReading("a100", ahead.wall, 1, 1.0, ahead.seconds)])
        assert store.spent(["h100"], START, END) == pytest.approx(8 * 10.0 * 72)
        assert store.spent(["a100"], END + AHEAD, ahead.wall) == pytest.approx(0.25)
    warned = [r.getMessage() for r in caplog.records if "ledger retention" in r.getMessage()]
    assert len(warned) == 1, warned
    assert "100 days, 0:00:00 past" in warned[0] and "clock is ahead" in warned[0]
