"""Clocks. Time is always injected: the core never reads the wall clock itself.

``now()`` is the wall time (tz-aware UTC): what is recorded, reported and planned with. ``monotonic()`` is seconds
on a clock that only moves forward at a steady rate, for local timeouts and deadlines that a wall-clock step (NTP,
a resumed VM) must not stretch or cut short, and for the time the ledger charges across such a step. It counts the
time the machine was suspended (``CLOCK_BOOTTIME`` on Linux): the accelerators an agent pays for bill on while its
own VM is suspended, and ``time.monotonic`` stands still then, so a 2-hour suspend went uncharged and read as a step
of the wall clock. Where there is no such clock, ``time.monotonic``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

# The steady clock that counts a suspend, where the platform has one (Linux).
_BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)


def steady_seconds() -> float:
    """Seconds on a clock that never steps and counts the time the machine was suspended; ``time.monotonic`` where
    the platform has none (it stands still while suspended)."""
    return time.monotonic() if _BOOTTIME is None else time.clock_gettime(_BOOTTIME)


class Clock(Protocol):
    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """The wall clock, tz-aware UTC. Only the daemon's wiring creates one."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return steady_seconds()


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
