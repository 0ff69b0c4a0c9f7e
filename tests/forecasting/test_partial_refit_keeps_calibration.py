"""A retraining fit given only some of the series (the history of the others was not read at that fit) retrains the
model on those and leaves every other series as it was: the model that trained it, its notes and its calibration
residuals, so its quantiles keep their spread instead of falling to its last value until a fit reads it again."""

from __future__ import annotations

import pandas as pd
import pytest

from forecasting.registry import build
from tests.forecasting.conftest import DAY, STEP, bursty, long_frame

LEVELS = (0.5, 0.9)
HORIZON = 12


def _frame(days: int) -> pd.DataFrame:
    return long_frame({"a": bursty(days * DAY, seed=1), "b": bursty(days * DAY, seed=2, level=60.0)})


def _first_step(out: pd.DataFrame, uid: str) -> pd.Series:
    return out[out["unique_id"] == uid].iloc[0]


@pytest.mark.parametrize("name", ["naive", "ets"])
def test_a_series_missing_from_a_retraining_fit_keeps_its_model_and_calibration(name: str) -> None:
    whole = _frame(4)
    model = build(name)
    model.fit(whole[whole["ds"] < whole["ds"].iloc[0] + pd.Timedelta(days=3)], STEP)
    recent_before = whole[whole["ds"] < whole["ds"].iloc[0] + pd.Timedelta(days=3)].groupby("unique_id").tail(80)
    before = _first_step(model.predict(recent_before, HORIZON, LEVELS), "b")
    assert before["q0.9"] > before["q0.5"], before["note"]

    # A day later the retraining fit reads a's history only.
    model.fit(whole[whole["unique_id"] == "a"], STEP)
    recent = whole.groupby("unique_id").tail(80)
    after = model.predict(recent, HORIZON, LEVELS)
    b = _first_step(after, "b")
    assert b["model"] == before["model"] == name, b["note"]
    assert b["note"] == before["note"]
    assert b["q0.9"] > b["q0.5"], "b's q0.9 fell to its median: its calibration was dropped"
    a = _first_step(after, "a")
    assert a["model"] == name and a["q0.9"] > a["q0.5"], a["note"]

    # The next (hourly) fit reads both again; b is brought up to date under the model that trained it.
    model.fit(whole, STEP)
    again = _first_step(model.predict(recent, HORIZON, LEVELS), "b")
    assert again["model"] == name and again["q0.9"] > again["q0.5"], again["note"]
