"""The daily report when the wall clock is stepped forward in the evening past the next morning's report time, then
corrected back, with the runtime's real scheduler (APScheduler 3, real threads, short intervals): the report the step
sent at once, in the evening, does not stand for the next morning's report time (ten hours on, in real time), so the
next morning's report is still sent at its time, and once.

The wall clock is the one of ``tests.daemon.test_scheduler_wall_clock_steps``: the system's plus an offset the test
steps, read by the daemon, the runtime and APScheduler alike."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.daemon.test_daily_report_across_clock_steps import REPORT_AT, _ticks_after, _until
from tests.daemon.test_daily_report_after_a_step_back import _sent, _through_report_time
from tests.daemon.test_scheduler_wall_clock_steps import OffsetClock, Replica, wall  # noqa: F401 - wall: a fixture

MARCH_1_10PM = datetime(2026, 3, 1, 22, 0, tzinfo=UTC)  # 14 hours after 1 March's report time, 10 before 2 March's


def test_a_clock_stepped_forward_in_the_evening_and_corrected_back_sends_the_next_mornings_report(
    wall: OffsetClock,  # noqa: F811
) -> None:
    wall.set_to(MARCH_1_10PM)
    made = Replica(wall, daily_report_at=REPORT_AT)
    made.runtime.start()
    try:
        assert _ticks_after(made, 2)
        wall.offset += timedelta(hours=11)  # a wrong clock: 2 March 09:00, past 2 March's report time
        assert _until(lambda: bool(_sent(made)))  # sent at once, at the wrong time
        assert _ticks_after(made, 2)  # time for the runtime to see the step forward before the correction
        wall.set_to(MARCH_1_10PM + timedelta(seconds=30))  # NTP corrects it back within the minute
        assert _ticks_after(made, 3)  # the step back was handled: the ticks went on
        _through_report_time(wall, made, 2)
    finally:
        made.runtime.stop()
    sent = _sent(made)
    assert len(sent) == 2, [e.at for e in sent]  # 2 March's report, not a day without one, nor two
    wrong, second = sent
    assert wrong.at >= MARCH_1_10PM + timedelta(hours=11)
    # at the corrected clock's report time
    assert datetime(2026, 3, 2, 8, 0, tzinfo=UTC) <= second.at < datetime(2026, 3, 2, 8, 1, tzinfo=UTC)
