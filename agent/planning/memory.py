"""What the planner remembers between ticks: recent changes (anti-flapping), back-offs and why, blocked pools, since
when each pool's changes keep failing, and since when its units keep failing for a reason other than capacity. It
is kept for configured pools only (``only``): what it says of a pool no longer configured is dropped, never alerted
on or exported, and not inherited by a pool added later under the same id.

It also carries the record of the open alert conditions (``open_conditions``, ``conditions_ended``: what
``agent.conditions.ConditionTracker`` holds), which the planner never reads: it travels with the memory so that a
new leader, which reads the memory its predecessor saved, neither tells those conditions again nor forgets to tell
their ends. Conditions are not a pool's: ``only`` keeps them all (one about a pool no longer configured is simply
never raised again, and its end is told).

It carries as well, per TPU slice group, since when each of its slices has been seen short of hosts
(``slices_short_since``: ``actuators.short_slices.ShortSlices.known``), which the planner never reads either: the
daemon hands it back to the slice adapter of a restarted agent or a new leader at its first read of the memory, so a
slice's wait for its missing hosts goes on instead of starting again within an unbroken watch, while its hosts (kept
with the time) show the same shortfall.

It carries too the scale-ups the leader waits for (``scale_ups_waited``: ``agent.budget_watch.BudgetWatch.waited``),
which the planner never reads: a new leader waits for exactly those, from when they were asked, instead of taking
every unit in flight for a scale-up of its own from its first read (a node being repaired is in flight too). None: not
kept (a memory saved by an earlier release, or none saved), and the new leader falls back to waiting for every unit in
flight from its first read; ``()``: kept, and none waited for.

It carries too the drains taken over that a leader settled, the latest 2,000 over all pools (``drains_settled``:
per pool, each drain's key with when: ``agent.drains.NodeDrains.settled``), which the planner never reads: a replica
that leads again after another led forgets the removals it remembers whose drains that leader settled
(``NodeDrains.recall_settled``), and follows the others to their end, so a removal's warning is told once and never
lost.

It carries too the counts of the daily report's window (``day_counts``: ``agent.daemon.summary.DailySummary``), which
the planner never reads: a replica that starts leading takes over what the leaders before it counted since the last
report, so the report of the day covers the day, not only the part this replica led. None: none kept (a memory saved
by an earlier release, or before any leader counted).

The memory is an immutable value: the loop passes it in and stores the updated copy it gets back.

Its times are wall times, written by the tick that set them: a tick that ran while the wall clock was ahead (a VM
resumed with a wrong clock, then stepped back by NTP) wrote times that the corrected clock reaches only after the
step's length, and a back-off, a last change or a failure written then would hold the pool that much longer (6 h
ahead: a stockout's 10-minute back-off held the pool 370 minutes after the correction). Each tick first takes the
memory back within its clock (``within_clock``): no back-off ends later than now and the longest back-off a tick
sets (``max(MIN_BACKOFF, lead_time)``), and no change or failure is later than now (``agent.memory_clock``, which
logs what it moves).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TypeVar

from models import AlertKind, Severity

V = TypeVar("V")

# How far ahead of this replica's clock a time saved by another may be without a word: replicas' clocks kept by NTP
# differ by well under a second (as ``agent.scale_up_memory.CLOCK_SKEW``); a time further ahead is still moved back.
CLOCK_SKEW = timedelta(seconds=5)
Condition = tuple[AlertKind, str]  # an alert condition: kind, subject


@dataclass(frozen=True)
class PendingScaleUp:
    """A scale-up the leader asked for, waiting for its units to become ready. ``inherited``: not known to have been
    asked, units in flight found at a leader's first read of its pool that no trusted saved scale-up explains
    (``requested_at`` is that read: the one time known to be no earlier than the ask), and waited for from there.
    ``judged_at``: the last tick that read its pool and found it still waited for, renewed at every such tick (the
    memory is saved once a tick while a scale-up waits); a new leader trusts a saved scale-up only if that is within an
    unbroken watch of its first tick and not later than it (``agent.scale_up_memory``; None: never judged)."""

    pool_id: str
    requested_at: datetime
    from_units: int
    to_units: int
    inherited: bool = False
    judged_at: datetime | None = None


class BackoffReason(StrEnum):
    """Why a pool is backed off: out of capacity or quota (a stockout), or its scale-ups kept failing with errors a
    retry may fix for longer than its lead time."""

    STOCKOUT = "stockout"
    FAILING_CHANGES = "failing-changes"


@dataclass(frozen=True)
class OpenCondition:
    """A level condition raised and not yet resolved (``agent.conditions``): first raised at ``since``, last raised
    or holding at ``seen``, its latest event's ``severity`` and ``summary``, when each severity was last told (an event
    a notifier's de-duplication window let through: ``told``), the first tick that found it gone since ``seen``,
    whether it was last seen as holding (``held``) and when the end told before held this one's back (``held_by``)."""

    since: datetime
    seen: datetime
    severity: Severity
    summary: str
    told: dict[Severity, datetime] = field(default_factory=dict)
    gone: datetime | None = None
    held: bool = False
    held_by: datetime | None = None


