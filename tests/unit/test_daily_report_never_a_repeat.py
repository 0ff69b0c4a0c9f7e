"""A daily report is never a repeat of the one before it, whatever the notifiers' de-duplication window: each stands
for its own day. After a wall clock stepped forward in the evening past the next morning's report time and corrected
back, the runtime sends the real next morning's report ten hours after the early one (``agent.daemon.runtime``); with
``alerts.dedup_window`` at 12 h the notifier swallowed it and answered delivered, and that day had no report.
Alerts of a condition are still repeats within the window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.notify.dedup import DedupWindow
from models import AlertEvent, AlertKind, Severity
from tests.fakes.stepping_clock import SteppingClock

EVENING = datetime(2026, 3, 1, 22, 0, tzinfo=UTC)


def _report(at: datetime) -> AlertEvent:
    return AlertEvent(AlertKind.DAILY_REPORT, Severity.INFO, at, "daily/replica-0", "3 action(s), 0 error(s)")


def test_the_next_mornings_report_ten_hours_after_an_early_one_is_delivered_with_a_12_hour_window() -> None:
    clock = SteppingClock(EVENING)
    told = DedupWindow(timedelta(hours=12), monotonic=clock.monotonic)
    clock.step(timedelta(hours=11))  # the wall clock says 2 March 09:00: the report goes out at once
    told.handled(_report(clock.now()))
    clock.step(-timedelta(hours=11))  # corrected
    clock.run(timedelta(hours=10))  # the real 2 March 08:00

    assert not told.is_repeat(_report(clock.now()))


def test_a_condition_is_still_a_repeat_within_the_window() -> None:
    clock = SteppingClock(EVENING)
    told = DedupWindow(timedelta(hours=12), monotonic=clock.monotonic)
    stockout = AlertEvent(AlertKind.STOCKOUT, Severity.WARNING, clock.now(), "pool gpu", "no capacity")
    told.handled(stockout)
    clock.run(timedelta(hours=10))

    assert told.is_repeat(AlertEvent(AlertKind.STOCKOUT, Severity.WARNING, clock.now(), "pool gpu", "no capacity"))
