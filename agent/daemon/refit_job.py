"""The daemon's refit job: refit the loop's models without holding ticks off for longer than a model swap.

A tick and a refit never overlap on the loop's models: a loop that refits apart (``RefitsApart``) reads the history
(within the refit's own deadline) and fits a copy while ticks go on, and copies the model and swaps it in between
two ticks (so the first tick need not wait for the first fit, and no tick waits for a history read); any other
loop's refit holds ticks off. When the configured model's fit fails while a stand-in forecasts, the stand-in is
refitted instead; when the model in use was fitted, and whether the configured model is still pending, are exported
(``leadtime_model_fitted_timestamp_seconds``, ``leadtime_configured_model_pending``). A refit that fails is counted
by error class and survived: the ticks keep the previous models. A stop abandons a fit beside the ticks
(``agent.daemon.orderly_stop``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from agent.daemon.metrics import DaemonMetrics
from agent.daemon.orderly_stop import OrderlyStop
from agent.daemon.ports import AgentLoop, RefitsApart, StagedRefit
from agent.daemon.summary import DailySummary
from models.clock import Clock

# The daemon's jobs log under the one name of ``agent.daemon.service``, whichever of its modules runs them.
log = logging.getLogger("agent.daemon.service")


class RefitJob:
    def __init__(
        self,
        loop: AgentLoop,
        stop: OrderlyStop,
        *,
        clock: Clock,
        metrics: DaemonMetrics,
        summary: DailySummary,
        timer: Callable[[], float],
    ) -> None:
        """``timer``: durations for metrics only; decisions never read it."""
        self._loop = loop
        self._stop = stop
        self._clock = clock
        self._metrics = metrics
        self._summary = summary
        self._timer = timer
        self._refitting = threading.Lock()  # one refit at a time, its fit beside the ticks included

    def run(self) -> None:
        """Refit the models. A loop that refits apart holds ticks off only while it copies the model and while it
        swaps the fitted model in; ticks go on with the previous model while it reads the history and fits."""
        with self._refitting:
            if self._stop.stopping.is_set():
                return
            now = self._clock.now()
            started = self._timer()
            try:
                self._refit(now)
            except Exception as exc:  # a failed refit keeps the previous models; never fatal
                log.exception("refit failed; ticks keep the previous models")
                self._metrics.record_error(exc)
                self._summary.add_error(exc)
            finally:
                self._metrics.refit_duration.observe(self._timer() - started)

    def _refit(self, now: datetime) -> None:
        work, stopping = self._stop.work, self._stop.stopping
        if not isinstance(self._loop, RefitsApart):
            with work:
                if not stopping.is_set():
                    self._loop.refit(now)
            return
        staged = self._loop.stage_refit(now)  # reads the metric source only, within its deadline: ticks go on
        for why in staged.unread.values():  # a class not read keeps its model; the loop logged which
            self._metrics.record_error(why)
        with work:
            if stopping.is_set():
                return
            staged.take()
        if not self._fit_unless_stopped(staged):
            log.info("refit abandoned: the replica is stopping; its model is not swapped in")
            return
        with work:
            if stopping.is_set():  # stopped between the fit and the swap: nothing changes any more
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
            self._summary.add_error(failure)

    def _fit_unless_stopped(self, staged: StagedRefit) -> bool:
        """Fit ``staged`` on a thread of its own, a daemon thread, and wait until it is fitted (True, or what the
        fit raised) or a stop is asked for (False). A stop abandons the fit: it changes nothing a tick reads, it is
        never installed, and its thread, left to finish or to end with the process, does not keep the process
        alive (a worker of the scheduler's pool would: the interpreter joins those at exit)."""
        outcome: list[BaseException | None] = []
        fit_or_stop = self._stop.fit_or_stop

        def fit() -> None:
            failure: BaseException | None = None
            try:
                staged.fit()
            except BaseException as exc:  # noqa: BLE001 - handed to the refit job, which counts and survives it
                failure = exc
            with fit_or_stop:
                outcome.append(failure)
                fit_or_stop.notify_all()

        threading.Thread(target=fit, name="leadtime-refit-fit", daemon=True).start()
        with fit_or_stop:
            fit_or_stop.wait_for(lambda: bool(outcome) or self._stop.stopping.is_set())
        if not outcome:
            return False
        if outcome[0] is not None:
            raise outcome[0]
        return True
