"""Delivering a tick's alerts: the level conditions it ends (``agent.conditions``), carried in the planner memory so
that the next leader inherits them, and what a failed tick collected delivered before its error is raised.

The loop (``agent.loop.Agent.act``) concludes the tick's conditions at its end (``conclude``) and delivers its alerts
and the ends (``deliver``); a tick that fails delivers what it collected with ``tell_failed``, resolving nothing,
having evaluated nothing to its end. The record in the memory is adopted by the daemon once, when a replica that
becomes the leader first reads it (``agent.daemon.adapters``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from agent.conditions import ConditionTracker
from agent.notify.base import Flushable, Notifier
from agent.planning import PlannerMemory
from agent.planning.memory import Condition, OpenCondition
from models import AlertEvent

log = logging.getLogger("agent.loop")  # the loop's logger, as before the split


@dataclass(frozen=True)
class Concluded:
    """A tick's conditions concluded: the memory carrying the open ones, and what to tell beside the tick's alerts
    (``resolved``): the inherited conditions held silently that a new leader tells again, then the ends."""

    memory: PlannerMemory
    resolved: list[AlertEvent]


def conclude(
    tracker: ConditionTracker,
    memory: PlannerMemory,
    now: datetime,
    alerts: Sequence[AlertEvent],
    holding: Collection[Condition] = (),
    unknown: Collection[Condition] = (),
) -> Concluded:
    """Note the tick's alerts in ``tracker`` (``ConditionTracker.update``) and carry its record in ``memory``."""
    resolved = tracker.update(now, alerts, holding, unknown)
    return Concluded(with_conditions(memory, tracker), resolved)


def with_conditions(memory: PlannerMemory, tracker: ConditionTracker) -> PlannerMemory:
    """``memory`` carrying the open conditions of ``tracker``, saved for the next leader; itself when they are so.

    Only a change that matters is saved: a condition that opens, ends, changes severity, is found gone or is seen
    holding (or no longer). One whose only change is its last-seen time or its summary keeps the one ``memory``
    holds: both move at every tick while the condition holds (a stalled scale-up says how long it has waited, a
    projected overspend quotes the live projection), and writing them would rewrite the stored memory at every
    tick (an operator's edit of the ConfigMap, read before a tick and written after it, would be refused). A
    successor needs the last-seen time only as a lower bound: the tracker that adopts the record waits
    ``resolve_after`` from its adoption before it ends a condition it finds gone (``ConditionTracker.adopt``). The
    summary it tells again is the one saved, which may be a few ticks older than the predecessor's last."""
    active, ended = tracker.record()
    kept = memory.open_conditions
    active = {k: kept[k] if k in kept and _same_but_moving(kept[k], v) else v for k, v in active.items()}
    if active == kept and ended == memory.conditions_ended:
        return memory
    return replace(memory, open_conditions=active, conditions_ended=ended)


def _same_but_moving(saved: OpenCondition, now: OpenCondition) -> bool:
    """Whether ``now`` differs from ``saved`` in nothing but what moves while a condition holds: when it was last
    seen, and the figures of its summary (a stalled scale-up's wait, a projection's USD). A summary that says
    something else (a stockout found to be a quota used up) is a change a successor must tell as it stands."""
    return replace(saved, seen=now.seen, summary=now.summary) == now and _words(saved.summary) == _words(now.summary)


def _words(summary: str) -> str:
    """A summary without its figures: numbers and durations such as 20m, 1h5m or 61,440.00 read alike."""
    return _FIGURES.sub("#", summary)


_FIGURES = re.compile(r"\d[\d,.:]*[a-z]?(?:\d+[a-z])*")


def tell_failed(
    tracker: ConditionTracker, memory: PlannerMemory, notifier: Notifier, now: datetime, alerts: Sequence[AlertEvent]
) -> PlannerMemory:
    """Deliver what a failed tick collected before it failed, keeping its level conditions to be resolved by a
    later tick; it resolves none, having evaluated none to its end. A notifier's failure here is logged, so that
    the tick's own error is the one raised. The memory carrying the conditions is returned."""
    concluded = conclude(tracker, memory, now, alerts, unknown=tracker.active)
    try:
        deliver(notifier, alerts)
    except Exception:
        log.exception("alerts of a failed tick not delivered: %d", len(alerts))
    return concluded.memory


def deliver(notifier: Notifier, events: Sequence[AlertEvent]) -> None:
    for event in events:
        notifier.notify(event)
    if isinstance(notifier, Flushable):
        notifier.flush()
