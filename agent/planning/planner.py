"""The capacity planner: forecasts and observed state in, an immutable CapacityPlan out.

Rules (DESIGN.md):
- scale-up target per class = max(forecast quantile over the lead-time horizon, demand observed now);
- classes are filled into their eligible pools cheapest first; a pool in back-off or blocked cannot grow, so
  its share spills to the next eligible pool, and so does the part of a spot pool's interruption reserve above
  its current size;
- never release on a forecast alone: a unit goes only if it has been observed idle for the stabilization window;
- with ``slice_release_by_forecast``, a whole slice (a pool of slices serving one demand group alone) that has
  been idle for the idle hold is released only while the forecast probability that it is needed again within its
  lead time is below the break-even ratio (``_slice_release``);
- a pool whose state, or one of whose classes, is unknown is held (no release), with a skip reason; a pool whose
  state is unknown takes demand only up to the units it is known to hold (``_last_units``: those the agent last read
  it at, else those the ledger last recorded it holding, else none), as it cannot grow: the rest goes to the next
  eligible pool;
- an on-prem pool is never resized; it takes demand up to its units that can work now (``onprem_units``, read
  each tick: nodes down or cordoned leave its share to the next eligible pool), or up to its ``max_units`` when
  that could not be read;
- targets are absolute whole units within each pool's bounds; a pool's broken units (paid for, serving nothing)
  take their room from its ``max_units``, so it is never asked for more than ``max_units`` less them.

Every pool gets a decision record (``models.decision.PoolDecision``) with the arithmetic behind its target; the
resizes' reasons are rendered from it once the budget caps have had their say.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from agent.planning.budget import BudgetSpend
from agent.planning.budgeting import apply_budgets
from agent.planning.decisions import with_budgets
from agent.planning.groups import DemandGroup, single_class_groups
from agent.planning.memory import PlannerMemory
from agent.planning.pacing import BurstProfile, pace_needs
from config.schema import PlannerSettings
from models import (
    CapacityPlan,
    CapacityTier,
    DemandForecast,
    DemandShare,
    Drain,
    Hold,
    PoolDecision,
    PoolKind,
    PoolSpec,
    PoolState,
    Resize,
    Skip,
    SkipReason,
    drain_key,
)
from models.allocation import allocate, unassigned, units_for
from models.decision import ReserveCarry
from models.durations import format_duration

_LATER = ""  # a resize's reason is rendered from its decision record once the budgets have had their say
# A pool whose idle units are not known by name (one without a node drainer) shrinks by a size change: which
# units go is then up to the cloud. Releases of pools with a drainer name their nodes (``_with_nodes``).
_NODES_NOTE = "idle units are not known by name at plan time: the cloud chooses which units a release takes"


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
    # per on-prem pool: its units that can take work now (Ready, schedulable nodes); one not in it: its max_units
    onprem_units: Mapping[str, int] = field(default_factory=dict)
    # the pools whose releases are drains of their nodes, never of a unit still provisioning (None: not known, every
    # pool taken as drained); a budget's hard stop takes units in flight before busy ones only in the others
    drained: Collection[str] | None = None
    # per pool: the target units of the agent's last successful read of it in this process (with its own resizes
    # carried out since); an unread pool takes demand up to them before the ledger's record is asked (``_last_units``)
    last_read_units: Mapping[str, int] = field(default_factory=dict)


def plan_capacity(given: PlanInput) -> CapacityPlan:
    shares, unknown = group_shares(given)
    sized = _sized(given, _paced(given, shares))
    resizes: list[Resize] = []
    skips: list[Skip] = []
    decisions: dict[str, PoolDecision] = {}
    for pool in sorted(given.pools, key=lambda p: p.pool_id):
        action, decisions[pool.pool_id] = _decide(given, pool, sized[pool.pool_id], unknown)
        if isinstance(action, Resize):
            resizes.append(action)
        elif isinstance(action, Skip):
            skips.append(action)
        if decisions[pool.pool_id].step_limit is not None and isinstance(action, Resize):
            skips.append(Skip(pool.pool_id, SkipReason.STEP_LIMIT, _step_detail(decisions[pool.pool_id])))
    desired = {pool_id: d.bounded_units for pool_id, d in sized.items()}
    held = apply_budgets(
        given.now, given.tick, given.settings.scale_down_stabilization, given.pools, given.states, given.budgets,
        resizes, skips, desired, blocked=given.memory.blocked, unknown=unknown, drained=given.drained,
        last_read=given.last_read_units,
    )  # fmt: skip
    decisions = with_budgets(decisions, skips, held)
    for pool_id, decision in decisions.items():
        if over := tuple(s.budget.name for s in given.budgets if pool_id in s.budget.pools):
            decisions[pool_id] = replace(decision, budgets=over)
    final: list[Resize] = []
    drains: list[Drain] = []
    for planned in held.resizes:
        decision = decisions[planned.pool_id]
        if not planned.is_scale_up:
            decisions[planned.pool_id] = decision = _with_nodes(given, decision, planned)
        final.append(resize := replace(planned, reason=decision.why()))
        drains.extend(Drain(resize.pool_id, n, resize.reason, drain_key(resize.key, n)) for n in decision.nodes)
    return CapacityPlan(
        given.now,
        tuple(final),
        tuple(drains),
        skips=held.skips,
        targets=held.targets,
        budgets=held.snapshots,
        decisions=decisions,
    )


def plan_groups(given: PlanInput) -> tuple[DemandGroup, ...]:
    if given.groups is not None:
        return tuple(given.groups)
    return single_class_groups(_class_names(given.pools), given.pools)


def group_shares(given: PlanInput) -> tuple[dict[str, DemandShare], set[str]]:
    """What each demand group needs, and why; and the classes whose demand is unknown (hold their pools).

    Need = max(forecast quantile over the horizon, demand observed now). A group of several classes uses the
    forecast of its summed demand when there is one, else the sum of its members' forecasts. A group with
    neither a forecast nor an observation has no entry.
    """
    shares: dict[str, DemandShare] = {}
    unknown: set[str] = set()
    for group in plan_groups(given):
        observed = [_known(given.observed.get(name)) for name in group.members]
        missing = [n for n, o in zip(group.members, observed, strict=True) if o is None or n not in given.forecasts]
        if missing:
            unknown.update(group.members)  # a pool shared with an unknown class is held as a whole
        seen = any(o is not None for o in observed)
        floor = sum(o for o in observed if o is not None)
        steps = _horizon_steps(given, group)
        level = given.service_levels.get(group.name) or max(given.service_levels.get(n, 0.9) for n in group.members)
        peak = _peak(given.forecasts.get(group.name), level, steps) if group.is_aggregate else None
        if peak is None:
            peaks = [_peak(given.forecasts.get(n), level, steps) for n in group.members]
            known_peaks = [p for p in peaks if p is not None]
            peak = sum(known_peaks) if known_peaks else None
        candidates = [v for v in (peak, floor if seen else None) if v is not None]
        if candidates:
            need = max(candidates)
            shares[group.name] = DemandShare(group.name, level, peak, floor if seen else None, need, need)
    return shares, unknown


def _known(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


def _peak(forecast: DemandForecast | None, level: float, steps: int | None) -> float | None:
    """The forecast's calibrated quantile of the highest demand over ``steps`` (see ``DemandForecast.peak``)."""
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


