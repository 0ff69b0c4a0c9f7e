"""The daemon's job bodies: election, tick, refit and daily report, and an orderly stop.

Scheduling lives in ``agent.daemon.runtime`` and the electors in ``agent.daemon.election``; this module decides
what each job does, with time from the injected clock, so tests drive it directly with a simulated clock.

* Only the leader runs the agent loop. A standby's tick checks that it can still see the Lease and, given a
  ``standby_probe`` (the metric source's: one instant query without retries, within the source's timeout), that
  its Prometheus answers, so that it is ready to take over: a standby with a wrong ``prometheus.url`` would be
  blind as leader, and a rolling update must not go on over new pods that would be (the reason is on /readyz and
  logged once, when it starts or changes). When the loop can, it also watches read-only (reads the pools and
  charges its own ledger, so its ledger has no hole when it leads); both replicas refit their models, so a new
  leader starts warm.
* A replica that becomes the leader asks the loop to resume (reload the state the previous leader saved)
  before its first tick as leader. Every leader tick that follows a time this replica did not lead is such a first
  tick: the request is made whenever the replica is seen not leading (a round that starts after one that ended
  without the lease, a standby tick), not only when a round takes the lease: a tick may start between the round
  that takes the lease and the round's end, or run as a standby while a renewal is in flight across the renew
  deadline (it forgets the open conditions and the scale-ups waited for) with no lease taken afterwards, since the
  renewal succeeds. A renewal that succeeds after the deadline with no tick in between starts no new term: the
  Lease still named this replica, so nobody else led meanwhile.
* A tick or refit that fails is counted by error class and survived; the next one starts afresh. A failed leader
  tick is alerted as ``tick-failed`` on ``replica/<pod>`` whatever the error's class, and its end is told once the
  ticks stop failing (``agent.daemon.tick_failures``). A leader tick that could read no class's demand or no pool
  (it holds every pool) is blind: counted apart and not a success, so readiness fails once no tick has succeeded
  for its bound.
* A tick and a refit never overlap on the loop's models: a loop that refits apart reads the history (within the
  refit's own deadline) and fits a copy while ticks go on, and copies the model and swaps it in between two ticks
  (so the first tick need not wait for the first fit, and no tick waits for a history read); any other loop's
  refit holds ticks off. When the configured model's fit fails while a stand-in forecasts, the stand-in is
  refitted instead; when the model in use was fitted, and whether the configured model is still pending, are
  exported (``leadtime_model_fitted_timestamp_seconds``, ``leadtime_configured_model_pending``). On shutdown the
  tick in progress finishes (and a refit's model copy or swap, which hold ticks off); a fit beside the ticks is
  abandoned: it writes nothing, its model is never swapped in, and its thread
  does not keep the process alive, so the lease is handed over at once instead of after the fit. A tick that has
  not finished within the shutdown wait keeps the lease from being handed over: it lapses instead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from agent.daemon.election import Elector, Probe
from agent.daemon.events import KubernetesEventRecorder
from agent.daemon.health import HealthState
from agent.daemon.lease import ElectionStep
from agent.daemon.metrics import DaemonMetrics
from agent.daemon.ports import (
    AgentLoop,
    AlertSink,
    DecisionSink,
    RefitsApart,
    Resumable,
    StagedRefit,
    TickReport,
    Watching,
)
from agent.daemon.shadow_book import ShadowBook
from agent.daemon.summary import DailySummary
from agent.daemon.tick_failures import KeepsTickFailures, TickFailures
from agent.decision_events import decision_events
from models import AlertEvent, AlertKind, Severity
from models.clock import Clock

log = logging.getLogger(__name__)


class Daemon:
    def __init__(
        self,
        loop: AgentLoop,
        elector: Elector,
        *,
        clock: Clock,
        metrics: DaemonMetrics,
        health: HealthState,
        notifier: AlertSink,
        mode: str,
        contact_bound: timedelta,
        events: KubernetesEventRecorder | None = None,
        decisions: DecisionSink | None = None,
        on_became_leader: Callable[[], None] | None = None,
        shadow: ShadowBook | None = None,
        standby_probe: Probe | None = None,
        timer: Callable[[], float] = time.perf_counter,
        resolve_after: timedelta = timedelta(minutes=5),
    ) -> None:
        """``resolve_after``: how long after the last failed tick their end is told (``alerts.resolve_after``)."""
        self._loop = loop
        self._elector = elector
        self._clock = clock
        self._metrics = metrics
        self._health = health
        self._notifier = notifier
        self.mode = mode
        self._contact_bound = contact_bound
        self._events = events
        self._decisions = decisions
        self._on_became_leader = on_became_leader
        self._shadow = shadow
        self._standby_probe = standby_probe
        self._unready: str | None = None  # why the last standby probe failed, as logged
        self._timer = timer  # durations for metrics only; decisions never read it
        self._work = threading.Lock()
        self._refitting = threading.Lock()  # one refit at a time, its fit beside the ticks included
        self._stopping = threading.Event()
        self._fit_or_stop = threading.Condition()  # notified when a fit beside the ticks ends and on a stop
        self._resume = threading.Event()  # set by the election thread, consumed by the next leader tick
        self._led = False  # whether the last election round ended leading (this replica's term goes on)
        # The monotonic reading when the last election round that reached the Kubernetes API was sent: a standby's
        # contact is aged on it, so a wall clock stepped back does not keep a standby cut off from the API ready.
        self._contact_at: float | None = None
        self.summary = DailySummary(clock.now())
        self._failures = TickFailures(f"replica/{elector.identity}", resolve_after)
        metrics.set_identity(mode, elector.identity)
        metrics.is_leader.set(0)

    @property
    def identity(self) -> str:
        return self._elector.identity

    def set_on_became_leader(self, hook: Callable[[], None]) -> None:
        self._on_became_leader = hook

    def tick_skipped(self) -> None:
        """A scheduled tick did not start because the previous one was still running."""
        self._metrics.ticks_skipped.inc()

    # -- jobs ---------------------------------------------------------------------------------------------
    def elect(self) -> ElectionStep:
        now, sent = self._clock.now(), self._clock.monotonic()
        if not self._led:  # a round that takes the lease starts a term; a tick may start before the round ends
            self._resume.set()
        step = self._elector.step(now)
        self._led = step.leading
        if step.error is None:
            self._contact_at = sent
        self._metrics.is_leader.set(1 if step.leading else 0)
        if step.error:
            self._metrics.errors.labels("KubernetesApiUnavailable").inc()
        if step.became_leader:
            self._resume.set()
            self._record_event(now, "LeaderElected", f"{self.identity} leads and plans ({self.mode})")
            if self._on_became_leader is not None and not self._stopping.is_set():
                self._on_became_leader()
        if step.lost_leadership:
            self._metrics.forget_latest_tick()
            why = step.error or f"the lease is now held by {step.holder or 'nobody'}"
            self._record_event(now, "LeadershipLost", f"{self.identity} stopped acting: {why}", warning=True)
            self._alert(AlertKind.LEADERSHIP_LOST, Severity.WARNING, now, "stopped acting: lease not renewed", why)
        return step

    def tick(self) -> None:
        with self._work:
            if self._stopping.is_set():
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

    def refit(self) -> None:
        """Refit the models. A loop that refits apart (``RefitsApart``) holds ticks off only while it copies the
        model and while it swaps the fitted model in; ticks go on with the previous model while it reads the history
        and fits."""
        with self._refitting:
            if self._stopping.is_set():
                return
            now = self._clock.now()
            started = self._timer()
            try:
                self._refit(now)
            except Exception as exc:  # a failed refit keeps the previous models; never fatal
                log.exception("refit failed; ticks keep the previous models")
                self._metrics.record_error(exc)
                self.summary.add_error(exc)
            finally:
                self._metrics.refit_duration.observe(self._timer() - started)

    def _refit(self, now: datetime) -> None:
        if not isinstance(self._loop, RefitsApart):
            with self._work:
                if not self._stopping.is_set():
                    self._loop.refit(now)
            return
        staged = self._loop.stage_refit(now)  # reads the metric source only, within its deadline: ticks go on
        for why in staged.unread.values():  # a class not read keeps its model; the loop logged which
            self._metrics.record_error(why)
        with self._work:
            if self._stopping.is_set():
                return
            staged.take()
        if not self._fit_unless_stopped(staged):
            log.info("refit abandoned: the replica is stopping; its model is not swapped in")
            return
        with self._work:
            if self._stopping.is_set():  # stopped between the fit and the swap: nothing changes any more
                return
            staged.install()
        self._metrics.record_model(staged.fitted_at, staged.pending)
        if (failure := staged.failure) is not None:  # the stand-in was refitted and forecasts on
            log.error(
                "refit: the configured model could not be fitted (%s: %s); the stand-in was refitted on the same "
                "history and forecasts until it can",
                type(failure).__name__,
                failure,
            )
            self._metrics.record_error(failure)
            self.summary.add_error(failure)

    def _fit_unless_stopped(self, staged: StagedRefit) -> bool:
        """Fit ``staged`` on a thread of its own, a daemon thread, and wait until it is fitted (True, or what the
        fit raised) or a stop is asked for (False). A stop abandons the fit: it changes nothing a tick reads, it is
        never installed, and its thread, left to finish or to end with the process, does not keep the process
        alive (a worker of the scheduler's pool would: the interpreter joins those at exit)."""
        outcome: list[BaseException | None] = []

        def fit() -> None:
            failure: BaseException | None = None
            try:
                staged.fit()
            except BaseException as exc:  # noqa: BLE001 - handed to the refit job, which counts and survives it
                failure = exc
            with self._fit_or_stop:
                outcome.append(failure)
                self._fit_or_stop.notify_all()

        threading.Thread(target=fit, name="leadtime-refit-fit", daemon=True).start()
        with self._fit_or_stop:
            self._fit_or_stop.wait_for(lambda: bool(outcome) or self._stopping.is_set())
        if not outcome:
            return False
        if outcome[0] is not None:
            raise outcome[0]
        return True

    def daily_report(self) -> None:
        now = self._clock.now()
        event = self.summary.close(now, self.identity, self.mode)
        log.info("daily report: %s %s", event.summary, event.details)
        self._deliver(event)
        if self._shadow is not None:
            try:
                written = self._shadow.write_daily(now)
            except OSError as exc:  # the report is lost for today; the account itself is kept
                log.warning("shadow report not written: %s", exc)
                self._metrics.record_error(exc)
            else:
                if written is not None:
                    log.info("shadow report written to %s", written)

    # -- shutdown -----------------------------------------------------------------------------------------
    def stop_working(self, timeout: float | None = None) -> bool:
        """Start no new tick or refit, abandon a refit's fit beside the ticks (it writes nothing and is never
        swapped in), and wait for the tick in progress to finish (or a refit's model copy or swap, which hold
        ticks off), while the election goes on renewing the lease: at most ``timeout`` seconds when given. False
        when one was still running then."""
        with self._fit_or_stop:
            self._stopping.set()
            self._fit_or_stop.notify_all()
        if not self._work.acquire(timeout=-1.0 if timeout is None else max(0.0, timeout)):
            return False
        self._work.release()
        return True

    def release(self) -> bool:
        """Hand the lease over; call only once ``stop_working`` returned True, so nothing acts after the handover: a
        standby takes an empty lease at once, and a tick still running could have a cloud write on its way (the
        runtime leaves the lease to lapse then). A tick or refit still holding the loop keeps the lease: False."""
        if not self._work.acquire(blocking=False):
            log.warning("the lease is not handed over: a tick (or a refit's model copy or swap) still runs; it lapses")
            return False
        try:
            released = self._elector.release(self._clock.now())
        finally:
            self._work.release()
        self._metrics.is_leader.set(0)
        self._metrics.forget_latest_tick()
        return released

    # -- internals ----------------------------------------------------------------------------------------
    def _leader_tick(self, now: datetime) -> None:
        started = self._timer()
        if self._resume.is_set() and isinstance(self._loop, Resumable):
            self._resume.clear()
            self._loop.resume()
        try:
            report = self._loop.run_once(now)
        except Exception as exc:  # noqa: BLE001 - the daemon survives any failed tick and retries next time
            self._tick_failed(now, "leader", exc)
        else:
            self._metrics.record_tick(report)
            self.summary.add_report(report)
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
        self.summary.add_tick("standby", "failed")

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
        self.summary.add_tick(role, "ok")

    def _tick_blind(self, now: datetime, why: str) -> None:
        """A leader tick that ran with nothing to plan on (no class's demand, or no pool, could be read) held every
        pool: it is counted apart (``blind``) and is no success, so the leader is not ready once none has succeeded
        for the readiness bound (a wrong prometheus.url, a refused cloud permission). The tick has already alerted
        on each class or pool it could not read."""
        log.warning("tick held every pool, it had nothing to plan on: %s", why)
        self._health.tick_failed(now, f"nothing to plan on: {why}")
        self._metrics.ticks.labels("leader", "blind").inc()
        self.summary.add_tick("leader", "blind")

    def _tick_failed(self, now: datetime, role: str, exc: Exception) -> None:
        log.error("tick failed, pools held until the next tick: %s: %s", type(exc).__name__, exc)
        self._health.tick_failed(now, f"{type(exc).__name__}: {exc}")
        self._metrics.record_error(exc)
        self._metrics.ticks.labels(role, "failed").inc()
        self.summary.add_tick(role, "failed")
        self.summary.add_error(exc)
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

    def _alert(self, kind: AlertKind, severity: Severity, now: datetime, summary: str, detail: str) -> None:
        event = AlertEvent(kind, severity, now, f"replica/{self.identity}", summary, {"detail": detail})
        self._deliver(event)

    def _deliver(self, event: AlertEvent) -> None:
        try:
            delivered = self._notifier.notify(event)
        except Exception as exc:  # noqa: BLE001 - a notifier outage must never stop the daemon
            log.warning("alert not delivered (%s): %s", type(exc).__name__, exc)
            self._metrics.record_error(exc)
            return
        if not delivered:
            self._metrics.errors.labels("AlertNotDelivered").inc()

    def _record_decisions(self, now: datetime, report: TickReport) -> None:
        if self._decisions is None:
            return
        try:
            events = decision_events(report.plan, report.results, recommend=self.mode == "dry-run")
            self._decisions.record(now, events)
        except Exception:  # Events are best effort; a tick that acted has succeeded
            log.exception("decision events not recorded")

    def _record_event(self, now: datetime, reason: str, message: str, warning: bool = False) -> None:
        if self._events is not None:
            self._events.record(now, reason, message, warning=warning)
