"""The ledger's growth: readings of a pool at the same units are folded into one entry per 15-minute cell, and every
spend figure the ledger reports is what it was when each reading was a row of its own.

The reference ledger stores what accrual derives as it did before folding: each reading's interval and opening
mark, recorded as given (``record_many`` does not fold). Both are fed the same readings by the meter, on every
backend."""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agent.ledger import InMemoryLedger
from agent.ledger.accrual import GRID, PoolReading
from agent.ledger.base import Ledger, Newest
from agent.ledger.billed import BilledCost
from agent.ledger.meter import SpendMeter
from agent.ledger.postgres import PostgresLedger
from agent.ledger.sqlite import SqliteLedger
from agent.planning.budget import Budget
from models import LedgerEntry
from tests.postgres.fixtures import POSTGRES, Database

T0 = datetime(2026, 1, 31, 18, 0, 7, tzinfo=UTC)  # February starts inside the readings in the first three zones
TICK = timedelta(minutes=1)
GAP_AFTER = timedelta(minutes=5)
PRICES = {"h100": 98.32, "v5e": 1.2}
ZONES = [ZoneInfo(z) for z in ("UTC", "Asia/Kathmandu", "America/St_Johns", "Pacific/Chatham")]
Store = InMemoryLedger | SqliteLedger | PostgresLedger


