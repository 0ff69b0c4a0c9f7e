"""A wall clock stepped back (NTP, a VM resumed) does not drop the spend of the time until it catches up.

Readings are stamped with the wall time, and a reading older than the pool's newest ledger entry used to add
nothing: after a step back of an hour, an hour of real spend went unrecorded, silently. The meter now charges such a
reading the time elapsed on the monotonic clock since the pool's previous reading (the units it held), and warns once
per step. The cost goes on the end of the pool's newest entry, which stays where it is: placed at that end plus the
monotonic time, the readings moved the ledger on as fast as the wall clock went, so it stayed ahead of the wall clock
by the whole step for good (and a restart put it further ahead), and spend read up to the wall time missed it."""

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

START = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
EVER = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2028, 1, 1, tzinfo=UTC))
MINUTE = timedelta(minutes=1)


def _two_hours(meter: SpendMeter, *, step_back: timedelta, units: int = 10, monotonic: bool = True) -> None:
    """One reading a minute for two real hours of ``units`` at 10 USD a unit-hour, the wall clock stepped back by
    ``step_back`` half-way; the monotonic clock runs on."""
    wall = START
    for minute in range(121):
        if minute == 60:
            wall -= step_back
        meter.observe([PoolReading("h100", wall, units, 10.0, float(minute * 60) if monotonic else None)])
        wall += MINUTE


def test_a_step_back_of_an_hour_keeps_the_spend_of_the_hour(caplog: pytest.LogCaptureFixture) -> None:
    ledger = InMemoryLedger()
    with caplog.at_level(logging.WARNING, logger="agent.ledger.meter"):
        _two_hours(SpendMeter(ledger, timedelta(minutes=5)), step_back=timedelta(hours=1))
    assert ledger.spent(["h100"], *EVER) == pytest.approx(200.0)
    warned = [r.getMessage() for r in caplog.records if "stepped back" in r.getMessage()]
    assert len(warned) == 1, warned  # once for the step, not once a minute
    assert "h100" in warned[0] and "a step back of 1:00:00" in warned[0]
    assert "catches up with the ledger, in 0:59:00" in warned[0]


def test_spend_is_the_same_whatever_the_step() -> None:
    steady = InMemoryLedger()
    _two_hours(SpendMeter(steady, timedelta(minutes=5)), step_back=timedelta(0))
    for back in (timedelta(seconds=90), timedelta(minutes=30), timedelta(hours=3)):
        stepped = InMemoryLedger()
        _two_hours(SpendMeter(stepped, timedelta(minutes=5)), step_back=back)
        assert stepped.spent(["h100"], *EVER) == pytest.approx(steady.spent(["h100"], *EVER)), back


def test_a_scale_up_read_at_the_same_instant_is_charged_from_then_on() -> None:
    """The loop records the agent's own scale-up right after the tick's reading, at the same wall time and about
    the same monotonic time: behind the ledger, it still raises the units held from that reading on."""
    ledger = InMemoryLedger()
    meter = SpendMeter(ledger, timedelta(minutes=5))
    meter.observe([PoolReading("h100", START, 10, 10.0, 0.0)])
    meter.observe([PoolReading("h100", START + 30 * MINUTE, 10, 10.0, 1800.0)])
    back = START  # the clock stepped back 30 minutes
    meter.observe([PoolReading("h100", back, 10, 10.0, 3600.0)])
    meter.observe([PoolReading("h100", back, 20, 10.0, 3600.0)])  # the scale-up
    meter.observe([PoolReading("h100", back + 30 * MINUTE, 20, 10.0, 5400.0)])
    assert ledger.spent(["h100"], *EVER) == pytest.approx(10 * 10.0 * 1 + 20 * 10.0 * 0.5)


