"""The daily report when a wall clock set days ahead in the middle of a day is corrected back, with the runtime's real
scheduler (APScheduler 3, real threads, short intervals): the report sent at the wrong time stands for the report
time nearest to when it was really sent, here that day's (an hour before), so the next day's report is sent at its
time, not held for two days. The summaries give the windows' real (monotonic) lengths across the steps.

The wall clock is the one of ``tests.daemon.test_scheduler_wall_clock_steps``: the system's plus an offset the test
steps, read by the daemon, the runtime and APScheduler alike."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.daemon.summary import DailySummary
from tests.daemon.test_daily_report_across_clock_steps import REPORT_AT, _ticks_after, _until
from tests.daemon.test_daily_report_after_a_step_back import _sent, _through_report_time
from tests.daemon.test_scheduler_wall_clock_steps import OffsetClock, Replica, wall  # noqa: F401 - wall: a fixture

MARCH_1_9AM = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)  # an hour after 1 March's report time


def test_a_clock_set_ahead_mid_day_and_corrected_back_sends_the_next_days_report(wall: OffsetClock) -> None:  # noqa: F811
    wall.set_to(MARCH_1_9AM)
    made = Replica(wall, daily_report_at=REPORT_AT)
    made.runtime.start()
    try:
        assert _ticks_after(made, 2)
        wall.offset += timedelta(days=3)  # a wrong clock: 4 March 09:00, three report times passed
        assert _until(lambda: bool(_sent(made)))  # sent at once, at the wrong time
        wall.set_to(MARCH_1_9AM + timedelta(seconds=30))  # NTP corrects it back within the minute
        assert _ticks_after(made, 3)  # the step back was handled: the ticks went on
        for day in (2, 3):
            _through_report_time(wall, made, day)
    finally:
        made.runtime.stop()
    wrong, second, third = _sent(made)  # 2 March's too, not only 3 March's
    assert wrong.at >= MARCH_1_9AM + timedelta(days=3)
    for sent, day in ((second, 2), (third, 3)):  # each at the corrected clock's report time
        assert datetime(2026, 3, day, 8, 0, tzinfo=UTC) <= sent.at < datetime(2026, 3, day, 8, 1, tzinfo=UTC)
    assert "(the wall clock was stepped forward 3d meanwhile)" in wrong.summary
    # stepped back 3 days, then (the test's passage of time) forward to 2 March 08:00: back 2d1h in all
    assert "(the wall clock was stepped back 2d1h" in second.summary and "since" not in second.summary


def _summary(on_the_wall: timedelta, real: float) -> str:
    """A window that is ``on_the_wall`` long on the wall clock and ``real`` seconds on the monotonic one."""
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    summary = DailySummary(start, 1000.0)
    summary.add_tick("leader", "ok")
    return summary.close(start + on_the_wall, "replica-a", "live", 1000.0 + real).summary


def test_the_summary_gives_the_real_length_of_a_window_the_wall_clock_was_stepped_in() -> None:
    day = timedelta(days=1).total_seconds()
    # no step: the wall clock's length, "the last day" for a day (NTP slewing keeps the two within a minute a day)
    assert _summary(timedelta(days=1), day - 20) == "0 action(s), 0 error(s) in the last day"
    assert _summary(timedelta(hours=5), 5 * 3600) == "0 action(s), 0 error(s) in the last 5h"
    # a clock set 3 days ahead 5 minutes in: the report sent then covers 5 minutes
    assert _summary(timedelta(days=3, minutes=5), 300) == (
        "0 action(s), 0 error(s) in the last 5m (the wall clock was stepped forward 3d meanwhile)"
    )
    # the next one, after the clock was corrected back: 23 hours, not a window that ends before it starts
    assert _summary(timedelta(days=-2, hours=-1), 23 * 3600) == (
        "0 action(s), 0 error(s) in the last 23h (the wall clock was stepped back 3d meanwhile)"
    )
    assert _summary(timedelta(days=-2), day) == (
        "0 action(s), 0 error(s) in the last day (the wall clock was stepped back 3d meanwhile)"
    )
