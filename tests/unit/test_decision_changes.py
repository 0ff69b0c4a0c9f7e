"""Counting where the forecast changed the planner's target against the calibrated last value."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd

from agent.outlook import Outlook
from agent.simulation.decisions import decision_changes
from agent.simulation.window import SimulationWindow
from config import settings_from_mapping
from models import DemandForecast

STEP = timedelta(minutes=5)
INDEX = pd.date_range("2024-01-01", periods=4, freq=STEP, tz="UTC")
SETTINGS = settings_from_mapping(
    {
        "demand_classes": [{"name": "a", "family": "tpu"}],
        "pools": [
            {
                "id": "slices",
                "kind": "tpu-slice-group",
                "family": "tpu",
                "chips_per_unit": 32,
                "max_units": 16,
                "price_per_chip_hour_usd": 1.2,
                "lead_time": "10m",
                "serves": ["a"],
            }
        ],
        "planner": {"service_level": 0.9},
    }
)


def _outlook(peak: float | None) -> Outlook:
    if peak is None:
        return Outlook({}, {}, {"a": "no observed value"})
    now = INDEX[0].to_pydatetime()
    forecast = DemandForecast("a", now, STEP, {0.9: (peak, peak, peak)}, 10.0, "test")
    return Outlook({"a": 10.0}, {"a": forecast}, {})


def test_ticks_where_the_target_in_whole_slices_differs_are_counted_up_and_down() -> None:
    window = SimulationWindow(INDEX, ("a",), np.full((4, 1), 10.0), np.zeros((0, 1)), STEP)
    # Tick 0: 40 vs 60 chips is 2 slices either way (no change); tick 1: 70 vs 60 chips is 3 vs 2 slices (up);
    # tick 2: 20 vs 60 is 1 vs 2 (down); tick 3: the last value has no forecast, so the tick is not compared.
    forecast = [_outlook(40.0), _outlook(70.0), _outlook(20.0), _outlook(50.0)]
    last_value = [_outlook(60.0), _outlook(60.0), _outlook(60.0), _outlook(None)]
    (changes,) = decision_changes(SETTINGS, SETTINGS.planner, window, forecast, last_value).values()
    assert (changes.ticks, changes.up, changes.down) == (3, 1, 1)
    assert changes.summary()["changed_fraction"] == 2 / 3
