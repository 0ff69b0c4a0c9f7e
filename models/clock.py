"""Clocks. Time is always injected: the core never reads the wall clock itself.

``now()`` is the wall time (tz-aware UTC): what is recorded, reported and planned with. ``monotonic()`` is seconds
on a clock that only moves forward at a steady rate, for local timeouts and deadlines that a wall-clock step (NTP,
a resumed VM) must not stretch or cut short.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """The wall clock, tz-aware UTC. Only the daemon's wiring creates one."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


class SimulatedClock:
    """A clock that moves only when told to; used by the simulator and tests."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("SimulatedClock needs a tz-aware start time")
        self._start = start
        self._now = start

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        """Seconds since the start: simulated time never steps, so it is its own monotonic clock."""
        return (self._now - self._start).total_seconds()

    def set(self, when: datetime) -> None:
        if when < self._now:
            raise ValueError(f"time cannot go backwards: {when.isoformat()} < {self._now.isoformat()}")
        self._now = when

    def advance(self, by: timedelta) -> None:
        self.set(self._now + by)
