"""The daily report is sent by the leader only: every replica runs the daily report job, and a standby, which must not
send a second report to the channel, logs that it skipped it and starts its counts afresh. The leader is the replica
leading at the report time: a leader that stopped acting just before it sends none, and so does the standby that has
not taken over yet; a standby that takes over after the report time does not send it late.

Two replicas against the fake Kubernetes API (``tests.daemon.replicas``, the daemon driven job by job on a simulated
clock), and one replica with the runtime's real scheduler (APScheduler 3, real threads, short intervals) on the
stepped wall clock of ``tests.daemon.test_scheduler_wall_clock_steps``."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from actuators import SimulatedCluster
from agent.daemon.lease import ElectionStep, LeaseElector
from models import AlertEvent, AlertKind
from models.clock import SimulatedClock
from tests.daemon.conftest import DEADLINE, LEASE
from tests.daemon.links import CuttableLink
from tests.daemon.replicas import POOL, Fleet, Replica, make_replica
from tests.daemon.test_daily_report_across_clock_steps import _until
from tests.daemon.test_scheduler_wall_clock_steps import CountingElector, OffsetClock, wall  # noqa: F401
from tests.daemon.test_scheduler_wall_clock_steps import Replica as RuntimeReplica

Make = Callable[[str], tuple[LeaseElector, CuttableLink]]
SKIPPED = "daily report not sent: this replica does not hold the lease"


@pytest.fixture
def fleet(clock: SimulatedClock, elector_for: Make) -> Fleet:
    cluster = SimulatedCluster([POOL], clock, initial_units={POOL.pool_id: 1})
    fleet = Fleet(clock, cluster)
    for name in ("replica-a", "replica-b"):
        elector, link = elector_for(name)
        fleet.replicas.append(make_replica(name, elector, link, clock, cluster))
    return fleet


def _reports(replica: Replica) -> list[AlertEvent]:
    return [e for e in replica.notifier.events if e.kind is AlertKind.DAILY_REPORT]


def _skips(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith(SKIPPED)]


def test_only_the_leader_sends_the_daily_report_and_the_standby_logs_that_it_skipped_it(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.daemon.service")
    a, b = fleet.replicas
    fleet.run(timedelta(minutes=3))
    assert a.elector.is_leader(fleet.clock.now()) and not b.elector.is_leader(fleet.clock.now())
    for replica in (a, b):  # the job runs in every replica at the report time
        replica.daemon.daily_report()
    (report,) = _reports(a)
    assert report.summary == "3 action(s), 0 error(s) in the last 3m"
    assert _reports(b) == []  # one report in the channel, not one per replica
    (skipped,) = _skips(caplog)
    assert skipped.levelno == logging.INFO
    assert "replica-b" in skipped.getMessage()


def test_a_standby_that_takes_over_reports_the_day_since_the_report_it_skipped(fleet: Fleet) -> None:
    a, b = fleet.replicas
    fleet.run(timedelta(minutes=3))
    for replica in (a, b):
        replica.daemon.daily_report()
    skipped_at = fleet.clock.now()
    fleet.run(timedelta(minutes=1))
    a.alive = False  # the leader dies; the standby takes over
    fleet.run(timedelta(minutes=3))
    assert b.elector.is_leader(fleet.clock.now())
    b.daemon.daily_report()
    (report,) = _reports(b)
    # its window starts at the report time it skipped, not at its start: a daily report, not one of its whole life
    assert report.details["window"].startswith(skipped_at.isoformat())
    assert "standby ok" in report.details["ticks"] and "leader ok" in report.details["ticks"]
    assert report.details["actions"] != "none"  # what it did since it took over


def test_a_leader_whose_renewal_is_late_at_the_report_time_still_sends_it(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.daemon.service")
    a, b = fleet.replicas
    fleet.run(timedelta(minutes=2))
    a.link.cut()  # the API unreachable for a few seconds: the leader stops acting at its renew deadline
    fleet.run(DEADLINE + timedelta(seconds=2))
    now = fleet.clock.now()
    assert DEADLINE + timedelta(seconds=2) < LEASE  # but it still holds the lease: nobody else can have taken it
    assert not a.elector.is_leader(now) and not b.elector.is_leader(now)
    sent = [replica.daemon.daily_report() for replica in (a, b)]
    a.link.restore()
    fleet.run(timedelta(seconds=10))
    assert a.elector.is_leader(fleet.clock.now())  # the same term goes on
    assert sent == [True, False]  # the day has its one report (nobody sent it when only is_leader was asked)
    assert len(_reports(a)) == 1 and _reports(a)[0].details["actions"] != "none" and _reports(b) == []
    assert len(_skips(caplog)) == 1


def test_a_leader_cut_off_past_its_lease_sends_none(fleet: Fleet, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agent.daemon.service")
    a = fleet.replicas[0]
    fleet.run(timedelta(minutes=2))
    a.link.cut()
    fleet.run(LEASE + timedelta(seconds=2))  # the standby may have taken the lease by now
    assert not a.elector.holds_lease(fleet.clock.now())
    assert not a.daemon.daily_report()
    assert _reports(a) == []
    # what it would have reported is in its log, not lost without a word
    assert any("replica-a" in r.getMessage() and "action(s)" in r.getMessage() for r in _skips(caplog))


class SwitchedElector(CountingElector):
    """A replica's elector that leads only while ``leading`` is set (a standby until a test makes it the leader)."""

    def __init__(self) -> None:
        super().__init__("replica-b")
        self.leading = False
        self._led = False

    def step(self, now: datetime) -> ElectionStep:
        self.rounds.append(time.monotonic())
        self.last_contact = now
        leading, became = self.leading, self.leading and not self._led
        self._led = leading
        return ElectionStep(leading=leading, became_leader=became, holder="replica-b" if leading else "replica-a")

    def is_leader(self, now: datetime) -> bool:
        return self.leading

    def holds_lease(self, now: datetime) -> bool:
        return self.leading