def test_without_a_monotonic_time_an_older_reading_adds_nothing_and_is_told(caplog: pytest.LogCaptureFixture) -> None:
    """A reading with no monotonic time (a replay) or no earlier reading of its pool on this process's monotonic
    clock cannot say how much time passed: it adds nothing, as before, but the operator is told."""
    ledger = InMemoryLedger()
    with caplog.at_level(logging.WARNING, logger="agent.ledger.meter"):
        _two_hours(SpendMeter(ledger, timedelta(minutes=5)), step_back=timedelta(hours=1), monotonic=False)
    assert ledger.spent(["h100"], *EVER) == pytest.approx(100.0)
    warned = [r.getMessage() for r in caplog.records if "stepped back" in r.getMessage()]
    assert len(warned) == 1 and "not charged" in warned[0], warned


def test_a_restarted_meter_charges_from_its_second_reading() -> None:
    """After a restart behind the ledger, the first reading has no earlier one on the monotonic clock: it only sets
    where the time is measured from; the readings after it are charged."""
    ledger = InMemoryLedger()
    SpendMeter(ledger, timedelta(minutes=5)).observe([PoolReading("h100", START + 60 * MINUTE, 10, 10.0, 0.0)])
    ledger_before = ledger.spent(["h100"], *EVER)
    restarted = SpendMeter(ledger, timedelta(minutes=5))
    for minute in range(11):  # the wall clock an hour behind the ledger, a fresh process's monotonic clock
        restarted.observe([PoolReading("h100", START + minute * MINUTE, 10, 10.0, 5.0 + minute * 60)])
    assert ledger.spent(["h100"], *EVER) - ledger_before == pytest.approx(10 * 10.0 * 10 / 60)


class _SteppedClock:
    """A node's clocks: the wall time, which NTP may step, and a monotonic time that only runs."""

    def __init__(self, start: datetime) -> None:
        self.wall, self.seconds = start, 0.0

    def run(self, by: timedelta) -> None:
        self.wall += by
        self.seconds += by.total_seconds()

    def monotonic(self) -> float:
        return self.seconds


def test_the_budget_watch_charges_ticks_behind_the_ledger_by_its_monotonic_clock() -> None:
    """The loop's ticks, stamped with the wall time, on a 10-unit pool that scales up to 20 an hour after the wall
    clock stepped back an hour: two real hours at 10 units, then one at 20, 400 USD at 10 USD a unit-hour."""
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
    clock = _SteppedClock(START)
    pools = {p.pool_id: p for p in settings.pool_specs()}
    watch = BudgetWatch(settings, pools, ledger, tick=MINUTE, monotonic=clock.monotonic)
    for minute in range(181):
        if minute == 60:
            clock.wall -= timedelta(hours=1)
        now = clock.wall
        units = 10 if minute <= 120 else 20
        watch.observe(now, {"h100": PoolState("h100", now, units, units)})
        if minute == 120:  # the agent's own scale-up, right after the tick's reading
            up = Resize("h100", 10, 20, "demand", "h100@up")
            done = ActionResult(up.key, "h100", ActionStatus.DONE, now)
            watch.acted(now, CapacityPlan(now, (up,)), [done], {"h100": PoolState("h100", now, 10, 10)})
        clock.run(MINUTE)
    assert ledger.spent(["h100"], *EVER) == pytest.approx(2 * 10 * 10.0 + 20 * 10.0)


