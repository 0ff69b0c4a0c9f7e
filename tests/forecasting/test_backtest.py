"""The backtest engine: no look-ahead, the scores it reports, and the same points for every model."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from datetime import timedelta
from typing import Self

import numpy as np
import pandas as pd
import pytest

from forecasting.backtest import BacktestResult, BacktestSpec, Grid, ModelScores, TraceSummary, run_backtest
from forecasting.base import Forecaster
from forecasting.last_value import PersistenceForecaster
from forecasting.output import forecast_frame
from forecasting.series import step_ns, to_panel
from models import ForecastError
from tests.forecasting.conftest import START, STEP

HORIZONS = (("5m", timedelta(minutes=5)), ("10m", timedelta(minutes=10)))


def _grid(values: np.ndarray) -> Grid:
    index = pd.date_range(START, periods=values.shape[0], freq=STEP)
    return Grid(index, tuple(f"s{i}" for i in range(values.shape[1])), values, STEP)


def _spec(
    grid: Grid, first: int, last: int, quantiles: tuple[tuple[str, float], ...] = (("0.9", 0.9),)
) -> BacktestSpec:
    return BacktestSpec(
        start=grid.index[first], end=grid.index[last], horizons=HORIZONS, quantiles=quantiles, origin_every=STEP
    )


class PeekingForecaster:
    """Records the newest timestamp it was shown, and forecasts a constant."""

    name = "peek"

    def __init__(self, value: float = 1.0) -> None:
        self.value = value
        self.seen: list[pd.Timestamp] = []

    @property
    def min_history_steps(self) -> int:
        return 2

    def fit(self, history: pd.DataFrame, step: timedelta) -> Self:
        self.seen.append(history["ds"].max())
        return self

    def predict(self, recent: pd.DataFrame, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        self.seen.append(recent["ds"].max())
        panel = to_panel(recent, STEP)
        uids = sorted(panel)
        values = np.full((len(uids), len(quantiles), horizon), self.value)
        ends = [panel[u].end_ns for u in uids]
        return forecast_frame(uids, ends, step_ns(STEP), values, ["peek"] * len(uids), [""] * len(uids), quantiles)


def test_models_never_see_the_origin_or_later() -> None:
    grid = _grid(np.arange(40, dtype=float)[:, None])
    peek = PeekingForecaster()
    run_backtest(grid, {"peek": lambda: peek}, _spec(grid, 20, 30))
    origins = grid.index[20:30]
    fits, predicts = peek.seen[0::2], peek.seen[1::2]
    assert all(seen < origin for seen, origin in zip(fits, origins, strict=True))
    assert all(seen == origin - STEP for seen, origin in zip(predicts, origins, strict=True))


def test_scores_of_a_known_forecast() -> None:
    # y rises by one per step: persistence misses by h at h steps ahead; the one-step naive error is 1.
    grid = _grid(np.arange(1, 41, dtype=float)[:, None])
    result = run_backtest(
        grid,
        {"naive": PersistenceForecaster},
        _spec(grid, 20, 30, (("0.5", 0.5), ("0.9", 0.9))),
        families={"naive": "baseline"},
    )
    scores = result["models"]["naive"]
    assert scores["family"] == "baseline"
    assert scores["mase"] == pytest.approx({"5m": 1.0, "10m": 2.0})
    mean_level = np.mean(np.arange(21, 31))
    assert scores["pinball"]["0.9"]["5m"] == pytest.approx(0.9 * 1.0 / mean_level)
    assert scores["pinball"]["0.5"]["10m"] == pytest.approx(0.5 * 2.0 / mean_level)
    assert scores["coverage"]["0.9"] == 0.0
    assert scores["fit_seconds"] >= 0
    assert scores["predict_seconds"] >= 0
    assert set(result["series"]["s0"]["naive"]) >= {"pinball_0.9_5m", "coverage_0.9"}


def test_the_result_holds_the_keys_of_its_type_in_their_order() -> None:
    # The order is the order of the JSON ``leadtime backtest`` writes; ``path`` and ``attribution`` are the command's
    # to add.
    grid = _grid(np.arange(1, 41, dtype=float)[:, None])
    result = run_backtest(grid, {"naive": PersistenceForecaster}, _spec(grid, 20, 30))
    assert list(result) == list(BacktestResult.__annotations__)
    assert list(result["trace"]) == [key for key in TraceSummary.__annotations__ if key not in ("path", "attribution")]
    assert list(result["models"]["naive"]) == list(ModelScores.__annotations__)


def test_level_weighted_loss_and_median_ratio_by_hand() -> None:
    # Three series rising by 1, 2 and 3 per step; origins 20..29, so the 5m outcomes are y[20..29].
    t = np.arange(40, dtype=float)
    grid = _grid(np.stack([t + 1, 100 + 2 * t, 50 + 3 * t], axis=1))
    result = run_backtest(
        grid,
        {"naive": PersistenceForecaster, "flat": lambda: PeekingForecaster(100.0)},
        _spec(grid, 20, 30),
    )
    naive, flat = result["models"]["naive"], result["models"]["flat"]
    # Mean levels over the window: 25.5, 149, 123.5 (sum 298).
    # naive misses by 1, 2, 3 below the outcome: q0.9 pinball 0.9, 1.8, 2.7.
    assert naive["pinball_weighted"]["0.9"]["5m"] == pytest.approx((0.9 + 1.8 + 2.7) / 298)
    # At 10m it misses by twice as much.
    assert naive["pinball_weighted"]["0.9"]["10m"] == pytest.approx((1.8 + 3.6 + 5.4) / 298)
    # flat = 100: above s0 by 74.5 on average (0.1 x 74.5 = 7.45), below s1 by 49 (0.9 x 49 = 44.1), below s2 by
    # 23.5 (0.9 x 23.5 = 21.15); every outcome is on the same side of 100 throughout, so means are exact.
    assert flat["pinball_weighted"]["0.9"]["5m"] == pytest.approx((7.45 + 44.1 + 21.15) / 298)
    # Per-series ratios to naive: 7.45/0.9 = 8.28, 44.1/1.8 = 24.5, 21.15/2.7 = 7.83: the median is 8.28.
    assert flat["ratio_median"] is not None and naive["ratio_median"] is not None  # the baseline ran
    assert flat["ratio_median"]["0.9"]["5m"] == pytest.approx(7.45 / 0.9)
    assert naive["ratio_median"]["0.9"]["5m"] == pytest.approx(1.0)
    # The per-series mean weighs every series alike, whatever its size: not the weighted figure.
    assert naive["pinball"]["0.9"]["5m"] == pytest.approx((0.9 / 25.5 + 1.8 / 149 + 2.7 / 123.5) / 3)


def test_no_median_ratio_without_the_baseline() -> None:
    grid = _grid(np.arange(1, 41, dtype=float)[:, None])
    result = run_backtest(grid, {"flat": lambda: PeekingForecaster(100.0)}, _spec(grid, 20, 30))
    assert result["models"]["flat"]["ratio_median"] is None


def test_every_model_is_scored_on_the_same_points() -> None:
    values = np.arange(1, 41, dtype=float)[:, None]
    grid = _grid(values)

    class Declining(PeekingForecaster):
        def predict(self, recent: pd.DataFrame, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
            out = super().predict(recent, horizon, quantiles)
            if recent["ds"].max() >= grid.index[25]:
                out[[c for c in out.columns if c.startswith("q")]] = np.nan
            return out

    result = run_backtest(grid, {"a": PeekingForecaster, "b": Declining}, _spec(grid, 20, 30))
    a, b = result["models"]["a"], result["models"]["b"]
    assert a["pinball"] == b["pinball"]  # same constant forecast, scored where both answered


def test_no_origin_in_the_window_is_an_error() -> None:
    grid = _grid(np.ones((10, 1)))
    spec = BacktestSpec(grid.index[-1] + STEP * 5, grid.index[-1] + STEP * 9, HORIZONS, (("0.9", 0.9),))
    models: dict[str, type[Forecaster]] = {"naive": PersistenceForecaster}
    with pytest.raises(ForecastError, match="no origin"):
        run_backtest(grid, models, spec)


def test_a_horizon_that_is_not_a_whole_number_of_steps_is_an_error() -> None:
    grid = _grid(np.ones((10, 1)))
    spec = BacktestSpec(grid.index[2], grid.index[5], (("7m", timedelta(minutes=7)),), (("0.9", 0.9),))
    with pytest.raises(ForecastError, match="whole number"):
        run_backtest(grid, {"naive": PersistenceForecaster}, spec)


def test_a_series_with_no_value_in_the_window_is_scored_nan_without_a_warning() -> None:
    # s1 stops recording before the window (a model retired from serving): no level, so no score, and the
    # other series' scores are as they would be alone.
    t = np.arange(40, dtype=float)
    retired = np.where(t < 15, 5.0, np.nan)
    grid = _grid(np.stack([t + 1, retired], axis=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = run_backtest(grid, {"naive": PersistenceForecaster}, _spec(grid, 20, 30))
    assert np.isnan(result["series"]["s1"]["naive"]["pinball_0.9_5m"])
    alone = run_backtest(_grid(grid.values[:, :1]), {"naive": PersistenceForecaster}, _spec(grid, 20, 30))
    assert result["series"]["s0"] == alone["series"]["s0"]
