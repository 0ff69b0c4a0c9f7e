"""The daemon's daily report: the day's summary, closed and sent as an alert, and the shadow report written beside
it (when the daemon keeps a shadow account). The runtime schedules it once a day at the configured UTC time, in every
replica; only the leader at that time sends it, so the channel gets one report a day, not one per replica.

The replica that holds the lease sends it, a leader whose renewal is late by a few seconds included (past its renew
deadline it no longer acts, but within the lease duration nobody else can have taken the lease, and a slow API call
at the report time must not cost the day its report). A standby sends nothing and writes no shadow report: it logs
at INFO that it skipped the report because it does not hold the lease, with what it would have said, and its counts
start afresh, so that when it takes over later its first report covers the day since the report time it skipped,
not its whole life. Nobody sends a report that was due while no replica held the lease (the old leader lost it and
the standby had not taken it yet), nor one due before a standby took over: the holder at the report time sends it.

The report covers the day when the lead changed hands during it: the leaders keep their counts in the planner memory
and the one at the report time took over those of its predecessors of the day (``agent.daemon.summary``, naming who
led when); its next tick keeps the new window's counts there, and a replica taking over never takes over those of a
day already reported (``agent.daemon.day_counts.same_window``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

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
        leads: Callable[[datetime], bool],
    ) -> None:
        """``deliver``: sends an alert, never raises. ``leads``: whether this replica holds the lease now (the
        elector's ``holds_lease``: its last renewal is younger than the lease duration)."""
        self._summary = summary
        summary.named(identity)
        self._clock = clock
        self._identity = identity
        self._mode = mode
        self._deliver = deliver
        self._metrics = metrics
        self._shadow = shadow
        self._leads = leads

    def send(self) -> bool:
        """Send the day's report when this replica leads, else skip it; either way the counts start afresh. True
        when it was sent."""
        now = self._clock.now()
        leads = self._leads(now)
        event = self._summary.close(now, self._identity, self._mode, self._clock.monotonic())
        if not leads:
            log.info(
                "daily report not sent: this replica does not hold the lease (%s); the replica holding it sends it. "
                "Its counts start afresh: %s %s",
                self._identity,
                event.summary,
                event.details,
            )
            return False
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
        return True
