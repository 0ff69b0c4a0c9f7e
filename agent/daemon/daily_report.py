"""The daemon's daily report: the day's summary, closed and sent as an alert, and the shadow report written beside
it (when the daemon keeps a shadow account). The runtime schedules it once a day at the configured UTC time."""

from __future__ import annotations

import logging
from collections.abc import Callable

from agent.daemon.metrics import DaemonMetrics
from agent.daemon.shadow_book import ShadowBook
from agent.daemon.summary import DailySummary
from models import AlertEvent
from models.clock import Clock

# The daemon's jobs log under the one name of ``agent.daemon.service``, whichever of its modules runs them.
log = logging.getLogger("agent.daemon.service")


class DailyReport:
    def __init__(
        self,
        summary: DailySummary,
        *,
        clock: Clock,
        identity: str,
        mode: str,
        deliver: Callable[[AlertEvent], None],
        metrics: DaemonMetrics,
        shadow: ShadowBook | None,
    ) -> None:
        """``deliver``: sends an alert, never raises."""
        self._summary = summary
        self._clock = clock
        self._identity = identity
        self._mode = mode
        self._deliver = deliver
        self._metrics = metrics
        self._shadow = shadow

    def send(self) -> None:
        now = self._clock.now()
        event = self._summary.close(now, self._identity, self._mode, self._clock.monotonic())
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