class ScheduledReplica(RuntimeReplica):
    """One replica with the runtime's real scheduler, on the stepped wall clock, a standby until it is switched."""

    def __init__(self, wall: OffsetClock) -> None:  # noqa: F811
        self.switched = SwitchedElector()
        super().__init__(wall, elector=self.switched)

    def reports(self) -> list[AlertEvent]:
        return [e for e in self.notifier.events if e.kind is AlertKind.DAILY_REPORT]

    def rounds_after(self, count: int) -> bool:
        """Wait for ``count`` more election rounds: the scheduler has gone round that many times since (a standby's
        ticks do not run the loop)."""
        since = time.monotonic()
        return _until(lambda: sum(t > since for t in self.elector.rounds) >= count)


def _report_time_passes(wall: OffsetClock, made: ScheduledReplica, day: int) -> None:  # noqa: F811
    wall.set_to(datetime(2026, 3, day, 7, 59, 59, 500000, tzinfo=UTC))
    assert _until(lambda: wall.now() > datetime(2026, 3, day, 8, 0, 0, 500000, tzinfo=UTC))
    assert made.rounds_after(3)  # the scheduler went round past the report time


def test_a_standby_skips_the_scheduled_report_and_does_not_send_it_late_after_taking_over(
    wall: OffsetClock,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agent.daemon.service")
    wall.set_to(datetime(2026, 3, 2, 7, 0, tzinfo=UTC))
    made = ScheduledReplica(wall)
    made.runtime.start()
    try:
        assert made.rounds_after(2)
        _report_time_passes(wall, made, 2)  # the report time of 2 March, this replica a standby
        assert _until(lambda: bool(_skips(caplog)))
        made.switched.leading = True  # it takes over after the report time
        assert made.rounds_after(3)
        wall.set_to(datetime(2026, 3, 2, 7, 59, 58, tzinfo=UTC))  # and its clock is stepped back over it
        assert _until(lambda: wall.now() > datetime(2026, 3, 2, 8, 0, 0, 500000, tzinfo=UTC))
        assert made.rounds_after(3)
        late = list(made.reports())
        _report_time_passes(wall, made, 3)  # the next day's report time, this replica the leader
        assert _until(lambda: bool(made.reports()))
    finally:
        made.runtime.stop()
    assert late == []  # the leader at 2 March's report time sent that day's: not this one, not late
    (sent,) = made.reports()
    assert datetime(2026, 3, 3, 8, 0, tzinfo=UTC) <= sent.at < datetime(2026, 3, 3, 8, 1, tzinfo=UTC)
    assert len(_skips(caplog)) == 1
