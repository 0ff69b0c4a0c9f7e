"""A notifier that writes each alert as one structured log line, for deployments without a chat webhook."""

from __future__ import annotations

import logging

from models import AlertEvent, Severity

log = logging.getLogger("leadtime.alerts")
_LEVELS = {Severity.INFO: logging.INFO, Severity.WARNING: logging.WARNING, Severity.CRITICAL: logging.ERROR}


class LogNotifier:
    def notify(self, event: AlertEvent) -> bool:
        details = " ".join(f"{k}={v!r}" for k, v in sorted(event.details.items()))
        log.log(
            _LEVELS[event.severity], "alert kind=%s subject=%s %s %s", event.kind, event.subject, event.summary, details
        )
        return True
