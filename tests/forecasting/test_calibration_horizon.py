"""Calibration covers the horizon the caller asks for: a band keeps widening past an hour when the lead time does,
and a step past the calibrated ones is reported and answered by the fallback rather than given a stale band."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from config.schema import ForecastSettings
from forecasting.boosting import LightGbmPaths
from forecasting.calibrated import CalibratedForecaster
from forecasting.calibration import conformal_offsets
from forecasting.factory import build_forecaster
from forecasting.registry import build
from forecasting.selection import AutoForecaster
from tests.forecasting.conftest import DAY, STEP, long_frame

LEVELS = (0.5, 0.9)
TWO_HOURS = 24  # steps


def _random_walk() -> np.ndarray:
    rng = np.random.default_rng(1)
    return 200.0 + np.cumsum(rng.normal(0.0, 1.5, 3 * DAY))


@pytest.mark.parametrize("name", ["naive", "ets"])
def test_the_band_keeps_widening_over_a_horizon_of_two_hours(name: str) -> None:
    history = long_frame({"s": _random_walk()})
    model = build(name, quantiles=LEVELS, horizon=timedelta(hours=2)).fit(history, STEP)
    out = model.predict(history, TWO_HOURS, LEVELS)
    assert (out["note"] == "").all()
    band = (out["q0.9"] - out["q0.5"]).to_numpy()
    # a random walk's spread grows with the square root of the steps: about 1.4 times from one hour to two
    assert band[TWO_HOURS - 1] > 1.2 * band[TWO_HOURS // 2 - 1]


def test_asking_past_the_calibrated_steps_is_reported_not_answered_with_the_last_band() -> None:
    history = long_frame({"s": _random_walk()})
    model = build("ets", quantiles=LEVELS).fit(history, STEP)  # calibrated an hour ahead
    out = model.predict(history, TWO_HOURS, LEVELS)
    assert not (out["model"] == "ets").any()
    assert out["note"].str.startswith("ets: calibrated 12 steps ahead, asked for 24").all()


def test_offsets_past_the_residuals_count_as_too_few() -> None:
    residuals = np.random.default_rng(2).normal(size=(1, 100, 12))
    offsets, short = conformal_offsets(residuals, (0.5,), LEVELS, TWO_HOURS)
    assert short == 12
    assert offsets.shape == (len(LEVELS), TWO_HOURS)
    assert conformal_offsets(residuals, (0.5,), LEVELS, 12)[1] == 12


def _calibrated(model: AutoForecaster) -> list[CalibratedForecaster]:
    """Every calibrated forecaster ``auto`` may forecast with, fallbacks included."""
    found = []
    for top in [*model.candidates.values(), *model.forecasters.values()]:
        forecaster: CalibratedForecaster | None = top
        while forecaster is not None:
            found.append(forecaster)
            forecaster = forecaster.fallback
    return found


def test_the_configured_forecaster_is_calibrated_over_the_planning_horizon() -> None:
    settings = ForecastSettings(model="auto")
    longer = build_forecaster(settings, timedelta(hours=2))
    assert isinstance(longer, AutoForecaster)
    assert {f.calibration_horizon for f in _calibrated(longer)} == {timedelta(hours=2)}
    # what candidates are judged on, and the held-out booster ladder, stay at an hour
    assert longer.selection_horizon == timedelta(hours=1)
    boosters = longer.candidates["lightgbm"].model
    assert isinstance(boosters, LightGbmPaths)
    assert boosters.ahead_minutes == (5, 10, 15, 30, 45, 60)
    # a lead time of 55 minutes plus a tick of 5 is calibrated as before
    hour = build_forecaster(settings, timedelta(minutes=60))
    assert isinstance(hour, AutoForecaster)
    assert {f.calibration_horizon for f in _calibrated(hour)} == {timedelta(hours=1)}
