"""The daily report across steps of the wall clock, with the runtime's real scheduler (APScheduler 3, real threads,
short intervals): a step forward past the report's time sends that day's report once, however far past it the
clock lands (a day and more too: one report, not one for each time passed), and a step back over it afterwards does
not send it again.

The wall clock is the one of ``tests.daemon.test_scheduler_wall_clock_steps``: the system's plus an offset the test
steps, read by the daemon, the runtime and APScheduler alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from models import AlertKind
from tests.daemon.test_scheduler_wall_clock_steps import OffsetClock, Replica, wall  # noqa: F401 - wall: a fixture

REPORT_AT = "08:00"
MARCH_2_7AM = datetime(2026, 3, 2, 7, 0, tzinfo=UTC)
# How long the test waits for what it expects before it fails: a few ticks take ~1 s, but a machine busy with other
# work stalled the scheduler's threads 9 s once; waiting longer costs time only when the test fails.
PATIENCE_S = 60.0


def _until(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _ticks_after(made: Replica, count: int) -> bool:
    """Wait for ``count`` more ticks: the scheduler has gone round that many times since."""
    since = time.monotonic()
    return _until(lambda: made.rounds_and_ticks_since(since)[1] >= count)


def _reports(made: Replica) -> list[datetime]:
    return [e.at for e in made.notifier.events if e.kind is AlertKind.DAILY_REPORT]


@pytest.mark.parametrize(
    "step",
    [timedelta(hours=6), timedelta(days=1, hours=6)],
    ids=["forward-6h-past-it", "forward-over-two-report-times"],
)
def test_a_step_forward_past_the_daily_report_sends_it_once(wall: OffsetClock, step: timedelta) -> None:  # noqa: F811
    wall.set_to(MARCH_2_7AM)
    made = Replica(wall, daily_report_at=REPORT_AT)
    made.runtime.start()
    try:
        assert _ticks_after(made, 2)  # running, the report due at 08:00 on 2 March
        wall.offset += step  # NTP, or a VM resumed with its clock behind, steps the wall clock over 08:00
        sent = _until(lambda: bool(_reports(made)))
        assert _ticks_after(made, 5)  # and the scheduler went on past it
    finally:
        made.runtime.stop()
    assert sent, "the day's report was dropped: the step forward made it later than the scheduler's misfire grace"
    (at,) = _reports(made)  # once: not again for a second report time the step passed
    assert at >= MARCH_2_7AM + step  # sent at the stepped time


def test_a_step_back_over_a_report_sent_after_a_step_forward_does_not_send_it_again(
    wall: OffsetClock,  # noqa: F811
) -> None:
    wall.set_to(MARCH_2_7AM)
    made = Replica(wall, daily_report_at=REPORT_AT)
    made.runtime.start()
    try:
        assert _ticks_after(made, 2)
        wall.offset += timedelta(hours=6)  # to 13:00: the report of 2 March is sent at once
        assert _until(lambda: bool(_reports(made)))
        wall.set_to(datetime(2026, 3, 2, 7, 59, 58, 500000, tzinfo=UTC))  # NTP corrects it back before 08:00
        stepped_back = time.monotonic()
        assert _until(lambda: wall.now().time() > datetime(2026, 3, 2, 8, 0, 0, 500000).time())  # 08:00 passed again
        assert _ticks_after(made, 5)
        rounds, ticks = made.rounds_and_ticks_since(stepped_back)
    finally:
        made.runtime.stop()
    assert len(_reports(made)) == 1  # the report of 2 March was sent once; the next is due on 3 March
    assert rounds >= 5 and ticks >= 5  # the step back held neither the election nor the ticks
