"""The planning horizon is the longest lead time of the pools the agent scales, plus one tick: an on-prem pool is
fixed, never provisioned, so its lead time asks for no forecast further ahead (as the planner leaves it out of each
demand's horizon, ``agent.planning.needs.horizon_steps``), and a slow one changes no decision."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.simulation import select_window
from agent.simulation.assembly import policy_agent, policy_cluster
from agent.simulation.runner import run_policy
from agent.sources.trace import read_trace
from config import load_settings, settings_from_mapping
from config.schema import Settings

ROOT = Path(__file__).resolve().parents[2]
MINUTE = timedelta(minutes=1)


def _settings(pools: list[dict[str, Any]]) -> Settings:
    return settings_from_mapping({"demand_classes": [{"name": "a"}], "pools": pools})


def _pool(pool_id: str, kind: str, lead_time: str) -> dict[str, Any]:
    onprem = kind == "on-prem"
    return {
        "id": pool_id,
        "kind": kind,
        "tier": "on-prem" if onprem else "on-demand",
        "chips_per_unit": 8,
        "min_units": 2 if onprem else 0,
        "max_units": 2 if onprem else 8,
        "price_per_chip_hour_usd": 0.0 if onprem else 3.0,
        "lead_time": lead_time,
        "serves": ["a"],
    }


@pytest.mark.parametrize(
    ("pools", "horizon"),
    [
        # a slow on-prem lead time (a rack delivered in two hours) asks for no forecast past the cloud pool's
        ([_pool("rack", "on-prem", "2h"), _pool("cloud", "gpu-node-pool", "10m")], timedelta(minutes=11)),
        ([_pool("rack", "on-prem", "0s"), _pool("cloud", "gpu-node-pool", "10m")], timedelta(minutes=11)),
        # the longest of the pools scaled
        (
            [_pool("cloud", "gpu-node-pool", "10m"), _pool("slow", "gpu-node-pool", "25m")],
            timedelta(minutes=26),
        ),
        # nothing is provisioned: one tick
        ([_pool("rack", "on-prem", "2h")], MINUTE),
    ],
)
def test_the_horizon_covers_the_lead_times_of_the_pools_scaled(pools: list[dict[str, Any]], horizon: timedelta) -> None:
    settings = _settings(pools)
    assert settings.planning_horizon(MINUTE) == horizon


def _helios_hybrid(onprem_lead_time: str) -> Settings:
    """The hybrid reference scenario (16 tenants, an on-prem pool each, spot 15m and on-demand 10m for all),
    forecast by damped-trend smoothing, whose calibration holds out the residuals of the whole horizon."""
    raw = load_settings(ROOT / "config" / "examples" / "helios-hybrid.yaml").model_dump(mode="json")
    raw["forecast"]["model"] = "ets"
    for pool in raw["pools"]:
        if pool["kind"] == "on-prem":
            pool["lead_time"] = onprem_lead_time
    return settings_from_mapping(raw, source="helios-hybrid.yaml")


def test_a_slow_on_prem_lead_time_changes_no_decision() -> None:
    """Six hours of the Helios hybrid scenario with the on-prem pools' lead time at 0s and at 2h. When the horizon
    counted it, the agent forecast 25 steps instead of 4, and the held-out window moved: 3 scale actions instead of
    4 over the same demand."""
    trace = read_trace(ROOT / "data" / "helios-earth" / "demand_5min.csv.gz")
    prompt, slow = _helios_hybrid("0s"), _helios_hybrid("2h")
    start = datetime(2020, 5, 11, 22, 0, tzinfo=UTC)  # 06:00 in the cluster's zone (UTC+8)
    window = select_window(trace, slow.demand_class_models(), start, start + timedelta(hours=6))
    cluster, _ = policy_cluster(slow, window, "forecast")
    agent = policy_agent("forecast", slow, trace, window, cluster, None)
    assert agent.horizon == 4  # spot's 15 minutes and a 5-minute tick, not 2 hours and 5 minutes
    runs = [run_policy(s, trace, window, "forecast") for s in (prompt, slow)]
    assert runs[1].scale_actions == runs[0].scale_actions
    assert runs[1].cost_usd == runs[0].cost_usd
    for pool_id, units in runs[0].paid_units.items():
        np.testing.assert_array_equal(runs[1].paid_units[pool_id], units, err_msg=pool_id)
