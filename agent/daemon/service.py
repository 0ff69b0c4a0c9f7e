"""The daemon: its jobs (election, tick, refit and daily report) and an orderly stop, as the runtime calls them.

Scheduling lives in ``agent.daemon.runtime`` and the electors in ``agent.daemon.election``; this module runs the
election rounds and hands each other job to the module that owns its body: ``agent.daemon.tick_job`` (a leader or
standby tick), ``agent.daemon.refit_job`` (refitting the models beside the ticks), ``agent.daemon.daily_report``
and ``agent.daemon.orderly_stop`` (the stop and the lease's handover). Time comes from the injected clock, so tests
drive the daemon directly with a simulated clock. Both replicas refit their models, so a new leader starts warm.

A replica that becomes the leader asks the loop to resume (reload the state the previous leader saved) before its
first tick as leader. Every leader tick that follows a time this replica did not lead is such a first tick: the
request is made whenever the replica is seen not leading (a round that starts after one that ended without the
lease, a standby tick), not only when a round takes the lease: a tick may start between the round that takes the
lease and the round's end, or run as a standby while a renewal is in flight across the renew deadline (it forgets
the open conditions and the scale-ups waited for) with no lease taken afterwards, since the renewal succeeds. A
renewal that succeeds after the deadline with no tick in between starts no new term: the Lease still named this
replica, so nobody else led meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from agent.daemon.daily_report import DailyReport
from agent.daemon.election import Elector, Probe
from agent.daemon.events import KubernetesEventRecorder
from agent.daemon.health import HealthState
from agent.daemon.lease import ElectionStep
from agent.daemon.metrics import DaemonMetrics
from agent.daemon.orderly_stop import OrderlyStop
from agent.daemon.ports import AgentLoop, AlertSink, DecisionSink
from agent.daemon.refit_job import RefitJob
from agent.daemon.shadow_book import ShadowBook
from agent.daemon.summary import DailySummary
from agent.daemon.tick_job import TickJob
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
        self._elector = elector
        self._clock = clock
        self._metrics = metrics
        self._notifier = notifier
        self.mode = mode
        self._events = events
        self._on_became_leader = on_became_leader
        self._led = False  # whether the last election round ended leading (this replica's term goes on)
        self.summary = DailySummary(clock.now(), clock.monotonic())
        self._stop = OrderlyStop(elector, clock, metrics)
        self._ticks = TickJob(
            loop,
            elector,
            self._stop,
            clock=clock,
            metrics=metrics,
            health=health,
            summary=self.summary,
            deliver=self._deliver,
            recommend=mode == "dry-run",
            contact_bound=contact_bound,
            decisions=decisions,
            standby_probe=standby_probe,
            timer=timer,
            resolve_after=resolve_after,
        )
        self._refits = RefitJob(loop, self._stop, clock=clock, metrics=metrics, summary=self.summary, timer=timer)
        self._report = DailyReport(
            self.summary,
            clock=clock,
            identity=elector.identity,
            mode=mode,
            deliver=self._deliver,
            metrics=metrics,
            shadow=shadow,
            leads=elector.holds_lease,
        )
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
            self._ticks.resume_at_next_leader_tick()
        step = self._elector.step(now)
        self._led = step.leading
        if step.error is None:
            self._ticks.api_contacted(sent)
        self._metrics.is_leader.set(1 if step.leading else 0)
        if step.error:
            self._metrics.errors.labels("KubernetesApiUnavailable").inc()
        if step.became_leader:
            self._ticks.resume_at_next_leader_tick()
            self._record_event(now, "LeaderElected", f"{self.identity} leads and plans ({self.mode})")
            if self._on_became_leader is not None and not self._stop.stopping.is_set():
                self._on_became_leader()
        if step.lost_leadership:
            self._metrics.forget_latest_tick()
            why = step.error or f"the lease is now held by {step.holder or 'nobody'}"
            self._record_event(now, "LeadershipLost", f"{self.identity} stopped acting: {why}", warning=True)
            self._alert(AlertKind.LEADERSHIP_LOST, Severity.WARNING, now, "stopped acting: lease not renewed", why)
        return step

    def tick(self) -> None:
        """A leader tick runs the agent loop; a standby tick checks that this replica is ready to lead."""
        self._ticks.run()

    def refit(self) -> None:
        """Refit the models. A loop that refits apart (``RefitsApart``) holds ticks off only while it copies the
        model and while it swaps the fitted model in; ticks go on with the previous model while it reads the history
        and fits."""
        self._refits.run()

    def daily_report(self) -> bool:
        """The daily report job, run in every replica at the report time: the leader sends the report, a standby
        logs that it skipped it (``agent.daemon.daily_report``). True when it was sent."""
        return self._report.send()

    # -- shutdown -----------------------------------------------------------------------------------------
    def stop_working(self, timeout: float | None = None) -> bool:
        """Start no new tick or refit, abandon a refit's fit beside the ticks (it writes nothing and is never
        swapped in), and wait for the tick in progress to finish (or a refit's model copy or swap, which hold
        ticks off), while the election goes on renewing the lease: at most ``timeout`` seconds when given. False
        when one was still running then."""
        return self._stop.stop_working(timeout)

    def release(self) -> bool:
        """Hand the lease over; call only once ``stop_working`` returned True (``OrderlyStop.release``). False when
        a tick or refit still holds the loop: the lease then lapses."""
        return self._stop.release()

    # -- alerts and Events ----------------------------------------------------------------------------------
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

    def _record_event(self, now: datetime, reason: str, message: str, warning: bool = False) -> None:
        if self._events is not None:
            self._events.record(now, reason, message, warning=warning)
