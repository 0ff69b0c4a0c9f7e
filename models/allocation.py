"""Cheapest-first allocation of demand to pools: the one rule shared by planning, simulation and the oracle.

Each demand class is filled from the pools that may serve it, in fill order (on-prem, reserved, spot,
on-demand; then price per chip; then name). Classes are served in order of priority (their waiting cost per
accelerator-hour, highest first; then name), so a shared pool that cannot hold every class serves the dearest
waiting first. Quantities are in accelerator chips.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from models.pools import PoolSpec


def allocate(
    demand: Mapping[str, float],
    pools: Sequence[PoolSpec],
    capacity_chips: Mapping[str, float],
    eligible: Mapping[str, Collection[str]] | None = None,
    priority: Mapping[str, float] | None = None,
) -> dict[str, dict[str, float]]:
    """Assign each class's demand to pools with room, cheapest first.

    Returns ``{pool_id: {class: chips}}`` for every pool (empty when it serves nothing). Demand that does not
    fit anywhere is simply not assigned; ``unassigned`` computes it. ``eligible`` names the pools a demand may
    use when that is not what the pools' ``serves`` say (e.g. for a group of classes planned together).
    ``priority`` (a waiting cost per class; a class without one counts 0) orders the classes, highest first.
    """
    room = {p.pool_id: float(capacity_chips.get(p.pool_id, 0.0)) for p in pools}
    assigned: dict[str, dict[str, float]] = {p.pool_id: {} for p in pools}
    ordered = sorted(pools, key=lambda p: p.fill_key)
    for name in serving_order(demand, priority):
        remaining = max(0.0, float(demand[name]))
        for pool in ordered:
            if remaining <= 0.0:
                break
            allowed = name in pool.serves if eligible is None else pool.pool_id in eligible.get(name, ())
            if not allowed or room[pool.pool_id] <= 0.0:
                continue
            take = min(remaining, room[pool.pool_id])
            assigned[pool.pool_id][name] = assigned[pool.pool_id].get(name, 0.0) + take
            room[pool.pool_id] -= take
            remaining -= take
    return assigned


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