def _paced(given: PlanInput, shares: Mapping[str, DemandShare]) -> dict[str, DemandShare]:
    """Each demand's need with its burst part cut to what its budgets paced on a forecast fund (``pacing``): the
    part above what the pools it fills before the paced ones take, each with the room it is filled up to here."""
    needs = {name: share.need for name, share in shares.items()}
    paced = pace_needs(
        given.now,
        given.pools,
        plan_groups(given),
        needs,
        given.budgets,
        given.burst_profile,
        given.waiting_costs,
        given.onprem_units,
        room=_rooms(given)[0],
    )
    return {
        name: share if paced[name] >= share.need else replace(share, need=paced[name], unpaced_need=share.need)
        for name, share in shares.items()
    }


def _sized(given: PlanInput, shares: Mapping[str, DemandShare]) -> dict[str, PoolDecision]:
    """Each pool's record up to its bounds: demand assigned cheapest first, whole units, headroom, spot reserve
    (the part of it a pool cannot hold, over its ``max_units`` less its broken units or over its current size while it
    cannot grow, is held by the next eligible pool with room, ``_carry_reserves``).
    """
    room, tops = _rooms(given)
    groups = plan_groups(given)
    eligible = {g.name: g.pools for g in groups}
    priority = {g.name: max(given.waiting_costs.get(m, 0.0) for m in g.members) for g in groups}
    needs = {name: share.need for name, share in shares.items()}
    assigned = allocate(needs, given.pools, room, eligible, priority)
    left = unassigned(needs, assigned)
    sized: dict[str, PoolDecision] = {}
    for pool in given.pools:
        taken = assigned[pool.pool_id]
        demand = tuple(_share(shares[name], chips) for name, chips in sorted(taken.items()))
        unplaced = tuple(
            _share(shares[name], left[name])
            for name in sorted(left)
            if left[name] > 0.0 and pool.pool_id in eligible.get(name, ())
        )
        rounded = units_for(sum(taken.values()), pool.chips_per_unit)
        fixed = pool.kind is PoolKind.ON_PREM
        headroom = 0 if fixed else given.settings.headroom_units
        reserve = 0 if fixed else _interruption_reserve(pool, rounded)
        state = given.states.get(pool.pool_id)
        current = state.target_units if state is not None else None
        wanted = rounded + headroom + reserve
        bounded = pool.clamp(wanted) if fixed else _bound(pool, wanted, tops[pool.pool_id])
        sized[pool.pool_id] = PoolDecision(
            pool_id=pool.pool_id,
            fixed=fixed,
            lead_time=pool.lead_time,
            chips_per_unit=pool.chips_per_unit,
            min_units=pool.min_units,
            max_units=pool.max_units,
            current_units=current,
            demand=demand,
            rounded_units=rounded,
            headroom_units=headroom,
            spot_reserve_units=reserve,
            bounded_units=bounded,
            stepped_units=bounded,
            target_units=current,
            nodes_note=_NODES_NOTE,
            unplaced=unplaced,
            broken_units=len(state.broken_units) if state is not None else 0,
        )
    return _carry_reserves(given, sized, room, tops, eligible, priority)


