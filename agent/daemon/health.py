"""Liveness and readiness of one replica.

Alive means the process serves requests. Ready means the last successful tick is younger than a bound: a
leader that cannot reach what it needs, or a standby that cannot reach the Kubernetes API, stops being ready
after the bound and says why; it is not restarted for it (liveness stays up), because a restart would not help.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from models.redaction import redact


@dataclass(frozen=True)
class Readiness:
    ready: bool
    detail: str


class HealthState:
    """Thread-safe record of tick outcomes, read by the endpoints."""

    def __init__(self, max_tick_age: timedelta) -> None:
        self.max_tick_age = max_tick_age
        self._lock = threading.Lock()
        self._last_success: datetime | None = None
        self._last_failure: tuple[datetime, str] | None = None

    def tick_succeeded(self, now: datetime) -> None:
        with self._lock:
            self._last_success = now

    def tick_failed(self, now: datetime, reason: str) -> None:
        with self._lock:
            self._last_failure = (now, redact(reason))  # served on /readyz: no credential an error quoted

    @property
    def last_success(self) -> datetime | None:
        with self._lock:
            return self._last_success

    def readiness(self, now: datetime) -> Readiness:
        with self._lock:
            success, failure = self._last_success, self._last_failure
        if success is None:
            why = f"; last failure: {failure[1]}" if failure else ""
            return Readiness(False, f"no successful tick yet{why}")
        age = now - success
        if age > self.max_tick_age:
            why = f"; last failure: {failure[1]}" if failure and failure[0] > success else ""
            bound = self.max_tick_age.total_seconds()
            return Readiness(False, f"last successful tick {age.total_seconds():.0f}s ago (bound {bound:.0f}s){why}")
        return Readiness(True, f"last successful tick {age.total_seconds():.0f}s ago")
