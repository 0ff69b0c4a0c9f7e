"""A window that opens inside a gap of the trace: the units every policy starts with are sized on the demand
nearest the start, never on the gap read as no demand. The agent-driven policies hold their pools while demand is
unknown, so a start at zero units stayed at zero through the gap, and the demand that came back waited a lead time
for capacity that a cluster running before the gap had: unserved demand the policies did not cause."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agent.simulation import run_policy, select_window
from agent.simulation.window import initial_units
from agent.sources.trace import read_trace
from config import settings_from_mapping
from config.schema import Settings

STEPS_PER_HOUR = 12
DEMAND = 30.0  # chips: 4 units of 8
GAP = (22 * STEPS_PER_HOUR, 26 * STEPS_PER_HOUR)  # no record from 22:00 on the first day to 02:00 on the second


def _settings() -> Settings:
    raw = {
        "demand_classes": [{"name": "a"}],
        "pools": [{"id": "gpu", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 10,
                   "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["a"]}],
        "forecast": {"history": "1d", "model": "last-value"},
    }  # fmt: skip
    return settings_from_mapping(raw, source="gap.yaml")


def _trace(tmp_path: Path) -> Path:
    stamps = pd.date_range("2024-01-01T00:00:00+00:00", periods=36 * STEPS_PER_HOUR, freq="5min")
    values = np.full(len(stamps), DEMAND)
    values[GAP[0] : GAP[1]] = np.nan
    path = tmp_path / "trace.csv"
    frame = pd.DataFrame({"unique_id": "a", "ds": stamps.strftime("%Y-%m-%dT%H:%M:%S%z"), "y": values})
    frame.to_csv(path, index=False)
    return path


def test_the_start_units_are_sized_on_the_demand_before_the_gap(tmp_path: Path) -> None:
    settings = _settings()
    trace = read_trace(_trace(tmp_path))
    start = pd.Timestamp("2024-01-02T00:00:00+00:00").to_pydatetime()
    window = select_window(trace, settings.demand_class_models(), start, None)
    assert np.isnan(window.demand[: 2 * STEPS_PER_HOUR]).all()  # the window opens two hours into the gap
    assert initial_units(window, settings.pool_specs()) == {"gpu": math.ceil(DEMAND / 8)}


@pytest.mark.parametrize("policy", ["forecast", "reactive"])
def test_demand_coming_back_after_a_gap_at_the_start_finds_the_capacity_it_had(tmp_path: Path, policy: str) -> None:
    settings = _settings()
    trace = read_trace(_trace(tmp_path))
    start = pd.Timestamp("2024-01-02T00:00:00+00:00").to_pydatetime()
    window = select_window(trace, settings.demand_class_models(), start, None)
    run = run_policy(settings, trace, window, policy)
    assert run.demanded_accelerator_hours > 0
    assert run.unserved_accelerator_hours == 0.0
