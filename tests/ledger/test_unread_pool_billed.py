"""A pool that could not be read while the bill of those hours is imported: its hours count once, on every ledger
that keeps bills.

While a pool is unread, its budgets count what it held since its newest entry without recording it (the meter's
unrecorded spend); once it is read again, accrual records that stretch, and the entries a billed interval covers
are replaced by the bill. The unrecorded spend leaves out the same pieces, so the figures while the pool is unread
are those it has once read again. An h100 pool of 10 units at 10 USD per unit-hour (100 USD an hour), read from
00:00 to 01:00, unread to 03:15; the bill for 00:00-03:00 is 120 USD an hour. The budget is in Asia/Kolkata, so its
hour at 03:15 UTC is [02:30, 03:30) UTC, half of it billed. The example of docs/billing-reconciliation.md.

``leadtime recommend`` reads the same SQLite file through its read-only ledger (``agent.commands.recommend_ledger``),
which passes the billed intervals through and leaves out its own charges a bill covers: it read 585/135 USD there,
while unread and once its dry-run tick read the pool, where the daemon reads 385/85.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agent.commands.recommend_ledger import ReadOnlyLedger, read_only
from agent.ledger.accrual import PoolReading
from agent.ledger.billed import BilledCost
from agent.ledger.meter import SpendMeter
from agent.ledger.postgres import PostgresLedger
from agent.ledger.shared_file import LeaderWrittenLedger
from agent.ledger.sqlite import SqliteLedger
from agent.planning.budget import Budget, Period
from tests.postgres.fixtures import POSTGRES, Database

T0 = datetime(2026, 12, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
NOW = T0 + 3 * HOUR + timedelta(minutes=15)
UNITS, PRICE = 10, 10.0  # 100 USD an hour
BILL_PER_HOUR = 120.0
BUDGET = Budget("research", frozenset({"h100"}), monthly_cap_usd=100_000.0, tz=ZoneInfo("Asia/Kolkata"))
GAP_AFTER = timedelta(minutes=10)


@dataclass(frozen=True)
class Rig:
    ledger: SqliteLedger | PostgresLedger | LeaderWrittenLedger
    record_billed: Callable[[Sequence[BilledCost]], None]  # what ``ledger import-billing`` stores
    read: SqliteLedger | PostgresLedger | LeaderWrittenLedger | ReadOnlyLedger  # what the spend is read through


@pytest.fixture(
    params=["sqlite", "sqlite-shared-file", "recommend-read-only", pytest.param("postgresql", marks=POSTGRES)]
)
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    path = tmp_path / "ledger.sqlite"
    if request.param == "recommend-read-only":  # the daemon writes the file; ``leadtime recommend`` reads it
        with SqliteLedger(path) as daemon, SqliteLedger(path, read_only=True) as recommend:
            yield Rig(daemon, daemon.record_billed, read_only(recommend))
        return
    if request.param == "sqlite-shared-file":  # the file the daemon's replicas share, opened by the one leading
        leading = [True]
        shared = LeaderWrittenLedger(path)
        shared.follow(lambda: leading[0])
        shared.spent(["h100"], T0, NOW)  # the leader opens the file, creating it

        def import_while_not_leading(costs: Sequence[BilledCost]) -> None:
            # the import takes the writer lock, which the leader holds: it runs while no replica leads
            leading[0] = False
            shared.spent(["h100"], T0, NOW)  # reopens read-only, letting the lock go
            with SqliteLedger(path) as importer:
                importer.record_billed(costs)
            leading[0] = True

        with shared:
            yield Rig(shared, import_while_not_leading, shared)
        return
    opened: SqliteLedger | PostgresLedger
    if request.param == "sqlite":
        opened = SqliteLedger(path)
    else:
        database: Database = request.getfixturevalue("postgres_database")
        opened = PostgresLedger(database.url, database.password)
    with opened:
        yield Rig(opened, opened.record_billed, opened)


def hourly_bill(start: datetime, hours: int, pool: str = "h100", per_hour: float = BILL_PER_HOUR) -> list[BilledCost]:
    return [BilledCost(pool, start + i * HOUR, start + (i + 1) * HOUR, per_hour) for i in range(hours)]


def test_an_unread_pool_s_billed_hours_count_once(rig: Rig) -> None:
    meter = SpendMeter(rig.ledger, GAP_AFTER)
    reader = meter if rig.read is rig.ledger else SpendMeter(rig.read, GAP_AFTER)
    at = T0
    while at <= T0 + HOUR:
        meter.observe([PoolReading("h100", at, UNITS, PRICE)])
        at += timedelta(minutes=5)
    assert BUDGET.hour(NOW) == Period(T0 + 2.5 * HOUR, T0 + 3.5 * HOUR)

    def unread() -> tuple[float, float]:
        (spend,) = reader.budget_spend([BUDGET], NOW, unread=["h100"], prices={"h100": PRICE})
        assert spend.unread_since == {"h100": T0 + HOUR} and spend.last_units == {"h100": UNITS}
        return spend.spent_period_usd, spend.spent_hour_usd

    # No bill: the read hour and the 2 h 15 min unread, at 100 USD an hour; of the budget's hour, 45 minutes.
    assert unread() == pytest.approx((325.0, 75.0))

    rig.record_billed(hourly_bill(T0, 3))
    # The bill for 00:00-03:00 (360 USD) and the estimate of 03:00-03:15 (25 USD); of the hour, the bill for
    # 02:30-03:00 (60 USD) and 25 USD. The estimate of 01:00-03:00 was counted beside its bill: 585 and 135 USD.
    assert unread() == pytest.approx((385.0, 85.0))

    # Read again at the same units: the stretch is recorded, its billed part replaced by the bill. The same figures.
    # (recommend: its dry-run tick reads the pool and charges the stretch beside the ledger, 585/135 before.)
    reader.observe([PoolReading("h100", NOW, UNITS, PRICE)])
    (spend,) = reader.budget_spend([BUDGET], NOW)
    assert (spend.spent_period_usd, spend.spent_hour_usd) == pytest.approx((385.0, 85.0))


def test_billed_intervals_are_those_overlapping_the_span(rig: Rig) -> None:
    """The stored pieces (15 minutes each) that overlap [start, end), found by their ends; other pools' left out."""
    rig.record_billed([*hourly_bill(T0, 3), *hourly_bill(T0, 1, "a100", 50.0)])
    ledger = rig.read
    found = ledger.billed_intervals(["h100"], T0 + 2 * HOUR + timedelta(minutes=50), NOW)
    quarter = timedelta(minutes=15)
    assert [(b.pool_id, b.start, b.end) for b in found] == [
        ("h100", T0 + 2 * HOUR + 3 * quarter, T0 + 3 * HOUR)  # the piece holding 02:50; nothing billed after 03:00
    ]
    assert found[0].cost_usd == pytest.approx(BILL_PER_HOUR / 4)
    assert ledger.billed_intervals(["h100"], T0 + 3 * HOUR, NOW) == []
    assert len(ledger.billed_intervals(["a100", "h100"], T0, NOW)) == 4 + 12
