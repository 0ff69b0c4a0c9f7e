"""The history behind a paced burst budget: each demand group's burst need averaged per hour of the day, UTC: a
seasonal profile, cheap enough to refresh every hour. A step's burst need is the group's demand above what its pools
ahead of those the paced budgets pay for take of it (``agent.planning.pacing.ahead_chips``, as a tick measures it):
its on-prem pools and cheaper pools outside the paced budgets, a pool shared by several groups allocated among them
in the planner's order (dearest waiting first) rather than counted in full for each. Measured above the whole of a
shared pool, two tenants each demanding 64 GPUs over one 64-GPU on-prem pool read no burst at all, and pacing never
bit; measured above on-prem alone, demand a reserved pool outside the budget serves was paced as burst.

The mean is weighted by recency: a step's weight halves with every ``HALF_LIFE`` of age before the newest step.
A burst need that has been falling for days is then forecast near its recent level rather than the whole
history's, so that pacing does not ration today's demand for a need that has already passed (on the Helios
hybrid window the unweighted week-long mean overestimated the remaining need of the last five days 1.1-3.5x and
left money unspent at the period end).

The on-prem capacity a step's burst is measured above is the one the tick measures it above: each on-prem pool's
units that could take work at that step, read with its capacity query over the history (``capacity``), at most its
``max_units``, and its ``max_units`` where that read has no value or none that is a count of units, as a tick plans
on. Measured above ``max_units`` alone, a week with 10 of 40 nodes down counted a third of the burst the cloud
served, and pacing spent for that third: the money ran out halfway through the period. The capacity is read as a
history (``OnPremCapacityHistory.units_between``), not judged by its newest value: with kube-state-metrics down for
the last minutes before the read, only those minutes' steps are measured above ``max_units``, not the whole history.

A step where any member of a group has no value counts nothing for that group (never as zero demand), nor for a
group sharing pools ahead with it whose share it could change; a group with an hour of the day never observed has no
profile, and the planner then does not pace on it.

``HourlyBurstProfile`` keeps the profile a tick plans on. Once per clock hour it reads the demand history, within
``DEMAND_HISTORY_READ_SHARE`` of the tick, then the on-prem capacity history, within ``CAPACITY_HISTORY_READ_SHARE``
(each its own deadline, so that a tick's ``act`` reads for at most one tick once an hour). A class not read by then
has no history this hour, and its groups no profile: they are not paced, and the cap still holds. An on-prem pool
whose capacity history is not read (Prometheus failing or unreachable, a query too late, or one with no value in
the whole history) keeps the last history read of it, if any, and is measured above its ``max_units`` where that
has no value (the steps since it was read) or where there is none; it is read again at the next tick whose own
capacity read of the pool succeeds, and the profile recomputed, rather than an hour later (before, the whole history
was measured above ``max_units`` for the hour). A warning names the pool, why, and which capacity is used. A read
that ran out of its share of the tick (a range query that hangs or answers too slowly, while the quick reads may
well answer) is not tried again before ``SLOW_READ_RETRY``, the wait doubling with each such read in a row, up to
the next hourly refresh, which asks every pool; a pool read ends its wait. Asked again at every tick, a hung
history query cost half of every tick.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd

from agent.planning.budget import Budget
from agent.planning.groups import DemandGroup
from agent.planning.pacing import HOURS_A_DAY, BurstProfile, ahead_chips, ahead_pools, paced_pools
from agent.sources.base import read_deadline, read_time_left
from agent.sources.onprem_capacity import OnPremCapacityHistory, OnPremCapacitySource
from models import MetricsUnavailable, PoolKind, PoolSpec
from models.allocation import serving_order
from models.errors import PrometheusServerFailure

log = logging.getLogger(__name__)

HALF_LIFE = timedelta(days=1)
# The share of a tick the demand history behind the profile is read within, once an hour (30 s of a 1-minute tick),
# as long as a tick's own demand reads. Unbounded, a Prometheus that accepts and never answers held the tick for the
# first class's retries and a probe: (retries + 1) x timeout + timeout, about 2 minutes with the defaults.
DEMAND_HISTORY_READ_SHARE = 0.5
# The share of a tick the on-prem capacity history is read within, after the demand history: one range query per
# on-prem pool. Unbounded, each pool's query could take its retries (about 91 s with the defaults).
CAPACITY_HISTORY_READ_SHARE = 0.5
# How long after a capacity history read that ran out of its time the pools it did not read are asked again; the
# wait doubles with each such read in a row (the hourly refresh asks them whatever their wait).
SLOW_READ_RETRY = timedelta(minutes=10)

# Reads the demand of every class over [start, end): the history, and why some classes have none.
DemandHistoryRead = Callable[[datetime, datetime], tuple[pd.DataFrame, Mapping[str, MetricsUnavailable]]]


def _within_tick(what: str, share: float) -> str:
    """The setting a history read the deadline ended names to raise: the deadline is a share of the tick, not
    loop.read_deadline."""
    return f"loop.tick_interval (the burst profile's {what} history is read within {share:.0%} of a tick)"


def burst_profile(
    history: pd.DataFrame,
    groups: Sequence[DemandGroup],
    pools: Mapping[str, PoolSpec],
    capacity: Mapping[str, pd.Series] | None = None,
    paced: Collection[str] | None = None,
    priority: Mapping[str, float] | None = None,
) -> BurstProfile:
    """Recency-weighted mean burst need per hour of the day per group, from a ``unique_id, ds, y`` frame of class
    demand: at each step, the group's demand above what its pools ahead of the ``paced`` ones take
    (``agent.planning.pacing.ahead_chips``, pools shared by groups split among them as the planner splits them,
    ``priority`` per group), an on-prem pool holding the units ``capacity`` read then (``max_units`` where it has
    none) and any other pool its ``max_units``. ``paced`` None: only on-prem pools are ahead."""
    if history.empty:
        return BurstProfile({})
    wide = history.pivot_table(index="ds", columns="unique_id", values="y", aggfunc="mean", dropna=False)
    stamps = pd.DatetimeIndex(wide.index).tz_convert("UTC")
    hours = stamps.hour
    age = (stamps[-1] - stamps) / HALF_LIFE
    weights = pd.Series(np.power(0.5, np.asarray(age, dtype=float)), index=wide.index)
    totals = {
        g.name: wide[list(g.members)].sum(axis=1, skipna=False).to_numpy(dtype=float)
        for g in groups
        if all(m in wide.columns for m in g.members)
    }
    ahead = _ahead_chips(totals, groups, pools, _room_history(pools, capacity or {}, wide.index), paced, priority or {})
    profiles: dict[str, tuple[float, ...]] = {}
    for group in groups:
        if group.name not in totals:
            continue
        burst = pd.Series(totals[group.name] - ahead[group.name], index=wide.index).clip(lower=0.0)
        seen = weights.where(burst.notna(), 0.0)
        weighted = (burst.fillna(0.0) * seen).groupby(hours).sum()
        mass = seen.groupby(hours).sum()
        by_hour = (weighted / mass.where(mass > 0.0)).reindex(range(HOURS_A_DAY))
        values = by_hour.to_numpy(dtype=float)
        if np.isnan(values).any():
            continue
        profiles[group.name] = tuple(float(v) for v in values)
    return BurstProfile(profiles)


def _room_history(pools: Mapping[str, PoolSpec], capacity: Mapping[str, pd.Series], index: pd.Index) -> dict[str, Any]:
    """The chips each pool could take at each step of ``index``: an on-prem pool's units read then, judged as a tick
    judges them (``agent.onprem_capacity.read_onprem``: a fraction rounded down, at most ``max_units``; no value, or
    one that is not a count of units, is ``max_units``); any other pool its ``max_units``."""
    room: dict[str, Any] = {}
    for pool_id, pool in pools.items():
        full = float(pool.max_units * pool.chips_per_unit)
        read = capacity.get(pool_id)
        if pool.kind is not PoolKind.ON_PREM or read is None:
            room[pool_id] = np.full(len(index), full)
            continue
        values = read.reindex(index).to_numpy(dtype=float)
        counted = np.isfinite(values) & (values >= 0.0)
        units = np.minimum(np.floor(np.where(counted, values, 0.0) + 1e-9), pool.max_units)
        room[pool_id] = np.where(counted, units * pool.chips_per_unit, full)
    return room


def _ahead_chips(
    totals: Mapping[str, Any],
    groups: Sequence[DemandGroup],
    pools: Mapping[str, PoolSpec],
    room: Mapping[str, Any],
    paced: Collection[str] | None,
    priority: Mapping[str, float],
) -> dict[str, Any]:
    """At each step, the chips of each group's demand its pools ahead take (NaN where it is not known). A group
    alone in its pools ahead takes the least of its demand and their room; groups sharing one are allocated step
    by step (``ahead_chips``; in one pass where they all share the same pools), and where any of them has no value
    none of their shares is known."""
    known = [g for g in groups if g.name in totals]
    eligible = {g.name: ahead_pools(g, pools, paced) for g in known}
    out: dict[str, Any] = {}
    for names in _sharing(eligible):
        ids = sorted({p for n in names for p in eligible[n]})
        if all(eligible[n] == eligible[names[0]] for n in names):
            # the same pools for all: each group in serving order takes what the ones before it left of their room
            free = sum((room[p] for p in ids), np.zeros(len(totals[names[0]])))
            for name in serving_order(names, priority):
                out[name] = np.minimum(totals[name], free)
                free = np.maximum(free - totals[name], 0.0)
            continue
        members = [g for g in known if g.name in names]
        demand = np.vstack([totals[n] for n in names])
        free = np.vstack([room[p] for p in ids])
        taken = np.full(demand.shape, np.nan)
        memo: dict[tuple[float, ...], list[float]] = {}
        for step in range(demand.shape[1]):
            if np.isnan(demand[:, step]).any():
                continue
            key = (*demand[:, step], *free[:, step])
            if key not in memo:
                needs = dict(zip(names, (float(v) for v in demand[:, step]), strict=True))
                rooms = dict(zip(ids, (float(v) for v in free[:, step]), strict=True))
                got = ahead_chips(needs, members, {p: pools[p] for p in ids}, rooms, paced, priority)
                memo[key] = [got[n] for n in names]
            taken[:, step] = memo[key]
        out.update((n, taken[i]) for i, n in enumerate(names))
    return out


def _sharing(eligible: Mapping[str, frozenset[str]]) -> list[list[str]]:
    """The groups in sets that share pools ahead, directly or through one another (each set in name order)."""
    sets: list[tuple[set[str], set[str]]] = []  # (groups, pools)
    for name in sorted(eligible):
        joined = [s for s in sets if s[1] & eligible[name]]
        merged = ({name}, set(eligible[name]))
        for s in joined:
            merged[0].update(s[0])
            merged[1].update(s[1])
            sets.remove(s)
        sets.append(merged)
    return [sorted(names) for names, _ in sets]


@dataclass(frozen=True)
class _Refresh:
    """One hour's refresh: the demand history read, over [start, end), and the on-prem pools whose capacity history
    over the same range is still to be read."""

    start: datetime
    end: datetime
    history: pd.DataFrame
    due: frozenset[str]


class HourlyBurstProfile:
    """The burst profile a paced budget plans on: the demand history read once per clock hour, the on-prem capacity
    history with it, kept per pool until read again (see the module's text)."""

    def __init__(
        self,
        groups: Sequence[DemandGroup],
        pools: Sequence[PoolSpec],
        history: timedelta,
        step: timedelta,
        tick: timedelta,
        budgets: Sequence[Budget] | None = None,
        waiting_costs: Mapping[str, float] | None = None,
    ) -> None:
        """``budgets``: those the agent plans with, whose paced pools the burst is measured up to (None: the burst
        is what is above the on-prem pools); ``waiting_costs`` per class, the order shared pools serve groups in."""
        self._groups = tuple(groups)
        self._pools = {p.pool_id: p for p in pools}
        self._paced = None if budgets is None else paced_pools(budgets, self._pools)
        costs = waiting_costs or {}
        self._priority = {g.name: max((costs.get(m, 0.0) for m in g.members), default=0.0) for g in self._groups}
        self._onprem = [p for p in pools if p.kind is PoolKind.ON_PREM]
        self._history, self._step, self._tick = history, step, tick
        self._hour: datetime | None = None
        self._refresh: _Refresh | None = None
        self._profile: BurstProfile | None = None
        self._capacity: dict[str, tuple[datetime, pd.Series]] = {}  # the last history read of each pool, and when
        self._slow: dict[str, tuple[int, datetime]] = {}  # reads in a row that ran out of time, and the next retry

    def at(
        self,
        now: datetime,
        read_demand: DemandHistoryRead,
        capacity: OnPremCapacitySource | None,
        read_now: Collection[str] = (),
    ) -> BurstProfile | None:
        """The profile at ``now``: refreshed at the first tick of each clock hour, and recomputed at a later tick
        of it once the capacity history of a pool not read then is read; None when the demand history cannot be
        read. ``read_now`` names the on-prem pools whose capacity this tick read: only those are asked again."""
        hour = now.replace(minute=0, second=0, microsecond=0)
        if self._hour != hour:
            self._hour = hour
            self._profile = self._refreshed(now, read_demand, capacity)
        elif self._refresh is not None and self._refresh.due:
            retry = {p for p in self._refresh.due & set(read_now) if self._slow.get(p, (0, now))[1] <= now}
            if retry and self._read_capacity(capacity, retry, now):
                self._profile = self._computed()
        return self._profile

    def _refreshed(
        self, now: datetime, read_demand: DemandHistoryRead, capacity: OnPremCapacitySource | None
    ) -> BurstProfile | None:
        start = now - self._history
        self._refresh = None
        try:
            with read_deadline(
                self._tick * DEMAND_HISTORY_READ_SHARE, _within_tick("demand", DEMAND_HISTORY_READ_SHARE)
            ):
                history, unread = read_demand(start, now)
        except MetricsUnavailable as exc:
            log.warning("burst profile unavailable: %s", exc)
            return None
        for name, why in sorted(unread.items()):
            log.warning(
                "burst profile: demand history of class %s not read (%s): its groups are not paced", name, why.reason
            )
        readable: frozenset[str] = frozenset()
        if isinstance(capacity, OnPremCapacityHistory):
            readable = frozenset(p.pool_id for p in self._onprem)
        self._refresh = _Refresh(start, now, history, readable)
        failed = next((e for e in unread.values() if isinstance(e, PrometheusServerFailure)), None)
        if failed is not None and readable:
            log.warning(
                "burst profile: on-prem capacity not read over the history, the demand history read has just failed "
                "(%s, class %s): %s",
                failed.reason,
                failed.demand_class,
                "; ".join(self._used(pool_id) for pool_id in sorted(readable)),
            )
        elif readable:
            self._read_capacity(capacity, readable, now)
        return self._computed()

    def _read_capacity(self, capacity: OnPremCapacitySource | None, pool_ids: Collection[str], now: datetime) -> bool:
        """Read the capacity history of ``pool_ids`` up to ``now`` (the refresh's range, or a later one when read
        again: the refresh's own end may be the very outage that failed it), within its share of the tick; whether
        any was read. Each pool not read is logged with the capacity it is measured above, and stays due."""
        refresh = self._refresh
        if refresh is None or not isinstance(capacity, OnPremCapacityHistory):
            return False
        asked = [p for p in self._onprem if p.pool_id in pool_ids]
        asked_ids = [p.pool_id for p in asked]
        with read_deadline(
            self._tick * CAPACITY_HISTORY_READ_SHARE, _within_tick("on-prem capacity", CAPACITY_HISTORY_READ_SHARE)
        ):
            units, problems = capacity.units_between(asked, now - self._history, now, self._step)
            left = read_time_left()
        ran_out = left is not None and left[0] <= 0
        for pool_id, series in sorted(units.items()):
            self._slow.pop(pool_id, None)
            if now != refresh.end:
                log.info(
                    "burst profile: on-prem capacity of %s read over the history again: the profile is recomputed",
                    pool_id,
                )
            self._capacity[pool_id] = (now, series)
        # due: the pools asked that the source could not read; one it has no way to read is in neither answer
        self._refresh = _Refresh(
            refresh.start, refresh.end, refresh.history, refresh.due - set(asked_ids) | set(problems)
        )
        for pool_id, why in sorted(problems.items()):
            log.warning(
                "burst profile: on-prem capacity of %s not read over the history (%s): %s; %s",
                pool_id,
                why,
                self._used(pool_id),
                self._slowed(pool_id, now) if ran_out else "read again at the next tick that reads its capacity",
            )
        return bool(units)

    def _slowed(self, pool_id: str, now: datetime) -> str:
        """Count a read of the pool that ran out of its time, and say when it is asked again: ``SLOW_READ_RETRY``
        after the first such read in a row, twice as long after each next one, at the next hourly refresh at the
        latest. A quick read that answers is no sign that the slow history query would."""
        count = self._slow.get(pool_id, (0, now))[0] + 1
        retry = now + min(SLOW_READ_RETRY * 2 ** (count - 1), timedelta(hours=1))
        self._slow[pool_id] = (count, retry)
        return (
            f"the read ran out of its time, {count} in a row: read again no earlier than {retry.isoformat()} "
            "(or at the next hourly refresh), once a tick reads its capacity"
        )

    def _used(self, pool_id: str) -> str:
        """What a pool not read this time is measured above."""
        kept = self._capacity.get(pool_id)
        if kept is None:
            return f"{pool_id} measured above its max_units"
        return (
            f"{pool_id} measured above its capacity history read at {kept[0].isoformat()} (its max_units at the "
            "steps since)"
        )

    def _computed(self) -> BurstProfile | None:
        refresh = self._refresh
        if refresh is None:
            return None
        capacity = {pool_id: series for pool_id, (_, series) in self._capacity.items()}
        return burst_profile(refresh.history, self._groups, self._pools, capacity, self._paced, self._priority)