def test_a_reading_behind_another_writers_entry_adds_nothing_and_says_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two replicas charging one ledger, one a minute apart and the other half a minute later, whose readings land
    in either order: a reading behind the other replica's entry is no step of its clock. Every instant is charged
    once, and nothing is told."""
    ledger = InMemoryLedger()
    first, second = SpendMeter(ledger, timedelta(minutes=5)), SpendMeter(ledger, timedelta(minutes=5))
    with caplog.at_level(logging.WARNING, logger="agent.ledger.meter"):
        for minute in range(60):
            on, half = START + minute * MINUTE, START + minute * MINUTE + MINUTE / 2
            later = PoolReading("h100", half, 10, 10.0, 1000.0 + minute * 60 + 30)
            sooner = PoolReading("h100", on, 10, 10.0, float(minute * 60))
            if minute % 2:  # the half-minute replica writes first: the other's reading is behind its entry
                second.observe([later])
                first.observe([sooner])
            else:
                first.observe([sooner])
                second.observe([later])
    assert ledger.spent(["h100"], *EVER) == pytest.approx(10 * 10.0 * (59.5 / 60))
    assert not [r for r in caplog.records if "stepped back" in r.getMessage()]


def _ledger(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Ledger:
    if kind == "memory":
        return InMemoryLedger()
    if kind == "sqlite":
        return SqliteLedger(tmp_path / "ledger.sqlite")
    database: Database = request.getfixturevalue("postgres_database")
    return PostgresLedger(database.url, database.password)


@pytest.mark.parametrize("kind", ["memory", "sqlite", pytest.param("postgres", marks=POSTGRES)])
def test_the_wall_clock_catches_up_with_the_ledger_after_the_step(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """An hour at 10 units, the wall clock stepped back an hour, then two more real hours: the ledger's newest entry
    is where the wall clock is, not an hour ahead of it, and the three hours are charged once (each ledger keeps the
    microsecond pieces the catch-up is charged on)."""
    ledger = _ledger(kind, request, tmp_path)
    meter = SpendMeter(ledger, timedelta(minutes=5))
    wall, mono = START, 0.0
    for minute in range(181):
        if minute == 60:
            wall -= timedelta(hours=1)
        meter.observe([PoolReading("h100", wall, 10, 10.0, mono)])
        if minute < 180:
            wall, mono = wall + MINUTE, mono + 60.0
    last = ledger.last_entry("h100")
    assert last is not None and abs(last.end - wall) <= MINUTE
    assert ledger.spent(["h100"], *EVER) == pytest.approx(10 * 10.0 * 3)
    # read up to the wall time, as the budgets read it, the spend is all there
    assert ledger.spent(["h100"], START - timedelta(hours=1), wall + MINUTE) == pytest.approx(10 * 10.0 * 3)


def test_a_restart_while_the_wall_clock_catches_up_puts_the_ledger_no_further_ahead(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Stepped back an hour, restarted half an hour later (a new meter, a new monotonic origin): the ledger stays
    where it was, the wall clock reaches it at the hour, and only the restart's first reading goes uncharged."""
    ledger = InMemoryLedger()
    meter = SpendMeter(ledger, timedelta(minutes=5))
    wall, mono = START, 0.0
    for minute in range(151):
        if minute == 60:
            wall -= timedelta(hours=1)
        if minute == 90:
            meter, mono = SpendMeter(ledger, timedelta(minutes=5)), 1000.0
        meter.observe([PoolReading("h100", wall, 10, 10.0, mono)])
        if minute < 150:
            wall, mono = wall + MINUTE, mono + 60.0
    last = ledger.last_entry("h100")
    assert last is not None and last.end == wall  # the wall clock passed the ledger at the hour: plain readings since
    assert ledger.spent(["h100"], *EVER) == pytest.approx(10 * 10.0 * 149 / 60)  # 150 minutes but the restart's one


def test_a_reading_that_finds_the_wall_clock_caught_up_is_owed_the_time_before_the_entry_end() -> None:
    """Stepped back 90 seconds between two readings a minute apart: the next reading is behind and charged its
    minute on the monotonic clock; the one after finds the wall clock 30 seconds past the ledger and is charged
    those and the 30 seconds before them, a minute in all."""
    ledger = InMemoryLedger()
    meter = SpendMeter(ledger, timedelta(minutes=5))
    meter.observe([PoolReading("h100", START, 10, 60.0, 0.0)])  # 10 USD a minute
    meter.observe([PoolReading("h100", START + MINUTE, 10, 60.0, 60.0)])
    meter.observe([PoolReading("h100", START + MINUTE / 2, 10, 60.0, 120.0)])  # stepped back 90 s: behind
    assert ledger.spent(["h100"], *EVER) == pytest.approx(20.0)
    meter.observe([PoolReading("h100", START + 3 * MINUTE / 2, 10, 60.0, 180.0)])
    assert ledger.spent(["h100"], *EVER) == pytest.approx(30.0)
    meter.observe([PoolReading("h100", START + 5 * MINUTE / 2, 10, 60.0, 240.0)])
    assert ledger.spent(["h100"], *EVER) == pytest.approx(40.0)
