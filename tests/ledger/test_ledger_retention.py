"""Retention: a database ledger that keeps ``retention`` of history removes older entries and billed costs as the
meter records spend, a batch at a time, keeping each pool's first record and every figure of the current and
previous months; the same history kept whole reads the same there."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from agent.ledger.accrual import PoolReading
from agent.ledger.billed import BilledCost, on_grid
from agent.ledger.folding import entries_on_grid
from agent.ledger.meter import SpendMeter
from agent.ledger.postgres import PostgresLedger
from agent.ledger.retention import BATCH, MINIMUM
from agent.ledger.sqlite import SqliteLedger
from agent.planning.budget import Budget
from config.ledger import LedgerSettings
from models import LedgerEntry
from tests.postgres.fixtures import POSTGRES
from tests.postgres.server import PostgresServer

NOW = datetime(2026, 3, 10, 12, 0, 7, tzinfo=UTC)
RETENTION = MINIMUM
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
START = NOW - 100 * DAY
POOLS = {"h100": (4, 98.32), "v5e": (16, 1.2)}
ZONES = [ZoneInfo(z) for z in ("UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago", "Asia/Kathmandu")]
Store = SqliteLedger | PostgresLedger


def history() -> list[LedgerEntry]:
    """100 days of hourly entries of each pool up to NOW, as a ledger written before folding and retention holds
    them: cut on the grid, as a ledger stores them (5 rows an hour, the hours being off the grid)."""
    hours = (NOW - START) // HOUR
    return entries_on_grid(
        [
            LedgerEntry(pool, START + i * HOUR, START + (i + 1) * HOUR, units, units * price)
            for pool, (units, price) in POOLS.items()
            for i in range(hours)
        ]
    )


def bills() -> list[BilledCost]:
    """A daily bill of h100 for 60 days (stored as 96 pieces a day)."""
    first = (START + 20 * DAY).replace(hour=0, minute=0, second=0)
    return [BilledCost("h100", first + i * DAY, first + (i + 1) * DAY, 9_000.0 + i) for i in range(60)]


def open_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path, retention: timedelta | None) -> Store:
    if kind == "sqlite":
        return SqliteLedger(tmp_path / f"ledger-{retention}.sqlite", retention=retention)
    server: PostgresServer = request.getfixturevalue("postgres_server")  # a database of its own: pruning is not
    return PostgresLedger(server.new_database(), server.password, retention=retention)  # per pool


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=POSTGRES)])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def kept(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with open_store(kind, request, tmp_path, RETENTION) as store:
        store.record_many(history())
        store.record_billed(bills())
        yield store


def count(store: Store, pool: str | None = None) -> int:
    return len(store.entries(pool))


def tick(meter: SpendMeter, at: datetime) -> None:
    meter.observe([PoolReading(pool, at, units, price) for pool, (units, price) in POOLS.items()])


def test_old_history_goes_a_batch_a_tick_and_each_pool_keeps_its_first_record(kept: Store) -> None:
    first = kept.recorded_since(list(POOLS))
    assert first == dict.fromkeys(POOLS, START)
    old = sum(1 for e in history() if e.end <= NOW - RETENTION)
    assert old > BATCH  # more than one tick's work
    before = count(kept)
    meter = SpendMeter(kept, timedelta(minutes=5))
    tick(meter, NOW)  # an opening mark of each pool, and a batch of old rows removed
    assert count(kept) == before + len(POOLS) - BATCH
    tick(meter, NOW + timedelta(minutes=1))  # a minute charged and its mark, and the rest removed
    rows = kept.entries()  # the minute is folded into the history's last piece, in the same cell: one more row a pool
    assert len(rows) == before + len(POOLS) - (old - len(POOLS))
    assert all(e.end > NOW - RETENTION or e.start == START for e in rows)
    assert len([e for e in rows if e.start == START]) == len(POOLS)
    assert kept.recorded_since(list(POOLS)) == first
    cutoff = NOW + timedelta(minutes=1) - RETENTION
    pieces = on_grid(bills())
    left = [p for p in pieces if p.start < cutoff and (p is pieces[0] or p.end > cutoff)]  # its first, the one across
    assert len(left) == 2
    assert kept.billed(["h100"], START, cutoff) == pytest.approx(sum(p.cost_usd for p in left))
    assert kept.billed(["h100"], cutoff, NOW) == pytest.approx(sum(p.cost_usd for p in pieces if p.start >= cutoff))


def test_the_current_and_previous_months_read_the_same_as_the_whole_history(
    kept: Store, kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    with open_store(kind, request, tmp_path, None) as whole:
        whole.record_many(history())
        whole.record_billed(bills())
        ours, theirs = SpendMeter(kept, timedelta(minutes=5)), SpendMeter(whole, timedelta(minutes=5))
        at = NOW
        for _ in range(5):  # more ticks than batches to remove
            tick(ours, at)
            tick(theirs, at)
            at += timedelta(minutes=1)
        assert count(kept) < count(whole) * 0.7  # 64 days of 100 kept
        for zone in ZONES:
            budget = Budget("b", frozenset(POOLS), monthly_cap_usd=1e9, hourly_cap_usd=1e9, tz=zone)
            month = budget.period(at)
            previous = budget.period(month.start - timedelta(microseconds=1))
            for pool in POOLS:
                for start, end in ((month.start, at), (previous.start, previous.end)):
                    for read in ("spent", "estimated", "billed"):
                        got = getattr(kept, read)([pool], start, end)
                        assert got == pytest.approx(getattr(whole, read)([pool], start, end), rel=1e-12), (zone, read)
                    assert kept.spent([pool], start, end) > 0.0
        for pool in POOLS:  # what is gone was spent before the cutoff
            gone = (START + HOUR, at - RETENTION - DAY)
            first_bill = on_grid(bills())[0].cost_usd if pool == "h100" else 0.0  # kept, as its first record
            assert kept.spent([pool], *gone) == pytest.approx(first_bill)
            assert whole.spent([pool], *gone) > 1_000.0


def test_a_retention_shorter_than_two_months_in_any_zone_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="retention must be at least 64d"):
        LedgerSettings(retention=timedelta(days=40))
    with pytest.raises(ValueError, match="at least 64 days"):
        SqliteLedger(tmp_path / "ledger.sqlite", retention=timedelta(days=40))
    assert LedgerSettings().retention == timedelta(days=400)
    assert LedgerSettings(retention=None).retention is None
