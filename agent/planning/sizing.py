"""Sizing each pool: demand paced to its budgets, placed cheapest first into the room each pool may take, rounded
to whole units with headroom and the spot reserve, within the pool's bounds (``size_pools``), and the spot reserve a
pool cannot hold carried by the next eligible pools (``_carry_reserves``). Pure.

A pool whose state is unknown takes demand only up to the units it is known to hold (``_last_units``); an on-prem
pool up to its units that can work now; a pool that cannot grow up to its current size (``_rooms``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta

from agent.planning.pacing import pace_needs
from agent.planning.plan_input import PlanInput, plan_groups
from models import CapacityTier, DemandShare, PoolDecision, PoolKind, PoolSpec, PoolState
from models.allocation import allocate, unassigned, units_for
from models.decision import CarryCause, ReserveCarry

# A pool whose idle units are not known by name (one without a node drainer) shrinks by a size change: which
# units go is then up to the cloud. Releases of pools with a drainer name their nodes (``agent.planning.planner``).
_NODES_NOTE = "idle units are not known by name at plan time: the cloud chooses which units a release takes"


def paced_shares(given: PlanInput, shares: Mapping[str, DemandShare]) -> dict[str, DemandShare]:
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


def size_pools(given: PlanInput, shares: Mapping[str, DemandShare]) -> dict[str, PoolDecision]:
    """Each pool's record up to its bounds: demand first to the chips each pool's busy units already run
    (``_busy_chips``), the rest cheapest first; whole units, headroom, spot reserve (the part of it a pool cannot
    hold, over its ``max_units`` less its broken units or over its current size while it cannot grow, is held by the
    next eligible pool with room, ``_carry_reserves``).
    """
    room, tops = _rooms(given)
    groups = plan_groups(given)
    eligible = {g.name: g.pools for g in groups}
    priority = {g.name: max(given.waiting_costs.get(m, 0.0) for m in g.members) for g in groups}
    needs = {name: share.need for name, share in shares.items()}
    assigned = allocate(needs, given.pools, room, eligible, priority, held=_busy_chips(given, room))
    unplaced_by_pool = _unplaced_by_pool(shares, unassigned(needs, assigned), eligible)
    sized: dict[str, PoolDecision] = {}
    for pool in given.pools:
        taken = assigned[pool.pool_id]
        demand = tuple(_share(shares[name], chips) for name, chips in sorted(taken.items()))
        unplaced = tuple(unplaced_by_pool.get(pool.pool_id, ()))
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
            available_units=given.onprem_units.get(pool.pool_id) if fixed else None,
        )
    return _carry_reserves(given, sized, room, tops, eligible, priority)


def _unplaced_by_pool(
    shares: Mapping[str, DemandShare], left: Mapping[str, float], eligible: Mapping[str, frozenset[str]]
) -> dict[str, list[DemandShare]]:
    """The demand left unplaced, by each pool that may serve it, in the order of the demands' names: sorted once per
    plan instead of once per pool."""
    by_pool: dict[str, list[DemandShare]] = {}
    for name in sorted(left):
        if left[name] > 0.0:
            share = _share(shares[name], left[name])
            for pool_id in eligible.get(name, ()):
                by_pool.setdefault(pool_id, []).append(share)
    return by_pool


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


def idle_window(given: PlanInput, pool: PoolSpec) -> timedelta:
    """How long a unit of the pool must be observed idle before it may be released (the scale-down rule)."""
    return max(given.settings.scale_down_stabilization, pool.lead_time * given.settings.idle_hold_lead_times)


def _busy_chips(given: PlanInput, room: Mapping[str, float]) -> dict[str, float]:
    """The chips each read pool's busy units run, held for the demand they may serve before anything is placed
    cheapest first. Running work stays where it runs: placed cheapest first regardless, demand that busy units of a
    dearer pool serve was bought again in a cheaper one (backed off, blocked or at its bound when the work started)
    and both were paid for until the work ended.

    A unit counts as busy until it has been idle for the pool's idle window (``idle_window``, the one a release
    waits for): a unit whose pod ended a moment ago is usually given the next pod, and freeing its chips at once
    bought cheaper units that sat unused and went an hour later, at every such moment, while the dear unit was never
    released. Idle units whose idle start is not known count as busy (no release takes them either).

    A cloud pool holds only where which class its busy units run cannot change where the rest goes: every class it
    serves has the same eligible pools. Otherwise (which class runs there is not read) its chips were credited to
    the class served first, and a class with pending demand was sent to nothing it can run on; such a pool holds
    nothing, its demand placed cheapest first (at worst bought again, never left unserved).

    An on-prem pool, first in fill order, counts all the units it can work with (its room): its idleness is not
    read, and its work is the demand the cloud pools' busy units do not run (held first by a cloud pool, a class's
    demand left its own on-prem pool unused and the next class's was bought on spot)."""
    eligible = [frozenset(g.pools) for g in plan_groups(given)]
    busy: dict[str, float] = {}
    for pool in given.pools:
        if pool.kind is PoolKind.ON_PREM:
            busy[pool.pool_id] = room[pool.pool_id]
            continue
        state = given.states.get(pool.pool_id)
        if state is None or len({pools for pools in eligible if pool.pool_id in pools}) > 1:
            continue
        window = idle_window(given, pool)
        settled = sum(1 for since in state.idle_since if given.now - since >= window)
        busy[pool.pool_id] = float(max(0, state.ready_units - settled) * pool.chips_per_unit)
    return busy


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
        cause = _carry_cause(given, pid) if holds < decision.bounded_units else CarryCause.BOUND
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
            carry = ReserveCarry(pid, target, held, cause)
            carries.setdefault(pid, []).append(carry)
            carries.setdefault(target, []).append(carry)
        if chips - placed > 1e-9:
            carries.setdefault(pid, []).append(ReserveCarry(pid, None, chips - placed, cause))
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


def _carry_cause(given: PlanInput, pool_id: str) -> CarryCause:
    """Why a pool holds fewer units than its bound (``_rooms``): its state was not read, or it cannot grow."""
    if pool_id not in given.states:
        return CarryCause.NOT_READ
    return CarryCause.BLOCKED if pool_id in given.memory.blocked else CarryCause.BACKED_OFF


def _share(whole: DemandShare, chips: float) -> DemandShare:
    return replace(whole, chips=chips)


def _interruption_reserve(pool: PoolSpec, units: int) -> int:
    """Spot units expected to be reclaimed before a replacement could be ready: hold that many more."""
    if pool.tier is not CapacityTier.SPOT or pool.spot_interruption_per_hour <= 0.0:
        return 0
    exposure = pool.spot_interruption_per_hour * pool.lead_time.total_seconds() / 3600.0
    return math.ceil(units * min(exposure, 1.0) - 1e-9)
