"""The daemon's tick job: a leader tick runs the agent loop, a standby tick checks that the replica is ready to take
over; either one's outcome goes to readiness, the metrics and the day's summary.

* Only the leader runs the agent loop. A standby's tick checks that it can still see the Lease and, given a
  ``standby_probe`` (the metric source's: one instant query without retries, within the source's timeout), that
  its Prometheus answers, so that it is ready to take over: a standby with a wrong ``prometheus.url`` would be
  blind as leader, and a rolling update must not go on over new pods that would be (the reason is on /readyz and
  logged once, when it starts or changes). When the loop can, it also watches read-only (reads the pools and
  charges its own ledger, so its ledger has no hole when it leads).
* A leader tick asks the loop to resume (reload the state the previous leader saved) when the election, or a
  standby tick, has asked for it since (``resume_at_next_leader_tick``): the first leader tick of each term. It tells
  the loop whether another replica may have led since the last resume: the elector counted a new term in between
  (``CountsTerms``: the lease taken from another holder's or an emptied record, or created), read at the resume, so a
  tick that starts before the round that took the lease ends knows it too. A renewal of this replica's own record,
  however late, is no such term.
* A tick that fails is counted by error class and survived; the next one starts afresh. A failed leader tick hands
  the day's counts to a loop that keeps them for the next leader, as any leader tick does. A failed leader tick is
  alerted as ``tick-failed`` on ``replica/<pod>`` whatever the error's class, and its end is told once the ticks
  stop failing (``agent.daemon.tick_failures``). A leader tick that could read no class's demand or no pool (it
  holds every pool) is blind: counted apart and not a success, so readiness fails once no tick has succeeded for
  its bound.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from agent.daemon.election import CountsTerms, Elector, Probe
from agent.daemon.health import HealthState
from agent.daemon.metrics import DaemonMetrics
from agent.daemon.orderly_stop import OrderlyStop
from agent.daemon.ports import AgentLoop, DecisionSink, Resumable, TickReport, Watching
from agent.daemon.summary import DailySummary
from agent.daemon.tick_failures import KeepsTickFailures, TickFailures
from agent.decision_events import decision_events
from models import AlertEvent
from models.clock import Clock

# The daemon's jobs log under the one name of ``agent.daemon.service``, whichever of its modules runs them.
log = logging.getLogger("agent.daemon.service")


class TickJob:
    def __init__(
        self,
        loop: AgentLoop,
        elector: Elector,
        stop: OrderlyStop,
        *,
        clock: Clock,
        metrics: DaemonMetrics,
        health: HealthState,
        summary: DailySummary,
        deliver: Callable[[AlertEvent], None],
        recommend: bool,
        contact_bound: timedelta,
        decisions: DecisionSink | None,
        standby_probe: Probe | None,
        timer: Callable[[], float],
        resolve_after: timedelta,
    ) -> None:
        """``deliver``: sends an alert, never raises. ``recommend``: decisions are recorded as recommendations (a
        dry run). ``contact_bound``: how long a standby stays ready after the last election round that reached the
        Kubernetes API. ``timer``: durations for metrics only; decisions never read it. ``resolve_after``: how long
        after the last failed tick their end is told."""
        self._loop = loop
        self._elector = elector
        self._stop = stop
        self._clock = clock
        self._metrics = metrics
        self._health = health
        self._summary = summary
        self._deliver = deliver
        self._recommend = recommend
        self._contact_bound = contact_bound
        self._decisions = decisions
        self._standby_probe = standby_probe
        self._timer = timer
        self._unready: str | None = None  # why the last standby probe failed, as logged
        self._resume = threading.Event()  # set by the election thread, consumed by the next leader tick
        self._terms_resumed = 0  # the elector's count of new terms at the last resume (``CountsTerms``)
        # The monotonic reading when the last election round that reached the Kubernetes API was sent: a standby's
        # contact is aged on it, so a wall clock stepped back does not keep a standby cut off from the API ready.
        self._contact_at: float | None = None
        self._failures = TickFailures(f"replica/{elector.identity}", resolve_after)

    def resume_at_next_leader_tick(self) -> None:
        self._resume.set()

    def api_contacted(self, sent: float) -> None:
        """An election round sent at the monotonic reading ``sent`` reached the Kubernetes API."""
        self._contact_at = sent

    def run(self) -> None:
        with self._stop.work:
            if self._stop.stopping.is_set():
                return
            now = self._clock.now()
            self._health.tick_started(now)
            try:
                # set here too, not only by the election: a leader whose lease lapsed unseen by an election round
                # would go on saying it leads beside the replica that took the lease over
                leading = self._elector.is_leader(now)
                self._metrics.is_leader.set(1 if leading else 0)
                if leading:
                    self._leader_tick(now)
                else:
                    self._standby_tick(now)
            finally:
                self._health.tick_ended()

    def _leader_tick(self, now: datetime) -> None:
        started = self._timer()
        if self._resume.is_set() and isinstance(self._loop, Resumable):
            self._resume.clear()
            terms = self._elector.terms if isinstance(self._elector, CountsTerms) else 0
            self._loop.resume(another_led=terms != self._terms_resumed)
            self._terms_resumed = terms
        try:
            report = self._loop.run_once(now)
        except Exception as exc:  # noqa: BLE001 - the daemon survives any failed tick and retries next time
            self._tick_failed(now, "leader", exc)
        else:
            self._metrics.record_tick(report)
            self._summary.add_report(report)
            self._failures_ended(now)
            if report.blind is None:
                self._tick_succeeded(now, "leader")
            else:
                self._tick_blind(now, report.blind)
            self._record_decisions(now, report)
            if report.errors:
                log.info("tick survived %d error(s): %s", len(report.errors), "; ".join(map(str, report.errors)))
        finally:
            self._metrics.tick_duration.labels("leader").observe(self._timer() - started)

    def _standby_tick(self, now: datetime) -> None:
        # Again at every standby tick: a leader tick that ended after the loss of the lease was noticed set them anew.
        self._metrics.forget_latest_tick()
        self._watch(now)  # the loop forgets what only a leader holds: its next leader tick reloads it
        self._resume.set()
        if self._failures.stand_by():
            log.info("failed ticks as leader: their end is left to the leader, which reads them in the planner memory")
        self._failures_ended(now)  # a standby's ticks hold no pool
        reasons = []
        contact = self._contact_at
        if contact is None or self._clock.monotonic() - contact > self._contact_bound.total_seconds():
            # the election logs its own failures
            reasons.append(self._elector.last_error or "no contact with the Kubernetes API yet")
        probed = self._probe()
        if probed is not None:
            reasons.append(probed)
        if not reasons:
            self._tick_succeeded(now, "standby")
            return
        self._health.tick_failed(now, "; ".join(reasons))
        self._metrics.ticks.labels("standby", "failed").inc()
        self._summary.add_tick("standby", "failed")

    def _probe(self) -> str | None:
        """Why the standby could not read what it needs as leader (its Prometheus), or None when it can: one probe
        a standby tick."""
        if self._standby_probe is None:
            return None
        try:
            self._standby_probe.probe()
        except Exception as exc:  # noqa: BLE001 - the standby is unready for it, never stopped
            self._metrics.record_error(exc)
            why = str(exc) or type(exc).__name__
            if why != self._unready:  # once when it starts failing, or fails otherwise; not every tick
                log.warning("standby not ready to lead, it could not read its demand as leader: %s", why)
            self._unready = why
            return why
        if self._unready is not None:
            log.info("standby ready to lead: its Prometheus answers again")
        self._unready = None
        return None

    def _watch(self, now: datetime) -> None:
        """Read-only observation on a standby; a failure is logged and counted, never a failed tick: the
        standby stays ready to lead, and the gap is charged conservatively once the pools are seen again."""
        if not isinstance(self._loop, Watching):
            return
        started = self._timer()
        try:
            self._loop.watch(now)
        except Exception as exc:  # noqa: BLE001 - a failed read must never make the standby unready
            log.warning("standby could not observe the pools: %s: %s", type(exc).__name__, exc)
            self._metrics.record_error(exc)
        finally:
            self._metrics.tick_duration.labels("standby").observe(self._timer() - started)

    def _tick_succeeded(self, now: datetime, role: str) -> None:
        self._health.tick_succeeded(now)
        self._metrics.record_success(now)
        self._metrics.ticks.labels(role, "ok").inc()
        self._summary.add_tick(role, "ok")

    def _tick_blind(self, now: datetime, why: str) -> None:
        """A leader tick that ran with nothing to plan on (no class's demand, or no pool, could be read) held every
        pool: it is counted apart (``blind``) and is no success, so the leader is not ready once none has succeeded
        for the readiness bound (a wrong prometheus.url, a refused cloud permission). The tick has already alerted
        on each class or pool it could not read."""
        log.warning("tick held every pool, it had nothing to plan on: %s", why)
        self._health.tick_failed(now, f"nothing to plan on: {why}")
        self._metrics.ticks.labels("leader", "blind").inc()
        self._summary.add_tick("leader", "blind")

    def _tick_failed(self, now: datetime, role: str, exc: Exception) -> None:
        log.error("tick failed, pools held until the next tick: %s: %s", type(exc).__name__, exc)
        self._health.tick_failed(now, f"{type(exc).__name__}: {exc}")
        self._metrics.record_error(exc)
        self._metrics.ticks.labels(role, "failed").inc()
        self._summary.add_tick(role, "failed")
        self._summary.add_error(exc)
        if role == "leader":  # its counts go to the next leader as after any leader tick (never raises)
            self._summary.keep(self._loop)
        self._deliver(self._failures.failed(now, exc))
        opened = self._failures.condition()
        if role == "leader" and opened is not None and isinstance(self._loop, KeepsTickFailures):
            try:  # saved with the open conditions, so that its end outlives this process
                self._failures.saved = self._loop.keep_open(self._failures.key, opened, now)
            except Exception as unsaved:  # noqa: BLE001 - its end is then told by this replica alone, as before
                log.warning("tick-failed not kept in the planner memory: %s: %s", type(unsaved).__name__, unsaved)

    def _failures_ended(self, now: datetime) -> None:
        if (ended := self._failures.ended(now)) is not None:
            log.info("ticks no longer fail: %s", ended.summary)
            self._deliver(ended)
            if isinstance(self._loop, KeepsTickFailures) and self._elector.is_leader(now):
                self._loop.keep_closed(self._failures.key, now)

    def _record_decisions(self, now: datetime, report: TickReport) -> None:
        if self._decisions is None:
            return
        try:
            events = decision_events(report.plan, report.results, recommend=self._recommend)
            self._decisions.record(now, events)
        except Exception:  # Events are best effort; a tick that acted has succeeded
            log.exception("decision events not recorded")