class Unfolded:
    """What the ledger held before folding: the meter's entries recorded as accrual derives them."""

    def __init__(self, inner: Ledger) -> None:
        self.inner = inner

    def update(self, pools: Sequence[str], derive: Callable[[Newest], Sequence[LedgerEntry]]) -> None:
        self.inner.record_many(derive({pool: self.inner.last_entry(pool) for pool in pools}))

    def record(self, entry: LedgerEntry) -> None:
        self.inner.record(entry)

    def record_many(self, entries: Sequence[LedgerEntry]) -> None:
        self.inner.record_many(entries)

    def spent(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        return self.inner.spent(pools, start, end)

    def last_entry(self, pool_id: str) -> LedgerEntry | None:
        return self.inner.last_entry(pool_id)


def ticks(hours: int, seed: int = 11) -> list[list[PoolReading]]:
    """A tick a minute for two pools: mostly steady, with resizes, the agent's own scale-up right after a reading,
    price changes, and unwatched gaps."""
    rng = random.Random(seed)
    units = {"h100": 4, "v5e": 16}
    prices = dict(PRICES)
    out: list[list[PoolReading]] = []
    now = T0
    for _ in range(hours * 60):
        now += TICK if rng.random() > 0.01 else rng.choice([7, 13, 31]) * TICK
        tick = []
        for pool in sorted(units):
            if rng.random() < 0.03:
                units[pool] = max(0, units[pool] + rng.randint(-3, 3))
            if rng.random() < 0.01:
                prices[pool] = round(prices[pool] * rng.uniform(0.8, 1.2), 4)
            tick.append(PoolReading(pool, now, units[pool], prices[pool]))
            if rng.random() < 0.02:
                tick.append(
                    PoolReading(pool, now + timedelta(seconds=2), units[pool] + rng.randint(1, 3), prices[pool])
                )
        out.append(tick)
    return out


def open_store(kind: str, request: pytest.FixtureRequest, directory: Path, name: str) -> Store:
    if kind == "memory":
        return InMemoryLedger()
    if kind == "sqlite":
        return SqliteLedger(directory / f"{name}.sqlite")
    database: Database = request.getfixturevalue("postgres_database")
    return PostgresLedger(database.url, database.password)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgresql", marks=POSTGRES)])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def ledger_dir(tmp_path: Path) -> Iterator[Path]:
    """Where the SQLite ledgers are kept: in memory-backed storage (tmpfs) where the machine has it, else the test's
    own directory. The ledger syncs every commit to its file (``synchronous = FULL``), once per reading fed here: on a
    disk those syncs were most of these tests' time, and nothing they check depends on the file's storage."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=shm, prefix="leadtime-ledger-") as directory:
        yield Path(directory)


@pytest.fixture
def pair(kind: str, request: pytest.FixtureRequest, ledger_dir: Path) -> Iterator[tuple[Store, Store]]:
    """A ledger and the reference (PostgreSQL: the reference's pools are renamed, in the same database)."""
    folded = open_store(kind, request, ledger_dir, "folded")
    reference = folded if kind == "postgresql" else open_store(kind, request, ledger_dir, "reference")
    yield folded, reference
    for store in {id(folded): folded, id(reference): reference}.values():
        if not isinstance(store, InMemoryLedger):
            store.close()


def rows(store: Store, pool: str) -> list[LedgerEntry]:
    if isinstance(store, InMemoryLedger):
        return [e for e in store.entries() if e.pool_id == pool]
    return store.entries(pool)


def feed(meter: SpendMeter, readings: list[list[PoolReading]], rename: str = "") -> None:
    for tick in readings:
        meter.observe([PoolReading(rename + r.pool_id, r.at, r.units, r.price_per_unit_hour_usd) for r in tick])


def test_hours_of_steady_readings_are_about_one_row_per_pool_per_cell(kind: str, pair: tuple[Store, Store]) -> None:
    ledger, _ = pair
    meter = SpendMeter(ledger, GAP_AFTER)
    minutes = 6 * 60  # 24 cells of 15 minutes, across the month's end at midnight
    for minute in range(minutes):
        meter.observe([PoolReading("h100", T0 + minute * TICK, 8, PRICES["h100"])])
    stored = rows(ledger, "h100")
    assert len(stored) <= minutes // 15 + 2  # a cell's entry, the first cell's part, the opening mark
    assert sum(e.cost_usd for e in stored) == pytest.approx(8 * PRICES["h100"] * (minutes - 1) / 60, rel=1e-9)
    assert all(e.end <= e.start + GRID for e in stored)
    newest = ledger.last_entry("h100")
    assert newest == LedgerEntry("h100", T0 + (minutes - 1) * TICK, T0 + (minutes - 1) * TICK, 8, 0.0)


def test_folded_and_unfolded_ledgers_report_the_same_spend(kind: str, pair: tuple[Store, Store]) -> None:
    """Month to date as the meter reads it at every 37th tick, and each grid cell, hour and month (in zones whose
    months start on the quarter and half hour) once all is recorded."""
    ledger, reference = pair
    readings = ticks(10)
    theirs = "old-" if ledger is reference else ""
    folding, unfolded = SpendMeter(ledger, GAP_AFTER), SpendMeter(Unfolded(reference), GAP_AFTER)
    budgets = [Budget(str(zone), frozenset(PRICES), monthly_cap_usd=1e9, hourly_cap_usd=1e9, tz=zone) for zone in ZONES]
    renamed = [replace(b, pools=frozenset(theirs + p for p in PRICES)) for b in budgets]
    for i, tick in enumerate(readings):
        feed(folding, [tick])
        feed(unfolded, [tick], theirs)
        if i % 37 == 0 or i == len(readings) - 1:
            now = tick[-1].at
            got = [(s.spent_period_usd, s.spent_hour_usd) for s in folding.budget_spend(budgets, now)]
            want = [(s.spent_period_usd, s.spent_hour_usd) for s in unfolded.budget_spend(renamed, now)]
            assert [x for pair in got for x in pair] == pytest.approx([x for pair in want for x in pair], rel=1e-12)
            for pool in PRICES:
                for budget in budgets:
                    start = budget.period(now).start
                    want_spent = reference.spent([theirs + pool], start, now)
                    assert ledger.spent([pool], start, now) == pytest.approx(want_spent, rel=1e-12, abs=1e-9)
    end = readings[-1][-1].at

    folded_rows = sum(len(rows(ledger, p)) for p in PRICES)
    reference_rows = sum(len(rows(reference, theirs + p)) for p in PRICES)
    assert folded_rows * 5 < reference_rows  # at least five times fewer rows, on these readings

    for pool in PRICES:
        old = theirs + pool
        assert ledger.last_entry(pool) == _renamed(reference.last_entry(old), pool)
        if not isinstance(ledger, InMemoryLedger):
            assert not isinstance(reference, InMemoryLedger)
            assert ledger.recorded_since([pool]) == {pool: reference.recorded_since([old])[old]}
        cells = _spans(T0 - GRID, end + GRID, GRID)
        hours = _spans(T0, end + timedelta(hours=1), timedelta(hours=1))
        months = [
            (period.start, period.end)
            for budget in budgets
            for at in (T0, end)
            for period in (budget.period(at), budget.period(budget.period(at).start - timedelta(microseconds=1)))
        ]
        for start, stop in [*cells, *hours, *months]:
            assert ledger.spent([pool], start, stop) == pytest.approx(
                reference.spent([old], start, stop), rel=1e-12, abs=1e-9
            )


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=POSTGRES)])  # the in-memory ledger
def test_billed_costs_replace_the_same_spend_in_folded_and_unfolded_ledgers(  # keeps no billed costs
    kind: str, pair: tuple[Store, Store]
) -> None:
    """Bills split on the grid across periods (hourly rows and a daily row, a month starting inside them in half-
    and quarter-hour zones) replace the estimate of the same cells in both."""
    ledger, reference = pair
    assert not isinstance(ledger, InMemoryLedger) and not isinstance(reference, InMemoryLedger)
    readings = ticks(10, seed=5)
    theirs = "old-" if ledger is reference else ""
    feed(SpendMeter(ledger, GAP_AFTER), readings)
    feed(SpendMeter(Unfolded(reference), GAP_AFTER), readings, theirs)
    hour = timedelta(hours=1)
    first = T0.replace(minute=0, second=0) + hour
    for store, prefix in ((ledger, ""), (reference, theirs)):
        bills = [BilledCost(prefix + "h100", first + i * hour, first + (i + 1) * hour, 300.0 + i) for i in range(4)]
        bills.append(BilledCost(prefix + "v5e", first.replace(hour=0), first.replace(hour=0) + 24 * hour, 480.0))
        store.record_billed(bills)
    end = readings[-1][-1].at
    for zone in ZONES:
        budget = Budget("b", frozenset(PRICES), monthly_cap_usd=1e9, hourly_cap_usd=1e9, tz=zone)
        period = budget.period(end)
        before = budget.period(period.start - timedelta(microseconds=1))
        for pool in PRICES:
            for start, stop in ((period.start, end), (before.start, before.end)):
                for read in ("spent", "estimated", "billed"):
                    got = getattr(ledger, read)([pool], start, stop)
                    want = getattr(reference, read)([theirs + pool], start, stop)
                    assert got == pytest.approx(want, rel=1e-12, abs=1e-9), (zone, pool, read)
            report = ledger.reconcile([pool], before.start, end)
            old = reference.reconcile([theirs + pool], before.start, end)
            assert [(r.hours, r.billed_usd) for r in report] == [(r.hours, r.billed_usd) for r in old]
            assert [r.estimated_usd for r in report] == pytest.approx([r.estimated_usd for r in old], rel=1e-12)


