"""A forecast with a figure that is not finite (NaN, infinite) in what the planner reads of it is no forecast: its
class's pools are held, as for a class without one, never released on NaN nor bought to ``max_units`` on infinity."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from agent.planning import PlanInput, plan_capacity
from config.schema import PlannerSettings
from models import (
    AcceleratorFamily,
    CapacityPlan,
    CapacityTier,
    DemandForecast,
    PoolKind,
    PoolSpec,
    PoolState,
    SkipReason,
)

NOW = datetime(2024, 1, 1, 12, tzinfo=UTC)
STEP = timedelta(minutes=5)
HOUR_AGO = NOW - timedelta(hours=1)
OD = PoolSpec("od", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 10, 10.0,
              timedelta(minutes=10), ("train",))  # fmt: skip
THREE_IDLE = PoolState("od", NOW, 4, 4, idle_units=3, idle_since=(HOUR_AGO,) * 3, idle_nodes=("n1", "n2", "n3"))


def forecast(values: tuple[float, ...]) -> DemandForecast:
    return DemandForecast("train", NOW, STEP, {0.5: values, 0.9: values}, 8.0, "test")


def plan(state: PoolState, forecasts: dict[str, DemandForecast], observed: float = 8.0) -> CapacityPlan:
    return plan_capacity(PlanInput(NOW, STEP, [OD], {"od": state}, forecasts, {"train": observed}, {"train": 0.9},
                                   PlannerSettings()))  # fmt: skip


def test_a_nan_forecast_holds_the_pool_as_a_missing_one_does() -> None:
    missing = plan(THREE_IDLE, {})
    nan = plan(THREE_IDLE, {"train": forecast((math.nan,) * 14)})
    assert missing.resizes == () and nan.resizes == (), nan.decisions["od"].why()  # released 4 -> 1 before
    assert [s.reason for s in nan.skips] == [s.reason for s in missing.skips] == [SkipReason.MISSING_DATA]


def test_a_nan_first_step_does_not_hide_the_rest_of_the_forecast() -> None:
    # the steps say 30 chips (4 units); the NaN first made the peak NaN and the 3 idle units were released
    out = plan(THREE_IDLE, {"train": forecast((math.nan,) + (30.0,) * 13)})
    assert out.resizes == (), out.decisions["od"].why()
    assert [s.reason for s in out.skips] == [SkipReason.MISSING_DATA]


def test_a_nan_later_step_is_not_skipped_either() -> None:
    # the planner reads the lead time and a tick: 3 steps; a NaN in the second was skipped by max()
    out = plan(THREE_IDLE, {"train": forecast((8.0, math.nan) + (8.0,) * 12)})
    assert out.resizes == () and [s.reason for s in out.skips] == [SkipReason.MISSING_DATA]


def test_an_infinite_forecast_is_not_bought_to_max_units() -> None:
    out = plan(PoolState("od", NOW, 1, 1), {"train": forecast((math.inf,) * 14)})
    assert out.resizes == (), out.decisions["od"].why()  # 1 -> 10 before


def test_an_infinite_published_peak_counts_as_well() -> None:
    values = (8.0,) * 14
    peaked = DemandForecast("train", NOW, STEP, {0.9: values}, 8.0, "test", peaks={0.9: (8.0,) * 13 + (math.inf,)})
    assert math.isnan(peaked.peak(0.9))
    assert peaked.peak(0.9, 3) == 8.0  # the steps read are finite
    assert peaked.exceedance(1000.0) == 1.0  # says nothing: taken as likely, so no slice is released on it


def test_an_infinite_current_value_counts_as_none() -> None:
    out = plan(PoolState("od", NOW, 1, 1), {"train": forecast((8.0,) * 14)}, observed=math.inf)
    assert out.resizes == (), out.decisions["od"].why()  # 1 -> 10 before, on 'now inf'
    assert out.decisions["od"].why().startswith("need 8 chips"), out.decisions["od"].why()
