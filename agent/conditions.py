"""Level conditions and their ends: which conditions the agent raised are still holding, and a ``resolved`` message
for each one that is gone, so that people learn when a condition clears, not only that it began.

A level condition is one that holds for a while. These kinds are level conditions, each one condition per kind and
subject (whatever its severity: a warning that turns critical is the same condition):

* raised every tick while they hold (a notifier tells them once per de-duplication window): ``missing-data`` (a
  demand class without trustworthy demand), ``pool-unreadable``, ``projected-overspend``,
  ``budget-hard-stop-deferred``, ``stalled-scale-up``, ``broken-unit`` (a pool's units that cannot serve with work
  on them), an ``actuator-failure`` of a pool blocked after a permanent error, one of a pool's idle nodes that
  cannot be read, ``onprem-capacity`` (an on-prem pool short of its ``max_units``, whose capacity cannot be
  read, or whose query reads more units than its ``max_units``) and ``spot-reserve-unheld`` (a spot pool's
  interruption reserve that no pool has room for);
* raised when they begin, and holding while the planner's memory or the pool's state says so (``still_holding``):
  ``stockout`` (while the pool is backed off for a stockout, or a zone of it is backed off or has failed units), an
  ``actuator-failure`` of a pool whose changes keep failing (while the memory says it is failing, or blocked).

Every other kind is a one-off event and is never resolved: a budget threshold crossed, a scale-up trimmed by a
shared budget, a budget's ledger that began mid-period (told once per period), a drain that removed its node or slice
with pods still terminating (``drain-unfinished-pods``), a drain that ended with its node left cordoned while the
cloud still deletes it (``drain-deletion-overdue``: not tracked here; the replica that told it resolves it itself
when the cloud stops deleting the node and it is uncordoned, ``agent.drains``), and the daemon's own alerts
(leadership lost, the daily report). The daemon's ``tick-failed`` is resolved, by the daemon once no tick has failed
for ``resolve_after``; this tracker only carries it in the planner memory (``carry``, ``drop``) so that the next
leader ends it when the replica that raised it is gone.

``ConditionTracker.update`` is called at the end of each tick that ran to completion, which evaluated every
condition; a tick that failed calls nothing, so a condition is never resolved for want of a tick. A condition
stays active until a tick finds it neither raised nor holding; one about a pool whose state this tick could not
read is left as it is (``unknown``): neither raised nor resolved, and so is a stalled scale-up of a pool whose
units in flight a new leader adopted and does not call stalled yet (``not_evaluated``).

A condition that flickers (a class's newest sample stale on every other tick, a pool read that fails now and then, a
projection hovering at a cap) must not post a message each way at every flicker, so an end is told only when it lasts:
a tick that finds an active condition gone resolves it once the condition has not been seen for ``resolve_after``
(``alerts.resolve_after``); a tick that sees it before then keeps it active, nothing told. A condition that the
planner's memory or the pool's state said held when last seen (``still_holding``) ends when they say so, which has
hysteresis of its own (a back-off's length, a lead time without a failure): it is resolved by the first tick that
finds it gone. And at most one end of a condition is told per ``window`` (``alerts.dedup_window``, the notifiers'
de-duplication window): an end found less than a window after the last one told of the same condition waits, still
active, until the window has passed, and is told then if the condition is still gone. The end is an INFO event of its
kind and subject with ``resolved`` set, saying when the condition was first raised, when last seen, when a tick first
found it gone and how long it lasted. A notifier that handles it forgets the condition's de-duplication entries
(``agent.notify.dedup``), so a condition that comes back, even within the window, is told again: with both bounds, a
condition that flickers posts, per window, one end at most and at each severity two raises at most (the one the window
allows and the one after the end). A standby forgets its conditions (``forget``): the leader tells their ends.

The tracker's record (``record``) travels in the planner memory, which the leader saves and a new leader adopts once,
when it first reads the memory (``adopt``), so a change of leader does not lose the ends of the conditions its
predecessor raised. The new leader tells those conditions again while they hold: it cannot know which of them its
predecessor's notifier delivered (one queued while Slack was down or rate-limited dies with the pod), and a repeat is
better than silence. A kind raised at every tick is told again by the tick's own event; one raised only when it began
(a stockout, changes that keep failing), held silently since, is raised again from its saved severity and summary at
the first tick that finds it holding, saying when and that the previous leader raised it, before any end. The record
is saved only with a change that matters (a condition opens, ends, changes severity, is found gone or holding), not
as its last-seen time or summary moves at every tick (``agent.tick_alerts``), so the one a successor reads may be
older than the truth: it ends an adopted condition it finds gone only once ``resolve_after`` has passed since it
adopted it, the end it tells gives the last-seen time saved (a lower bound), and the summary it tells again is the
one saved (a stalled scale-up's wait a few ticks short).

The times the tracker keeps are wall times: one written while the wall clock was ahead (a VM resumed with a wrong
clock, then stepped back by NTP; a predecessor whose clock runs ahead) is later than any tick's ``now`` until the
clock has caught up, and would hold the condition's end back that long (6 h ahead: told 365 minutes after the
correction instead of ``resolve_after``). Each ``update`` first moves every such time back to its ``now`` (it was
seen, found gone, told no later than that), and logs it when by more than ``CLOCK_SKEW``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from agent.alerts import PendingScaleUp
from agent.planning import PlannerMemory
from agent.planning.memory import CLOCK_SKEW, BackoffReason, Condition, OpenCondition
from models import AlertEvent, AlertKind, PoolState, Severity
from models.durations import format_duration

log = logging.getLogger(__name__)

LEVEL_KINDS = frozenset(
    {
        AlertKind.MISSING_DATA,
        AlertKind.POOL_UNREADABLE,
        AlertKind.BROKEN_UNIT,
        AlertKind.PROJECTED_OVERSPEND,
        AlertKind.BUDGET_HARD_STOP_DEFERRED,
        AlertKind.STALLED_SCALE_UP,
        AlertKind.STOCKOUT,
        AlertKind.ACTUATOR_FAILURE,
        AlertKind.ONPREM_CAPACITY,
        AlertKind.SPOT_RESERVE_UNHELD,
    }
)


class ConditionTracker:
    """``resolve_after``: how long a condition must have gone unseen before its end is told; ``window``: an end is
    told at most once per window for each condition (``alerts.resolve_after`` and ``alerts.dedup_window``).

    What it holds is the record the planner memory carries (``record``, ``adopt``): a replica that becomes the
    leader adopts the record its predecessor saved, so it tells the end of each condition the predecessor raised.
    It tells again those of them that still hold, as its own: its notifier has no record of them, and nothing says
    whether the predecessor's notifier delivered them (``update`` returns those held silently, told again, with the
    ends)."""

    def __init__(self, resolve_after: timedelta = timedelta(minutes=5), window: timedelta = timedelta(hours=1)) -> None:
        self.resolve_after = resolve_after
        self.window = window
        self._active: dict[Condition, OpenCondition] = {}
        self._ended: dict[Condition, datetime] = {}  # when the last end of each condition was told
        # adopted conditions, each with when it was adopted: its last-seen time saved may be older than the truth
        self._adopted_at: dict[Condition, datetime] = {}
        # adopted conditions not told by this tracker yet: one still holding and not raised is told again (``update``)
        self._to_retell: set[Condition] = set()
        # conditions another part of this replica raises and ends (``carry``): in the record, never ended here
        self._carried: set[Condition] = set()

    @property
    def active(self) -> tuple[Condition, ...]:
        return tuple(sorted(self._active))

    def record(self) -> tuple[dict[Condition, OpenCondition], dict[Condition, datetime]]:
        """The open conditions and the recent ends told, as the planner memory keeps them."""
        return dict(self._active), dict(self._ended)

    def adopt(
        self, active: Mapping[Condition, OpenCondition], ended: Mapping[Condition, datetime], now: datetime
    ) -> None:
        """Take the record the planner memory holds (read back from the store when this replica became the leader,
        at ``now``): the conditions in it were raised by another replica, or by this one before it last stopped
        leading. One found gone is ended no earlier than ``resolve_after`` after ``now`` (unless it held), except one
        this tracker holds itself (the same condition since the same time), whose own last-seen time is kept."""
        own = {k: v.seen for k, v in self._active.items() if k in active and active[k].since == v.since}
        self._carried &= set(own)
        self._active = {k: replace(v, seen=max(v.seen, own[k])) if k in own else v for k, v in active.items()}
        self._ended = dict(ended)
        self._adopted_at = {k: now for k in active if k not in own}
        self._to_retell = set(self._adopted_at)

    def update(
        self,
        now: datetime,
        raised: Iterable[AlertEvent],
        holding: Collection[Condition] = (),
        unknown: Collection[Condition] = (),
    ) -> list[AlertEvent]:
        """Note this tick's level conditions and return a resolved event for each active one gone long enough:
        neither ``raised`` this tick, nor ``holding`` (``still_holding``), nor ``unknown`` (``not_evaluated`` this
        tick), unseen for ``resolve_after`` and whose last end was told a ``window`` ago or more. One-off events in
        ``raised`` are ignored.

        Before the ends come the adopted conditions told again (``_retold``): one raised only when it began (a
        stockout, changes that keep failing) is held silently afterwards, so a new leader that did not tell it
        again would tell only its end."""
        self._within_clock(now)
        told: set[Condition] = set()
        for event in raised:
            if event.kind not in LEVEL_KINDS or event.resolved:
                continue
            key = (event.kind, event.subject)
            before = self._active.get(key)
            since = before.since if before else event.at
            self._adopted_at.pop(key, None)
            self._active[key] = OpenCondition(since, now, event.severity, event.summary, held=key in holding)
            told.add(key)
        resolved = self._retold(now, told, holding, unknown)
        self._ended = {key: at for key, at in self._ended.items() if now - at < self.window}
        for key, active in sorted(self._active.items()):
            if key in told or key in unknown or key in self._carried:
                continue
            if key in holding:
                self._active[key] = replace(active, seen=now, gone=None, held=True, held_by=None)
                self._adopted_at.pop(key, None)
                continue
            gone = active.gone or now
            unseen_since = max(active.seen, self._adopted_at.get(key, active.seen))
            if (not active.held and now - unseen_since < self.resolve_after) or key in self._ended:
                self._active[key] = replace(active, gone=gone, held_by=self._ended.get(key, active.held_by))
                continue
            del self._active[key]
            self._adopted_at.pop(key, None)
            self._ended[key] = now
            late = "" if gone == now else self._why_late(active.held_by)
            last = AlertEvent(key[0], active.severity, active.seen, key[1], active.summary)
            resolved.append(resolved_event(last, active.since, active.seen, gone, now, late))
        return resolved

    def _within_clock(self, now: datetime) -> None:
        """Move every time later than ``now`` back to ``now``: it was written while the wall clock was ahead."""
        ahead: dict[str, timedelta] = {}

        def cap(key: Condition, at: datetime) -> datetime:
            if at > now:
                ahead[f"{key[0]} {key[1]}"] = max(at - now, ahead.get(f"{key[0]} {key[1]}", timedelta(0)))
            return min(at, now)

        for key, active in self._active.items():
            moved = replace(
                active,
                since=cap(key, active.since),
                seen=cap(key, active.seen),
                told={severity: cap(key, at) for severity, at in active.told.items()},
                gone=None if active.gone is None else cap(key, active.gone),
                held_by=None if active.held_by is None else cap(key, active.held_by),
            )
            if moved != active:
                self._active[key] = moved
        self._ended = {key: cap(key, at) for key, at in self._ended.items()}
        self._adopted_at = {key: cap(key, at) for key, at in self._adopted_at.items()}
        if ahead and max(ahead.values()) > CLOCK_SKEW:
            log.warning(
                "open conditions: times up to %s later than now (%s), written while the wall clock was ahead: it was "
                "stepped back since (NTP, a resumed VM) or the replica that saved them runs ahead; check the nodes' "
                "time sync. They are moved back to now: %s",
                max(ahead.values()),
                _when(now),
                ", ".join(sorted(ahead)),
                extra={"ahead_s": {what: by.total_seconds() for what, by in sorted(ahead.items())}},
            )

    def _retold(
        self, now: datetime, told: Collection[Condition], holding: Collection[Condition], unknown: Collection[Condition]
    ) -> list[AlertEvent]:
        """The adopted conditions still holding and not raised this tick, raised again from what the predecessor
        saved (its severity and summary, the summary as the condition opened or last changed severity): nothing
        says the predecessor's notifier delivered them. One raised this tick is told by its own event, one gone ends
        as any other; one this tick could not evaluate (``unknown``) waits for a tick that can."""
        retold = []
        for key in sorted(self._to_retell - set(unknown)):
            active = self._active.get(key)
            if active is not None and key in holding and key not in told:
                raised = f"{_when(active.since)} by the previous leader"
                retold.append(
                    AlertEvent(
                        kind=key[0],
                        severity=active.severity,
                        at=now,
                        subject=key[1],
                        summary=f"{active.summary} (Raised {raised}; still holds.)",
                        details={
                            "first raised": raised,
                            "told again": "this leader cannot know whether the previous leader's alert was delivered",
                        },
                    )
                )
            self._to_retell.discard(key)
        return retold

    def _why_late(self, held_by: datetime | None) -> str:
        """Why an end found at one tick is told at a later one."""
        if held_by is not None:
            return (
                f"the end before was told at {_when(held_by)}, and an end is told at most once per "
                f"{format_duration(self.window)} (alerts.dedup_window)"
            )
        return f"an end is told once the condition has gone unseen for {format_duration(self.resolve_after)}"

    def carry(self, key: Condition, condition: OpenCondition) -> None:
        """Hold ``condition`` in the record as open, for another part of this replica that raises it and tells its
        end (the daemon's ``tick-failed``, raised by ticks that fail, which call no ``update``): this tracker never
        ends it, but saves it with the record, so a successor (or this replica after a restart) adopts it and tells
        its end as any other's. ``drop`` takes it out once its end is told."""
        self._active[key] = condition
        self._carried.add(key)
        self._adopted_at.pop(key, None)
        self._to_retell.discard(key)

    def drop(self, key: Condition) -> None:
        """Take a condition out of the record without telling its end: it was told elsewhere (``carry``)."""
        self._active.pop(key, None)
        self._carried.discard(key)
        self._adopted_at.pop(key, None)
        self._to_retell.discard(key)

    def forget(self) -> None:
        """Drop every active condition without telling its end (a replica that no longer leads)."""
        self._carried.clear()
        self._active.clear()
        self._ended.clear()
        self._adopted_at.clear()
        self._to_retell.clear()


def resolved_event(
    last: AlertEvent, since: datetime, seen: datetime, gone: datetime, now: datetime, late: str = ""
) -> AlertEvent:
    """The end of the condition ``last`` was raised for: first raised at ``since``, last seen at ``seen``, first
    found gone at ``gone`` (it ended between the two), told at ``now``; ``late`` says why not at ``gone``."""
    details = {
        "first raised": _when(since),
        "last seen": _when(seen),
        "gone at": _when(gone),
        "lasted": f"{format_duration(seen - since)} to {format_duration(gone - since)}",
        f"last told ({last.severity})": last.summary,
    }
    if late:
        details["told at"] = f"{_when(now)}: {late}"
    return AlertEvent(
        kind=last.kind,
        severity=Severity.INFO,
        at=now,
        subject=last.subject,
        summary=(
            f"No longer holds, after {format_duration(gone - since)}: raised {_when(since)}, last seen {_when(seen)}, "
            f"gone at {_when(gone)}."
        ),
        details=details,
        resolved=True,
    )


def still_holding(memory: PlannerMemory, states: Mapping[str, PoolState], now: datetime) -> set[Condition]:
    """The conditions raised once that still hold: a pool backed off for a stockout, a zone of a pool backed off or
    with failed units, a pool blocked or whose changes or units keep failing. A back-off for changes or units that
    kept failing holds no stockout (its actuator-failure holds while the memory counts the pool as failing), so a
    stockout raised before it ends with the stockout's own back-off."""
    held: set[Condition] = {
        (AlertKind.STOCKOUT, p)
        for p in memory.backoff_until
        if memory.in_backoff(p, now) and memory.why_backed_off(p) is BackoffReason.STOCKOUT
    }
    for pool_id, state in states.items():
        zones = any(z.failed_units or (z.backoff_until is not None and now < z.backoff_until) for z in state.zones)
        if zones or state.failed_units:
            held.add((AlertKind.STOCKOUT, pool_id))
    failing = (*memory.blocked, *memory.failing_since, *memory.units_failing_since)
    held |= {(AlertKind.ACTUATOR_FAILURE, p) for p in failing}
    return held


def not_evaluated(
    pools: Iterable[str], states: Mapping[str, PoolState], pending: Iterable[PendingScaleUp] = ()
) -> set[Condition]:
    """The conditions of pools whose state this tick could not read: their zones (failed or missing), broken units,
    idle nodes and whether a scale-up of theirs is stalled are not known. Nor is it known of a pool with a scale-up
    adopted in flight (``pending``, ``PendingScaleUp.inherited``) not stalled by this agent's clock yet: the stall its
    predecessor told may still hold (no unit came), so the condition stays open until the units come or the wait
    is stalled by this agent's own clock, and is neither ended nor raised anew in between."""
    unread = [p for p in pools if p not in states]
    adopted = {(AlertKind.STALLED_SCALE_UP, f"pool {p.pool_id}") for p in pending if p.inherited}
    # "idle nodes of <pool>" is the subject of the drainer's alert (agent.drains), which reads only pools it can see;
    # "zones of <pool>" that of ``agent.alerts.missing_zone_events``
    return (
        {(kind, p) for kind in (AlertKind.STOCKOUT, AlertKind.BROKEN_UNIT) for p in unread}
        | {(AlertKind.ACTUATOR_FAILURE, f"idle nodes of {p}") for p in unread}
        | {(AlertKind.POOL_UNREADABLE, f"zones of {p}") for p in unread}
        | {(AlertKind.STALLED_SCALE_UP, f"pool {p}") for p in unread}  # ``agent.alerts.stalled_scale_up_events``
        | adopted
    )


def _when(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC")