def test_an_update_replayed_after_folding_adds_nothing(kind: str, pair: tuple[Store, Store]) -> None:
    """An interval folded into the entry before it is recorded already: deriving it again changes nothing."""
    ledger, _ = pair
    meter = SpendMeter(ledger, GAP_AFTER)
    for minute in range(3):
        meter.observe([PoolReading("h100", T0 + minute * TICK, 2, 60.0)])
    again = [
        LedgerEntry("h100", T0 + TICK, T0 + 2 * TICK, 2, 2.0),
        LedgerEntry("h100", T0 + 2 * TICK, T0 + 2 * TICK, 2, 0.0),
    ]
    ledger.update(["h100"], lambda newest: again)
    assert rows(ledger, "h100") == [
        LedgerEntry("h100", T0, T0 + 2 * TICK, 2, 4.0),
        LedgerEntry("h100", T0 + 2 * TICK, T0 + 2 * TICK, 2, 0.0),
    ]
    assert ledger.spent(["h100"], T0, T0 + GRID) == pytest.approx(4.0)


def _spans(start: datetime, end: datetime, step: timedelta) -> list[tuple[datetime, datetime]]:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    at = epoch + ((start - epoch) // step) * step
    out = []
    while at < end:
        out.append((at, at + step))
        at += step
    return out


def _renamed(entry: LedgerEntry | None, pool: str) -> LedgerEntry | None:
    return None if entry is None else LedgerEntry(pool, entry.start, entry.end, entry.units, entry.cost_usd)
