"""Running the daemon: APScheduler jobs, the endpoints, and an orderly stop on SIGTERM.

Jobs (APScheduler 3, background thread, UTC):

* ``election`` every retry period, on an executor of its own so a long tick never delays a renewal;
* ``tick`` every tick interval: one instance at a time, coalesced, dropped when it cannot start within the
  misfire grace (never a burst of late ticks); run at once when this replica becomes the leader. A tick that
  overruns its interval is logged once when it starts overrunning and once when it ends, with the number of
  scheduled ticks skipped meanwhile (``leadtime_ticks_skipped_total``), instead of APScheduler's warning for every
  skipped slot;
* ``refit`` every refit interval, first at start so models are warm before the replica may lead; it fits beside
  the ticks (the first ones forecast with a cheap stand-in), so the first tick, and readiness, need not wait;
* ``daily-report`` once a day at the configured UTC time, in every replica: the leader at that time sends the
  report, a standby logs that it skipped it (``agent.daemon.daily_report``), and either way the report time is done
  for this replica: a standby that takes over later does not send it late, nor after a step back over it. The day's
  summary is told the time when the job is added, and the last report time at or before then, so that a replica
  started between two report times takes over the day's counts kept, and one whose job was added just after a report
  time (its first run the next day's) takes over none of the day just reported.

APScheduler 3 compares a job's next run time with the wall clock. The interval jobs (election, tick, refit) keep
their pace on the monotonic clock instead (``agent.daemon.clock_watch``): a step of the wall clock (NTP, a resumed
VM) moves their next run times by the step, within one interval of now, and wakes the scheduler, so a step back does
not hold them for its length (an hour back held every election, tick and refit for the hour: the lease lapsed
without a word and no pool was planned) and a step forward does not run them early. The daily report stays at its
wall-clock time: a step forward past it sends it at once, and once, however far past (a step over two report times
sends one report, which covers both days: its summary says the window's length). A report stands for the last
report time before it was really sent (on the monotonic clock), or for the next one when it was sent at most
``EARLY_REPORT`` before it: after a step back it is not sent again for that day, and it is sent on the next day's
report time the clock reaches. A clock three days ahead corrected back: the report sent at the wrong time, then each
day's at its time from the next one on, not days without one; a report sent an hour after that day's time is that
day's, and the next day's follows; a report a clock a minute ahead sent at its time is not sent again when the clock
is set back over it; a report sent the evening before, by a clock stepped forward past the next morning's time and
corrected back, is the previous day's, and the next morning's is sent at its time.

Stopping (SIGTERM or SIGINT): no new tick or refit starts; a model being fit beside the ticks is abandoned (it writes
nothing and is never swapped in); the tick in progress finishes (or a refit's history read or model swap, which
hold ticks off), with the election still renewing the lease meanwhile; then the scheduler stops, the lease is
handed over, the endpoints close, exit 0. A tick still running after the shutdown wait may have a cloud write on
its way: the lease is then not handed over but left to lapse (the election stops renewing it, so this replica stops
acting at its renew deadline), and a standby takes over after the lease duration, never beside that tick.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from types import FrameType

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MAX_INSTANCES, JobEvent
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from agent.daemon.clock_watch import WallClockWatch
from agent.daemon.endpoints import EndpointServer
from agent.daemon.service import Daemon
from models.clock import Clock, SystemClock

log = logging.getLogger(__name__)


class _DropSkippedSlotWarnings(logging.Filter):
    """APScheduler warns for every slot a running job makes it skip; the runtime reports an overrun once instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances" not in str(record.msg)


_scheduler_log = logging.getLogger("apscheduler.scheduler.leadtime")
_scheduler_log.addFilter(_DropSkippedSlotWarnings())


# Below the Deployment's terminationGracePeriodSeconds (120 s): after SIGTERM a replica whose tick finishes within
# this hands its lease over, so the standby takes over at once rather than after the lease duration.
SHUTDOWN_WAIT = timedelta(seconds=90)

# A daily report sent at most this long before a report time (a clock a little ahead, or stepped forward shortly before
# it) stands for it: that day's report is not sent again when the clock is corrected back. One sent earlier (the
# evening before, by a clock stepped forward past the morning's time) stands for the report time before it, and the
# next report time still sends its report: one a day, in real time, not a day without one.
EARLY_REPORT = timedelta(hours=2)


@dataclass(frozen=True)
class Schedule:
    tick_interval: timedelta
    refit_interval: timedelta
    election_interval: timedelta
    misfire_grace: timedelta
    daily_report_at: str  # HH:MM, UTC


