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

Every age and duration is measured on the monotonic clock the daemon passes in (``Clock.monotonic``): a wall clock
stepped back (NTP, a VM restored) would keep a replica whose every tick fails ready for as long as the step, and one
stepped forward during a tick would have the kubelet restart a leader in the middle of it. The wall time is kept only
to say when. Without a monotonic clock (a simulated one, whose time never steps), ages are measured on the wall
times passed in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from models.redaction import redact


@dataclass(frozen=True)
class Readiness:
    ready: bool
    detail: str


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class _Moment:
    """When something happened: the wall time (to say when) and the monotonic reading (to measure ages)."""

    wall: datetime
    reading: timedelta  # since the monotonic clock's origin; exact on the wall times where there is none


class HealthState:
    """Thread-safe record of tick outcomes, read by the endpoints."""

    def __init__(
        self,
        max_tick_age: timedelta,
        max_tick_duration: timedelta | None = None,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        """``monotonic``: the clock ages are measured on (the daemon's ``Clock.monotonic``); without one, on the
        wall times given, for a clock that never steps."""
        self.max_tick_age = max_tick_age
        self.max_tick_duration = max_tick_duration
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._last_success: _Moment | None = None
        self._last_failure: tuple[_Moment, str] | None = None
        self._running_since: _Moment | None = None

    def _at(self, now: datetime) -> _Moment:
        if self._monotonic is None:
            return _Moment(now, now - _EPOCH)
        return _Moment(now, timedelta(seconds=self._monotonic()))

    def tick_started(self, now: datetime) -> None:
        at = self._at(now)
        with self._lock:
            self._running_since = at

    def tick_ended(self) -> None:
        with self._lock:
            self._running_since = None

    def liveness(self, now: datetime) -> Readiness:
        """Alive unless one tick has been running longer than ``max_tick_duration``."""
        at = self._at(now)
        with self._lock:
            since = self._running_since
        if since is None or self.max_tick_duration is None:
            return Readiness(True, "ok")
        running = at.reading - since.reading
        if running <= self.max_tick_duration:
            return Readiness(True, "ok")
        bound = self.max_tick_duration.total_seconds()
        return Readiness(False, f"a tick has been running {running.total_seconds():.0f}s (bound {bound:.0f}s)")

    def tick_succeeded(self, now: datetime) -> None:
        at = self._at(now)
        with self._lock:
            self._last_success = at

    def tick_failed(self, now: datetime, reason: str) -> None:
        at = self._at(now)
        with self._lock:
            self._last_failure = (at, redact(reason))  # served on /readyz: no credential an error quoted

    @property
    def last_success(self) -> datetime | None:
        """The wall time of the last successful tick, for display."""
        with self._lock:
            return self._last_success.wall if self._last_success is not None else None

    def readiness(self, now: datetime) -> Readiness:
        at = self._at(now)
        with self._lock:
            success, failure = self._last_success, self._last_failure
        if success is None:
            why = f"; last failure: {failure[1]}" if failure else ""
            return Readiness(False, f"no successful tick yet{why}")
        age = at.reading - success.reading
        if age > self.max_tick_age:
            why = f"; last failure: {failure[1]}" if failure and failure[0].reading > success.reading else ""
            bound = self.max_tick_age.total_seconds()
            return Readiness(False, f"last successful tick {age.total_seconds():.0f}s ago (bound {bound:.0f}s){why}")
        return Readiness(True, f"last successful tick {age.total_seconds():.0f}s ago")