def _rooms(given: PlanInput) -> tuple[dict[str, float], dict[str, int]]:
    """The chips each pool may take demand up to, and the most units it may be asked for (``_top``).

    An on-prem pool takes up to its units that can work now; a pool that cannot grow (blocked, backed off) up to
    its current size; a pool whose state could not be read up to the units it is known to hold (``_last_units``):
    it is held, never resized, so demand above them goes to the next eligible pool instead of waiting on a pool that
    cannot serve it (a revoked permission can last days). Any other pool up to its top."""
    room: dict[str, float] = {}
    tops: dict[str, int] = {}
    for pool in given.pools:
        state = given.states.get(pool.pool_id)
        frozen = pool.pool_id in given.memory.blocked or given.memory.in_backoff(pool.pool_id, given.now)
        tops[pool.pool_id] = _top(pool, state)
        if pool.kind is PoolKind.ON_PREM:
            units = min(pool.max_units, given.onprem_units.get(pool.pool_id, pool.max_units))
        elif state is None:
            units = min(tops[pool.pool_id], _last_units(given, pool.pool_id))
        elif frozen:
            units = state.target_units
        else:
            units = tops[pool.pool_id]
        room[pool.pool_id] = float(units * pool.chips_per_unit)
    return room, tops


def _last_units(given: PlanInput, pool_id: str) -> int:
    """The units an unread pool is known to hold: those the agent last read it at (``last_read_units``), so that one
    failed read (an HTTP 503) leaves its demand on it instead of buying it on the next pool for a tick; else what the
    ledger last recorded it holding (as its budgets count it; a pool in no budget has no record), else none: demand is
    never left on a pool on the guess that it has room."""
    if pool_id in given.last_read_units:
        return given.last_read_units[pool_id]
    return max((s.last_units[pool_id] for s in given.budgets if pool_id in s.last_units), default=0)


def _top(pool: PoolSpec, state: PoolState | None) -> int:
    """The most units a pool may be asked for: its ``max_units`` less its broken units, which are paid for and serve
    nothing but hold their place in the cloud (a slice group of ``max_units`` 2 with a broken slice holds one more)."""
    return max(0, pool.max_units - (len(state.broken_units) if state is not None else 0))


def _bound(pool: PoolSpec, wanted: int, top: int) -> int:
    """``wanted`` within the pool's bounds and never above ``top`` (``_top``), even to reach its ``min_units``."""
    return min(pool.clamp(wanted), top)


