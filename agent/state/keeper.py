"""MemoryKeeper: when the planner's memory is loaded from and saved to its store, and what a failure does.

* ``resume()`` is called when this replica becomes the leader: before its next tick plans, the memory the
  previous leader saved (or this replica before a restart) replaces the in-memory copy, keeping what this replica
  learned since it became leader (while the store could not be read). Unless the store still holds what this
  replica last read or wrote there: nobody saved since, so the memory it holds is the newer one (its last save
  failed, a ConfigMap 409 or 5xx, the API down, which is also what lets its lease lapse, and nobody led meanwhile):
  a block after a permanent error, a back-off, a failure learned since its last good save are kept, merged against
  the stored copy as at any later tick. Its open conditions, slices short of hosts and scale-ups waited for are kept
  too when it has not stood by since its last tick as leader (its tracker, slice adapter and budget watch still hold
  them); after a standby tick, which forgot them, they are the stored ones, as for any new leader.
* ``before_tick`` reads the store every tick and merges what changed there since this replica last read or wrote
  it: an operator who lifts a block by editing (or deleting) the stored memory, as the operations guide says,
  is heard at the next tick instead of being written over at the next save. The merge is three-way, per pool,
  against what the store held when this replica last saw it: a value only one side changed takes that side's; a
  value both changed keeps this replica's block or the later time. The open alert conditions are the exception:
  once loaded, this replica's are kept as they are (its tracker, which adopted the stored ones at the first load,
  is what says which are open), so a deleted or stale stored copy neither drops a condition, whose end would never
  be told, nor brings back one that ended, whose end would be told twice. So are the slices short of hosts (its
  slice adapter, which took the stored record back at the first load, reads them): a stale copy written back does
  not bring back the time of a wait that ended, which would delete a slice short again a minute into its new wait.
  So are the scale-ups waited for (``scale_ups_waited``): at the first load they are the stored ones exactly (None
  when nothing is stored, or a release that kept none saved it: the new leader then waits for the units in flight
  from its first read), whatever this replica held before it led (it forgot its own scale-ups as a standby: another
  leader may have resized since), unless it leads again with the store as it left it and has not stood by (above);
  afterwards its budget watch says which are waited for. So are the drains settled (``drains_settled``): at the first
  load, the stored ones and those this replica held (a drain settled stays so, whoever says it), handed to its
  drains, which say from then on which were settled (``agent.drains.NodeDrains.recall_settled``).
* ``after_tick(memory, now)`` saves the memory when it differs from what the store holds. A failed save is
  logged and retried on the next tick; the tick itself is never held up or failed by the store.
* Until a load has succeeded, nothing is saved: a new leader that cannot read the store must not overwrite
  the back-offs and blocks its predecessor saved with its own, emptier, memory. It keeps retrying the load, and
  must not plan with that memory either (``loaded`` is False): the daemon's leader tick then only watches
  (``agent.daemon.adapters``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from datetime import datetime
from typing import TypeVar

from agent.planning import PlannerMemory
from agent.state.base import StateStore
from models import AlertKind, StateUnavailable

log = logging.getLogger(__name__)
V = TypeVar("V")
K = TypeVar("K", str, tuple[AlertKind, str])


class MemoryKeeper:
    """``pools``: the configured pools, which the restored memory is counted for in the log (the agent drops what it
    holds for any other); None counts every pool the memory names."""

    def __init__(self, store: StateStore, pools: Collection[str] | None = None) -> None:
        self._store = store
        self._pools = pools
        self._loaded = False
        self._stored: PlannerMemory | None = None  # what the store holds, as far as this replica knows
        self._read = False  # whether ``_stored`` is known: the store read (or written) once since the start
        self._base: PlannerMemory | None = None  # the memory when leadership started, until the first load
        self._ticked: PlannerMemory | None = None  # the memory at the end of this replica's last tick as leader
        self._failing: str | None = None
        self.failures = 0

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def failing(self) -> bool:
        """Whether the store's last load or save failed (retried at the next tick)."""
        return self._failing is not None

    def resume(self) -> None:
        """Leadership starts (again): read the store before the next tick plans."""
        self._loaded = False
        self._base = None

    def before_tick(self, memory: PlannerMemory) -> tuple[PlannerMemory, StateUnavailable | None]:
        """The memory the tick should plan with (``memory`` merged with what changed in the store), and the
        error when the store could not be read (``memory`` returned as it was; a tick plans with it only once a
        load has succeeded since leadership started, ``loaded``)."""
        first = not self._loaded
        if first and self._base is None:
            self._base = memory  # what this replica knew before it led: stale once the store is read
        try:
            stored = self._store.load()
        except StateUnavailable as exc:
            self._failed("load", exc)
            return memory, exc
        self._recovered()
        # nobody saved since this replica last read or wrote the store: the memory it holds is the newer one
        unchanged = first and self._read and stored == self._stored
        base = self._base if first and not unchanged else self._stored
        theirs = stored or PlannerMemory()
        merged = merge(base or PlannerMemory(), memory, theirs) if stored is not None or not first else memory
        if not first:  # since the first load the leader's tracker holds the open conditions, its slice adapter
            merged = replace(  # the slices short of hosts, its budget watch the scale-ups waited for
                merged,
                open_conditions=memory.open_conditions,
                conditions_ended=memory.conditions_ended,
                slices_short_since=memory.slices_short_since,
                scale_ups_waited=memory.scale_ups_waited,
                drains_settled=memory.drains_settled,
            )
        elif not (unchanged and self._ticked is not None and _held(memory) == _held(self._ticked)):
            if unchanged and stored is not None:  # it stood by since its last tick as leader: it forgot its own
                merged = replace(
                    merged,
                    open_conditions=stored.open_conditions,
                    conditions_ended=stored.conditions_ended,
                    slices_short_since=stored.slices_short_since,
                )
            # the predecessor's, exactly: none kept (None) when nothing is stored
            merged = replace(merged, scale_ups_waited=None if stored is None else stored.scale_ups_waited)
        if unchanged and merged != theirs:
            log.info(
                "the stored planner memory is as this replica last read or wrote it (its last save failed, nobody "
                "saved since): what it learned since is kept and saved after this tick"
            )
        self._loaded, self._base, self._stored, self._read = True, None, stored, True
        for pool in sorted(set(memory.blocked) - set(merged.blocked)):
            log.info("pool %s is no longer blocked: lifted in the stored planner memory", pool)
        if first and stored is None:
            log.info("no saved planner memory; starting from the one in memory")
        elif first:  # what the agent keeps of it: nothing of a pool no longer configured
            kept = merged if self._pools is None else merged.only(self._pools)
            log.info(
                "planner memory restored: %d recent changes, %d back-offs, %d blocked pools",
                len(kept.last_change),
                len(kept.backoff_until),
                len(kept.blocked),
                extra={"blocked": sorted(kept.blocked), "backoff": sorted(kept.backoff_until)},
            )
            if kept.scale_ups_waited is None:
                log.info(
                    "the planner memory keeps no scale-ups waited for (saved by an earlier release): the units in "
                    "flight are waited for from this leader's first read of each pool"
                )
        return merged, None

    def after_tick(self, memory: PlannerMemory, now: datetime) -> StateUnavailable | None:
        """Save ``memory`` if the store holds something else; the error when that failed (retried next tick)."""
        if not self._loaded:
            return None
        self._ticked = memory
        if memory == self._stored or (self._stored is None and memory == PlannerMemory()):
            return None
        try:
            self._store.save(memory, now)
        except StateUnavailable as exc:
            self._failed("save", exc)
            return exc
        self._recovered()
        self._stored, self._read = memory, True
        log.debug("planner memory saved")
        return None

    def _failed(self, what: str, exc: StateUnavailable) -> None:
        self.failures += 1
        message = f"{type(exc).__name__}: {exc}"
        if message != self._failing:  # once per outage, not every tick
            log.warning(
                "planner memory %s failed, keeping the copy in memory and retrying next tick: %s", what, message
            )
        self._failing = message

    def _recovered(self) -> None:
        if self._failing is not None:
            log.info("planner memory store answers again")
        self._failing = None


