"""The report's forecast bands show, at each step, the forecast the capacity for that step was bought on: issued one
lead time before the step, from its median to the quantile at the class's service level."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from agent.simulation import run_policy, select_window
from agent.simulation.bands import band_leads
from agent.simulation.observation import observe_window
from agent.sources.trace import read_trace
from config import settings_from_mapping
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec
from tests.conftest import TraceWriter
from tests.scenario.test_simulate import two_class_config

DAY = 288  # five-minute steps


def _config() -> dict[str, Any]:
    return {
        **two_class_config(lead="15m"),
        "forecast": {"model": "last-value", "history": "1d", "quantiles": [0.5, 0.8, 0.95]},
        "planner": {"service_level": 0.8},
    }


def test_each_band_value_is_the_forecast_issued_one_lead_time_before_at_the_service_level(
    write_trace: TraceWriter,
) -> None:
    rng = np.random.default_rng(5)
    t = np.arange(2 * DAY)
    ramp = np.round(20 + 15 * np.sin(2 * np.pi * t / DAY) + rng.normal(0, 3, len(t)))
    recorded = read_trace(write_trace({"a": list(np.maximum(ramp, 0)), "b": [4.0] * len(t)}))
    settings = settings_from_mapping(_config())
    window = select_window(recorded, settings.demand_class_models(), recorded.index[DAY].to_pydatetime(), None)
    outlooks = observe_window(settings, recorded, window, "forecast")
    run = run_policy(settings, recorded, window, "forecast", outlooks=outlooks)
    median, upper = run.forecast_bands["a"]
    lead = 3  # 15 minutes of five-minute steps: a decision at tick t buys capacity ready at step t + 3
    checked = 0
    for tick in range(len(window.index) - lead):
        forecast = outlooks[tick].forecasts.get("a")
        if forecast is None:
            continue
        assert upper[tick + lead] == forecast.quantiles[0.8][lead]
        assert median[tick + lead] == forecast.quantiles[0.5][lead]
        checked += 1
    assert checked > DAY // 2
    assert np.isnan(upper[:lead]).all()  # nothing was issued a lead time before the window's first steps
    issued_next = np.array([o.forecasts["a"].quantiles[0.8][0] for o in outlooks[lead:]])
    assert not np.allclose(upper[lead:], issued_next), "the band must not be the forecast of the next step"
    top = np.array([o.forecasts["a"].quantiles[0.95][lead] for o in outlooks[:-lead]])
    assert (upper[lead:] < top).any(), "the band must end at the service level, not the highest quantile"


def test_the_lead_of_a_class_is_its_longest_scalable_pool_lead_in_whole_steps() -> None:
    def pool(pool_id: str, kind: PoolKind, lead: timedelta, serves: tuple[str, ...]) -> PoolSpec:
        tier = CapacityTier.ON_PREM if kind is PoolKind.ON_PREM else CapacityTier.ON_DEMAND
        return PoolSpec(pool_id, kind, tier, AcceleratorFamily.GPU, 8, 0, 4, 10.0, lead, serves)

    pools = [
        pool("onprem", PoolKind.ON_PREM, timedelta(hours=2), ("a", "b", "c")),
        pool("spot", PoolKind.GPU_NODE_POOL, timedelta(minutes=7), ("a",)),
        pool("od", PoolKind.GPU_NODE_POOL, timedelta(minutes=10), ("a", "b")),
    ]
    assert band_leads(pools, timedelta(minutes=5)) == {"a": 2, "b": 2, "c": 0}
    pools[1] = pool("spot", PoolKind.GPU_NODE_POOL, timedelta(minutes=11), ("a",))
    assert band_leads(pools, timedelta(minutes=5))["a"] == 3  # 11 minutes: ready after the third step


@pytest.mark.parametrize("lead", ["0s", "15m"])
def test_the_bands_never_reach_past_the_window(write_trace: TraceWriter, lead: str) -> None:
    recorded = read_trace(write_trace({"a": [10.0] * (2 * DAY), "b": [4.0] * (2 * DAY)}))
    raw = _config()
    raw["pools"][0]["lead_time"] = lead
    settings = settings_from_mapping(raw)
    window = select_window(recorded, settings.demand_class_models(), recorded.index[DAY].to_pydatetime(), None)
    run = run_policy(settings, recorded, window, "forecast")
    median, upper = run.forecast_bands["a"]
    assert len(median) == len(upper) == len(window.index)
    assert not np.isnan(upper[-1])
