"""A billed interval that crosses the start of a budget period counts in both periods, on every ledger.

Hourly billing rows are on the UTC hour; a budget in Asia/Kolkata (UTC+05:30) starts its month and its hours on
the half hour, and a daily row crosses any month start inside its UTC day. Spend is read as the daemon reads it
(the meter, from the running period totals: ``spent_in_periods``) and as reports read it (``spent`` over the
period so far, and over the whole previous period). The bill's distribution within its row is not known, so each
period gets the share of the bill for its share of the row's time, as the estimate accrues.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg
import pytest

from agent.ledger import InMemoryLedger
from agent.ledger.accrual import GRID, PoolReading
from agent.ledger.base import Ledger
from agent.ledger.billed import BilledCost, BilledCosts
from agent.ledger.meter import SpendMeter
from agent.ledger.postgres import PostgresLedger
from agent.ledger.rows import to_us
from agent.ledger.sqlite import SqliteLedger
from agent.planning.budget import Budget
from tests.postgres.fixtures import POSTGRES, Database

KOLKATA = ZoneInfo("Asia/Kolkata")
APRIL = datetime(2026, 4, 1, tzinfo=KOLKATA)  # 2026-03-31 18:30 UTC: the month starts inside the 18:00 UTC row
ROW = APRIL.astimezone(UTC).replace(minute=0)  # the hourly billing row [18:00, 19:00) UTC
BUDGET = Budget("research", frozenset({"a100"}), monthly_cap_usd=10_000.0, hourly_cap_usd=500.0, tz=KOLKATA)
UNITS = 3
PRICE = 24.0  # USD per unit-hour
TICK = timedelta(minutes=5)
GAP_AFTER = timedelta(minutes=10)
HOUR = timedelta(hours=1)
START = ROW - 2 * HOUR  # estimated spend from 16:00 UTC to 21:00 UTC
END = ROW + 3 * HOUR


def estimate(start: datetime, end: datetime) -> float:
    return UNITS * PRICE * (end - start) / HOUR


def charged(start: datetime, end: datetime) -> float:
    """The estimate of the entries the meter charged that start in [start, end): one a tick from START to END."""
    ticks = (START + i * TICK for i in range((END - START) // TICK))
    return sum(estimate(at, at + TICK) for at in ticks if start <= at < end)


def replaced(start: datetime, end: datetime) -> float:
    """The estimate a bill replaces in [start, end): of the entries that start in it. The meter's readings in a
    15-minute cell are one entry, which starts at the cell's start (the first reading in it)."""
    cells = (START + i * GRID for i in range((END - START) // GRID))
    return sum(estimate(at, at + GRID) for at in cells if start <= at < end)


def _charged(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> InMemoryLedger | SqliteLedger | PostgresLedger:
    """A ledger of the backend, holding the estimate the meter charged for the pool held at ``UNITS`` all along."""
    opened: InMemoryLedger | SqliteLedger | PostgresLedger
    if kind == "memory":
        opened = InMemoryLedger()
    elif kind == "sqlite":
        opened = SqliteLedger(tmp_path / "ledger.sqlite")
    else:
        database: Database = request.getfixturevalue("postgres_database")
        opened = PostgresLedger(database.url, database.password)
    meter = SpendMeter(opened, GAP_AFTER)
    at = START
    while at <= END:
        meter.observe([PoolReading("a100", at, UNITS, PRICE)])
        at += TICK
    return opened


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgresql", marks=POSTGRES)])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    opened = _charged(request.param, request, tmp_path)
    yield opened
    if not isinstance(opened, InMemoryLedger):
        opened.close()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=POSTGRES)])
def billed_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqliteLedger | PostgresLedger]:
    """The database ledgers, which keep billed costs beside the estimate."""
    opened = _charged(request.param, request, tmp_path)
    assert not isinstance(opened, InMemoryLedger)
    with opened:
        yield opened


def read(ledger: Ledger, now: datetime) -> dict[str, float]:
    """The budget's spend in its month and hour so far, through the meter and through ``spent``, and its spend in
    the whole previous month."""
    (spend,) = SpendMeter(ledger, GAP_AFTER).budget_spend([BUDGET], now)
    period, hour = BUDGET.period(now), BUDGET.hour(now)
    before = BUDGET.period(period.start - timedelta(microseconds=1))
    return {
        "meter month": spend.spent_period_usd,
        "meter hour": spend.spent_hour_usd,
        "month": ledger.spent(["a100"], period.start, now),
        "hour": ledger.spent(["a100"], hour.start, now),
        "previous month": ledger.spent(["a100"], before.start, before.end),
    }


