"""A large fleet's report draws at most MAX_PANELS pools and classes: the costliest pools and the classes with the
most demand, with a table saying what was left out; a small fleet is drawn whole, in configuration order."""

from __future__ import annotations

from datetime import timedelta

import numpy as np

from agent.report.fleet import MAX_PANELS, top_classes, top_pools, top_pools_table
from agent.simulation.runner import PolicyRun
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec


def _pools(n: int) -> list[PoolSpec]:
    return [
        PoolSpec(
            pool_id=f"p{i:04d}",
            kind=PoolKind.GPU_NODE_POOL,
            tier=CapacityTier.ON_DEMAND,
            family=AcceleratorFamily.GPU,
            chips_per_unit=8,
            min_units=0,
            max_units=10,
            price_per_unit_hour_usd=1.0,
            lead_time=timedelta(minutes=10),
            serves=(f"c{i:04d}",),
        )
        for i in range(n)
    ]


def _runs(pools: list[PoolSpec]) -> dict[str, PolicyRun]:
    rng = np.random.default_rng(3)
    spend = {p.pool_id: float(rng.uniform(0, 1000)) for p in pools}
    return {
        "forecast": PolicyRun("forecast", spend_by_pool_usd=spend),
        "reactive": PolicyRun("reactive", spend_by_pool_usd={k: 2 * v for k, v in spend.items()}),
    }


def test_a_small_fleet_is_drawn_whole_in_configuration_order() -> None:
    pools = _pools(5)
    assert top_pools(pools, _runs(pools)) == pools
    assert top_pools_table(pools, _runs(pools)) == ""
    assert top_classes([f"c{i}" for i in range(5)], np.ones((3, 5))) == [0, 1, 2, 3, 4]


def test_a_thousand_pools_are_summarised_by_the_costliest() -> None:
    pools = _pools(1000)
    runs = _runs(pools)
    spend = runs["forecast"].spend_by_pool_usd
    costliest = sorted(spend, key=lambda pid: -spend[pid])[:MAX_PANELS]

    chosen = top_pools(pools, runs)

    assert len(chosen) == MAX_PANELS
    assert {p.pool_id for p in chosen} == set(costliest)
    assert [p.pool_id for p in chosen] == sorted(costliest)  # configuration order
    table = top_pools_table(pools, runs)
    assert table.count("<tr>") == MAX_PANELS + 1
    assert f"the other {1000 - MAX_PANELS} cost" in table
    assert costliest[0] in table


def test_the_classes_drawn_are_those_with_the_most_demand_gaps_not_counted() -> None:
    classes = [f"c{i}" for i in range(40)]
    demand = np.tile(np.arange(40, dtype=float), (6, 1))
    demand[:, 39] = np.nan  # the largest column index has no data at all
    chosen = top_classes(classes, demand)
    assert chosen == list(range(15, 39))
