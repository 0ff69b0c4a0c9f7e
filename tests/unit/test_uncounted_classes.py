"""A pool shared with a class that has no data (neither a current value nor a forecast) is sized without it; its
record, and so the reason of a scale-up, says so, naming the class. A class with a figure is counted and not named."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.planning import PlanInput, plan_capacity
from config.schema import PlannerSettings
from models import AcceleratorFamily, CapacityPlan, CapacityTier, DemandForecast, PoolKind, PoolSpec, PoolState

NOW = datetime(2024, 1, 1, 12, tzinfo=UTC)
STEP = timedelta(minutes=5)
# Pool X serves classes a and b: 8 chips a unit, bounds 0..10.
X = PoolSpec("X", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 10, 10.0,
             timedelta(minutes=10), ("a", "b"))  # fmt: skip


def plan(units: int, forecasts: dict[str, float], observed: dict[str, float]) -> CapacityPlan:
    made = {name: DemandForecast(name, NOW, STEP, {0.9: (v,) * 14}, v, "test") for name, v in forecasts.items()}
    given = PlanInput(NOW, STEP, [X], {"X": PoolState("X", NOW, units, units)}, made, observed, {"a": 0.9, "b": 0.9},
                      PlannerSettings())  # fmt: skip
    return plan_capacity(given)


def test_a_scale_up_of_a_pool_shared_with_a_class_without_data_says_so() -> None:
    # b needs 24 chips, 3 units; a has no current value and no forecast, so nothing of it is in the 3.
    out = plan(1, {"b": 24.0}, {"b": 24.0})
    [resize] = out.resizes
    assert (resize.from_units, resize.to_units) == (1, 3)
    assert resize.reason == (
        "need 24 chips within lead time 10m (b: q0.9 peak 24, now 24; a: no data, not counted) -> 3 units of 8 chips "
        "= 3 -> target 3"
    )
    assert out.decisions["X"].log_fields()["no_data"] == "a"


def test_a_hold_for_a_class_without_data_names_it_in_the_need_too() -> None:
    # With more units than b needs the release is held for a, and the need says what it left out.
    why = plan(4, {"b": 8.0}, {"b": 8.0}).decisions["X"].why()
    assert why.startswith("need 8 chips within lead time 10m (b: q0.9 peak 8, now 8; a: no data, not counted) -> ")
    assert why.endswith("-> missing-data: no trustworthy demand for a; holding -> target 4")


def test_a_pool_whose_only_demand_has_no_data_names_it_beside_no_demand() -> None:
    why = plan(0, {}, {}).decisions["X"].why()
    assert why == "no demand assigned (a, b: no data, not counted) -> 0 units of 8 chips = 0 -> target 0"


def test_a_class_with_a_current_value_but_no_forecast_is_counted_and_not_named() -> None:
    # a has 16 chips now and no forecast: its pool is held from releasing, but its 16 chips are in the need.
    out = plan(1, {"b": 24.0}, {"a": 16.0, "b": 24.0})
    assert [(r.from_units, r.to_units) for r in out.resizes] == [(1, 5)]
    assert out.decisions["X"].no_data == ()
    assert "no data" not in out.resizes[0].reason
    assert out.decisions["X"].log_fields()["no_data"] is None
