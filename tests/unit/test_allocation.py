"""Allocation of demand to pools: cheapest first, by priority, and as much demand served as the pools can hold."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec
from models.allocation import allocate, unassigned


def spec(pool_id: str, serves: tuple[str, ...], tier: CapacityTier = CapacityTier.SPOT, price: float = 8.0) -> PoolSpec:
    return PoolSpec(
        pool_id, PoolKind.GPU_NODE_POOL, tier, AcceleratorFamily.GPU, 8, 0, 100, price, timedelta(minutes=10), serves
    )


def test_a_class_only_one_pool_can_serve_is_not_crowded_out_by_one_served_before_it() -> None:
    # The group (named before z) may use spot or on-demand, z only spot. Spot holds 32 chips: the group, served
    # first, takes them all, then moves 16 of them to on-demand to make way for z.
    spot = spec("spot", ("a", "b", "z"))
    ondemand = spec("od", ("a", "b"), CapacityTier.ON_DEMAND, 30.0)
    demand = {"pool-group:od+spot": 32.0, "z": 16.0}
    eligible = {"pool-group:od+spot": {"spot", "od"}, "z": {"spot"}}
    assigned = allocate(demand, [spot, ondemand], {"spot": 32.0, "od": 80.0}, eligible)
    assert assigned == {"spot": {"pool-group:od+spot": 16.0, "z": 16.0}, "od": {"pool-group:od+spot": 16.0}}
    assert unassigned(demand, assigned) == {"pool-group:od+spot": 0.0, "z": 0.0}


def test_room_is_made_along_a_chain_of_moves() -> None:
    # x takes p1 (cheapest), y p2; z may use only p1: x moves to p2, y to p3 to make way.
    pools = [spec("p1", ("x", "z"), price=1.0), spec("p2", ("x", "y"), price=2.0), spec("p3", ("y",), price=3.0)]
    assigned = allocate({"x": 8.0, "y": 8.0, "z": 8.0}, pools, {"p1": 8.0, "p2": 8.0, "p3": 8.0})
    assert assigned == {"p1": {"z": 8.0}, "p2": {"x": 8.0}, "p3": {"y": 8.0}}


def test_a_class_served_later_never_takes_chips_from_one_served_before_it() -> None:
    # Both may use only spot: b waits at the higher cost, so it is served whole and a gets what is left; moving
    # nothing frees room, so a stays short (and, served by name, a takes its 12 first).
    shared = spec("spot", ("a", "b"))
    demand = {"a": 12.0, "b": 10.0}
    assert allocate(demand, [shared], {"spot": 16.0}, priority={"a": 1.0, "b": 4.0}) == {"spot": {"b": 10.0, "a": 6.0}}
    assert allocate(demand, [shared], {"spot": 16.0}) == {"spot": {"a": 12.0, "b": 4.0}}


def test_demand_that_fits_is_placed_as_before_cheapest_first() -> None:
    pools = [spec("od", ("a", "b"), CapacityTier.ON_DEMAND, 30.0), spec("spot", ("a", "b"), price=10.0)]
    assigned = allocate({"a": 20.0, "b": 20.0}, pools, {"spot": 32.0, "od": 80.0})
    assert assigned == {"spot": {"a": 20.0, "b": 12.0}, "od": {"b": 8.0}}


@st.composite
def instances(draw: st.DrawFn) -> tuple[dict[str, float], list[PoolSpec], dict[str, float], dict[str, float]]:
    classes = [f"c{i}" for i in range(draw(st.integers(1, 5)))]
    pools = []
    for i in range(draw(st.integers(1, 5))):
        serves = tuple(draw(st.lists(st.sampled_from(classes), max_size=len(classes), unique=True)))
        pools.append(spec(f"p{i}", serves, draw(st.sampled_from(list(CapacityTier)[1:])), draw(st.integers(1, 9))))
    demand = {c: float(draw(st.integers(0, 24))) for c in classes}
    capacity = {p.pool_id: float(draw(st.integers(0, 24))) for p in pools}
    priority = {c: float(draw(st.integers(0, 2))) for c in classes}
    return demand, pools, capacity, priority


def most_servable(demand: dict[str, float], pools: list[PoolSpec], capacity: dict[str, float]) -> int:
    """The maximum flow from the classes' demand to the pools' capacity, by scipy (integral quantities)."""
    classes = sorted(demand)
    size = 2 + len(classes) + len(pools)
    weights = np.zeros((size, size), dtype=np.int32)
    for i, name in enumerate(classes, start=1):
        weights[0, i] = int(demand[name])
        for j, pool in enumerate(pools, start=1 + len(classes)):
            if name in pool.serves:
                weights[i, j] = 10_000
    for j, pool in enumerate(pools, start=1 + len(classes)):
        weights[j, size - 1] = int(capacity[pool.pool_id])
    return int(maximum_flow(csr_matrix(weights), 0, size - 1).flow_value)


@settings(max_examples=300, deadline=None)
@given(instances())
def test_as_much_demand_is_served_as_the_pools_can_hold_and_priority_is_kept(
    instance: tuple[dict[str, float], list[PoolSpec], dict[str, float], dict[str, float]],
) -> None:
    demand, pools, capacity, priority = instance
    assigned = allocate(demand, pools, capacity, priority=priority)
    for pool in pools:
        assert sum(assigned[pool.pool_id].values()) <= capacity[pool.pool_id] + 1e-9
        assert set(assigned[pool.pool_id]) <= set(pool.serves)
    left = unassigned(demand, assigned)
    assert all(value >= 0.0 for value in left.values())
    served = sum(demand.values()) - sum(left.values())
    assert abs(served - most_servable(demand, pools, capacity)) < 1e-6
    # The classes of the highest waiting cost are served as much as they could be with every pool to themselves.
    top = max(priority.values())
    first = {name: value for name, value in demand.items() if priority[name] == top}
    assert abs(sum(first[n] - left[n] for n in first) - most_servable(first, pools, capacity)) < 1e-6
