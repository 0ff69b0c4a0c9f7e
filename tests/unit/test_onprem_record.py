"""An on-prem pool's record names its size (its max_units), the units its capacity query read as able to take work,
and the units its demand takes there."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.planning import PlanInput, plan_capacity
from config.schema import PlannerSettings
from models import AcceleratorFamily, CapacityTier, DemandForecast, PoolDecision, PoolKind, PoolSpec, PoolState

NOW = datetime(2024, 1, 1, 12, tzinfo=UTC)
STEP = timedelta(minutes=5)
OD = PoolSpec("od", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 10, 10.0,
              timedelta(minutes=10), ("train",))  # fmt: skip


def onprem(min_units: int) -> PoolSpec:
    return PoolSpec("onp", PoolKind.ON_PREM, CapacityTier.ON_PREM, AcceleratorFamily.GPU, 8, min_units, 10, 0.0,
                    timedelta(minutes=10), ("train",))  # fmt: skip


def record(chips: float, available: dict[str, int], min_units: int = 10) -> PoolDecision:
    forecast = DemandForecast("train", NOW, STEP, {0.9: (chips,) * 14}, chips, "test")
    given = PlanInput(NOW, STEP, [onprem(min_units), OD], {"od": PoolState("od", NOW, 0, 0)}, {"train": forecast},
                      {"train": chips}, {"train": 0.9}, PlannerSettings(), onprem_units=available)  # fmt: skip
    return plan_capacity(given).decisions["onp"]


def test_an_onprem_pools_record_names_its_size_and_the_units_that_can_work() -> None:
    # A 10-unit pool with 4 units able to work takes the 24 chips: 3 units.
    for min_units in (10, 0):  # min_units equals max_units in a valid configuration; the size is max_units either way
        why = record(24.0, {"onp": 4}, min_units).why()
        assert why == (
            "need 24 chips within lead time 10m (train: q0.9 peak 24, now 24) -> fixed pool of 10 units, available: "
            "4 of 10, its demand takes 3 -> target unknown"
        ), min_units


def test_an_onprem_pool_takes_no_more_than_its_units_that_can_work() -> None:
    # 2 units able to work take 16 of the 24 chips; the rest goes to the on-demand pool.
    assert "fixed pool of 10 units, available: 2 of 10, its demand takes 2 -> " in record(24.0, {"onp": 2}).why()


def test_an_onprem_pool_without_a_read_or_demand_says_only_what_it_knows() -> None:
    assert "-> fixed pool of 10 units, its demand takes 3 -> target unknown" in record(24.0, {}).why()
    idle = record(0.0, {"onp": 4}).why()
    assert idle == "no demand assigned -> fixed pool of 10 units, available: 4 of 10 -> target unknown"
