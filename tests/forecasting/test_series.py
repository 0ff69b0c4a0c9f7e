"""Turning long frames into per-series grids, and laying recent data over kept history."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from forecasting.series import SeriesData, merge, to_panel
from models import ForecastError
from tests.forecasting.conftest import START, STEP, long_frame

STEP_NS = 300 * 10**9


def test_missing_timestamps_become_nan_not_zero() -> None:
    frame = long_frame({"a": np.array([1.0, 2.0, 3.0, 4.0])}).drop(index=[1, 2])
    panel = to_panel(frame, STEP)
    assert np.isnan(panel["a"].y[1])
    assert np.isnan(panel["a"].y[2])
    assert panel["a"].y[[0, 3]].tolist() == [1.0, 4.0]


def test_series_are_split_and_sorted_whatever_the_row_order() -> None:
    frame = long_frame({"b": np.arange(5.0), "a": np.arange(3.0) + 10}).sample(frac=1.0, random_state=3)
    panel = to_panel(frame, STEP)
    assert sorted(panel) == ["a", "b"]
    assert panel["b"].y.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert panel["a"].start_ns == START.value


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (pd.DataFrame({"unique_id": ["a"], "y": [1.0]}), "lacks column"),
        (pd.DataFrame({"unique_id": ["a"], "ds": [pd.Timestamp("2024-01-01")], "y": [1.0]}), "tz-aware"),
    ],
)
def test_bad_frames_raise_forecast_error(frame: pd.DataFrame, message: str) -> None:
    with pytest.raises(ForecastError, match=message):
        to_panel(frame, STEP)


def test_zero_step_is_refused() -> None:
    with pytest.raises(ForecastError, match="positive"):
        to_panel(long_frame({"a": np.ones(3)}), timedelta(0))


def test_merge_overlays_recent_on_kept_history_without_erasing_by_nan() -> None:
    older = SeriesData("a", 0, STEP_NS, np.array([1.0, 2.0, 3.0, 4.0]))
    newer = SeriesData("a", 2 * STEP_NS, STEP_NS, np.array([30.0, np.nan, 50.0]))
    merged = merge(older, newer, keep=10)
    assert merged.start_ns == 0
    assert merged.y.tolist() == [1.0, 2.0, 30.0, 4.0, 50.0]


def test_merge_keeps_only_the_newest_steps_and_leaves_holes_as_nan() -> None:
    older = SeriesData("a", 0, STEP_NS, np.array([1.0, 2.0]))
    newer = SeriesData("a", 5 * STEP_NS, STEP_NS, np.array([9.0]))
    merged = merge(older, newer, keep=5)
    assert merged.end_ns == 5 * STEP_NS
    assert len(merged.y) == 5
    assert np.isnan(merged.y[:4]).tolist() == [False, True, True, True]
    assert merged.y[-1] == 9.0
