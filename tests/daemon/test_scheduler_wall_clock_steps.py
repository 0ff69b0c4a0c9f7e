"""The daemon's runtime (APScheduler 3 with real threads and short intervals) across steps of the wall clock: the
election and the ticks keep their pace through a step back or forward, and the daily report is not sent twice when
the clock is stepped back over it.

The machine's own clock cannot be stepped by a test (it needs root and would step every other process), so the wall
clock is one that reads the system's plus an offset the test sets, the daemon's and the runtime's clock, and the one
APScheduler 3.11 reads: its scheduler and executors read the wall clock as ``datetime.now`` through the name
``datetime`` in ``apscheduler.schedulers.base`` (``_process_jobs``: which jobs are due, how long to wait) and
``apscheduler.executors.base`` (``run_job``: whether a run is too late), which the fixture replaces with a subclass
whose ``now`` adds the offset. Its monotonic clock is the system's."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo

import apscheduler.executors.base
import apscheduler.schedulers.base
import pytest

from agent.daemon.election import SoleReplicaElector
from agent.daemon.endpoints import EndpointServer
from agent.daemon.health import HealthState
from agent.daemon.lease import ElectionStep
from agent.daemon.metrics import DaemonMetrics
from agent.daemon.runtime import DaemonRuntime, Schedule
from agent.daemon.service import Daemon
from agent.notify import RecordingNotifier
from models import AlertKind
from tests.daemon.fake_loop import FakeTickReport

INTERVAL = timedelta(seconds=0.2)


class OffsetClock:
    """The system's wall clock plus ``offset``, which a test steps; the system's monotonic clock."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def monotonic(self) -> float:
        return time.monotonic()

    def set_to(self, wall: datetime) -> None:
        self.offset = wall - datetime.now(UTC)


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> OffsetClock:
    clock = OffsetClock()

    class SteppedDatetime(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> SteppedDatetime:
            stepped = datetime.now(tz) + clock.offset
            return cls.combine(stepped.date(), stepped.timetz())

    monkeypatch.setattr(apscheduler.schedulers.base, "datetime", SteppedDatetime)
    monkeypatch.setattr(apscheduler.executors.base, "datetime", SteppedDatetime)
    return clock


class CountingElector(SoleReplicaElector):
    """The elector of a replica that leads alone (election off), with the monotonic time of each round."""

    def __init__(self, identity: str = "replica-a") -> None:
        super().__init__(identity)
        self.rounds: list[float] = []

    def step(self, now: datetime) -> ElectionStep:
        self.rounds.append(time.monotonic())
        return super().step(now)


class TimedLoop:
    """The agent loop of a tick that plans nothing: the monotonic time of each tick."""

    def __init__(self) -> None:
        self.ticks: list[float] = []
        self._lock = threading.Lock()

    def run_once(self, now: datetime) -> FakeTickReport:
        with self._lock:
            self.ticks.append(time.monotonic())
        return FakeTickReport()

    def refit(self, now: datetime) -> None:
        pass


class Replica:
    def __init__(
        self, wall: OffsetClock, daily_report_at: str = "08:00", elector: CountingElector | None = None
    ) -> None:
        self.elector = elector or CountingElector()
        self.loop = TimedLoop()
        self.notifier = RecordingNotifier(dedup_window=timedelta(0))
        metrics = DaemonMetrics()
        health = HealthState(timedelta(seconds=10), monotonic=wall.monotonic)
        daemon = Daemon(
            self.loop,
            self.elector,
            clock=wall,
            metrics=metrics,
            health=health,
            notifier=self.notifier,
            mode="dry-run",
            contact_bound=timedelta(seconds=10),
        )
        schedule = Schedule(INTERVAL, timedelta(hours=1), INTERVAL, timedelta(seconds=1), daily_report_at)
        endpoints = EndpointServer("127.0.0.1", 0, health, metrics, wall)
        self.runtime = DaemonRuntime(daemon, schedule, endpoints, clock=wall)

    def rounds_and_ticks_since(self, since: float) -> tuple[int, int]:
        return sum(t > since for t in self.elector.rounds), sum(t > since for t in self.loop.ticks)

    def daily_reports(self) -> int:
        return sum(e.kind is AlertKind.DAILY_REPORT for e in self.notifier.events)


@pytest.fixture
def replica(wall: OffsetClock) -> Iterator[Replica]:
    made = Replica(wall)
    made.runtime.start()
    yield made
    made.runtime.stop()


@pytest.mark.parametrize("step", [timedelta(hours=-1), timedelta(hours=6)], ids=["back-1h", "forward-6h"])
def test_elections_and_ticks_keep_their_pace_across_a_wall_clock_step(
    wall: OffsetClock, replica: Replica, step: timedelta
) -> None:
    time.sleep(1.0)
    before = replica.rounds_and_ticks_since(0.0)
    stepped_at = time.monotonic()
    wall.offset += step  # NTP steps the wall clock
    time.sleep(1.5)
    rounds, ticks = replica.rounds_and_ticks_since(stepped_at)
    # 0.2 s apart: ~7 in 1.5 s. Stepped back an hour, APScheduler ran none before (8 and 8 in 1.5 s before the step).
    assert before[0] >= 3 and before[1] >= 3
    assert 4 <= rounds <= 9
    assert 4 <= ticks <= 9  # and no burst of catch-up ticks after a step forward


def test_a_step_back_over_the_daily_report_does_not_send_it_twice(wall: OffsetClock) -> None:
    wall.set_to(datetime(2026, 3, 2, 7, 59, 59, 400000, tzinfo=UTC))
    made = Replica(wall, daily_report_at="08:00")
    made.runtime.start()
    try:
        deadline = time.monotonic() + 60  # sent within a second; a busy machine has stalled the scheduler 9 s
        while made.daily_reports() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert made.daily_reports() == 1
        wall.offset -= timedelta(seconds=2)  # back to 07:59:58 and some
        stepped_at = time.monotonic()
        time.sleep(2.5)  # past 08:00 again on the stepped clock
        rounds, ticks = made.rounds_and_ticks_since(stepped_at)
    finally:
        made.runtime.stop()
    assert made.daily_reports() == 1  # the report of 2 March was sent once; the next is due on 3 March
    assert rounds >= 6 and ticks >= 6
