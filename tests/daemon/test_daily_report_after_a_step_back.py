"""The daily report when a wall clock set days ahead is corrected back (NTP after a VM resumed with a wrong clock),
with the runtime's real scheduler (APScheduler 3, real threads, short intervals): the report sent at the wrong time
is the one of the day that was due, and the next days' reports are sent when the corrected clock reaches their time,
not only once it reaches the wrong date again. Its summary says the window's length when that is not a day, and
its real (monotonic) length when the wall clock was stepped in it.

The wall clock is the one of ``tests.daemon.test_scheduler_wall_clock_steps``: the system's plus an offset the test
steps, read by the daemon, the runtime and APScheduler alike."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.daemon.summary import DailySummary
from models import AlertEvent, AlertKind
from tests.daemon.test_daily_report_across_clock_steps import MARCH_2_7AM, REPORT_AT, _ticks_after, _until
from tests.daemon.test_scheduler_wall_clock_steps import OffsetClock, Replica, wall  # noqa: F401 - wall: a fixture


def _sent(made: Replica) -> list[AlertEvent]:
    return [e for e in made.notifier.events if e.kind is AlertKind.DAILY_REPORT]


def _through_report_time(clock: OffsetClock, made: Replica, day: int) -> None:
    """The corrected clock reaches 08:00 on ``day`` March: set just before it, then let it pass. The step forward to
    it moves no report time (only the interval jobs), so half a second before is as good as more; the ticks after it
    passed show the scheduler went round past the report's time."""
    clock.set_to(datetime(2026, 3, day, 7, 59, 59, 500000, tzinfo=UTC))
    assert _until(lambda: clock.now() > datetime(2026, 3, day, 8, 0, 0, 500000, tzinfo=UTC))
    assert _ticks_after(made, 3)


def test_a_clock_three_days_ahead_corrected_back_does_not_silence_the_next_days_reports(
    wall: OffsetClock,  # noqa: F811
) -> None:
    wall.set_to(MARCH_2_7AM)
    made = Replica(wall, daily_report_at=REPORT_AT)
    made.runtime.start()
    try:
        assert _ticks_after(made, 2)
        wall.offset += timedelta(days=3)  # a wrong clock: 5 March 07:00, three report times passed
        assert _until(lambda: bool(_sent(made)))  # the report that was due, sent at the wrong time
        wall.set_to(MARCH_2_7AM + timedelta(seconds=30))  # NTP corrects it back
        assert _ticks_after(made, 3)  # the step back was handled: the ticks went on
        for day in (3, 4):
            _through_report_time(wall, made, day)
    finally:
        made.runtime.stop()
    wrong, third, fourth = _sent(made)
    assert wrong.at >= MARCH_2_7AM + timedelta(days=3)
    # its window is 3 days long on the wall clock but not in fact: the summary gives the real (monotonic) length
    assert "(the wall clock was stepped forward 3d meanwhile)" in wrong.summary
    assert "in the last 3d" not in wrong.summary
    for sent, day in ((third, 3), (fourth, 4)):  # each at the corrected clock's report time
        assert datetime(2026, 3, day, 8, 0, tzinfo=UTC) <= sent.at < datetime(2026, 3, day, 8, 1, tzinfo=UTC)
    # stepped back 3 days, then (the test's passage of time) forward to 3 March: back 1d23h in all, and its length
    assert "(the wall clock was stepped back 1d23h" in third.summary and "since" not in third.summary


def test_a_step_back_before_any_report_sends_the_report_of_the_day_the_clock_is_back_on(
    wall: OffsetClock,  # noqa: F811
) -> None:
    wall.set_to(MARCH_2_7AM)
    made = Replica(wall, daily_report_at=REPORT_AT)
    made.runtime.start()
    try:
        assert _ticks_after(made, 2)
        wall.set_to(MARCH_2_7AM - timedelta(days=1))  # stepped back a day before the first report: 1 March
        assert _ticks_after(made, 3)
        _through_report_time(wall, made, 1)
    finally:
        made.runtime.stop()
    (sent,) = _sent(made)  # the report of 1 March, not a day of silence until 08:00 on 2 March
    assert datetime(2026, 3, 1, 8, 0, tzinfo=UTC) <= sent.at < datetime(2026, 3, 1, 8, 1, tzinfo=UTC)


def _summary_over(length: timedelta, *, led: bool) -> str:
    summary = DailySummary(MARCH_2_7AM)
    if led:
        summary.add_tick("leader", "ok")
    return summary.close(MARCH_2_7AM + length, "replica-a", "live").summary


def test_the_summary_names_the_window_when_it_is_not_a_day() -> None:
    assert _summary_over(timedelta(days=1), led=True) == "0 action(s), 0 error(s) in the last day"
    assert _summary_over(timedelta(days=1, seconds=20), led=True).endswith("in the last day")  # a report run late
    assert _summary_over(timedelta(days=3), led=True) == "0 action(s), 0 error(s) in the last 3d"
    assert _summary_over(timedelta(hours=1), led=False) == "this replica did not lead in the last 1h (standby)"
    assert _summary_over(timedelta(days=-2), led=True) == (
        "0 action(s), 0 error(s) since 2026-03-02 07:00 UTC (the wall clock has been stepped back behind it since)"
    )
