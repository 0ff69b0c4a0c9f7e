"""A series that has only just appeared: calibrated from every origin of its short history, so it gets a band
after MIN_RESIDUALS steps past its first hour rather than twice that; until then the note says how much more
history it takes."""

from __future__ import annotations

import numpy as np
import pytest

from forecasting.calibration import MIN_RESIDUALS
from forecasting.registry import build
from tests.forecasting.conftest import DAY, STEP, long_frame

LEVELS = (0.5, 0.95)
HORIZON = 12  # an hour, the calibration horizon


def _ramp(steps: int) -> np.ndarray:
    rng = np.random.default_rng(5)
    return np.round(np.linspace(2.0, 40.0, steps) + rng.normal(0.0, 3.0, steps))


def test_a_series_with_three_hours_of_history_has_a_band() -> None:
    rng = np.random.default_rng(6)
    old = np.round(30.0 + rng.normal(0.0, 3.0, 3 * DAY))
    young = np.concatenate((np.full(3 * DAY - 36, np.nan), _ramp(36)))  # MIN_RESIDUALS origins an hour ahead each
    history = long_frame({"old": old, "young": young}).dropna()
    out = build("naive", quantiles=LEVELS).fit(history, STEP).predict(history, HORIZON, LEVELS)
    mine = out[out["unique_id"] == "young"]
    assert set(mine["model"]) == {"naive"}
    assert (mine["note"] == "").all()
    assert (mine["q0.95"] > mine["q0.5"]).all()


@pytest.mark.parametrize(("steps", "note"), [(30, "18 of the 24 residuals needed 1 steps ahead"), (12, "it takes")])
def test_a_series_too_young_to_calibrate_says_how_much_more_history_it_takes(steps: int, note: str) -> None:
    history = long_frame({"young": _ramp(steps)})
    out = build("naive", quantiles=LEVELS).fit(history, STEP).predict(history, HORIZON, LEVELS)
    assert set(out["model"]) == {"persistence"}
    more = (MIN_RESIDUALS - (steps - HORIZON)) * STEP if steps > HORIZON else (MIN_RESIDUALS + HORIZON) * STEP
    assert out["note"].str.contains(note).all()
    assert out["note"].str.contains(str(more)).all()