@dataclass(frozen=True)
class ReplicaCounts:
    """What one replica counted in a daily report's window: its actions by status, skips by reason, errors by type."""

    actions: dict[str, int] = field(default_factory=dict)
    skips: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class DayCounts:
    """The counts of a daily report's window as its leaders kept them: the window's start (``since``), who led it in
    order, each with when it took over (``led``, the latest ``agent.daemon.day_counts.LED_KEPT``; ``led_before`` counts
    those left out before them), and each replica's own counts (``replicas``, by identity: each counted once, by
    whoever it is)."""

    since: datetime
    led: tuple[tuple[str, datetime], ...] = ()
    replicas: dict[str, ReplicaCounts] = field(default_factory=dict)
    led_before: int = 0


@dataclass(frozen=True)
class PlannerMemory:
    last_change: dict[str, tuple[datetime, int]] = field(default_factory=dict)  # pool -> (when, +1 up / -1 down)
    backoff_until: dict[str, datetime] = field(default_factory=dict)  # pool -> no scale-up before this time
    backoff_reason: dict[str, BackoffReason] = field(default_factory=dict)  # pool -> why (absent: a stockout)
    blocked: dict[str, str] = field(default_factory=dict)  # pool -> why it must not be touched
    # pool -> since when its changes keep failing with errors a retry may fix (until one is accepted, or none fails
    # for a while: agent.executor), and when one of them last failed so
    failing_since: dict[str, datetime] = field(default_factory=dict)
    last_failure: dict[str, datetime] = field(default_factory=dict)
    # pool -> since when units the cloud accepted keep failing for a reason other than capacity or quota, and when
    # some last did so. Apart from the count above: the accepted request that asks for the units again ends that one
    units_failing_since: dict[str, datetime] = field(default_factory=dict)
    units_failed_last: dict[str, datetime] = field(default_factory=dict)
    # the alert conditions open, and when the end of each condition was last told (within a de-duplication window)
    open_conditions: dict[Condition, OpenCondition] = field(default_factory=dict)
    conditions_ended: dict[Condition, datetime] = field(default_factory=dict)
    # TPU slice group -> slice -> (since when it has been seen short of hosts, a read that found it short since, the
    # Compute instance ids of the hosts it had when first seen short still there, None from a release that kept none):
    # the slices short at the latest read (``short_slices.ShortSince``)
    slices_short_since: dict[str, dict[str, tuple[datetime, datetime, frozenset[str] | None]]] = field(
        default_factory=dict
    )
    # the scale-ups the leader waits for, in the order it asked for them (None: not kept, see the module docstring)
    scale_ups_waited: tuple[PendingScaleUp, ...] | None = None
    # pool -> drain key -> when a leader settled that drain, taken over; the latest 2,000 (see the module docstring)
    drains_settled: dict[str, dict[str, datetime]] = field(default_factory=dict)
    # the counts of the daily report's window, kept across leaders (None: none kept, see the module docstring)
    day_counts: DayCounts | None = None

    def changed(self, pool_id: str, at: datetime, direction: int) -> PlannerMemory:
        return replace(self, last_change={**self.last_change, pool_id: (at, direction)})

    def back_off(self, pool_id: str, until: datetime, reason: BackoffReason = BackoffReason.STOCKOUT) -> PlannerMemory:
        return replace(
            self,
            backoff_until={**self.backoff_until, pool_id: until},
            backoff_reason={**self.backoff_reason, pool_id: reason},
        )

    def why_backed_off(self, pool_id: str) -> BackoffReason:
        """Why the pool's latest back-off was set (a memory saved by a release that did not record it: a stockout)."""
        return self.backoff_reason.get(pool_id, BackoffReason.STOCKOUT)

    def block(self, pool_id: str, reason: str) -> PlannerMemory:
        """Nothing is sent to the pool until a person lifts the block; it is blocked, no longer failing."""
        return replace(self.not_failing(pool_id), blocked={**self.blocked, pool_id: reason})

    def in_backoff(self, pool_id: str, now: datetime) -> bool:
        until = self.backoff_until.get(pool_id)
        return until is not None and now < until

    def failing(self, pool_id: str, since: datetime, at: datetime) -> PlannerMemory:
        """A change of the pool failed at ``at``; its changes fail since ``since``, unless they already did since
        earlier."""
        first = min(since, self.failing_since.get(pool_id, since))
        last = max(at, self.last_failure.get(pool_id, at))
        return replace(
            self,
            failing_since={**self.failing_since, pool_id: first},
            last_failure={**self.last_failure, pool_id: last},
        )

    def failed_last(self, pool_id: str) -> datetime | None:
        """When a change of the pool last failed, while its changes keep failing (a memory saved by a release that
        did not record it: since when they fail)."""
        if pool_id not in self.failing_since:
            return None
        return self.last_failure.get(pool_id, self.failing_since[pool_id])

    def not_failing(self, pool_id: str) -> PlannerMemory:
        """A change of the pool was accepted, the pool is blocked, or its changes stopped failing: it is no longer
        failing."""
        if pool_id not in self.failing_since and pool_id not in self.last_failure:
            return self
        return replace(
            self,
            failing_since={p: t for p, t in self.failing_since.items() if p != pool_id},
            last_failure={p: t for p, t in self.last_failure.items() if p != pool_id},
        )

    def units_failed(self, pool_id: str, at: datetime) -> PlannerMemory:
        """Units of the pool failed at ``at`` for a reason other than capacity; they fail since then, unless they
        already did since earlier."""
        first = min(at, self.units_failing_since.get(pool_id, at))
        last = max(at, self.units_failed_last.get(pool_id, at))
        return replace(
            self,
            units_failing_since={**self.units_failing_since, pool_id: first},
            units_failed_last={**self.units_failed_last, pool_id: last},
        )

    def units_not_failing(self, pool_id: str) -> PlannerMemory:
        """The pool's units stopped failing: the count starts again at the next failed unit."""
        if pool_id not in self.units_failing_since and pool_id not in self.units_failed_last:
            return self
        return replace(
            self,
            units_failing_since={p: t for p, t in self.units_failing_since.items() if p != pool_id},
            units_failed_last={p: t for p, t in self.units_failed_last.items() if p != pool_id},
        )

    def within_clock(
        self, now: datetime, longest_backoff: Mapping[str, timedelta]
    ) -> tuple[PlannerMemory, dict[str, timedelta]]:
        """The memory with no time later than the clock allows at ``now`` (a back-off ends at ``now`` plus its pool's
        ``longest_backoff`` at the latest, a change or a failure is at ``now`` at the latest), and what was moved, by
        how much: a later time was written while the wall clock was ahead (stepped back since, or the clock of the
        replica that saved the memory runs ahead). Itself when nothing is (``agent.memory_clock`` logs the rest)."""
        ahead: dict[str, timedelta] = {}  # what is moved, by how much

        def cap(what: str, at: datetime, latest: datetime) -> datetime:
            if at > latest:
                ahead[f"{what} {at.isoformat(timespec='seconds')}"] = at - latest
            return min(at, latest)

        backoff = {
            p: cap(f"pool {p} backed off until", until, now + longest_backoff[p])
            for p, until in self.backoff_until.items()
            if p in longest_backoff
        }
        changes = {p: (cap(f"pool {p} last changed at", at, now), way) for p, (at, way) in self.last_change.items()}
        failures = {
            name: {p: cap(f"pool {p} {name.replace('_', ' ')}", at, now) for p, at in getattr(self, name).items()}
            for name in ("failing_since", "last_failure", "units_failing_since", "units_failed_last")
        }
        if not ahead:
            return self, ahead
        within = replace(
            self,
            backoff_until={**self.backoff_until, **backoff},
            last_change=changes,
            failing_since=failures["failing_since"],
            last_failure=failures["last_failure"],
            units_failing_since=failures["units_failing_since"],
            units_failed_last=failures["units_failed_last"],
        )
        return within, ahead

    def pools(self) -> frozenset[str]:
        """Every pool the memory says something about."""
        return frozenset(
            self.last_change.keys()
            | self.backoff_until.keys()
            | self.backoff_reason.keys()
            | self.blocked.keys()
            | self.failing_since.keys()
            | self.last_failure.keys()
            | self.units_failing_since.keys()
            | self.units_failed_last.keys()
            | self.slices_short_since.keys()
            | {p.pool_id for p in self.scale_ups_waited or ()}
            | self.drains_settled.keys()
        )

    def only(self, pool_ids: Collection[str]) -> PlannerMemory:
        """The memory of ``pool_ids`` alone: what it says of any other pool (one removed from the configuration, or
        renamed) is left out. Itself when it names no other pool."""
        if self.pools() <= set(pool_ids):
            return self
        return PlannerMemory(
            last_change=_only(self.last_change, pool_ids),
            backoff_until=_only(self.backoff_until, pool_ids),
            backoff_reason=_only(self.backoff_reason, pool_ids),
            blocked=_only(self.blocked, pool_ids),
            failing_since=_only(self.failing_since, pool_ids),
            last_failure=_only(self.last_failure, pool_ids),
            units_failing_since=_only(self.units_failing_since, pool_ids),
            units_failed_last=_only(self.units_failed_last, pool_ids),
            open_conditions=self.open_conditions,
            conditions_ended=self.conditions_ended,
            slices_short_since=_only(self.slices_short_since, pool_ids),
            scale_ups_waited=(
                None
                if self.scale_ups_waited is None
                else tuple(p for p in self.scale_ups_waited if p.pool_id in pool_ids)
            ),
            drains_settled=_only(self.drains_settled, pool_ids),
            day_counts=self.day_counts,
        )


def _only(values: Mapping[str, V], pool_ids: Collection[str]) -> dict[str, V]:
    return {pool: value for pool, value in values.items() if pool in pool_ids}
