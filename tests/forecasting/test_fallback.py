"""Guards and fallback: a model that fails, diverges or talks nonsense is replaced by the calibrated last value."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

import numpy as np
import pytest

from forecasting.calibrated import CalibratedForecaster, last_value_forecaster
from forecasting.guards import check_forecast, history_range
from forecasting.paths import PathRequest
from forecasting.registry import build
from forecasting.series import SeriesData
from tests.forecasting.conftest import DAY, STEP, bursty, long_frame

LEVELS = (0.5, 0.9)


class FakePathModel:
    """Forecasts the last value from past origins (so calibration sees a sane model) and ``value`` from the newest
    origin of a series, as a model that diverges on new data would; or fails its training."""

    base_levels: tuple[float, ...] = (0.5,)

    def __init__(self, value: float, fail_training: bool = False) -> None:
        self.value = value
        self.fail_training = fail_training

    def context_steps(self, step_ns: int) -> int:
        return 12

    def train(self, panel: Mapping[str, SeriesData]) -> dict[str, str]:
        return dict.fromkeys(panel, "fit diverged") if self.fail_training else {}

    def paths(self, requests: Sequence[PathRequest], horizon: int) -> list[np.ndarray]:
        out = []
        for series, origins in requests:
            last = np.nan_to_num(series.y[origins], nan=0.0)
            path = np.repeat(last[None, :, None], horizon, axis=2)
            path[:, origins == len(series.y) - 1, :] = self.value
            out.append(path)
        return out


def _forecaster(value: float, fail_training: bool = False) -> CalibratedForecaster:
    return CalibratedForecaster("fake", lambda: FakePathModel(value, fail_training), fallback=last_value_forecaster())


@pytest.mark.parametrize(
    ("value", "fail", "reason"),
    [
        (np.nan, False, "NaN or infinite"),
        (np.inf, False, "NaN or infinite"),
        (-500.0, False, "far below zero"),
        (1e6, False, "beyond a sane multiple"),
        (30.0, True, "fit diverged"),
    ],
)
def test_bad_forecasts_fall_back_to_the_calibrated_last_value(value: float, fail: bool, reason: str) -> None:
    y = bursty(3 * DAY, seed=4)
    history = long_frame({"s": y})
    model = _forecaster(value, fail).fit(history, STEP)
    out = model.predict(history.tail(36), 3, LEVELS)
    assert set(out["model"]) == {"naive"}
    assert out["note"].str.startswith("fake: ").all()
    assert out["note"].str.contains(reason).all()
    reference = last_value_forecaster().fit(history, STEP).predict(history.tail(36), 3, LEVELS)
    assert np.allclose(out["q0.9"], reference["q0.9"])


def test_a_forecast_below_zero_falls_back_instead_of_being_clipped_to_zero() -> None:
    history = long_frame({"s": bursty(3 * DAY, seed=4) + 20.0})  # ends at 20
    out = _forecaster(-5.0).fit(history, STEP).predict(history.tail(36), 3, LEVELS)
    assert set(out["model"]) == {"naive"}
    assert out["note"].str.contains("fake: forecast -5 at the median or above is below zero").all()
    assert (out["q0.5"] == 20.0).all()


def test_a_sane_forecast_is_kept_and_named_after_its_model() -> None:
    history = long_frame({"s": np.full(3 * DAY, 30.0)})
    out = _forecaster(31.0).fit(history, STEP).predict(history.tail(36), 3, LEVELS)
    assert set(out["model"]) == {"fake"}
    assert (out["note"] == "").all()
    assert np.allclose(out["q0.5"], 31.0)


class BiasedPathModel(FakePathModel):
    def paths(self, requests: Sequence[PathRequest], horizon: int) -> list[np.ndarray]:
        return [np.full((1, len(origins), horizon), self.value) for _, origins in requests]


def test_calibration_removes_a_constant_bias() -> None:
    history = long_frame({"s": np.full(3 * DAY, 30.0)})
    model = CalibratedForecaster("biased", lambda: BiasedPathModel(45.0)).fit(history, STEP)
    out = model.predict(history.tail(36), 3, LEVELS)
    assert np.allclose(out["q0.5"], 30.0)
    assert np.allclose(out["q0.9"], 30.0)


def test_a_model_without_usable_residuals_falls_back() -> None:
    history = long_frame({"s": bursty(3 * DAY, seed=4)})
    model = CalibratedForecaster("nan", lambda: BiasedPathModel(np.nan), fallback=last_value_forecaster())
    out = model.fit(history, STEP).predict(history.tail(36), 3, LEVELS)
    assert set(out["model"]) == {"naive"}
    assert out["note"].str.contains("residuals").all()


def test_forecasts_from_stale_data_are_refused_not_invented() -> None:
    y = bursty(3 * DAY, seed=4)
    y[-80:] = np.nan  # more than six hours without an observation
    history = long_frame({"s": y})
    out = _forecaster(30.0).fit(history, STEP).predict(history.tail(36), 3, LEVELS)
    assert np.isnan(out[["q0.5", "q0.9"]].to_numpy()).all()
    assert out["note"].str.contains("no observation").all()


@pytest.mark.parametrize(
    ("values", "history_range", "ok"),
    [
        (np.array([[1.0, 2.0]]), (0.0, 10.0), True),
        (np.array([[1.0, np.nan]]), (0.0, 10.0), False),
        (np.array([[1.0, 41.0]]), (0.0, 10.0), False),
        (np.array([[1.0, 39.0]]), (0.0, 10.0), True),
        (np.array([[-20.0, 1.0]]), (0.0, 10.0), False),
        (np.array([[5.0, 6.0]]), None, True),
    ],
)
def test_guard_limits(values: np.ndarray, history_range: tuple[float, float] | None, ok: bool) -> None:
    assert (check_forecast(values, history_range) == "") is ok


@pytest.mark.parametrize(
    ("values", "last", "levels", "ok"),
    [
        (np.array([[-1e-9, 2.0]]), 5.0, None, True),  # float noise around zero
        (np.array([[-0.5, 2.0]]), 5.0, None, False),  # a median below zero while demand is not
        (np.array([[-0.5, 2.0]]), 0.0, None, True),  # overshooting a series that reached zero: clipped
        (np.array([[-0.5, -0.2], [1.0, 2.0]]), 5.0, (0.1, 0.5), True),  # a low level may dip below zero
        (np.array([[-0.5, -0.2], [1.0, -0.3]]), 5.0, (0.1, 0.5), False),
    ],
)
def test_guard_refuses_a_median_or_higher_quantile_below_zero(
    values: np.ndarray, last: float, levels: tuple[float, ...] | None, ok: bool
) -> None:
    assert (check_forecast(values, (0.0, 10.0), last, levels) == "") is ok


def test_one_bad_sample_does_not_stretch_the_range_forecasts_are_judged_against() -> None:
    y = np.full(DAY, 20.0)
    y[100] = 5000.0  # a counter read as a gauge
    y[200] = 0.0
    assert history_range(y) == (20.0, 20.0)
    assert "beyond a sane multiple" in check_forecast(np.array([[259.0]]), history_range(y), 20.0)
    # a burst going on now is judged against itself
    assert check_forecast(np.array([[120.0]]), history_range(y), 100.0) == ""


def _daily_with_a_glitch(glitch_ago: int, after_glitch: int) -> np.ndarray:
    rng = np.random.default_rng(4)
    t = np.arange(3 * DAY)
    y = np.maximum(0.0, 20.0 + 8.0 * np.sin(2 * np.pi * t / DAY) + rng.normal(0.0, 2.0, len(t))).round()
    y[-glitch_ago] = 5000.0
    return y[: len(y) - glitch_ago + after_glitch + 1]


@pytest.mark.parametrize(
    ("after", "reason"),
    [(12, "beyond a sane multiple"), (24, "far below zero"), (48, "at the median or above is below zero")],
)
def test_one_bad_sample_sends_smoothing_to_the_calibrated_last_value(after: int, reason: str) -> None:
    """Damped-trend smoothing chases a single bad sample of 5000 on a series at about 20: first far above demand,
    then below zero as its trend turns. Those forecasts are refused, not published (or clipped to zero)."""
    history = long_frame({"s": _daily_with_a_glitch(glitch_ago=60, after_glitch=after)})
    model = build("ets", quantiles=(0.5, 0.9, 0.95), horizon=timedelta(minutes=30)).fit(history, STEP)
    out = model.predict(history, 6, (0.5, 0.9, 0.95))
    assert set(out["model"]) == {"naive"}
    assert out["note"].str.startswith("ets: ").all()
    assert out["note"].str.contains(reason).all()
    last = float(history["y"].iloc[-1])
    assert (out["q0.5"] == last).all()
    assert ((out["q0.95"] > last) & (out["q0.95"] < 3 * last)).all()
    assert (out["peak_q0.95"] < 3 * last).all()
