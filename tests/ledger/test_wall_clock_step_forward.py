"""A wall clock stepped forward (a bad NTP answer, a clock set by hand) is charged the time that passed, where it
passed.

A reading is stamped with the wall time, and accrual charged the whole time since the pool's newest entry: one tick
100 days ahead, while the monotonic clock moved 5 minutes, was charged as 100 days of an unwatched gap at the units
held (192,006.67 USD for 8 units at 10 USD a unit-hour), and left the ledger's end 100 days ahead, so that once the
clock came back every real reading was behind it and charged on a microsecond piece there, in a future month. The
meter now charges such a reading the monotonic time since the pool's previous one and records it at that reading's
time plus the monotonic time; the next reading, if the wall clock kept its new time, is recorded where it is read
and the step charged then, and once the clock is back, readings are recorded where they are read. A reading without a
monotonic time (a replay, a simulation, whose clock never steps) is charged by its wall time as before."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.budget_watch import BudgetWatch
from agent.ledger import InMemoryLedger
from agent.ledger.accrual import PoolReading
from agent.ledger.base import Ledger
from agent.ledger.meter import SpendMeter
from agent.ledger.postgres import PostgresLedger
from agent.ledger.sqlite import SqliteLedger
from config import settings_from_mapping
from models import ActionResult, ActionStatus, CapacityPlan, PoolState, Resize
from tests.postgres.fixtures import POSTGRES, Database

START = datetime(2026, 12, 1, tzinfo=UTC)
EVER = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2028, 1, 1, tzinfo=UTC))
TICK = timedelta(minutes=5)
AHEAD = timedelta(days=100)


def _ledger(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Ledger:
    if kind == "memory":
        return InMemoryLedger()
    if kind == "sqlite":
        return SqliteLedger(tmp_path / "ledger.sqlite")
    database: Database = request.getfixturevalue("postgres_database")
    return PostgresLedger(database.url, database.password)


def _messages(caplog: pytest.LogCaptureFixture, part: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if part in r.getMessage()]


@pytest.mark.parametrize("kind", ["memory", "sqlite", pytest.param("postgres", marks=POSTGRES)])
def test_a_tick_100_days_ahead_is_charged_the_time_that_passed(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An hour of 8 units read every 5 minutes, one tick with the wall clock 100 days ahead, then 6 hours back on
    the right clock at 64 units: 3,873.33 USD really spent, all of it in December up to the last reading (before:
    195,873.33 USD in all, 560.00 of it in December up to the last reading, 23,073.33 in March 2027, where the 6
    hours at 64 units were charged at the ledger's end)."""
    ledger = _ledger(kind, request, tmp_path)
    meter = SpendMeter(ledger, gap_after=TICK)
    wall, mono = START, 0.0
    with caplog.at_level(logging.WARNING, logger="agent.ledger.meter"):
        for _ in range(12):
            meter.observe([PoolReading("h100", wall, 8, 10.0, mono)])
            wall, mono = wall + TICK, mono + 300
        meter.observe([PoolReading("h100", wall + AHEAD, 8, 10.0, mono)])  # the tick ahead
        wall, mono = wall + TICK, mono + 300
        for _ in range(72):
            meter.observe([PoolReading("h100", wall, 64, 10.0, mono)])
            wall, mono = wall + TICK, mono + 300
    last = wall - TICK
    really = 8 * 10.0 * 65 / 60 + 64 * 10.0 * 71 * 5 / 60
    assert ledger.spent(["h100"], *EVER) == pytest.approx(really)
    assert ledger.spent(["h100"], START, last) == pytest.approx(really)  # in December, up to the last reading
    newest = ledger.last_entry("h100")
    assert newest is not None and newest.end == last
    assert not _messages(caplog, "not observed")
    assert not _messages(caplog, "stepped back")
    forward = _messages(caplog, "stepped forward")
    assert len(forward) == 1, forward
    assert "100 days, 0:00:00 past its previous reading" in forward[0]


