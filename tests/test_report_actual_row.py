"""The ``actual`` row of a replay, on a hand-made hybrid trace worked out by hand (``_scenario``): each unit a pool
added is billed from its pool's lead time before it was recorded (a policy's unit is billed from its request), it
serves from the
step it was recorded."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from agent.simulation import runner, select_window
from agent.sources.trace import read_trace
from config import settings_from_mapping

START = datetime.fromisoformat("2024-01-01T00:00:00+00:00")
END = datetime.fromisoformat("2024-01-01T06:00:00+00:00")
# Hourly steps of one class; step 4 is a gap (no value: not billed, not served).
DEMAND: list[float | None] = [10, 12, 20, 20, None, 16]
ONPREM = [2, 1, 1, 2, 2, 2]  # 8 chips a node; one node was down at steps 1 and 2
BURST = [0, 0, 1, 1, 0, 1]  # 8 chips a node, 1 h lead time, 8 USD a node-hour


def _scenario(tmp_path: Path) -> tuple[Any, Any]:
    rows = [
        {"unique_id": "a", "ds": f"2024-01-01T{t:02d}:00:00+00:00", "y": y}
        for t, y in enumerate(DEMAND)
        if y is not None
    ]
    path = tmp_path / "trace.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    pools = [
        {
            "id": "onprem",
            "kind": "on-prem",
            "tier": "on-prem",
            "chips_per_unit": 8,
            "min_units": 2,
            "max_units": 2,
            "price_per_chip_hour_usd": 0.0,
            "lead_time": "0s",
            "serves": ["a"],
        },
        {
            "id": "burst",
            "kind": "gpu-node-pool",
            "chips_per_unit": 8,
            "max_units": 4,
            "price_per_unit_hour_usd": 8.0,
            "lead_time": "1h",
            "serves": ["a"],
        },
    ]
    settings = settings_from_mapping({"demand_classes": [{"name": "a"}], "pools": pools}, source="hybrid.yaml")
    window = select_window(read_trace(path), settings.demand_class_models(), START, END)
    return settings, window


def _actual(settings: Any, window: Any) -> Any:
    units = {"onprem": np.array(ONPREM, dtype=float), "burst": np.array(BURST, dtype=float)}
    return runner.run_actual(settings, window, units)


def test_a_unit_added_is_billed_from_its_lead_time_before_it_was_recorded(tmp_path: Path) -> None:
    settings, window = _scenario(tmp_path)
    run = _actual(settings, window)
    # The burst node recorded at step 2 was requested at step 1; the one recorded at step 5 at step 4.
    assert run.paid_units["burst"].tolist() == [0, 1, 1, 1, 1, 1]
    assert run.ready_units["burst"].tolist() == BURST
    # Billed at the steps with data (0, 1, 2, 3, 5): 4 node-hours of 8 USD; step 4 is a gap.
    assert run.cost_usd == pytest.approx(32.0)
    assert run.spend_by_pool_usd["burst"] == pytest.approx(32.0)
    assert run.accelerator_hours == pytest.approx(8 * (2 + 1 + 1 + 2 + 2) + 8 * 4)
    # Served as recorded: step 1 has 8 on-prem chips for 12 (4 wait), step 2 has 16 for 20 (4 wait).
    assert run.unserved_accelerator_hours == pytest.approx(8.0)


@pytest.mark.parametrize(
    ("recorded", "lead", "expected"),
    [
        ([0, 0, 0, 2, 2], timedelta(minutes=10), [0, 2, 2, 0, 0]),  # 10 min of a 5 min step: 2 steps before
        ([1, 3, 3, 3, 3], timedelta(minutes=10), [2, 0, 0, 0, 0]),  # before the window's start: not billed
        ([2, 1, 2, 2, 2], timedelta(minutes=5), [0, 1, 0, 0, 0]),  # a node replaced is a new request
        ([0, 0, 4, 0, 0], timedelta(0), [0, 0, 0, 0, 0]),  # no lead time: nothing to bill before
    ],
)
def test_provisioning_units(recorded: list[int], lead: timedelta, expected: list[int]) -> None:
    got = runner.provisioning_units(np.array(recorded), lead, timedelta(minutes=5))
    assert got.tolist() == expected
