"""Every forecaster: the output contract, and the awkward inputs real demand data brings."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from forecasting.base import Forecaster
from forecasting.registry import build
from tests.forecasting.conftest import DAY, STEP, bursty, long_frame

LEVELS = (0.5, 0.9, 0.95)
MODELS = ("naive", "persistence", "last-value", "seasonal_naive", "ets", "stl", "lightgbm", "auto")


def _fitted(name: str, history: pd.DataFrame) -> Forecaster:
    return build(name, quantiles=LEVELS).fit(history, STEP)


def _recent(history: pd.DataFrame, model: Forecaster) -> pd.DataFrame:
    return history.groupby("unique_id").tail(model.min_history_steps)


@pytest.mark.parametrize("name", MODELS)
def test_output_has_one_row_per_series_and_step_with_ordered_nonnegative_quantiles(
    name: str, make_history: Callable[..., pd.DataFrame]
) -> None:
    history = make_history(days=4)
    model = _fitted(name, history)
    out = model.predict(_recent(history, model), 6, LEVELS)
    assert list(out.columns)[:7] == ["unique_id", "ds", "model", "note", "q0.5", "q0.9", "q0.95"]
    assert list(out.columns)[7:] in ([], ["peak_q0.5", "peak_q0.9", "peak_q0.95"])
    assert len(out) == 3 * 6
    last = history["ds"].max()
    assert out.groupby("unique_id")["ds"].min().eq(last + STEP).all()
    assert out.groupby("unique_id")["ds"].max().eq(last + 6 * STEP).all()
    values = out[["q0.5", "q0.9", "q0.95"]].to_numpy()
    assert np.isfinite(values).all()
    assert (values >= 0).all()
    assert (np.diff(values, axis=1) >= -1e-9).all()
    if "peak_q0.9" in out:  # the peak over steps 1..h: rising with h, never below the per-step quantiles
        for _, rows in out.groupby("unique_id"):
            peaks = rows[["peak_q0.5", "peak_q0.9", "peak_q0.95"]].to_numpy()
            per_step = np.maximum.accumulate(rows[["q0.5", "q0.9", "q0.95"]].to_numpy(), axis=0)
            assert (peaks >= per_step - 1e-9).all()
            assert (np.diff(peaks, axis=0) >= -1e-9).all()
            assert (np.diff(peaks, axis=1) >= -1e-9).all()


@pytest.mark.parametrize("name", MODELS)
def test_calibrated_upper_quantile_covers_about_as_asked(name: str) -> None:
    # A noisy level the models can only learn the spread of; refitted hourly as the loop does, and scored on
    # the two days after the first four.
    rng = np.random.default_rng(11)
    n = 6 * DAY
    y = np.maximum(50 + np.cumsum(rng.normal(0, 0.3, n)) + rng.normal(0, 3.0, n), 0)
    frame = long_frame({"s": y})
    model = build(name, quantiles=LEVELS)
    hits = []
    for origin in range(4 * DAY, 6 * DAY - 3, 12):
        model.fit(frame.iloc[:origin], STEP)
        out = model.predict(frame.iloc[max(0, origin - model.min_history_steps) : origin], 3, LEVELS)
        hits.append(y[origin + 2] <= out["q0.9"].iloc[2])
    if name == "persistence":
        assert np.mean(hits) < 0.7  # no spread by design: the reason the others calibrate
    else:
        assert 0.8 <= np.mean(hits) <= 0.98


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize(
    "case",
    ["short history", "nan run", "constant", "step change", "all nan recent", "zeros"],
)
def test_awkward_series_never_raise(name: str, case: str) -> None:
    n = 3 * DAY
    y = bursty(n, seed=5)
    other = bursty(n, seed=6, level=80)
    if case == "short history":
        y, other = y[:10], other[:10]
    elif case == "nan run":
        y[n - 200 : n - 20] = np.nan
    elif case == "constant":
        y[:] = 7.0
    elif case == "step change":
        y[n // 2 :] += 60.0
    elif case == "zeros":
        y[:] = 0.0
    history = long_frame({"s": y, "t": other})
    model = _fitted(name, history)
    recent = _recent(history, model).copy()
    if case == "all nan recent":
        recent.loc[recent["unique_id"] == "s", "y"] = np.nan
    out = model.predict(recent, 4, LEVELS)
    assert set(out["unique_id"]) == {"s", "t"}
    rows = out[out["unique_id"] == "s"]
    values = rows[["q0.5", "q0.9", "q0.95"]].to_numpy()
    if case == "all nan recent" and name in ("persistence", "last-value"):
        assert np.isnan(values).all()
    elif case == "all nan recent":
        # the recent window is empty but kept history is younger than the staleness limit
        assert np.isfinite(values).all() or rows["note"].str.len().gt(0).all()
    else:
        assert np.isfinite(values).all()
        assert (values >= 0).all()
    if case == "constant":
        assert np.allclose(values, 7.0, atol=0.5)


@pytest.mark.parametrize("name", MODELS)
def test_series_that_appears_after_fit_is_forecast_and_one_that_disappears_is_not(
    name: str, make_history: Callable[..., pd.DataFrame]
) -> None:
    history = make_history(days=3, names=("a", "b"))
    model = _fitted(name, history)
    recent = _recent(history, model)
    newcomer = long_frame(
        {"new": np.full(len(recent) // 2, 12.0)}, start=history["ds"].max() - STEP * (len(recent) // 2 - 1)
    )
    recent = pd.concat([recent[recent["unique_id"] == "a"], newcomer], ignore_index=True)
    out = model.predict(recent, 3, LEVELS)
    assert set(out["unique_id"]) == {"a", "new"}
    fresh = out[out["unique_id"] == "new"]
    assert np.allclose(fresh["q0.5"], 12.0)


def test_a_model_that_did_not_fit_says_which_model_ran_and_why() -> None:
    history = long_frame({"s": bursty(3 * DAY, seed=2)})
    model = build("stl", quantiles=LEVELS).fit(history.iloc[: DAY + 50], STEP)  # too short for a daily season
    out = model.predict(history.iloc[: DAY + 50].tail(model.min_history_steps), 3, LEVELS)
    assert set(out["model"]) == {"naive"}
    assert out["note"].str.contains("stl: STL fit failed").all()


def test_empty_recent_frame_gives_an_empty_forecast() -> None:
    history = long_frame({"s": bursty(3 * DAY, seed=2)})
    for name in MODELS:
        model = _fitted(name, history)
        out = model.predict(history.iloc[:0], 3, LEVELS)
        assert out.empty
        assert "q0.9" in out.columns