def test_a_step_forward_the_clock_keeps_is_charged_once_at_the_next_reading(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The wall clock 2 hours ahead for half an hour of one-minute ticks, with a scale-up from 10 to 20 units
    recorded right after one of them (same wall and monotonic time), then back. The first reading ahead is charged
    its minute; the next one, a minute past it on both clocks, says the wall clock kept its new time (as after NTP
    set a slow clock right, or a suspend a monotonic clock did not count), and is recorded where it was read: the
    2 hours are charged there, once, at the 10 units held (1,200 USD on top of the 1,350 the minutes cost), and the
    ledger follows the wall clock from then on. Back on the earlier time, each minute is charged once at the end of
    the ledger as after any step back. Before, every reading ahead was compared with where the previous one was
    placed, found 2 hours ahead again and placed back, which kept the ledger behind a wall clock that stayed on
    its new time for good (1,350 USD, where a kept step is charged 2,550)."""
    ledger = InMemoryLedger()
    meter = SpendMeter(ledger, gap_after=TICK)
    minute = timedelta(minutes=1)
    with caplog.at_level(logging.WARNING, logger="agent.ledger.meter"):
        for i in range(91):
            real = START + i * minute
            wall = real + timedelta(hours=2) if 30 <= i < 60 else real
            units = 10 if i <= 45 else 20
            meter.observe([PoolReading("h100", wall, units, 60.0, i * 60.0)])  # 1 USD a unit-minute
            if i == 45:
                meter.observe([PoolReading("h100", wall, 20, 60.0, i * 60.0)])  # the agent's own scale-up
    step = 10 * 120
    assert ledger.spent(["h100"], *EVER) == pytest.approx(45 * 10 + 45 * 20 + step)
    kept = START + timedelta(hours=2)  # where the ledger follows the wall clock (entries folded to 15 minutes)
    assert ledger.spent(["h100"], START, START + 30 * minute) == pytest.approx(30 * 10)  # the minute ahead: once
    assert ledger.spent(["h100"], START + 30 * minute, kept + 30 * minute) == pytest.approx(step)
    assert ledger.spent(["h100"], kept + 30 * minute, kept + 45 * minute) == pytest.approx(15 * 10)
    # from the scale-up on: 14 minutes ahead, and the 31 after the clock came back on pieces at the ledger's end
    assert ledger.spent(["h100"], kept + 45 * minute, kept + 60 * minute) == pytest.approx(45 * 20)
    newest = ledger.last_entry("h100")
    assert newest is not None and kept + 59 * minute < newest.end < kept + 60 * minute  # pieces of the step back
    forward = _messages(caplog, "stepped forward")
    assert len(forward) == 1, forward
    assert "2:00:00 past its previous reading" in forward[0]
    assert len(_messages(caplog, "stepped back")) == 1


def test_a_replay_without_monotonic_times_is_charged_by_its_wall_times() -> None:
    """A replay or a simulation has no monotonic clock: its readings jump as its clock does (6 hours between two
    readings), and the jump is charged as an unwatched gap at the larger of the units either side, as before."""
    ledger = InMemoryLedger()
    meter = SpendMeter(ledger, gap_after=TICK)
    meter.observe([PoolReading("h100", START, 8, 10.0)])
    meter.observe([PoolReading("h100", START + timedelta(hours=6), 16, 10.0)])
    assert ledger.spent(["h100"], *EVER) == pytest.approx(16 * 10.0 * 6)
    newest = ledger.last_entry("h100")
    assert newest is not None and newest.end == START + timedelta(hours=6)


@pytest.mark.parametrize("kind", ["memory", "sqlite", pytest.param("postgres", marks=POSTGRES)])
def test_a_scale_up_in_the_tick_ahead_is_placed_with_that_tick(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An hour of 8 units read every 5 minutes, one tick with the wall clock 100 days ahead in which the agent also
    scales the pool up to 16 units (a second reading at the same wall and monotonic time, as the budget watch
    records a scale-up), then an hour at 16 units on the right clock: 240.00 USD, as on a clock that never stepped
    (8 units for the first hour, 16 from the scale-up on), all in December, the ledger ending at the last reading.
    Before, the scale-up reading was compared with the tick's wall time, taken as the clock keeping its new time and
    recorded 100 days ahead: the 100 days were charged as a gap at 16 units (384,240.00 USD in all, 118,960.00 of it
    in December), the ledger's end stood 100 days ahead and every later reading was told as a step back."""
    ledger = _ledger(kind, request, tmp_path)
    meter = SpendMeter(ledger, gap_after=TICK)
    wall, mono = START, 0.0
    with caplog.at_level(logging.WARNING, logger="agent.ledger.meter"):
        for _ in range(12):
            meter.observe([PoolReading("h100", wall, 8, 10.0, mono)])
            wall, mono = wall + TICK, mono + 300
        meter.observe([PoolReading("h100", wall + AHEAD, 8, 10.0, mono)])  # the tick ahead
        meter.observe([PoolReading("h100", wall + AHEAD, 16, 10.0, mono)])  # its own scale-up, same stamps
        wall, mono = wall + TICK, mono + 300
        for _ in range(12):
            meter.observe([PoolReading("h100", wall, 16, 10.0, mono)])
            wall, mono = wall + TICK, mono + 300
    last = wall - TICK
    really = 8 * 10.0 * 60 / 60 + 16 * 10.0 * 60 / 60
    assert ledger.spent(["h100"], *EVER) == pytest.approx(really)
    assert ledger.spent(["h100"], START, last) == pytest.approx(really)  # in December, up to the last reading
    newest = ledger.last_entry("h100")
    assert newest is not None and newest.end == last
    assert not _messages(caplog, "not observed")
    assert not _messages(caplog, "stepped back")
    forward = _messages(caplog, "stepped forward")
    assert len(forward) == 1, forward
    assert "100 days, 0:00:00 past its previous reading" in forward[0]


def test_the_budget_watch_places_its_scale_up_with_the_tick_ahead(caplog: pytest.LogCaptureFixture) -> None:
    """The loop's ticks every 5 minutes on an 8-unit pool, the wall clock 100 days ahead for one tick in which the
    agent scales the pool up to 16 (``BudgetWatch.acted`` records it at the tick's wall time and monotonic seconds),
    then an hour of ticks on the right clock: 240.00 USD, in December, the ledger ending at the last tick (before:
    384,240.00 USD, the ledger's end 100 days ahead)."""
    settings = settings_from_mapping(
        {
            "demand_classes": [{"name": "a"}],
            "pools": [
                {
                    "id": "h100",
                    "kind": "gpu-node-pool",
                    "chips_per_unit": 8,
                    "max_units": 40,
                    "lead_time": "10m",
                    "price_per_unit_hour_usd": 10.0,
                    "serves": ["a"],
                },
            ],
        }
    )
    ledger = InMemoryLedger()
    seconds = [0.0]  # the monotonic clock the watch is given: runs 300 s a tick, whatever the wall clock says
    pools = {p.pool_id: p for p in settings.pool_specs()}
    watch = BudgetWatch(settings, pools, ledger, tick=TICK, monotonic=lambda: seconds[0])
    with caplog.at_level(logging.WARNING, logger="agent.ledger.meter"):
        for i in range(25):
            now = START + i * TICK + (AHEAD if i == 12 else timedelta(0))
            units = 8 if i <= 12 else 16
            watch.observe(now, {"h100": PoolState("h100", now, units, units)})
            if i == 12:  # the agent's own scale-up, in the tick ahead
                up = Resize("h100", 8, 16, "demand", "h100@up")
                done = ActionResult(up.key, "h100", ActionStatus.DONE, now)
                watch.acted(now, CapacityPlan(now, (up,)), [done], {"h100": PoolState("h100", now, 8, 8)})
            seconds[0] += TICK.total_seconds()
    last = START + 24 * TICK
    really = 8 * 10.0 * 60 / 60 + 16 * 10.0 * 60 / 60
    assert ledger.spent(["h100"], *EVER) == pytest.approx(really)
    assert ledger.spent(["h100"], START, last) == pytest.approx(really)
    newest = ledger.last_entry("h100")
    assert newest is not None and newest.end == last
    assert not _messages(caplog, "stepped back")
    assert len(_messages(caplog, "stepped forward")) == 1
