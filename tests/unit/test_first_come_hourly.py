"""The reactive baseline's kill switch holds a paced budget's hourly cap per clock hour, as the forecast policy's
planner does, so that both policies run under the same caps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from actuators.simulated import SimulatedCluster
from agent.planning.budget import Budget
from agent.simulation import select_window
from agent.simulation.budgets import budget_usage
from agent.simulation.first_come import FirstComeCaps
from agent.simulation.runner import run_policy
from agent.sources.trace import read_trace
from config import settings_from_mapping
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec
from models.clock import SimulatedClock

HOUR = datetime(2024, 1, 10, 6, 0, tzinfo=UTC)
STEP = timedelta(minutes=5)


def spot(units: int) -> PoolSpec:
    return PoolSpec("spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, units, 12.0,
                    timedelta(minutes=10), ("a",))  # fmt: skip


def test_first_come_cuts_to_the_hourly_cap_and_buys_again_when_the_next_hour_opens() -> None:
    pool = spot(10)
    clock = SimulatedClock(HOUR)
    cluster = SimulatedCluster([pool], clock, {"spot": 4})
    caps = FirstComeCaps([Budget("burst", frozenset({"spot"}), monthly_cap_usd=1e6, hourly_cap_usd=6.0)], [pool])
    # 12 USD a unit-hour, 5-minute steps: a unit costs 1 USD a step. 4 units spend 4, then 2 of the 6 are left:
    # the next step keeps 2 units, and the hour's money is gone for the rest of it.
    held = []
    for step in range(13):
        clock.set(HOUR + step * STEP)
        cluster.resize("spot", 4, f"the autoscaler asks again at {step}")
        caps.hold(clock.now(), cluster, STEP / timedelta(hours=1))
        held.append(cluster.paid_units()["spot"])
    # The next hour opens at the 13th step: its money is there again.
    assert held == [4, 2] + [0] * 10 + [4]
    assert cluster.paid_units() == {"spot": 4}


def test_the_reactive_baseline_never_spends_over_a_paced_budgets_hourly_cap(tmp_path: Path) -> None:
    # One day of history at 8 chips, then a 2-hour burst to 80 chips: the reactive autoscaler scales to 10 units
    # (80 USD an hour at 1 USD per chip-hour), twice the hourly cap.
    demand = [8.0] * 288 + [8.0] * 6 + [80.0] * 24 + [8.0] * 12
    stamps = pd.date_range("2024-01-01T00:00:00+00:00", periods=len(demand), freq="5min")
    path = tmp_path / "trace.csv"
    frame = pd.DataFrame({"unique_id": "a", "ds": stamps.strftime("%Y-%m-%dT%H:%M:%S%z"), "y": demand})
    frame.to_csv(path, index=False)
    budget = {"name": "burst", "pools": ["gpu"], "monthly_cap_usd": 100000, "hourly_cap_usd": 40, "pacing": "forecast"}
    raw = {
        "demand_classes": [{"name": "a", "waiting_cost_per_accelerator_hour_usd": 5.0}],
        "pools": [{"id": "gpu", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 50,
                   "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["a"]}],
        "forecast": {"history": "1d", "model": "last-value"},
        "budgets": [budget],
    }  # fmt: skip
    settings = settings_from_mapping(raw, source="hourly.yaml")
    trace = read_trace(path)
    window = select_window(trace, settings.demand_class_models(), stamps[288].to_pydatetime(), None)
    run = run_policy(settings, trace, window, "reactive")
    (usage,) = budget_usage(settings, window, run)
    assert not usage.exceeded
    assert (usage.hour_spend <= 40.0 + 1e-6).all()
    # The cap binds: the burst spends all of an hour's money, first-come, and leaves demand waiting.
    assert usage.peak_hour_usd == pytest.approx(40.0)
    assert int(np.max(run.paid_units["gpu"])) > 5
    assert run.unserved_accelerator_hours > 0.0
