"""Cheapest-first allocation of demand to pools: the one rule shared by planning, simulation and the oracle.

Each demand class is filled from the pools that may serve it, in fill order (on-prem, reserved, spot,
on-demand; then price per chip; then name). Classes are served in order of priority (their waiting cost per
accelerator-hour, highest first; then name), so a shared pool that cannot hold every class serves the dearest
waiting first. A class that finds its pools full takes room that a class served before it holds there when that
class can move the same chips to another of its pools with room (an augmenting path, as in a maximum flow), so
demand that only one pool can serve is not crowded out by demand that could have gone elsewhere: each class gets
as much as it can without taking anything from the classes served before it. Quantities are in accelerator
chips.

Capacity already at work comes before price (``held``): the chips a pool's busy units run are given to the demand
they can serve before anything is placed cheapest first, because running work stays where it runs (a pod is not
moved to a cheaper node that appears), so the same chips bought again in a cheaper pool would sit idle beside it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence

from models.pools import PoolSpec

_EPS = 1e-9


def allocate(
    demand: Mapping[str, float],
    pools: Sequence[PoolSpec],
    capacity_chips: Mapping[str, float],
    eligible: Mapping[str, Collection[str]] | None = None,
    priority: Mapping[str, float] | None = None,
    held: Mapping[str, float] | None = None,
) -> dict[str, dict[str, float]]:
    """Assign each class's demand to pools with room, cheapest first.

    Returns ``{pool_id: {class: chips}}`` for every pool (empty when it serves nothing). Demand that does not
    fit anywhere is simply not assigned; ``unassigned`` computes it. ``eligible`` names the pools a demand may
    use when that is not what the pools' ``serves`` say (e.g. for a group of classes planned together).
    ``priority`` (a waiting cost per class; a class without one counts 0) orders the classes, highest first.
    Where a class's pools are full, chips of classes served before it move to their other pools with room to
    make way (``_reroute``); what each of those classes is given in all stays the same.

    ``held`` (chips per pool, within its capacity) is what each pool's busy units already run: before the
    cheapest-first pass, each pool, in fill order, gives them to the classes it may serve, in serving order, up to
    what each still needs (``_hold``). Without it every chip is placed cheapest first.
    """
    room = {p.pool_id: float(capacity_chips.get(p.pool_id, 0.0)) for p in pools}
    assigned: dict[str, dict[str, float]] = {p.pool_id: {} for p in pools}
    options = _options(demand, pools, eligible)
    order = serving_order(demand, priority)
    remaining = {name: max(0.0, float(demand[name])) for name in order}
    if held:
        _hold(held, pools, options, order, assigned, room, remaining)
    closed: set[str] = set()  # full pools from which no move of demand reaches a pool with room
    for name in order:
        for pool_id in options[name]:
            if remaining[name] <= 0.0:
                break
            if room[pool_id] <= 0.0:
                continue
            take = min(remaining[name], room[pool_id])
            assigned[pool_id][name] = assigned[pool_id].get(name, 0.0) + take
            room[pool_id] -= take
            remaining[name] -= take
        while remaining[name] > _EPS:
            moved = _reroute(name, remaining[name], options, assigned, room, closed)
            if moved <= 0.0:
                break
            remaining[name] -= moved
    return assigned


def _hold(
    held: Mapping[str, float],
    pools: Sequence[PoolSpec],
    options: Mapping[str, Sequence[str]],
    order: Sequence[str],
    assigned: dict[str, dict[str, float]],
    room: dict[str, float],
    remaining: dict[str, float],
) -> None:
    """Give each pool's ``held`` chips (within its room), pools in fill order, to the classes that may use it, in
    serving order, up to what each still needs; in place. Which class a busy unit runs is not known: a class
    served first is taken to run on the cheapest of its pools with busy units."""
    for pool in sorted(pools, key=lambda p: p.fill_key):
        pool_id = pool.pool_id
        left = min(max(0.0, float(held.get(pool_id, 0.0))), room[pool_id])
        for name in order:
            if left <= _EPS:
                break
            if pool_id not in options[name] or remaining[name] <= 0.0:
                continue
            take = min(remaining[name], left)
            assigned[pool_id][name] = assigned[pool_id].get(name, 0.0) + take
            room[pool_id] -= take
            remaining[name] -= take
            left -= take


def _options(
    demand: Mapping[str, float], pools: Sequence[PoolSpec], eligible: Mapping[str, Collection[str]] | None
) -> dict[str, list[str]]:
    """The pools each class may use, in fill order."""
    ordered = sorted(pools, key=lambda p: p.fill_key)
    options: dict[str, list[str]] = {name: [] for name in demand}
    if eligible is None:
        for pool in ordered:
            for name in pool.serves:
                allowed = options.get(name)
                if allowed is not None and pool.pool_id not in allowed[-1:]:
                    allowed.append(pool.pool_id)
        return options
    rank = {pool.pool_id: i for i, pool in enumerate(ordered)}
    for name, allowed in options.items():
        allowed.extend(sorted((p for p in eligible.get(name, ()) if p in rank), key=rank.__getitem__))
    return options


def _reroute(
    name: str,
    wanted: float,
    options: Mapping[str, Sequence[str]],
    assigned: dict[str, dict[str, float]],
    room: dict[str, float],
    closed: set[str],
) -> float:
    """Make room for up to ``wanted`` chips of ``name`` in its full pools by moving other classes' chips along one
    shortest chain of moves (breadth first, each class's pools in fill order) that ends in a pool with room;
    returns the chips given to ``name`` (0 when no chain exists, and the pools searched are then marked closed:
    they stay full and unreachable from room for the rest of the allocation, so they are never searched again)."""
    via: dict[str, tuple[str | None, str]] = {}  # pool -> (pool its chips move from, class that moves)
    queue: deque[str] = deque()
    for pool_id in options[name]:
        if pool_id not in closed and pool_id not in via:
            via[pool_id] = (None, name)
            queue.append(pool_id)
    seen = {name}
    end: str | None = None
    while queue and end is None:
        source = queue.popleft()
        for other, chips in assigned[source].items():
            if other in seen or chips <= _EPS:
                continue
            seen.add(other)
            for pool_id in options[other]:
                if pool_id in via or pool_id in closed:
                    continue
                via[pool_id] = (source, other)
                if room[pool_id] > _EPS:
                    end = pool_id
                    break
                queue.append(pool_id)
            if end is not None:
                break
    if end is None:
        closed.update(via)
        return 0.0
    chain: list[tuple[str | None, str, str]] = []  # (from pool, class, to pool), from the end back to name
    step: str | None = end
    while step is not None:
        origin, mover = via[step]
        chain.append((origin, mover, step))
        step = origin
    amount = min(wanted, room[end], *(assigned[src][mover] for src, mover, _ in chain if src is not None))
    for origin, mover, target in chain:
        assigned[target][mover] = assigned[target].get(mover, 0.0) + amount
        if origin is not None:
            left = assigned[origin][mover] - amount
            if left > _EPS:
                assigned[origin][mover] = left
            else:
                del assigned[origin][mover]
    room[end] -= amount
    return amount


def serving_order(names: Collection[str], priority: Mapping[str, float] | None = None) -> list[str]:
    """Classes in the order they are served: highest priority first, then by name."""
    weights = priority or {}
    return sorted(names, key=lambda name: (-weights.get(name, 0.0), name))


def unassigned(demand: Mapping[str, float], assigned: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Demand per class left over after ``allocate``."""
    got: dict[str, float] = {}
    for per_class in assigned.values():
        for name, chips in per_class.items():
            got[name] = got.get(name, 0.0) + chips
    left = {name: float(value) - got.get(name, 0.0) for name, value in demand.items()}
    return {name: value if value > 1e-9 else 0.0 for name, value in left.items()}


def units_for(chips: float, chips_per_unit: int) -> int:
    """Whole units needed to hold ``chips`` (fractional demand from time-averaged traces rounds up)."""
    if chips <= 1e-9:
        return 0
    whole = int(chips // chips_per_unit)
    return whole + (1 if chips - whole * chips_per_unit > 1e-9 else 0)
