"""Liveness and readiness of one replica.

Alive means the process serves requests and no tick has been running longer than a bound: a tick that never
returns (a call without a timeout, a deadlock) would otherwise leave a leader that renews its lease, so no standby
takes over, and acts no more; failing liveness has the kubelet restart it. Ready means the last successful tick
is younger than a bound: a leader that cannot reach what it needs, or a standby that cannot reach the Kubernetes
API or its Prometheus (what it would read as leader), stops being ready after the bound and says why (a replica
started so, a new pod of a rolling update, is not ready from its first tick); it is not restarted for it (liveness
stays up), because a restart would not help. A leader tick that ran but could read no class's demand, or no pool,
held every pool and is not a success (``tick_failed`` with why): a wrong Prometheus URL or a refused cloud
permission makes the leader unready as a failing tick does, where the tick's survived errors alone would have kept
it ready.
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

    def __init__(self, max_tick_age: timedelta, max_tick_duration: timedelta | None = None) -> None:
        self.max_tick_age = max_tick_age
        self.max_tick_duration = max_tick_duration
        self._lock = threading.Lock()
        self._last_success: datetime | None = None
        self._last_failure: tuple[datetime, str] | None = None
        self._running_since: datetime | None = None

    def tick_started(self, now: datetime) -> None:
        with self._lock:
            self._running_since = now

    def tick_ended(self) -> None:
        with self._lock:
            self._running_since = None

    def liveness(self, now: datetime) -> Readiness:
        """Alive unless one tick has been running longer than ``max_tick_duration``."""
        with self._lock:
            since = self._running_since
        if since is None or self.max_tick_duration is None or now - since <= self.max_tick_duration:
            return Readiness(True, "ok")
        bound = self.max_tick_duration.total_seconds()
        return Readiness(False, f"a tick has been running {(now - since).total_seconds():.0f}s (bound {bound:.0f}s)")

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
