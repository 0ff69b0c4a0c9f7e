"""A series missing from the fits keeps its model and calibration for at most ``keep_unread_for``, then is forgotten.

A retraining fit not given a series (its history was not read) leaves it the model that trained it before, its
notes and its residuals. Nothing ended that: a series no fit read for a week was still forecast by the model and
calibration of its last fit, and nothing said how old they were. The forecaster now notes, per series, the end of
the history of the newest fit given it (``read_through``), and forgets a series no fit has been given for longer
than ``keep_unread_for`` (``forecast.history`` in the agent): its forecast then says since when it was not read,
and a fit that reads it calibrates it again.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from config.schema import ForecastSettings
from forecasting.factory import build_forecaster, stand_in_forecaster
from forecasting.registry import build
from forecasting.selection import AutoForecaster
from tests.forecasting.conftest import DAY, START, STEP, bursty, long_frame

LEVELS = (0.5, 0.9)
HORIZON = 12
KEEP = timedelta(days=2)


def _frame(days: int) -> pd.DataFrame:
    return long_frame({"a": bursty(days * DAY, seed=1), "b": bursty(days * DAY, seed=2, level=60.0)})


def _until(frame: pd.DataFrame, days: int, only: str | None = None) -> pd.DataFrame:
    cut = frame[frame["ds"] < START + pd.Timedelta(days=days)]
    return cut if only is None else cut[cut["unique_id"] == only]


def _first_step(out: pd.DataFrame, uid: str) -> pd.Series:
    return out[out["unique_id"] == uid].iloc[0]


def _end_of_day(days: int) -> datetime:
    """The newest step of a history of ``days`` days: the end a fit on it is noted at."""
    return (START + pd.Timedelta(days=days) - STEP).to_pydatetime().astimezone(UTC)


@pytest.mark.parametrize("name", ["naive", "ets", "auto"])
def test_a_series_unread_longer_than_the_bound_is_forgotten_and_calibrated_again_once_read(name: str) -> None:
    whole = _frame(8)
    model = build(name, lookback=KEEP)
    model.fit(_until(whole, 3), STEP)  # both read
    read_at = _end_of_day(3)
    assert model.read_through() == {"a": read_at, "b": read_at}  # type: ignore[attr-defined]

    # Daily fits given only a: b keeps its model and calibration while its last read is within the bound.
    for day in (4, 5):
        model.fit(_until(whole, day, only="a"), STEP)
        kept = _first_step(model.predict(_until(whole, day).groupby("unique_id").tail(80), HORIZON, LEVELS), "b")
        assert kept["q0.9"] > kept["q0.5"], kept["note"]
        assert "not been read" not in kept["note"]
        assert model.read_through() == {"a": _end_of_day(day), "b": read_at}  # type: ignore[attr-defined]

    # Past it (b last read 3 days before this fit's end, the bound is 2): b is forgotten.
    model.fit(_until(whole, 6, only="a"), STEP)
    recent = _until(whole, 6).groupby("unique_id").tail(80)
    gone = _first_step(model.predict(recent, HORIZON, LEVELS), "b")
    assert f"not been read by a fit since {read_at:%Y-%m-%d %H:%M} UTC" in gone["note"], gone["note"]
    assert gone["q0.9"] == gone["q0.5"], "b is forecast as a new series (its last value) until a fit reads it"
    assert model.read_through() == {"a": _end_of_day(6)}  # type: ignore[attr-defined]

    # A fit that reads b again calibrates it anew (the next retraining trains on it).
    model.fit(_until(whole, 8), STEP)
    back = _first_step(model.predict(_until(whole, 8).groupby("unique_id").tail(80), HORIZON, LEVELS), "b")
    assert back["q0.9"] > back["q0.5"], back["note"]
    assert "not been read" not in back["note"]
    assert model.read_through() == {"a": _end_of_day(8), "b": _end_of_day(8)}  # type: ignore[attr-defined]


def test_the_configured_history_bounds_what_the_agents_forecasters_keep() -> None:
    settings = ForecastSettings(history=timedelta(days=3))
    auto = build_forecaster(settings)
    assert isinstance(auto, AutoForecaster)
    stand_in = stand_in_forecaster(settings)
    assert stand_in is not None
    for made in (auto, *auto.candidates.values(), *auto.forecasters.values(), stand_in):
        assert made.keep_unread_for == timedelta(days=3)  # type: ignore[attr-defined]
