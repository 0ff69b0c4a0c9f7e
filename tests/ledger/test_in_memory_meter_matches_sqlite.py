"""The in-memory ledger charged through the spend meter stores what the SQLite ledger stores for the same readings
(the reference it follows: folded entries, opening marks, totals), across grid edges, gaps, scale-ups charged within
a tick and pools first seen late; and the meter reads what a ledger it is given can do from that ledger, also when
it is replaced."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.ledger import InMemoryLedger
from agent.ledger.accrual import PoolReading
from agent.ledger.meter import SpendMeter
from agent.ledger.sqlite import SqliteLedger
from agent.planning.budget import Budget
from config.schema import BudgetSettings

T0 = datetime(2024, 3, 31, 22, 55, tzinfo=UTC)  # the month ends within the run
PRICES = {"a": 3.5, "b": 0.7, "c": 12.25}


def _readings(seed: int) -> list[list[PoolReading]]:
    """Per tick, the readings of one observation, and now and then the agent's own scale-up right after."""
    rng = random.Random(seed)
    units = {p: rng.randint(0, 6) for p in PRICES}
    ticks: list[list[PoolReading]] = []
    now = T0
    for i in range(400):
        now += timedelta(minutes=rng.choice([5, 5, 5, 1, 7, 50]))  # 50 minutes: a gap to charge
        for pool in PRICES:
            if rng.random() < 0.2:
                units[pool] = max(0, units[pool] + rng.choice([-2, -1, 1, 3]))
        seen = [p for p in PRICES if not (p == "c" and i < 30)]  # c first seen late
        ticks.append([PoolReading(p, now, units[p], PRICES[p]) for p in seen])
        if rng.random() < 0.3:
            pool = rng.choice(seen)
            units[pool] += rng.randint(1, 3)
            ticks.append([PoolReading(pool, now, units[pool], PRICES[pool])])
    return ticks


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_in_memory_ledger_stores_what_sqlite_stores_for_the_same_readings(tmp_path: Path, seed: int) -> None:
    memory = InMemoryLedger()
    sqlite = SqliteLedger(tmp_path / "ledger.sqlite")
    try:
        meters = [SpendMeter(memory, timedelta(minutes=30)), SpendMeter(sqlite, timedelta(minutes=30))]
        for readings in _readings(seed):
            charged = [meter.observe(readings) for meter in meters]
            assert charged[0] == charged[1]
        assert memory.entries() == sqlite.entries()
        assert len(memory.entries()) < sum(len(r) for r in _readings(seed))  # folded: fewer rows than readings
        end = T0 + timedelta(days=3)
        for pool in PRICES:
            assert memory.last_entry(pool) == sqlite.last_entry(pool)
            for start in (T0, datetime(2024, 4, 1, tzinfo=UTC), T0 + timedelta(hours=5)):
                assert memory.spent([pool], start, end) == pytest.approx(sqlite.spent([pool], start, end), abs=1e-9)
        assert memory.recorded_since(list(PRICES)) == sqlite.recorded_since(list(PRICES))
    finally:
        sqlite.close()


def test_the_meter_reads_the_coverage_of_the_ledger_it_holds_now(tmp_path: Path) -> None:
    budget = Budget.from_settings(BudgetSettings(name="team", pools=("a",), monthly_cap_usd=1000.0))
    now = datetime(2024, 4, 1, 12, tzinfo=UTC)
    first = InMemoryLedger()
    meter = SpendMeter(first, timedelta(minutes=30))
    meter.observe([PoolReading("a", now - timedelta(hours=2), 2, 1.0)])
    (late,) = meter.coverage([budget], now)
    assert not late.complete  # recorded from 10:00, the period started at midnight
    sqlite = SqliteLedger(tmp_path / "ledger.sqlite")
    try:
        sqlite.record_many(first.entries())
        meter.ledger = sqlite
        (again,) = meter.coverage([budget], now)
        assert again.where == sqlite.where  # read from the ledger given, not the one the meter was made with
        meter.ledger = _Plain(first)
        assert meter.coverage([budget], now) == []  # a ledger that cannot say since when it holds a pool
    finally:
        sqlite.close()


class _Plain:
    """A ledger that keeps no record of since when it holds each pool (no ``recorded_since``, no ``where``)."""

    def __init__(self, inner: InMemoryLedger) -> None:
        self._inner = inner
        self.record = inner.record
        self.record_many = inner.record_many
        self.update = inner.update
        self.spent = inner.spent
        self.last_entry = inner.last_entry
