"""What the planner remembers between ticks: recent changes (anti-flapping), back-offs and blocked pools.

The memory is an immutable value: the loop passes it in and stores the updated copy it gets back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime


@dataclass(frozen=True)
class PlannerMemory:
    last_change: dict[str, tuple[datetime, int]] = field(default_factory=dict)  # pool -> (when, +1 up / -1 down)
    backoff_until: dict[str, datetime] = field(default_factory=dict)  # pool -> no scale-up before this time
    blocked: dict[str, str] = field(default_factory=dict)  # pool -> why it must not be touched

    def changed(self, pool_id: str, at: datetime, direction: int) -> PlannerMemory:
        return replace(self, last_change={**self.last_change, pool_id: (at, direction)})

    def back_off(self, pool_id: str, until: datetime) -> PlannerMemory:
        return replace(self, backoff_until={**self.backoff_until, pool_id: until})

    def block(self, pool_id: str, reason: str) -> PlannerMemory:
        return replace(self, blocked={**self.blocked, pool_id: reason})

    def in_backoff(self, pool_id: str, now: datetime) -> bool:
        until = self.backoff_until.get(pool_id)
        return until is not None and now < until
