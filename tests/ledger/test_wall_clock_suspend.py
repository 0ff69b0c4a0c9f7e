"""A suspend of the agent's VM (or NTP setting a slow wall clock 2 hours forward) is charged, and the ledger keeps up
with the wall clock after it.

The accelerators bill on while the agent's own VM is suspended; the wall clock runs through the suspend, and
``time.monotonic`` does not. The first reading after a 2-hour suspend was taken for a step forward and placed 2 hours
back, and every later one was compared with where the previous one was placed, found 2 hours ahead again and placed
back too: 8 units at 10 USD a unit-hour for an hour, 2 hours suspended and 55 minutes more were charged 153.33 USD
of 313.33, the ledger ended at 01:55 with the wall clock at 03:55 for good, and the current hour's spend read 0.00
(an hourly cap blind). A reading is now compared with the previous reading's wall time: the next reading finds the
wall clock kept its time and is recorded where it is read, the 2 hours charged there. The system clock's
monotonic time counts a suspend where the platform can (``CLOCK_BOOTTIME``), so a suspend is no step at all there."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.ledger import InMemoryLedger
from agent.ledger.accrual import PoolReading
from agent.ledger.base import Ledger
from agent.ledger.meter import SpendMeter
from agent.ledger.sqlite import SqliteLedger
from agent.planning.budget import Budget
from models.clock import SystemClock

START = datetime(2026, 12, 1, tzinfo=UTC)
EVER = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2028, 1, 1, tzinfo=UTC))
TICK = timedelta(minutes=5)
SUSPEND = timedelta(hours=2)


def _ledger(kind: str, tmp_path: Path) -> Ledger:
    return InMemoryLedger() if kind == "memory" else SqliteLedger(tmp_path / "ledger.sqlite")


def _suspended(ledger: Ledger, counts_suspend: bool) -> datetime:
    """An hour of 8 units read every 5 minutes, a 2-hour suspend, 55 minutes more; the monotonic time runs through
    the suspend when ``counts_suspend``. Returns the last reading's wall time."""
    meter = SpendMeter(ledger, gap_after=TICK)
    wall, mono = START, 0.0
    for _ in range(13):
        meter.observe([PoolReading("h100", wall, 8, 10.0, mono)])
        wall, mono = wall + TICK, mono + TICK.total_seconds()
    wall += SUSPEND
    mono += SUSPEND.total_seconds() if counts_suspend else 0.0
    for _ in range(11):
        meter.observe([PoolReading("h100", wall, 8, 10.0, mono)])
        wall, mono = wall + TICK, mono + TICK.total_seconds()
    return wall - TICK


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("counts_suspend", [False, True], ids=["monotonic", "boottime"])
def test_a_suspend_is_charged_and_the_ledger_keeps_up(
    kind: str, counts_suspend: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """3 h 55 min at 8 units: 313.33 USD, the ledger ending at the last reading, 73.33 USD in its clock hour
    (03:00-03:55). On a monotonic clock that stood still (153.33, 01:55 and 0.00 before), the step is told once; on
    one that counts the suspend, it is no step at all."""
    ledger = _ledger(kind, tmp_path)
    with caplog.at_level(logging.WARNING, logger="agent.ledger.meter"):
        last = _suspended(ledger, counts_suspend)
    assert last == START + timedelta(hours=3, minutes=55)
    assert ledger.spent(["h100"], *EVER) == pytest.approx(8 * 10.0 * (3 + 55 / 60))
    newest = ledger.last_entry("h100")
    assert newest is not None and newest.end == last
    budget = Budget(name="gpus", pools=frozenset({"h100"}), hourly_cap_usd=100.0)
    spend = SpendMeter(ledger, gap_after=TICK).budget_spend([budget], last)[0]
    assert spend.spent_hour_usd == pytest.approx(8 * 10.0 * 55 / 60)
    forward = [r.getMessage() for r in caplog.records if "stepped forward" in r.getMessage()]
    assert len(forward) == (0 if counts_suspend else 1), forward
    assert not [r for r in caplog.records if "stepped back" in r.getMessage()]


@pytest.mark.skipif(not hasattr(time, "CLOCK_BOOTTIME"), reason="the platform has no clock that counts a suspend")
def test_the_system_clocks_monotonic_time_counts_a_suspend(monkeypatch: pytest.MonkeyPatch) -> None:
    """The system clock's monotonic time is the boot-time clock, which runs through a suspend (``time.monotonic``
    does not). On a machine that never slept the two read alike, so the boot-time clock here is one that slept a
    day: the system clock reads it, not ``time.monotonic``."""
    read = time.clock_gettime

    def slept_a_day(clock_id: int) -> float:
        return read(clock_id) + (86_400.0 if clock_id == time.CLOCK_BOOTTIME else 0.0)

    monkeypatch.setattr(time, "clock_gettime", slept_a_day)
    seconds = SystemClock().monotonic()
    assert seconds - time.monotonic() == pytest.approx(86_400.0, abs=60.0)