def expected(now: datetime, billed: dict[tuple[datetime, datetime], float]) -> dict[str, float]:
    """What ``read`` must find: in each span, the estimate of the entries that start outside the billed rows (a
    row off the grid: ``replaced``) and, of each billed row, the share of its bill for the share of its time that
    lies in the span (the spans end on the 15-minute grid, so no piece of a row lies partly in one)."""

    def spend(start: datetime, end: datetime) -> float:
        total = charged(start, end)
        for (lo, hi), bill in billed.items():
            inside = min(hi, end) - max(lo, start)
            if inside > timedelta(0):
                total += inside / (hi - lo) * bill - replaced(max(lo, start), min(hi, end))
        return total

    period, hour = BUDGET.period(now), BUDGET.hour(now)
    before = BUDGET.period(period.start - timedelta(microseconds=1))
    month, this_hour = spend(period.start, now), spend(hour.start, now)
    return {
        "meter month": month,
        "meter hour": this_hour,
        "month": month,
        "hour": this_hour,
        "previous month": spend(before.start, before.end),
    }


@pytest.mark.parametrize("now", [ROW + HOUR, END], ids=["end-of-row", "later"])
def test_a_bill_equal_to_the_estimate_changes_no_period_s_spend(ledger: Ledger, now: datetime) -> None:
    """The memory ledger keeps no bills: a database ledger billed exactly the estimate must read as it does."""
    assert BUDGET.period(now).start == APRIL and ROW < APRIL < ROW + HOUR
    if isinstance(ledger, BilledCosts):
        ledger.record_billed([BilledCost("a100", lo, lo + HOUR, estimate(lo, lo + HOUR)) for lo in (ROW - HOUR, ROW)])
    assert read(ledger, now) == pytest.approx(expected(now, {}), abs=1e-6)


@pytest.mark.parametrize(
    ("lo", "hi"),
    [
        (ROW, ROW + HOUR),  # an hourly row across the month's and the Kolkata hour's start
        (ROW.replace(hour=0), ROW.replace(hour=0) + 24 * HOUR),  # a daily row: 18.5 h in March, 5.5 h in April
        (ROW + timedelta(minutes=7), ROW + timedelta(minutes=67)),  # edges off the 15-minute grid
    ],
    ids=["hourly", "daily", "off-grid"],
)
def test_a_bill_across_a_period_start_counts_its_share_in_each_period(
    billed_ledger: SqliteLedger | PostgresLedger, lo: datetime, hi: datetime
) -> None:
    bill = 1.5 * estimate(lo, hi) + 10.0
    billed_ledger.record_billed([BilledCost("a100", lo, hi, bill)])
    for now in (APRIL + timedelta(minutes=15), ROW + HOUR, END):
        assert read(billed_ledger, now) == pytest.approx(expected(now, {(lo, hi): bill}), abs=1e-6), now
    march = BUDGET.period(ROW)
    share = (APRIL - lo) / (hi - lo)
    assert billed_ledger.billed(["a100"], march.start, APRIL) == pytest.approx(share * bill)
    assert billed_ledger.billed(["a100"], APRIL, APRIL + 24 * HOUR) == pytest.approx((1 - share) * bill)

    # The same bill again (an export imported twice) counts once.
    billed_ledger.record_billed([BilledCost("a100", lo, hi, bill)])
    assert read(billed_ledger, END) == pytest.approx(expected(END, {(lo, hi): bill}), abs=1e-6)
    assert billed_ledger.billed(["a100"], march.start, APRIL + 24 * HOUR) == pytest.approx(bill)