def _held(memory: PlannerMemory) -> tuple[object, ...]:
    """What of the memory the leader's tracker, slice adapter and budget watch hold (a standby forgets it)."""
    return memory.open_conditions, memory.conditions_ended, memory.slices_short_since, memory.scale_ups_waited


def merge(base: PlannerMemory, ours: PlannerMemory, theirs: PlannerMemory) -> PlannerMemory:
    """Three-way, per pool: what only one side changed since ``base`` is taken from that side; where both
    changed, our block stays and the later time wins (a back-off, a recent change). A back-off's reason is the one
    of the side whose back-off was kept. Open alert conditions merge per condition the same way, ours kept where
    both changed (the leader saw it last), the slices short of hosts per slice group, and the scale-ups waited for
    as a whole (``MemoryKeeper.before_tick`` sets them itself). The drains settled are both sides', each drain both
    name at its later time: a drain settled stays so, whoever says it. The daily report's counts are taken whole, as
    the scale-ups waited for."""
    backoff_until = _three_way(base.backoff_until, ours.backoff_until, theirs.backoff_until, max)
    return PlannerMemory(
        last_change=_three_way(base.last_change, ours.last_change, theirs.last_change, max),
        backoff_until=backoff_until,
        backoff_reason={
            pool: why
            for pool, until in backoff_until.items()
            if (why := (ours if ours.backoff_until.get(pool) == until else theirs).backoff_reason.get(pool))
        },
        blocked=_three_way(base.blocked, ours.blocked, theirs.blocked, lambda o, _: o),
        failing_since=_three_way(base.failing_since, ours.failing_since, theirs.failing_since, min),
        last_failure=_three_way(base.last_failure, ours.last_failure, theirs.last_failure, max),
        units_failing_since=_three_way(
            base.units_failing_since, ours.units_failing_since, theirs.units_failing_since, min
        ),
        units_failed_last=_three_way(base.units_failed_last, ours.units_failed_last, theirs.units_failed_last, max),
        open_conditions=_three_way(base.open_conditions, ours.open_conditions, theirs.open_conditions, lambda o, _: o),
        conditions_ended=_three_way(base.conditions_ended, ours.conditions_ended, theirs.conditions_ended, max),
        slices_short_since=_three_way(
            base.slices_short_since, ours.slices_short_since, theirs.slices_short_since, lambda o, _: o
        ),
        # whole, ours where we changed it (the leader's budget watch waits for them)
        scale_ups_waited=ours.scale_ups_waited
        if ours.scale_ups_waited != base.scale_ups_waited
        else theirs.scale_ups_waited,
        # whole, ours where we changed it (the leader's daily summary keeps them: ``agent.daemon.summary``)
        day_counts=ours.day_counts if ours.day_counts != base.day_counts else theirs.day_counts,
        # both sides' (a drain settled stays so): a replica's own from before it led are not stale
        drains_settled={
            pool: _each_latest(ours.drains_settled.get(pool, {}), theirs.drains_settled.get(pool, {}))
            for pool in sorted(ours.drains_settled.keys() | theirs.drains_settled.keys())
        },
    )


def _each_latest(ours: Mapping[str, datetime], theirs: Mapping[str, datetime]) -> dict[str, datetime]:
    """The drains both sides say were settled, each at the later time either gives."""
    return {
        key: max(at for at in (ours.get(key), theirs.get(key)) if at is not None) for key in ours.keys() | theirs.keys()
    }


def _three_way(
    base: Mapping[K, V], ours: Mapping[K, V], theirs: Mapping[K, V], both: Callable[[V, V], V]
) -> dict[K, V]:
    out: dict[K, V] = {}
    for key in sorted(base.keys() | ours.keys() | theirs.keys()):
        b, o, t = base.get(key), ours.get(key), theirs.get(key)
        if o == b:
            value = t
        elif t == b:
            value = o
        else:
            value = o if t is None else t if o is None else both(o, t)
        if value is not None:
            out[key] = value
    return out
