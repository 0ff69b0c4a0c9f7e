"""The simulated cluster: pools whose units arrive after their lead time, leave at once, and can stock out.

It implements the Actuator interface, so the agent drives it exactly as it drives real pools. The simulation
runner moves it through time (``advance``) and feeds it each step's demand (``serve``), which is how it knows
which units are idle and since when.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from models import (
    ActionResult,
    ActionStatus,
    ActuatorError,
    CapacityUnavailable,
    PermanentActuatorError,
    PoolSpec,
    PoolState,
)
from models.allocation import allocate, unassigned, units_for
from models.clock import Clock


@dataclass
class _Pool:
    spec: PoolSpec
    ready: int
    arrivals: list[tuple[datetime, int]] = field(default_factory=list)
    idle: list[tuple[datetime, int]] = field(default_factory=list)  # (idle since, unit id), longest idle first
    failed: int = 0  # asked for, then found impossible (a stockout after the request): in no count but this one

    @property
    def in_flight(self) -> int:
        return sum(n for _, n in self.arrivals)

    @property
    def target(self) -> int:
        return self.ready + self.in_flight


@dataclass(frozen=True)
class StepOutcome:
    """What one step of demand met: chips served and left waiting per class, units in use and chips served per
    pool."""

    served: dict[str, float]
    unserved: dict[str, float]
    used_units: dict[str, int]
    served_by_pool: dict[str, float] = field(default_factory=dict)


class SimulatedCluster:
    """Pools in simulated time. ``stockouts`` maps a pool to windows in which it cannot get new units.
    ``waiting_costs`` (per class, USD per accelerator-hour) decide who a shared pool serves first when it cannot
    serve every class, as a scheduler with priorities would; without them, classes are served in name order.
    ``idle_pause_limit`` is the longest gap in the demand (a run of steps it is unknown at) through which the idle
    clocks pause (``pause_idle``); a longer one clears them (None: every gap pauses them)."""

    def __init__(
        self,
        pools: Sequence[PoolSpec],
        clock: Clock,
        initial_units: Mapping[str, int] | None = None,
        stockouts: Mapping[str, Sequence[tuple[datetime, datetime]]] | None = None,
        seed: int = 0,
        waiting_costs: Mapping[str, float] | None = None,
        idle_pause_limit: timedelta | None = None,
    ) -> None:
        self._clock = clock
        self._idle_pause_limit = idle_pause_limit
        self._priority = dict(waiting_costs or {})
        initial = initial_units or {}
        self._pools = {p.pool_id: _Pool(p, p.clamp(initial.get(p.pool_id, p.min_units))) for p in pools}
        self._stockouts = {k: list(v) for k, v in (stockouts or {}).items()}
        self._results: dict[str, ActionResult] = {}
        self._read_errors: dict[str, ActuatorError] = {}  # pool -> why reading it fails (``fail_reads``)
        self._unread: dict[str, ActuatorError] = {}
        self._rng = random.Random(seed)
        self._unit_ids = itertools.count()  # names idle units
        self.scale_actions = 0
        self.interruptions = 0

    # -- Actuator -----------------------------------------------------------------------------------------
    def list_pools(self) -> Sequence[PoolState]:
        """Every pool but those whose reads fail (``fail_reads``): those are left out (``unread_pools``)."""
        now = self._clock.now()
        self._unread = dict(self._read_errors)
        return [
            PoolState(
                pool_id=pool_id,
                observed_at=now,
                ready_units=pool.ready,
                target_units=pool.target,
                idle_units=len(pool.idle),
                idle_since=tuple(since for since, _ in pool.idle),
                failed_units=pool.failed,
            )
            for pool_id, pool in self._pools.items()
            if pool_id not in self._unread
        ]

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        return self._unread

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        if key in self._results:
            return self._results[key]
        pool = self._pools.get(pool_id)
        if pool is None:
            raise PermanentActuatorError(pool_id, "no such pool in the simulated cluster")
        now = self._clock.now()
        to_units = pool.spec.clamp(to_units)
        if pool.failed:  # cleared by any resize, as the real adapters delete their failed units
            failed, pool.failed = pool.failed, 0
            if to_units > pool.target:
                raise CapacityUnavailable(pool_id, f"simulated stockout: {failed} units could not be created")
        if to_units > pool.target:
            if self._stocked_out(pool_id, now):
                raise CapacityUnavailable(pool_id, "simulated stockout: no capacity in this window")
            self._add(pool, to_units - pool.target, now)
        elif to_units < pool.target:
            self._remove(pool, pool.target - to_units)
        else:
            result = ActionResult(key, pool_id, ActionStatus.DONE, now, detail="already at target")
            self._results[key] = result
            return result
        self.scale_actions += 1
        status = ActionStatus.STARTED if pool.in_flight else ActionStatus.DONE
        result = ActionResult(key, pool_id, status, now, detail=f"target {to_units} units")
        self._results[key] = result
        return result

    # -- NodeDrainer ---------------------------------------------------------------------------------------
    def idle_nodes(self, pool_id: str, idle_for: timedelta) -> Sequence[str]:
        """Idle ready units, longest idle first, named ``<pool>-idle-<id>``: a unit keeps its name while it stays
        idle (drains earlier in the same step do not rename the others); given work, it loses it."""
        pool = self._pool(pool_id)
        now = self._clock.now()
        return [f"{pool_id}-idle-{uid}" for since, uid in pool.idle if now - since >= idle_for]

    def pool_nodes(self, pool_id: str) -> Sequence[str]:
        """Every ready unit: the idle ones as ``idle_nodes`` names them, then the busy ones, ``<pool>-busy-<i>``
        (busy units are alike: each runs a share of the step's demand)."""
        pool = self._pool(pool_id)
        idle = [f"{pool_id}-idle-{uid}" for _, uid in pool.idle]
        return idle + [f"{pool_id}-busy-{i}" for i in range(pool.ready - len(pool.idle))]

    def drain(self, pool_id: str, node: str, key: str, forced: bool = False) -> ActionResult:
        """Remove exactly one unit: that idle one while it is still idle, or, for a busy name, one busy unit while
        any is left (its work goes back to the queue: the next step's demand finds one unit less). Only a forced
        release names busy units (``pool_nodes``), so ``forced`` changes nothing here."""
        if key in self._results:
            return self._results[key]
        pool = self._pool(pool_id)
        now = self._clock.now()
        idle = [uid for _, uid in pool.idle]
        if node.startswith(f"{pool_id}-busy-") and pool.ready > len(idle):  # busy units are alike: any one goes
            pool.ready -= 1
            result = self._drained(key, pool_id, node)
        elif (uid := _unit_id(node, f"{pool_id}-idle-")) in idle:
            del pool.idle[idle.index(uid)]
            pool.ready -= 1
            result = self._drained(key, pool_id, node)
        else:
            detail = f"{node} is not a unit of the pool (an idle one may have been given work since)"
            result = ActionResult(key, pool_id, ActionStatus.REJECTED, now, detail=detail)
        self._results[key] = result
        return result

    def draining_nodes(self, pool_id: str) -> Mapping[str, str]:
        """A simulated drain is done at once: nothing is ever left draining."""
        self._pool(pool_id)
        return {}

    def cancel(self, pool_id: str, node: str, key: str) -> ActionResult:
        """Nothing to end: a simulated drain is done at once."""
        self._pool(pool_id)
        detail = f"no drain of {node} is in progress (a simulated drain is done at once)"
        return ActionResult(key, pool_id, ActionStatus.REJECTED, self._clock.now(), detail=detail)

    def fail_in_flight(self, pool_id: str) -> None:
        """The units on their way cannot be created after all (a stockout found after the request was accepted):
        they leave the target and are reported failed; the next resize clears them and refuses to grow."""
        pool = self._pool(pool_id)
        pool.failed += pool.in_flight
        pool.arrivals.clear()

    def fail_reads(self, pool_id: str, error: ActuatorError | None) -> None:
        """Reading the pool fails with ``error`` (a refused permission, an API down) until called with None."""
        if error is None:
            self._read_errors.pop(pool_id, None)
        else:
            self._read_errors[pool_id] = error

    def add_stockout(self, pool_id: str, start: datetime, end: datetime) -> None:
        """The pool cannot get new units between ``start`` and ``end``."""
        self._stockouts.setdefault(pool_id, []).append((start, end))

    # -- driven by the simulation runner -------------------------------------------------------------------
    def advance(self, now: datetime) -> None:
        """Units whose lead time has passed become ready; spot units may be interrupted."""
        for pool in self._pools.values():
            arrived = sum(n for at, n in pool.arrivals if at <= now)
            if arrived:
                pool.arrivals = [(at, n) for at, n in pool.arrivals if at > now]
                pool.ready += arrived

    def interrupt_spot(self, step: timedelta) -> None:
        """Each ready spot unit is lost with its pool's hourly interruption probability scaled to ``step``."""
        hours = step.total_seconds() / 3600.0
        for pool in self._pools.values():
            rate = pool.spec.spot_interruption_per_hour
            if rate <= 0.0 or pool.ready == 0:
                continue
            lost = sum(1 for _ in range(pool.ready) if self._rng.random() < rate * hours)
            if lost:
                self.interruptions += lost
                pool.ready -= lost
                del pool.idle[max(0, len(pool.idle) - lost) :]

    def serve(self, now: datetime, demand: Mapping[str, float]) -> StepOutcome:
        """Meet one step of demand with ready capacity; track which units sat idle and since when."""
        specs = [p.spec for p in self._pools.values()]
        capacity = {pid: p.ready * p.spec.chips_per_unit for pid, p in self._pools.items()}
        assigned = allocate(demand, specs, capacity, priority=self._priority)
        left = unassigned(demand, assigned)
        used: dict[str, int] = {}
        for pool_id, pool in self._pools.items():
            used_units = min(pool.ready, units_for(sum(assigned[pool_id].values()), pool.spec.chips_per_unit))
            used[pool_id] = used_units
            idle = pool.ready - used_units
            if idle < len(pool.idle):
                del pool.idle[idle:]
            else:
                pool.idle.extend((now, next(self._unit_ids)) for _ in range(idle - len(pool.idle)))
        served = {name: float(value) - left.get(name, 0.0) for name, value in demand.items()}
        by_pool = {pool_id: sum(chips.values()) for pool_id, chips in assigned.items()}
        return StepOutcome(served=served, unserved=left, used_units=used, served_by_pool=by_pool)

    def pause_idle(self, step: timedelta, gap: timedelta, known: Mapping[str, float] | None = None) -> None:
        """Demand is unknown for this ``step``, in a gap (a run of such steps) ``gap`` long in all. Through a gap of
        at most ``idle_pause_limit`` (demand reported less often than the trace's step, a missed scrape) the idle
        clocks stop: a unit idle before it stays idle as long as it was (never longer: an unknown step is not read as
        idle), and each step of demand known after it tells whether it still is. Clearing them at every such gap
        started them again each time: a class with a value every other step left no unit idle for two steps, so none
        was ever released. A longer gap (a collector outage) clears them from its first step: idleness seen before it
        says nothing of the units through it, nor after it. The demand of the classes ``known`` at the step (the others
        have no value) is placed as ``serve`` places it, and the units it takes are busy, not idle: a unit busy on the
        known classes through a gap kept the idle time it had before it, and was released early."""
        limit = self._idle_pause_limit
        if known:
            specs = [p.spec for p in self._pools.values()]
            capacity = {pid: p.ready * p.spec.chips_per_unit for pid, p in self._pools.items()}
            assigned = allocate(known, specs, capacity, priority=self._priority)
            for pool_id, pool in self._pools.items():
                busy = min(pool.ready, units_for(sum(assigned[pool_id].values()), pool.spec.chips_per_unit))
                del pool.idle[max(0, pool.ready - busy) :]
        for pool in self._pools.values():
            if limit is not None and gap > limit:
                pool.idle.clear()
            else:
                pool.idle = [(since + step, uid) for since, uid in pool.idle]

    def paid_units(self) -> dict[str, int]:
        """Units being paid for: ready and in flight (billing starts when a unit is requested)."""
        return {pool_id: pool.target for pool_id, pool in self._pools.items()}

    def ready_units(self) -> dict[str, int]:
        return {pool_id: pool.ready for pool_id, pool in self._pools.items()}

    # -- internals -----------------------------------------------------------------------------------------
    def _pool(self, pool_id: str) -> _Pool:
        pool = self._pools.get(pool_id)
        if pool is None:
            raise PermanentActuatorError(pool_id, "no such pool in the simulated cluster")
        return pool

    def _drained(self, key: str, pool_id: str, node: str) -> ActionResult:
        self.scale_actions += 1
        return ActionResult(key, pool_id, ActionStatus.DONE, self._clock.now(), detail=f"{node} drained and removed")

    def _stocked_out(self, pool_id: str, now: datetime) -> bool:
        return any(start <= now < end for start, end in self._stockouts.get(pool_id, ()))

    @staticmethod
    def _add(pool: _Pool, units: int, now: datetime) -> None:
        arrive = now + pool.spec.lead_time
        if arrive <= now:
            pool.ready += units
        else:
            pool.arrivals.append((arrive, units))

    @staticmethod
    def _remove(pool: _Pool, units: int) -> None:
        """Cancel units still in flight first (latest-arriving first), then release ready units, longest idle
        first. The real adapters do the same: an instance group drops instances being created before running ones,
        and the slice and queued-resource adapters delete provisioning units before ready ones."""
        units = cancel_in_flight(pool.arrivals, units)
        from_ready = min(units, pool.ready)
        pool.ready -= from_ready
        del pool.idle[: min(from_ready, len(pool.idle))]


def _unit_id(node: str, prefix: str) -> int | None:
    """``i`` for a unit named ``<prefix><i>``, else None."""
    suffix = node.removeprefix(prefix)
    return int(suffix) if suffix != node and suffix.isdigit() else None


def gap_lengths(known: Sequence[bool] | np.ndarray) -> np.ndarray:
    """Per step, how many steps the gap it is in lasts (a run of steps whose demand is not ``known``; 0 at a known
    step), for ``SimulatedCluster.pause_idle``."""
    flags = np.asarray(known, dtype=bool)
    lengths = np.zeros(len(flags), dtype=int)
    t = 0
    while t < len(flags):
        end = t
        while end < len(flags) and not flags[end]:
            end += 1
        lengths[t:end] = end - t
        t = max(end, t + 1)
    return lengths


def cancel_in_flight(arrivals: list[tuple[datetime, int]], units: int) -> int:
    """Cancel up to ``units`` of the units still in flight (``(arrives at, count)``, in order of arrival),
    latest-arriving first, in place; how many of ``units`` remain to come from ready units."""
    while units > 0 and arrivals:
        at, n = arrivals.pop()
        if n > units:
            arrivals.append((at, n - units))
            return 0
        units -= n
    return units