def test_reconciliation_counts_the_hours_billed_and_splits_at_the_period_start(
    billed_ledger: SqliteLedger | PostgresLedger,
) -> None:
    rows = {(ROW - HOUR, ROW): 200.0, (ROW, ROW + HOUR): 80.0}
    billed_ledger.record_billed([BilledCost("a100", lo, hi, bill) for (lo, hi), bill in rows.items()])
    march = BUDGET.period(ROW)
    (whole,) = billed_ledger.reconcile(["a100"], ROW - HOUR, ROW + HOUR)
    assert (whole.hours, whole.estimated_usd, whole.billed_usd) == pytest.approx(
        (2.0, estimate(ROW - HOUR, ROW + HOUR), 280.0)
    )
    (april,) = billed_ledger.reconcile(["a100"], APRIL, END)
    assert (april.hours, april.estimated_usd, april.billed_usd) == pytest.approx(
        (0.5, estimate(APRIL, ROW + HOUR), 40.0)
    )
    (in_march,) = billed_ledger.reconcile(["a100"], march.start, APRIL)
    assert in_march.billed_usd + april.billed_usd == pytest.approx(whole.billed_usd)


def test_pieces_are_stored_on_the_grid_and_sum_to_the_bill(billed_ledger: SqliteLedger | PostgresLedger) -> None:
    """Storage: a row is kept as one piece per 15-minute slot it touches (a daily row, 96), whose bills add up to
    the row's; a later row replaces only the pieces it overlaps."""
    day = ROW.replace(hour=0)
    billed_ledger.record_billed([BilledCost("a100", day, day + 24 * HOUR, 0.1 * 96)])
    (daily,) = billed_ledger.reconcile(["a100"], day, day + 24 * HOUR)
    assert (daily.hours, daily.billed_usd) == pytest.approx((24.0, 0.1 * 96), rel=1e-12)
    assert billed_ledger.billed(["a100"], day, day + GRID) == pytest.approx(0.1)
    billed_ledger.record_billed([BilledCost("a100", ROW + timedelta(minutes=7), ROW + timedelta(minutes=37), 9.0)])
    replaced = billed_ledger.reconcile(["a100"], day, day + 24 * HOUR)[0]
    # The slots 18:00, 18:15 and 18:30 lose the daily bill; the new row's 18:07 piece is 8 minutes long.
    assert replaced.billed_usd == pytest.approx(0.1 * 93 + 9.0)
    assert replaced.hours == pytest.approx(24.0 - 45 / 60 + 30 / 60)


def store_whole(ledger: SqliteLedger | PostgresLedger, request: pytest.FixtureRequest, cost: BilledCost) -> None:
    """A bill stored in one row, as a release that did not cut bills on the grid stored it (plain SQL)."""
    row = (cost.pool_id, to_us(cost.start), to_us(cost.end), cost.cost_usd)
    if isinstance(ledger, SqliteLedger):
        with closing(sqlite3.connect(ledger.path)) as lite, lite:
            lite.execute("INSERT INTO billed VALUES (?, ?, ?, ?)", row)
        return
    database: Database = request.getfixturevalue("postgres_database")
    with psycopg.connect(database.url, password=database.password, autocommit=True) as postgres:
        postgres.execute("INSERT INTO leadtime_billed_costs VALUES (%s, %s, %s, %s)", row)


def test_a_bill_stored_whole_by_an_earlier_release_gives_way_to_an_import_over_it(
    billed_ledger: SqliteLedger | PostgresLedger, request: pytest.FixtureRequest
) -> None:
    day = ROW.replace(hour=0)
    daily = BilledCost("a100", day, day + 24 * HOUR, 960.0)
    store_whole(billed_ledger, request, daily)
    assert billed_ledger.billed(["a100"], APRIL, END) == 0.0  # all of it in March, where it starts
    # A row of a later export 20 hours into it replaces it, as any overlapped interval is replaced.
    late = BilledCost("a100", ROW + 2 * HOUR, ROW + 3 * HOUR, 50.0)
    billed_ledger.record_billed([late])
    assert billed_ledger.billed(["a100"], day, day + 24 * HOUR) == pytest.approx(50.0)
    assert read(billed_ledger, END) == pytest.approx(expected(END, {(late.start, late.end): 50.0}), abs=1e-6)
    # Importing the daily export again cuts it: each period gets its share.
    store_whole(billed_ledger, request, BilledCost("a100", day, ROW + 2 * HOUR, 800.0))
    billed_ledger.record_billed([daily])
    assert billed_ledger.billed(["a100"], day, day + 24 * HOUR) == pytest.approx(960.0)
    assert read(billed_ledger, END) == pytest.approx(expected(END, {(day, day + 24 * HOUR): 960.0}), abs=1e-6)
