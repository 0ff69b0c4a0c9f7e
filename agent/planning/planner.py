"""The capacity planner: forecasts and observed state in, an immutable CapacityPlan out.

Rules (DESIGN.md):
- scale-up target per class = max(forecast quantile over the lead-time horizon, demand observed now);
- classes are filled into their eligible pools cheapest first; a pool in back-off or blocked cannot grow, so
  its share spills to the next eligible pool, and so does the part of a spot pool's interruption reserve above
  its current size;
- never release on a forecast alone: a unit goes only if it has been observed idle for the stabilization window;
- with ``slice_release_by_forecast``, a whole slice (a pool of slices serving one demand group alone) that has
  been idle for the idle hold is released only while the forecast probability that it is needed again within its
  lead time is below the break-even ratio (``agent.planning.slice_release``);
- a pool whose state, or one of whose classes, is unknown is held (no release), with a skip reason; a pool whose
  state is unknown takes demand only up to the units it is known to hold (``agent.planning.sizing``: those the
  agent last read it at, else those the ledger last recorded it holding, else none), as it cannot grow: the rest
  goes to the next eligible pool;
- an on-prem pool is never resized; it takes demand up to its units that can work now (``onprem_units``, read
  each tick: nodes down or cordoned leave its share to the next eligible pool), or up to its ``max_units`` when
  that could not be read;
- targets are absolute whole units within each pool's bounds; a pool's broken units (paid for, serving nothing)
  take their room from its ``max_units``, so it is never asked for more than ``max_units`` less them.

What each group needs is worked out in ``agent.planning.needs``, each pool's size up to its bounds in
``agent.planning.sizing``, from the inputs of ``agent.planning.plan_input``; this module decides what to do with
each pool this tick (scale up, release, hold) and holds the decisions to the budgets (``agent.planning.budgeting``).

Every pool gets a decision record (``models.decision.PoolDecision``) with the arithmetic behind its target; the
resizes' reasons are rendered from it once the budget caps have had their say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from agent.planning.budgeting import apply_budgets
from agent.planning.decisions import with_budgets
from agent.planning.needs import Unknown, group_shares, missing_for
from agent.planning.plan_input import PlanInput, plan_groups
from agent.planning.sizing import idle_window, paced_shares, size_pools
from agent.planning.slice_release import slice_release
from models import (
    CapacityPlan,
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
from models.durations import format_duration

_LATER = ""  # a resize's reason is rendered from its decision record once the budgets have had their say


def plan_capacity(given: PlanInput) -> CapacityPlan:
    shares, unknown = group_shares(given)
    sized = size_pools(given, paced_shares(given, shares))
    resizes: list[Resize] = []
    skips: list[Skip] = []
    decisions: dict[str, PoolDecision] = {}
    # classes of groups with neither a forecast nor a current value: no share counts them (a group's share names
    # its own members lacking a figure)
    uncounted = frozenset(m for g in plan_groups(given) if g.name not in shares for m in g.members)
    for pool in sorted(given.pools, key=lambda p: p.pool_id):
        where = _placed_elsewhere(given, pool, sized)
        action, decisions[pool.pool_id] = _decide(given, pool, sized[pool.pool_id], unknown, uncounted, where)
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


def _decide(
    given: PlanInput,
    pool: PoolSpec,
    sized: PoolDecision,
    unknown: Unknown,
    uncounted: frozenset[str],
    elsewhere: str = "",
) -> tuple[Resize | Skip | None, PoolDecision]:
    """What to do with the pool this tick, and its record with the pacing, the holds and the target filled in (and
    the classes it serves that no figure counts, ``uncounted``: a scale-up is sized without them)."""
    state = given.states.get(pool.pool_id)
    sized = replace(sized, no_data=tuple(name for name in missing_for(pool, unknown) if name in uncounted))
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
    return _scale_down(given, pool, state, sized, unknown, elsewhere)


def _placed_elsewhere(given: PlanInput, pool: PoolSpec, sized: Mapping[str, PoolDecision]) -> str:
    """Where the demand a pool may serve is placed in other pools, as 'spot (train: 40 chips)'; empty when none is."""
    names = {g.name for g in plan_groups(given) if pool.pool_id in g.pools}
    parts = [
        f"{pid} ({', '.join(f'{s.demand}: {s.chips:g} chips' for s in d.demand if s.demand in names)})"
        for pid, d in sorted(sized.items())
        if pid != pool.pool_id and any(s.demand in names and s.chips > 0.0 for s in d.demand)
    ]
    return ", ".join(parts)


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
    given: PlanInput, pool: PoolSpec, state: PoolState, sized: PoolDecision, unknown: Unknown, elsewhere: str = ""
) -> tuple[Resize | Skip, PoolDecision]:
    pid, current, desired = pool.pool_id, state.target_units, sized.bounded_units
    missing = missing_for(pool, unknown)
    if missing:
        return _hold(sized, SkipReason.MISSING_DATA, f"no trustworthy demand for {', '.join(missing)}; holding")
    # The idle hold applies to every pool; a whole slice is then also held while the forecast says it is likely to
    # be needed again (with the idle hold first: on helios-earth-slices.yaml at equal service the forecast rule
    # after 10 minutes of idleness cost 1.069x the oracle at 0.5% unserved, after the hold 1.021x; at 0.1%
    # 1.338x and 1.345x, against 1.022x and 1.413x for the hold alone).
    window = idle_window(given, pool)
    slice_rule = slice_release(given, pool)
    settled = sum(1 for since in state.idle_since if given.now - since >= window)
    if settled == 0:
        if state.idle_units:
            detail = f"{state.idle_units} idle units, none idle for {format_duration(window)} yet"
            return _hold(sized, SkipReason.STABILIZING, detail, settled, window)
        detail = f"forecast allows {desired} units but no unit is idle"
        if elsewhere:
            detail += f"; the demand it may serve is placed on {elsewhere}: its units go as they fall idle"
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


def _flapping(given: PlanInput, pool_id: str, direction: int) -> bool:
    interval = given.settings.min_direction_change_interval
    last = given.memory.last_change.get(pool_id)
    if last is None or interval <= timedelta(0):
        return False
    when, previous = last
    return previous != direction and given.now - when < interval


def _key(now: datetime, pool_id: str, to_units: int) -> str:
    return f"{pool_id}@{now.isoformat()}->{to_units}"
