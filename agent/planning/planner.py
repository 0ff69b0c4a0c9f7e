"""The capacity planner: forecasts and observed state in, an immutable CapacityPlan out.

Rules (DESIGN.md):
- scale-up target per class = max(forecast quantile over the lead-time horizon, demand observed now);
- classes are filled into their eligible pools cheapest first; a pool in back-off or blocked cannot grow, so
  its share spills to the next eligible pool;
- never release on a forecast alone: a unit goes only if it has been observed idle for the stabilization window;
- a pool whose state, or one of whose classes, is unknown is held (no release), with a skip reason;
- targets are absolute whole units within each pool's bounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent.planning.budget import BudgetSpend
from agent.planning.budgeting import apply_budgets
from agent.planning.groups import DemandGroup, single_class_groups
from agent.planning.memory import PlannerMemory
from agent.planning.pacing import BurstProfile, pace_needs
from config.schema import PlannerSettings
from models import (
    CapacityPlan,
    CapacityTier,
    DemandForecast,
    PoolKind,
    PoolSpec,
    PoolState,
    Resize,
    Skip,
    SkipReason,
)
from models.allocation import allocate, units_for


@dataclass(frozen=True)
class PlanInput:
    """Everything one planning decision depends on. ``observed`` holds the newest trustworthy demand per class;
    a class without an observation or a forecast is unknown. ``forecasts`` may also hold the forecast of a
    demand group's summed demand, under the group's name; ``groups`` defaults to one group per class."""

    now: datetime
    tick: timedelta
    pools: Sequence[PoolSpec]
    states: Mapping[str, PoolState]
    forecasts: Mapping[str, DemandForecast]
    observed: Mapping[str, float]
    service_levels: Mapping[str, float]
    settings: PlannerSettings
    memory: PlannerMemory = field(default_factory=PlannerMemory)
    groups: Sequence[DemandGroup] | None = None
    forecast_step: timedelta | None = None
    budgets: Sequence[BudgetSpend] = ()  # spend so far of each budget (from the ledger); caps bind the plan
    waiting_costs: Mapping[str, float] = field(default_factory=dict)  # per class: who a shared pool serves first
    burst_profile: BurstProfile | None = None  # history of burst need, for budgets paced on a forecast


def plan_capacity(given: PlanInput) -> CapacityPlan:
    needs, unknown = group_needs(given)
    needs = pace_needs(
        given.now, given.pools, plan_groups(given), needs, given.budgets, given.burst_profile, given.waiting_costs
    )
    desired = _desired_units(given, needs)
    resizes: list[Resize] = []
    skips: list[Skip] = []
    for pool in sorted(given.pools, key=lambda p: p.pool_id):
        decision = _decide(given, pool, desired[pool.pool_id], unknown)
        if isinstance(decision, Resize):
            resizes.append(decision)
        elif decision is not None:
            skips.append(decision)
    held = apply_budgets(
        given.now, given.tick, given.settings.scale_down_stabilization, given.pools, given.states, given.budgets,
        resizes, skips, desired,
    )  # fmt: skip
    return CapacityPlan(given.now, held.resizes, skips=held.skips, targets=held.targets, budgets=held.snapshots)


def plan_groups(given: PlanInput) -> tuple[DemandGroup, ...]:
    if given.groups is not None:
        return tuple(given.groups)
    return single_class_groups(_class_names(given.pools), given.pools)


def group_needs(given: PlanInput) -> tuple[dict[str, float], set[str]]:
    """Chips each demand group should have ready; and the classes whose demand is unknown (hold their pools).

    Need = max(forecast quantile over the horizon, demand observed now). A group of several classes uses the
    forecast of its summed demand when there is one, else the sum of its members' forecasts.
    """
    needs: dict[str, float] = {}
    unknown: set[str] = set()
    for group in plan_groups(given):
        observed = [_known(given.observed.get(name)) for name in group.members]
        missing = [n for n, o in zip(group.members, observed, strict=True) if o is None or n not in given.forecasts]
        if missing:
            unknown.update(group.members)  # a pool shared with an unknown class is held as a whole
        floor = sum(o for o in observed if o is not None)
        steps = _horizon_steps(given, group)
        level = given.service_levels.get(group.name) or max(given.service_levels.get(n, 0.9) for n in group.members)
        peak = _peak(given.forecasts.get(group.name), level, steps) if group.is_aggregate else None
        if peak is None:
            peaks = [_peak(given.forecasts.get(n), level, steps) for n in group.members]
            known_peaks = [p for p in peaks if p is not None]
            peak = sum(known_peaks) if known_peaks else None
        candidates = [v for v in (peak, floor if any(o is not None for o in observed) else None) if v is not None]
        if candidates:
            needs[group.name] = max(candidates)
    return needs, unknown


def _known(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


def _peak(forecast: DemandForecast | None, level: float, steps: int | None) -> float | None:
    if forecast is None:
        return None
    peak = forecast.peak(level, steps)
    return None if math.isnan(peak) else peak


def _class_names(pools: Sequence[PoolSpec]) -> list[str]:
    return sorted({name for pool in pools for name in pool.serves})


def _horizon_steps(given: PlanInput, group: DemandGroup) -> int | None:
    """Forecast steps that matter: the longest lead time among the group's scalable pools, plus one tick."""
    leads = [p.lead_time for p in given.pools if p.pool_id in group.pools and p.kind is not PoolKind.ON_PREM]
    if not leads:
        return None
    step = given.forecast_step or given.tick
    return max(1, math.ceil((max(leads) + given.tick) / step))


