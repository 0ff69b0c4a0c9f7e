"""A retraining fit whose training raises leaves the forecaster as it was: the model trained before still forecasts
every series, with its notes and calibration, instead of an untrained model whose forecasts all go to the fallback
(and a refit within a tick that fails so says, truthfully, that the models fitted before still forecast)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest
from lightgbm.basic import LightGBMError

from agent.model_refits import refit_in_tick
from forecasting.boosting import LightGbmPaths
from forecasting.calibrated import CalibratedForecaster, last_value_forecaster
from tests.forecasting.conftest import DAY, STEP, bursty, long_frame

LEVELS = (0.5, 0.9)
HORIZON = 3


def _forecaster() -> CalibratedForecaster:
    """The global LightGBM model trained on all history, as ``forecast.model: lightgbm`` builds it but small; every
    model made after the first training's (the forecaster makes one when built, and one per training) asks LightGBM
    for a quantile it refuses (1.0), so that training raises in LightGBM."""
    made: list[LightGbmPaths] = []

    def make() -> LightGbmPaths:
        levels = (0.5, 0.9) if len(made) < 2 else (0.5, 1.0)
        made.append(LightGbmPaths(levels, rounds=20, ahead_minutes=(5, 15), min_rows=500))
        return made[-1]

    return CalibratedForecaster("lightgbm", make, fallback=last_value_forecaster(), offset_bases=False, hold_out=False)


def _frame() -> pd.DataFrame:
    return long_frame({uid: bursty(4 * DAY, seed=i + 1, level=30.0 * (i + 1)) for i, uid in enumerate("ab")})


def test_a_retraining_that_raises_keeps_the_model_trained_before() -> None:
    whole = _frame()
    model = _forecaster()
    model.fit(whole[whole["ds"] < whole["ds"].iloc[0] + pd.Timedelta(days=3)], STEP)
    recent = whole  # the same windows before and after, whatever history the forecaster kept
    before = model.predict(recent, HORIZON, LEVELS)
    assert (before["model"] == "lightgbm").all(), before["note"].unique()

    with pytest.raises(LightGBMError):
        model.fit(whole, STEP)  # a day later: due to retrain
    after = model.predict(recent, HORIZON, LEVELS)
    assert (after["model"] == "lightgbm").all(), after["note"].unique()
    assert (after["note"] == "").all()
    np.testing.assert_array_equal(after[["q0.5", "q0.9"]].to_numpy(), before[["q0.5", "q0.9"]].to_numpy())


def test_a_refit_in_a_tick_that_fails_forecasts_with_the_models_fitted_before(caplog: pytest.LogCaptureFixture) -> None:
    whole = _frame()
    model = _forecaster()
    first = whole[whole["ds"] < whole["ds"].iloc[0] + pd.Timedelta(days=3)]
    model.fit(first, STEP)
    fitted_at = first["ds"].max().to_pydatetime()

    def refit(now: datetime) -> None:
        model.fit(whole, STEP)  # a day later: due to retrain

    problems: dict[str, str] = {}
    with caplog.at_level(logging.ERROR, logger="agent.loop"):
        ok = refit_in_tick(refit, datetime(2024, 3, 8, tzinfo=UTC), fitted_at, ["a", "b"], problems)
    assert ok and problems == {}
    assert "forecasting with the models fitted at" in caplog.text
    out = model.predict(whole.groupby("unique_id").tail(model.min_history_steps + 10), HORIZON, LEVELS)
    assert (out["model"] == "lightgbm").all(), out["note"].unique()
    assert (out["q0.9"] >= out["q0.5"]).all()
