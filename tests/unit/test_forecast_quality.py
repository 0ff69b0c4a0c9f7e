"""The recommend backtest's coverage figures, on a forecaster whose answers are known: the per-step coverage of the
service level's quantile, and the coverage of the peak the planner provisions (the highest actual over the peak
steps against the published peak quantile at the last of them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Self

import pandas as pd
import pytest

from agent.forecast_quality import backtest
from forecasting.base import peak_column, quantile_column

STEP = timedelta(minutes=5)
START = datetime(2024, 1, 1, tzinfo=UTC)


class Constant:
    """Forecasts 10 at every step and quantile, with a peak quantile of ``peak`` (or none)."""

    name = "constant"
    min_history_steps = 1

    def __init__(self, peak: float | None) -> None:
        self.peak = peak

    def fit(self, history: pd.DataFrame, step: timedelta) -> Self:
        return self

    def predict(self, recent: pd.DataFrame, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        end = recent["ds"].max()
        frame = pd.DataFrame({"ds": [end + (h + 1) * STEP for h in range(horizon)]})
        frame.insert(0, "unique_id", "a")
        for q in quantiles:
            frame[quantile_column(q)] = 10.0
            if self.peak is not None:
                frame[peak_column(q)] = self.peak
        return frame


def _history(values: Sequence[float]) -> pd.DataFrame:
    return pd.DataFrame({"unique_id": "a", "ds": [START + i * STEP for i in range(len(values))], "y": list(values)})


def test_the_peak_coverage_counts_origins_whose_highest_actual_over_the_peak_steps_stayed_under_the_peak() -> None:
    # 12 steps at 5 then, from the first origin on, hourly blocks: a burst to 14 on the third step of every other hour
    values = [5.0] * 12
    for hour in range(4):
        block = [9.0] * 12
        if hour % 2 == 0:
            block[2] = 14.0
        values += block
    history = _history(values)
    first = START + 12 * STEP
    args = (history, STEP, 3, {"a": 0.9}, first, timedelta(hours=1))
    result = backtest(Constant(peak=12.0), *args, peak_steps={"a": 3})["a"]
    # origins at each hour: the burst at the third step is inside the 3 peak steps of origins 0 and 2
    assert result.origins == 4 and result.peak_steps == 3
    assert result.peak_coverage == pytest.approx(0.5)
    assert result.coverage == pytest.approx(10 / 12)  # per step: 2 of 12 steps above the q0.9 of 10
    # the burst lies beyond 2 peak steps: every planned peak covered it
    assert backtest(Constant(peak=12.0), *args, peak_steps={"a": 2})["a"].peak_coverage == pytest.approx(1.0)
    assert result.summary()["peak_coverage"] == 0.5


def test_no_peak_coverage_without_published_peaks_or_peak_steps() -> None:
    history = _history([5.0] * 48)
    args = (history, STEP, 3, {"a": 0.9}, START + 12 * STEP, timedelta(hours=1))
    assert math.isnan(backtest(Constant(peak=None), *args, peak_steps={"a": 3})["a"].peak_coverage)
    assert math.isnan(backtest(Constant(peak=12.0), *args)["a"].peak_coverage)
    assert backtest(Constant(peak=12.0), *args)["a"].summary()["peak_coverage"] == "n/a"
