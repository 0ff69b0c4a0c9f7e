"""A notifier that writes each alert as one structured log line, for deployments without a chat webhook: the
alerts' only sink then, so it de-duplicates as the Slack notifier does (one line per condition per ``dedup_window``,
a higher severity never taken for a repeat of a lower one), instead of a line every tick while a condition holds."""

from __future__ import annotations

import logging
from datetime import timedelta

from agent.notify.dedup import DedupWindow
from models import AlertEvent, Severity

log = logging.getLogger("leadtime.alerts")
_LEVELS = {Severity.INFO: logging.INFO, Severity.WARNING: logging.WARNING, Severity.CRITICAL: logging.ERROR}


class LogNotifier:
    def __init__(self, dedup_window: timedelta = timedelta(hours=1)) -> None:
        self.dedup_window = dedup_window
        self._told = DedupWindow(dedup_window)

    def notify(self, event: AlertEvent) -> bool:
        if self._told.is_repeat(event):
            return True
        self._told.handled(event)
        details = " ".join(f"{k}={v!r}" for k, v in sorted(event.details.items()))
        log.log(
            _LEVELS[event.severity], "alert kind=%s subject=%s %s %s", event.kind, event.subject, event.summary, details
        )
        return True
