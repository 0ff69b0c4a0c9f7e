"""The planner's per-plan work: what a replay asks for thousands of times is worked out once per plan or forecast.

A simulation plans every tick of every run over the same window, so work repeated per pool or per call adds up: the
forecast's levels are sorted once per forecast, and the demand left unplaced is sorted and shared out once per plan.
Each test counts that work on inputs that count how often they are read, and checks the results stay what they were.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from agent.planning import PlanInput
from agent.planning.groups import demand_groups
from agent.planning.sizing import size_pools
from config.schema import PlannerSettings
from models import AcceleratorFamily, CapacityTier, DemandForecast, DemandShare, PoolKind, PoolSpec, PoolState

NOW = datetime(2024, 1, 1, 12, tzinfo=UTC)
STEP = timedelta(minutes=5)


class CountedLevels(dict[float, tuple[float, ...]]):
    """Quantiles that count how often their levels are walked."""

    walks = 0

    def __iter__(self) -> Iterator[float]:
        CountedLevels.walks += 1
        return super().__iter__()


class CountedShares(dict[str, DemandShare]):
    """Demand shares that count how often one is looked up by name."""

    lookups = 0

    def __getitem__(self, name: str) -> DemandShare:
        CountedShares.lookups += 1
        return super().__getitem__(name)


def gpu_pool(
    pool_id: str, serves: tuple[str, ...], *, lead: int = 10, kind: PoolKind = PoolKind.GPU_NODE_POOL
) -> PoolSpec:
    tier = CapacityTier.ON_PREM if kind is PoolKind.ON_PREM else CapacityTier.ON_DEMAND
    return PoolSpec(pool_id, kind, tier, AcceleratorFamily.GPU, 8, 0, 2, 8.0, timedelta(minutes=lead), serves)


def plan_input(pools: list[PoolSpec], classes: list[str]) -> PlanInput:
    forecasts = {n: DemandForecast(n, NOW, STEP, {0.9: (8.0,) * 6}, 8.0, "test") for n in classes}
    return PlanInput(
        now=NOW,
        tick=STEP,
        pools=pools,
        states={p.pool_id: PoolState(p.pool_id, NOW, 0, 0) for p in pools},
        forecasts=forecasts,
        observed=dict.fromkeys(classes, 8.0),
        service_levels=dict.fromkeys(classes, 0.9),
        settings=PlannerSettings(),
        groups=demand_groups(classes, pools),
    )


def test_a_forecast_sorts_its_levels_once_however_often_a_level_is_asked_for() -> None:
    levels = CountedLevels({0.99: (3.0,), 0.5: (1.0,), 0.9: (2.0,)})
    forecast = DemandForecast("a", NOW, STEP, levels, 1.0, "test")
    CountedLevels.walks = 0
    chosen = [forecast.level_at_or_above(level) for level in (0.1, 0.5, 0.7, 0.9, 0.95, 0.99, 0.999) * 100]
    assert chosen[:7] == [0.5, 0.5, 0.9, 0.9, 0.99, 0.99, 0.99]
    assert CountedLevels.walks == 1


def test_a_pickled_forecast_reads_its_levels_as_the_original_and_compares_equal_to_a_fresh_one() -> None:
    forecast = DemandForecast("a", NOW, STEP, {0.9: (2.0,), 0.5: (1.0,)}, 1.0, "test")
    assert forecast.level_at_or_above(0.6) == 0.9
    again = pickle.loads(pickle.dumps(forecast))
    fresh = DemandForecast("a", NOW, STEP, {0.9: (2.0,), 0.5: (1.0,)}, 1.0, "test")
    assert again == fresh
    assert [again.level_at_or_above(v) for v in (0.1, 0.6, 0.95)] == [0.5, 0.9, 0.9]
    assert repr(again) == repr(fresh)


def unplaced_plan(pool_count: int) -> tuple[PlanInput, CountedShares]:
    pools = [gpu_pool(f"p{i:02d}", ("a", "b") if i % 2 else ("b", "c")) for i in range(pool_count)]
    given = plan_input(pools, ["a", "b", "c"])
    shares = CountedShares(
        (name, DemandShare(name, 0.9, need, None, need, need))
        for name, need in (("c", 900.0), ("b", 800.0), ("a", 700.0))
    )
    return given, shares


def test_the_unplaced_demand_is_shared_out_once_per_plan_not_once_per_pool() -> None:
    given, shares = unplaced_plan(20)
    CountedShares.lookups = 0
    sized = size_pools(given, shares)
    taken = sum(len(decision.demand) for decision in sized.values())
    unplaced = {s.demand for decision in sized.values() for s in decision.unplaced}
    assert unplaced == {"a", "b", "c"}
    # each pool looks up the demands it takes; a demand left unplaced is looked up once, not once per pool
    assert CountedShares.lookups == taken + len(unplaced)


def test_each_pool_lists_the_unplaced_demand_it_may_serve_in_name_order() -> None:
    given, shares = unplaced_plan(5)
    sized = size_pools(given, shares)
    placed = {name: sum(s.chips for d in sized.values() for s in d.demand if s.demand == name) for name in shares}
    assert sum(placed.values()) == 5 * 16.0  # every pool full, each demand's rest unplaced
    for pool in given.pools:
        expected = [(name, shares[name].need - placed[name]) for name in ("a", "b", "c") if name in pool.serves]
        assert [(s.demand, s.chips) for s in sized[pool.pool_id].unplaced] == expected, pool.pool_id
        assert all(s.need == shares[s.demand].need for s in sized[pool.pool_id].unplaced)
