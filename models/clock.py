"""Clocks. Time is always injected: the core never reads the wall clock itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock, tz-aware UTC. Only the daemon's wiring creates one."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class SimulatedClock:
    """A clock that moves only when told to; used by the simulator and tests."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("SimulatedClock needs a tz-aware start time")
        self._now = start

    def now(self) -> datetime:
        return self._now

    def set(self, when: datetime) -> None:
        if when < self._now:
            raise ValueError(f"time cannot go backwards: {when.isoformat()} < {self._now.isoformat()}")
        self._now = when

    def advance(self, by: timedelta) -> None:
        self.set(self._now + by)