class DaemonRuntime:
    def __init__(
        self,
        daemon: Daemon,
        schedule: Schedule,
        endpoints: EndpointServer,
        checks: Sequence[Callable[[], Sequence[str]]] = (),
        shutdown_wait: timedelta = SHUTDOWN_WAIT,
        clock: Clock | None = None,
    ) -> None:
        """``checks`` are advisory: each runs once, off the start, and what it returns is logged as warnings.
        ``shutdown_wait``: how long a stop waits for the tick in progress (or a refit's read or swap); the lease is
        handed over only when it has finished by then, and otherwise left to lapse. ``clock``: the wall clock the
        scheduler reads (``datetime.now``) and a monotonic one, to tell its steps by."""
        self._shutdown_wait = shutdown_wait
        self._clock = clock or SystemClock()
        self._daemon = daemon
        self._schedule = schedule
        self._endpoints = endpoints
        self._checks = tuple(checks)
        self._stop_requested = threading.Event()
        self._scheduler = BackgroundScheduler(
            timezone=UTC,
            executors={"default": ThreadPoolExecutor(2), "election": ThreadPoolExecutor(1)},
            job_defaults={"coalesce": True, "max_instances": 1},
            logger=_scheduler_log,
        )
        self._scheduler.add_listener(self._tick_skipped, EVENT_JOB_MAX_INSTANCES)
        self._scheduler.add_listener(self._tick_ended, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR)
        self._overrun_lock = threading.Lock()
        self._skipped_in_overrun = 0
        # the interval jobs, kept on the monotonic clock across wall-clock steps, and those paused by a stop (under
        # the lock, so that a step rescheduling them does not resume them)
        self._intervals = {
            "election": schedule.election_interval,
            "refit": schedule.refit_interval,
            "tick": schedule.tick_interval,
        }
        self._jobs_lock = threading.Lock()
        self._paused: set[str] = set()
        # the daily report's times, and the monotonic time the last one was run at, sent or skipped by a standby
        # (under its own lock): a step back of the wall clock reschedules it from when that really ran, read on the
        # corrected clock
        hour, minute = (int(part) for part in schedule.daily_report_at.split(":"))
        self._report_at = time(hour, minute)
        self._report_trigger = CronTrigger(hour=hour, minute=minute, timezone=UTC)
        self._report_lock = threading.Lock()
        self._report_sent_at: float | None = None
        self._clock_watch = WallClockWatch(
            self._clock, self._clock_stepped, every=min(1.0, schedule.election_interval.total_seconds() / 2)
        )
        daemon.set_on_became_leader(self._tick_now)

    def start(self) -> None:
        """Serve the endpoints, take part in the election once, then hand every job to the scheduler."""
        self._endpoints.start()
        self._daemon.elect()
        now = self._clock.now()
        s = self._schedule
        grace = max(1, round(s.misfire_grace.total_seconds()))
        self._scheduler.add_job(
            self._daemon.elect,
            IntervalTrigger(seconds=s.election_interval.total_seconds(), timezone=UTC),
            id="election",
            executor="election",
            misfire_grace_time=max(1, round(s.election_interval.total_seconds())),
            next_run_time=now + s.election_interval,
        )
        self._scheduler.add_job(
            self._daemon.refit,
            IntervalTrigger(seconds=s.refit_interval.total_seconds(), timezone=UTC),
            id="refit",
            misfire_grace_time=grace,
            next_run_time=now,
        )
        self._scheduler.add_job(
            self._daemon.tick,
            IntervalTrigger(seconds=s.tick_interval.total_seconds(), timezone=UTC),
            id="tick",
            misfire_grace_time=grace,
            next_run_time=now,
        )
        # its first window is matched from the last report time at or before now, when the job is added: its first
        # run is the next report time after now (the summary was begun earlier, before the endpoints and the election)
        self._daemon.summary.scheduled(self._report_at, now)
        self._scheduler.add_job(
            self._send_daily_report,
            self._report_trigger,
            id="daily-report",
            # however late: a step of the wall clock forward past its time must not drop the day's report; it is
            # sent once, coalesced with any other report time the step passed
            misfire_grace_time=None,
            coalesce=True,
        )
        if self._checks:
            self._scheduler.add_job(self._run_checks, "date", run_date=now, id="checks", misfire_grace_time=None)
        self._scheduler.start()
        self._clock_watch.start()
        log.info(
            "daemon started: %s, mode %s, tick every %ss",
            self._daemon.identity,
            self._daemon.mode,
            s.tick_interval.total_seconds(),
        )

    def _run_checks(self) -> None:
        for check in self._checks:
            try:
                found = check()
            except Exception:  # advisory: a check that fails is logged, never fatal
                log.exception("start-up check failed")
                continue
            for warning in found:
                log.warning("configuration check: %s", warning)

    def request_stop(self, signum: int | None = None, frame: FrameType | None = None) -> None:
        if signum is not None:
            log.info("received %s: finishing the tick in progress, then stopping", signal.Signals(signum).name)
        self._stop_requested.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a stop is requested (or ``timeout`` seconds pass); True when one was requested."""
        return self._stop_requested.wait(timeout)

    def stop(self) -> None:
        with self._jobs_lock:
            for job in ("tick", "refit", "daily-report"):
                self._paused.add(job)
                if self._scheduler.get_job(job) is not None:
                    self._scheduler.pause_job(job)
        # The election job keeps renewing while the last tick finishes. A tick still running after the wait may
        # have a cloud write on its way (each has up to the write limit): handing the lease over then would let a
        # standby act beside it, so the lease is left to lapse instead, as a replica that died leaves it.
        finished = self._daemon.stop_working(self._shutdown_wait.total_seconds())
        self._scheduler.shutdown(wait=finished)
        self._clock_watch.stop()
        if finished:
            released = self._daemon.release()
        else:
            released = False
            log.warning(
                "a tick (or a refit's read or swap) still runs after %.0fs: the lease is not handed over; it lapses "
                "once this replica stops renewing it, and a standby takes over after the lease duration",
                self._shutdown_wait.total_seconds(),
            )
        self._endpoints.stop()
        log.info("daemon stopped%s", " and handed over the lease" if released else "")

    def run_until_signalled(self) -> int:
        """Install SIGTERM/SIGINT handlers (main thread only), start, wait, stop; the exit code is 0."""
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        self.start()
        self.wait()
        self.stop()
        return 0

    def _tick_skipped(self, event: JobEvent) -> None:
        if event.job_id != "tick":
            return
        self._daemon.tick_skipped()
        with self._overrun_lock:
            self._skipped_in_overrun += 1
            first = self._skipped_in_overrun == 1
        if first:
            log.warning(
                "a tick is still running after its %ss interval: scheduled ticks are skipped until it finishes",
                self._schedule.tick_interval.total_seconds(),
            )

    def _tick_ended(self, event: JobEvent) -> None:
        if event.job_id != "tick":
            return
        with self._overrun_lock:
            skipped, self._skipped_in_overrun = self._skipped_in_overrun, 0
        if skipped:
            log.info("the overrunning tick finished; %d scheduled ticks were skipped meanwhile", skipped)

    def _send_daily_report(self) -> None:
        """Run at each report time in every replica; only the leader sends (``Daemon.daily_report``). A time a
        standby skipped stands for that day's report as one sent does: the leader at that time sent it."""
        with self._report_lock:
            self._report_sent_at = self._clock.monotonic()
        self._daemon.daily_report()

    def _report_after_step_back(self, now: datetime) -> datetime | None:
        """The daily report's next time after a step back: the first report time after both now and the one the last
        report stands for, the last report time before it was really sent (its monotonic age counted back from now, on
        the corrected clock), or the next one when it was sent at most ``EARLY_REPORT`` before it. A report sent at
        once after a step forward is the day's it was late for, unless it was sent shortly before the next day's
        time; one sent at its time by a clock a little ahead is not sent again."""
        with self._report_lock:
            sent_at = self._report_sent_at
        after = now
        if sent_at is not None:
            sent = now - timedelta(seconds=self._clock.monotonic() - sent_at)
            following: datetime | None = self._report_trigger.get_next_fire_time(None, sent + EARLY_REPORT)
            if following is not None:
                stands_for = following - timedelta(days=1)  # a daily time in UTC: the last before sent + EARLY_REPORT
                after = max(now, stands_for + timedelta(microseconds=1))
        due: datetime | None = self._report_trigger.get_next_fire_time(None, after)
        return due

    def _tick_now(self) -> None:
        if self._scheduler.running and self._scheduler.get_job("tick") is not None:
            self._scheduler.modify_job("tick", next_run_time=self._clock.now())

    def _clock_stepped(self, step: timedelta) -> None:
        """The wall clock was stepped by ``step``: each interval job's next run moves by it, to within one interval
        of now (the scheduler may have run an overdue job at the stepped time already), which wakes the scheduler."""
        now = self._clock.now()
        moved = []
        with self._jobs_lock:
            for job_id, interval in self._intervals.items():
                job = self._scheduler.get_job(job_id)
                if job_id in self._paused or job is None or job.next_run_time is None:
                    continue
                due = min(max(job.next_run_time + step, now), now + interval)
                try:
                    self._scheduler.modify_job(job_id, next_run_time=due)
                except JobLookupError:  # gone meanwhile (a stop)
                    continue
                moved.append(f"{job_id} at {due.isoformat(timespec='seconds')}")
            report = "sent at once if the step passed it"
            job = self._scheduler.get_job("daily-report")
            if step < timedelta(0) and "daily-report" not in self._paused and job is not None:
                next_report = self._report_after_step_back(now)
                with contextlib.suppress(JobLookupError):  # gone meanwhile (a stop)
                    self._scheduler.modify_job("daily-report", next_run_time=next_report)
                when = next_report.isoformat(timespec="minutes") if next_report else "never"
                report = f"not sent again for the day its last report stands for, next at {when}"
        log.warning(
            "the wall clock was stepped %s by %s (NTP, a resumed VM: check the node's time sync); the election, tick "
            "and refit keep their pace on the monotonic clock, next: %s; the daily report stays at %s UTC, %s",
            "back" if step < timedelta(0) else "forward",
            abs(step),
            ", ".join(moved) or "none (stopping)",
            self._schedule.daily_report_at,
            report,
            extra={"step_s": step.total_seconds()},
        )
