"""Alert events: what the agent tells people about."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class AlertKind(StrEnum):
    BUDGET_THRESHOLD = "budget-threshold"
    PROJECTED_OVERSPEND = "projected-overspend"
    BUDGET_RESERVATION_REFUSED = "budget-reservation-refused"
    BUDGET_LEDGER_INCOMPLETE = "budget-ledger-incomplete"
    BUDGET_HARD_STOP_DEFERRED = "budget-hard-stop-deferred"
    STOCKOUT = "stockout"
    STALLED_SCALE_UP = "stalled-scale-up"
    MISSING_DATA = "missing-data"
    ACTUATOR_FAILURE = "actuator-failure"
    POOL_UNREADABLE = "pool-unreadable"  # apart from actuator-failure, so it never silences a pool's blocking
    ONPREM_CAPACITY = "onprem-capacity"  # on-prem units down or cordoned, or their count unread
    BROKEN_UNIT = "broken-unit"  # a unit that cannot serve with work on it (PoolState.broken_units): a person decides
    SPOT_RESERVE_UNHELD = "spot-reserve-unheld"  # a spot pool's interruption reserve that no pool has room for
    # a unit a drain removed with pods that never finished terminating (their work may be lost): told once, a one-off
    DRAIN_UNFINISHED_PODS = "drain-unfinished-pods"
    # a node a drain left cordoned because the cloud still deletes it after the drain's wait: told once, a one-off
    DRAIN_DELETION_OVERDUE = "drain-deletion-overdue"
    TICK_FAILED = "tick-failed"
    LEADERSHIP_LOST = "leadership-lost"
    DAILY_REPORT = "daily-report"


class Severity(StrEnum):
    """In rising order: ``AlertEvent.repeat_of_keys`` relies on it."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


@dataclass(frozen=True)
class AlertEvent:
    """One thing worth telling a person. ``dedup_key`` identifies repeats of the same condition at the same
    severity; ``repeat_of_keys`` are the keys whose delivery makes this event a repeat. ``origin`` says which agent
    raised it (its mode, cluster and replica), stamped on its way out; it is not part of the condition."""

    kind: AlertKind
    severity: Severity
    at: datetime
    subject: str
    summary: str
    details: dict[str, str] = field(default_factory=dict)
    origin: str = ""
    resolved: bool = False  # the end of the condition named by kind and subject (``agent.conditions``)

    @property
    def dedup_key(self) -> str:
        return f"{self.kind}:{self.subject}:{'resolved' if self.resolved else self.severity}"

    @property
    def repeat_of_keys(self) -> tuple[str, ...]:
        """Its own key and those of the same condition at a higher severity: a notifier that delivered one of them
        within its window treats this event as a repeat. A lower severity's never silences it: a warning about a
        pool never swallows the critical alert that follows it (a pool unreadable on a 503, then on a 403). A
        condition's end is never a repeat: each is told once, by the tick that finds the condition gone. Nor is a
        daily report: each stands for its own day, and the runtime sends one a day (two may come less than a dedup
        window apart after the wall clock is stepped and corrected, the second the real next day's)."""
        if self.resolved or self.kind == AlertKind.DAILY_REPORT:
            return ()
        severities = list(Severity)
        return tuple(f"{self.kind}:{self.subject}:{s}" for s in severities[severities.index(self.severity) :])

    @property
    def condition_keys(self) -> tuple[str, ...]:
        """The keys of its condition at every severity: what a notifier forgets when the condition ends."""
        return tuple(f"{self.kind}:{self.subject}:{s}" for s in Severity)