def _desired_units(given: PlanInput, needs: Mapping[str, float]) -> dict[str, int]:
    room: dict[str, float] = {}
    for pool in given.pools:
        state = given.states.get(pool.pool_id)
        frozen = pool.pool_id in given.memory.blocked or given.memory.in_backoff(pool.pool_id, given.now)
        if pool.kind is PoolKind.ON_PREM:
            units = pool.max_units
        elif frozen:
            units = state.target_units if state is not None else 0
        else:
            units = pool.max_units
        room[pool.pool_id] = float(units * pool.chips_per_unit)
    groups = plan_groups(given)
    eligible = {g.name: g.pools for g in groups}
    priority = {g.name: max(given.waiting_costs.get(m, 0.0) for m in g.members) for g in groups}
    assigned = allocate(needs, given.pools, room, eligible, priority)
    desired: dict[str, int] = {}
    for pool in given.pools:
        units = units_for(sum(assigned[pool.pool_id].values()), pool.chips_per_unit)
        if pool.kind is not PoolKind.ON_PREM:
            units += given.settings.headroom_units + _interruption_reserve(pool, units)
        desired[pool.pool_id] = pool.clamp(units)
    return desired


def _interruption_reserve(pool: PoolSpec, units: int) -> int:
    """Spot units expected to be reclaimed before a replacement could be ready: hold that many more."""
    if pool.tier is not CapacityTier.SPOT or pool.spot_interruption_per_hour <= 0.0:
        return 0
    exposure = pool.spot_interruption_per_hour * pool.lead_time.total_seconds() / 3600.0
    return math.ceil(units * min(exposure, 1.0) - 1e-9)


def _decide(given: PlanInput, pool: PoolSpec, desired: int, unknown: set[str]) -> Resize | Skip | None:
    state = given.states.get(pool.pool_id)
    pid = pool.pool_id
    if pool.kind is PoolKind.ON_PREM:
        return None
    if state is None:
        return Skip(pid, SkipReason.MISSING_DATA, "pool state could not be observed; holding")
    current = state.target_units
    if desired == current:
        return None
    if pid in given.memory.blocked:
        return Skip(pid, SkipReason.PERMANENT_ERROR, given.memory.blocked[pid])
    if desired > current:
        return _scale_up(given, pool, state, desired)
    return _scale_down(given, pool, state, desired, unknown)


def _scale_up(given: PlanInput, pool: PoolSpec, state: PoolState, desired: int) -> Resize | Skip:
    pid, current = pool.pool_id, state.target_units
    if given.memory.in_backoff(pid, given.now):
        until = given.memory.backoff_until[pid].isoformat()
        return Skip(pid, SkipReason.BACKOFF, f"capacity unavailable recently; no scale-up before {until}")
    if state.in_flight_operation:
        return Skip(pid, SkipReason.IN_FLIGHT, f"operation {state.in_flight_operation} still running")
    if _flapping(given, pid, direction=+1):
        return Skip(pid, SkipReason.COOLDOWN, "scaled down too recently to reverse direction")
    to_units = desired
    limit = given.settings.max_scale_up_units_per_tick
    if limit is not None and to_units - current > limit:
        to_units = current + limit
    reason = f"demand forecast needs {desired} units within lead time {pool.lead_time}"
    return Resize(pid, current, to_units, reason, _key(given.now, pid, to_units))


def _scale_down(given: PlanInput, pool: PoolSpec, state: PoolState, desired: int, unknown: set[str]) -> Resize | Skip:
    pid, current = pool.pool_id, state.target_units
    missing = sorted(set(pool.serves) & unknown)
    if missing:
        return Skip(pid, SkipReason.MISSING_DATA, f"no trustworthy demand for {', '.join(missing)}; holding")
    window = given.settings.scale_down_stabilization
    window = max(window, pool.lead_time * given.settings.idle_hold_lead_times)
    settled = sum(1 for since in state.idle_since if given.now - since >= window)
    if settled == 0:
        if state.idle_units:
            return Skip(pid, SkipReason.STABILIZING, f"{state.idle_units} idle units, none idle for {window} yet")
        return Skip(pid, SkipReason.NOT_IDLE, f"forecast allows {desired} units but no unit is idle")
    if _flapping(given, pid, direction=-1):
        return Skip(pid, SkipReason.COOLDOWN, "scaled up too recently to reverse direction")
    release = min(current - desired, settled)
    limit = given.settings.max_scale_down_units_per_tick
    if limit is not None:
        release = min(release, limit)
    to_units = current - release
    reason = f"{settled} units idle for {window} and forecast needs {desired}"
    return Resize(pid, current, to_units, reason, _key(given.now, pid, to_units))


def _flapping(given: PlanInput, pool_id: str, direction: int) -> bool:
    interval = given.settings.min_direction_change_interval
    last = given.memory.last_change.get(pool_id)
    if last is None or interval <= timedelta(0):
        return False
    when, previous = last
    return previous != direction and given.now - when < interval


def _key(now: datetime, pool_id: str, to_units: int) -> str:
    return f"{pool_id}@{now.isoformat()}->{to_units}"