def _carry_reserves(
    given: PlanInput,
    sized: Mapping[str, PoolDecision],
    room: Mapping[str, float],
    tops: Mapping[str, int],
    eligible: Mapping[str, frozenset[str]],
    priority: Mapping[str, float],
) -> dict[str, PoolDecision]:
    """The records with the spot reserve units a pool cannot hold held by other pools instead: those its bound
    (``max_units`` less its broken units) cuts, and, while it cannot grow (backed off after a stockout, blocked),
    those above its current size.

    Such a pool is the binding tier (its demand already spills to the next eligible pool), so the units expected
    to be reclaimed within its lead time would otherwise not be held at all. Its cut chips are shared over its
    demands in proportion to the chips each has there, and filled like demand into the room the other pools have
    left within their limits (``max_units``, or the current size of a pool that cannot grow), cheapest first.
    """
    out = dict(sized)
    pools = {pool.pool_id: pool for pool in given.pools}
    free = {
        pid: max(0, int(room[pid]) // d.chips_per_unit - (d.rounded_units + d.headroom_units + d.spot_reserve_units))
        * float(d.chips_per_unit)
        for pid, d in sized.items()
    }
    carries: dict[str, list[ReserveCarry]] = {}
    carried: dict[str, float] = {}
    for pid in sorted(sized, key=lambda p: pools[p].fill_key):
        decision = sized[pid]
        wanted = decision.rounded_units + decision.headroom_units + decision.spot_reserve_units
        # what the pool can hold: its bound, or its current size while it cannot grow (backed off, blocked)
        holds = min(decision.bounded_units, int(room[pid]) // decision.chips_per_unit)
        cut = min(decision.spot_reserve_units, wanted - holds)
        if cut <= 0 or decision.need_chips <= 0.0:
            continue
        chips = float(cut * decision.chips_per_unit)
        demand = {s.demand: chips * s.chips / decision.need_chips for s in decision.demand}
        others = {name: eligible.get(name, frozenset()) - {pid} for name in demand}
        assigned = allocate(demand, given.pools, free, others, priority)
        placed = 0.0
        for target in sorted(assigned, key=lambda p: pools[p].fill_key):
            held = sum(assigned[target].values())
            if held <= 1e-9:
                continue
            free[target] -= held
            placed += held
            carried[target] = carried.get(target, 0.0) + held
            carry = ReserveCarry(pid, target, held)
            carries.setdefault(pid, []).append(carry)
            carries.setdefault(target, []).append(carry)
        if chips - placed > 1e-9:
            carries.setdefault(pid, []).append(ReserveCarry(pid, None, chips - placed))
    for pid, decision in sized.items():
        if pid not in carries:
            continue
        units = units_for(carried.get(pid, 0.0), decision.chips_per_unit)
        wanted = decision.rounded_units + decision.headroom_units + decision.spot_reserve_units + units
        bounded = decision.bounded_units if decision.fixed else _bound(pools[pid], wanted, tops[pid])
        out[pid] = replace(
            decision,
            carried_reserve_units=units,
            reserve_carries=tuple(carries[pid]),
            bounded_units=bounded,
            stepped_units=bounded,
        )
    return out


def _share(whole: DemandShare, chips: float) -> DemandShare:
    return replace(whole, chips=chips)


def _interruption_reserve(pool: PoolSpec, units: int) -> int:
    """Spot units expected to be reclaimed before a replacement could be ready: hold that many more."""
    if pool.tier is not CapacityTier.SPOT or pool.spot_interruption_per_hour <= 0.0:
        return 0
    exposure = pool.spot_interruption_per_hour * pool.lead_time.total_seconds() / 3600.0
    return math.ceil(units * min(exposure, 1.0) - 1e-9)


def _decide(
    given: PlanInput, pool: PoolSpec, sized: PoolDecision, unknown: set[str]
) -> tuple[Resize | Skip | None, PoolDecision]:
    """What to do with the pool this tick, and its record with the pacing, the holds and the target filled in."""
    state = given.states.get(pool.pool_id)
    pid, desired = pool.pool_id, sized.bounded_units
    if pool.kind is PoolKind.ON_PREM:
        return None, sized
    if state is None:
        return _hold(sized, SkipReason.MISSING_DATA, "pool state could not be observed; holding")
    current = state.target_units
    if desired == current:
        return None, sized
    if pid in given.memory.blocked:
        return _hold(sized, SkipReason.PERMANENT_ERROR, given.memory.blocked[pid])
    if desired > current:
        return _scale_up(given, pool, state, sized)
    return _scale_down(given, pool, state, sized, unknown)


def _hold(
    sized: PoolDecision, reason: SkipReason, detail: str, settled: int | None = None, window: timedelta | None = None
) -> tuple[Skip, PoolDecision]:
    """Not changed this tick: the record keeps the pool at its current size, with the reason (and, for a release,
    how many units were idle for which window)."""
    stepped = sized.stepped_units if sized.current_units is None else sized.current_units
    decision = replace(
        sized,
        holds=(*sized.holds, Hold(reason, detail)),
        stepped_units=stepped,
        target_units=sized.current_units,
        idle_settled=settled,
        idle_window=window,
    )
    return Skip(sized.pool_id, reason, detail), decision


def _scale_up(
    given: PlanInput, pool: PoolSpec, state: PoolState, sized: PoolDecision
) -> tuple[Resize | Skip, PoolDecision]:
    pid, current = pool.pool_id, state.target_units
    if given.memory.in_backoff(pid, given.now):
        until = given.memory.backoff_until[pid].isoformat()
        return _hold(sized, SkipReason.BACKOFF, f"capacity unavailable recently; no scale-up before {until}")
    if state.in_flight_operation:
        return _hold(sized, SkipReason.IN_FLIGHT, f"operation {state.in_flight_operation} still running")
    if _flapping(given, pid, direction=+1):
        return _hold(sized, SkipReason.COOLDOWN, "scaled down too recently to reverse direction")
    to_units, binding = sized.bounded_units, None
    limit = given.settings.max_scale_up_units_per_tick
    if limit is not None and to_units - current > limit:
        to_units, binding = current + limit, limit
    decision = replace(sized, stepped_units=to_units, step_limit=binding, target_units=to_units)
    return Resize(pid, current, to_units, _LATER, _key(given.now, pid, to_units)), decision


def _scale_down(
    given: PlanInput, pool: PoolSpec, state: PoolState, sized: PoolDecision, unknown: set[str]
) -> tuple[Resize | Skip, PoolDecision]:
    pid, current, desired = pool.pool_id, state.target_units, sized.bounded_units
    missing = sorted(set(pool.serves) & unknown)
    if missing:
        return _hold(sized, SkipReason.MISSING_DATA, f"no trustworthy demand for {', '.join(missing)}; holding")
    # The idle hold applies to every pool; a whole slice is then also held while the forecast says it is likely to
    # be needed again (with the idle hold first: on helios-earth-slices.yaml at equal service the forecast rule
    # after 10 minutes of idleness cost 1.069x the oracle at 0.5% unserved, after the hold 1.021x; at 0.1%
    # 1.338x and 1.345x, against 1.022x and 1.413x for the hold alone).
    window = max(given.settings.scale_down_stabilization, pool.lead_time * given.settings.idle_hold_lead_times)
    slice_rule = _slice_release(given, pool)
    settled = sum(1 for since in state.idle_since if given.now - since >= window)
    if settled == 0:
        if state.idle_units:
            detail = f"{state.idle_units} idle units, none idle for {format_duration(window)} yet"
            return _hold(sized, SkipReason.STABILIZING, detail, settled, window)
        detail = f"forecast allows {desired} units but no unit is idle"
        if pool.kind is PoolKind.TPU_QUEUED_RESOURCE:  # TPU VMs, not Kubernetes nodes: no drainer reads them
            detail = (
                f"forecast allows {desired} units, but queued resources are released only by a budget's hard stop "
                "or by hand: their idleness is not observed"
            )
        return _hold(sized, SkipReason.NOT_IDLE, detail, settled, window)
    if _flapping(given, pid, direction=-1):
        return _hold(sized, SkipReason.COOLDOWN, "scaled up too recently to reverse direction", settled, window)
    release = min(current - desired, settled)
    if slice_rule is not None:
        release, why = slice_rule.releasable(current, release, pool.chips_per_unit)
        if release == 0:
            return _hold(sized, SkipReason.STABILIZING, why, settled, window)
    limit, binding = given.settings.max_scale_down_units_per_tick, None
    if limit is not None and limit < release:
        release, binding = limit, limit
    to_units = current - release
    decision = replace(
        sized,
        stepped_units=to_units,
        step_limit=binding,
        target_units=to_units,
        idle_settled=settled,
        idle_window=window,
    )
    return Resize(pid, current, to_units, _LATER, _key(given.now, pid, to_units)), decision


def _with_nodes(given: PlanInput, decision: PoolDecision, release: Resize) -> PoolDecision:
    """The nodes a release drains, where the pool's idle nodes are known by name: the longest idle of those idle
    for the stabilization window (the shortest window any release uses; the drainer checks it again)."""
    state = given.states[release.pool_id]
    if not state.idle_nodes or len(state.idle_nodes) != len(state.idle_since):
        return decision
    window = given.settings.scale_down_stabilization
    by_age = sorted(zip(state.idle_since, state.idle_nodes, strict=True))
    settled = [node for since, node in by_age if given.now - since >= window]
    count = release.from_units - release.to_units
    if len(settled) < count:
        idle_for = format_duration(window)
        note = f"only {len(settled)} nodes are idle for {idle_for}, {count} to release: the drainer chooses"
        if release.forced:
            note = (
                f"a hard stop: the {len(settled)} nodes idle for {idle_for} go first, then {count - len(settled)} "
                "busy nodes the drainer chooses, the least loaded first"
            )
        return replace(decision, nodes_note=note)
    note = f"chosen at plan time: the {count} longest idle of the nodes idle for {format_duration(window)}"
    return replace(decision, nodes=tuple(settled[:count]), nodes_note=note)


def _step_detail(decision: PoolDecision) -> str:
    current = decision.current_units or 0
    sign = "+" if decision.bounded_units > current else "-"
    return (
        f"step limit {sign}{decision.step_limit} units per tick: {current}->{decision.stepped_units} this tick "
        f"instead of ->{decision.bounded_units}"
    )


@dataclass(frozen=True)
class SliceRelease:
    """Whether to release idle slices of a pool that alone serves one demand group.

    Holding a slice for its lead time costs ``p`` (its price over the lead time). Releasing it costs nothing if it
    is not needed again within the lead time, and ``p + w`` if it is (it is bought back, billed from the request,
    and the demand it would have served waits a lead time, at waiting cost ``w``). So release pays while the
    probability ``P`` that it is needed again is below ``p / (p + w)``: that is ``1 - q`` for the newsvendor service
    level ``q = w / (p + w)`` the group is planned at. ``P`` is the forecast probability that the peak of demand
    over the lead time exceeds the chips left without the slice (``DemandForecast.exceedance``).
    """

    forecast: DemandForecast
    service_level: float
    steps: int | None

    @property
    def break_even(self) -> float:
        return 1.0 - self.service_level

    def releasable(self, current: int, wanted: int, chips_per_unit: int) -> tuple[int, str]:
        """How many of ``wanted`` slices to release, one after the other, and why none when none."""
        released = 0
        chance = 0.0
        while released < wanted:
            left = (current - released - 1) * chips_per_unit
            chance = self.forecast.exceedance(float(left), self.steps)
            if chance >= self.break_even:
                break
            released += 1
        why = (
            f"a slice fewer is needed again within its lead time with probability {chance:.3g}, at or above the "
            f"break-even {self.break_even:.3g}; holding"
        )
        return released, why


def _slice_release(given: PlanInput, pool: PoolSpec) -> SliceRelease | None:
    """The forecast release rule for a whole-slice pool serving one demand group alone, when it applies: among
    the slices idle for the idle hold, it releases those unlikely to be needed again (else the hold alone decides)."""
    if not given.settings.slice_release_by_forecast or pool.kind is not PoolKind.TPU_SLICE_GROUP:
        return None
    groups = [g for g in plan_groups(given) if pool.pool_id in g.pools]
    if len(groups) != 1 or groups[0].pools != {pool.pool_id}:
        return None
    group = groups[0]
    forecast = given.forecasts.get(group.name) if group.is_aggregate else given.forecasts.get(group.members[0])
    if forecast is None or forecast.horizon_steps == 0:
        return None
    level = given.service_levels.get(group.name) or max(given.service_levels.get(n, 0.9) for n in group.members)
    return SliceRelease(forecast, level, _horizon_steps(given, group))


def _flapping(given: PlanInput, pool_id: str, direction: int) -> bool:
    interval = given.settings.min_direction_change_interval
    last = given.memory.last_change.get(pool_id)
    if last is None or interval <= timedelta(0):
        return False
    when, previous = last
    return previous != direction and given.now - when < interval


def _key(now: datetime, pool_id: str, to_units: int) -> str:
    return f"{pool_id}@{now.isoformat()}->{to_units}"
