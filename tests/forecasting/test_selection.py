"""Selection: ``auto`` picks per series what backtests best on recent history, and falls back rather than loses."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from forecasting.registry import build_calibrated
from forecasting.selection import AutoForecaster
from tests.forecasting.conftest import DAY, STEP, long_frame

LEVELS = (0.5, 0.9)


def _auto(names: tuple[str, ...]) -> AutoForecaster:
    return AutoForecaster([build_calibrated(n, LEVELS) for n in names], quantiles=LEVELS)


def test_a_daily_cycle_goes_to_the_seasonal_model_and_a_random_walk_stays_with_the_last_value() -> None:
    rng = np.random.default_rng(3)
    n = 5 * DAY
    cycle = 100 + 60 * np.sin(2 * np.pi * np.arange(n) / DAY) + rng.normal(0, 0.5, n)
    walk = np.maximum(200 + np.cumsum(rng.normal(0, 2.0, n)), 0)
    history = long_frame({"cycle": cycle, "walk": walk})
    auto = _auto(("naive", "seasonal_naive")).fit(history, STEP)
    assert auto.choice == {"cycle": "seasonal_naive", "walk": "naive"}
    assert auto.scores["cycle"]["seasonal_naive"] < auto.scores["cycle"]["naive"]
    out = auto.predict(history.groupby("unique_id").tail(auto.min_history_steps), 3, LEVELS)
    assert out.set_index("unique_id")["model"].to_dict() == {"cycle": "seasonal_naive", "walk": "naive"}
    assert out["note"].str.startswith("auto: selected").all()
    notes = out.groupby("unique_id")["note"].first()
    scores = auto.scores["cycle"]
    assert notes["cycle"].startswith(f"auto: selected seasonal_naive (score {scores['seasonal_naive']:.4g}")
    assert f"runner-up naive {scores['naive']:.4g}" in notes["cycle"]
    assert "runner-up seasonal_naive" in notes["walk"]


def test_without_enough_history_to_score_the_last_value_runs() -> None:
    history = long_frame({"s": np.linspace(10, 20, 40)})
    auto = _auto(("naive", "ets")).fit(history, STEP)
    assert auto.choice == {"s": "naive"}


def test_a_combination_is_scored_and_forecasts_the_average_of_its_parts() -> None:
    rng = np.random.default_rng(8)
    n = 5 * DAY
    y = 100 + 30 * np.sin(2 * np.pi * np.arange(n) / DAY) + np.cumsum(rng.normal(0, 1.0, n))
    history = long_frame({"s": np.maximum(y, 0)})
    auto = AutoForecaster(
        [build_calibrated(n, LEVELS) for n in ("naive", "seasonal_naive")],
        quantiles=LEVELS,
        combinations=(("seasonal_naive", "naive"),),
    ).fit(history, STEP)
    assert np.isfinite(auto.scores["s"]["seasonal_naive+naive"])
    auto.choice["s"] = "seasonal_naive+naive"
    recent = history.tail(auto.min_history_steps)
    out = auto.predict(recent, 3, LEVELS)
    parts = [auto.candidates[name].predict(recent, 3, LEVELS) for name in ("seasonal_naive", "naive")]
    assert np.allclose(out["q0.9"], (parts[0]["q0.9"] + parts[1]["q0.9"]) / 2)
    assert set(out["model"]) == {"seasonal_naive+naive"}


def test_combinations_must_name_candidates() -> None:
    with pytest.raises(ValueError, match="not candidates"):
        AutoForecaster([build_calibrated("naive", LEVELS)], combinations=(("naive", "lightgbm"),))


def test_between_reselections_a_fit_keeps_the_choice_but_new_series_are_chosen_at_once() -> None:
    rng = np.random.default_rng(3)
    n = 5 * DAY
    cycle = 100 + 60 * np.sin(2 * np.pi * np.arange(n) / DAY) + rng.normal(0, 0.5, n)
    history = long_frame({"cycle": cycle})
    auto = AutoForecaster(
        [build_calibrated(n, LEVELS) for n in ("naive", "seasonal_naive")],
        quantiles=LEVELS,
        reselect_interval=timedelta(days=1),
    ).fit(history.iloc[: 4 * DAY], STEP)
    assert auto.choice == {"cycle": "seasonal_naive"}
    auto.choice["cycle"] = "naive"  # a stale choice: kept until the next reselection is due
    walk = long_frame({"walk": np.maximum(200 + np.cumsum(rng.normal(0, 2.0, n)), 0)})
    auto.fit(pd.concat([history.iloc[: 4 * DAY + 12], walk.iloc[: 4 * DAY + 12]]), STEP)
    assert auto.choice == {"cycle": "naive", "walk": "naive"}
    auto.fit(history, STEP)  # a day later
    assert auto.choice["cycle"] == "seasonal_naive"


def test_a_winner_that_degrades_is_dropped_before_the_next_reselection_and_the_last_value_runs() -> None:
    """A daily cycle that stops halfway: the seasonal model wins on the cycle, then forecasts a cycle that is gone.
    Within hours (not at the next daily reselection) the series goes back to the last value, and says why."""
    rng = np.random.default_rng(5)
    cycle = 100 + 60 * np.sin(2 * np.pi * np.arange(4 * DAY) / DAY) + rng.normal(0, 0.5, 4 * DAY)
    still = cycle[-1] + rng.normal(0, 0.5, DAY)  # from day 4 on, the cycle is gone
    history = long_frame({"s": np.concatenate([cycle, still])})
    auto = AutoForecaster(
        [build_calibrated(n, LEVELS) for n in ("naive", "seasonal_naive")],
        quantiles=LEVELS,
        reselect_interval=timedelta(days=1),
        recent_window=timedelta(hours=6),
    ).fit(history.iloc[: 4 * DAY], STEP)
    assert auto.choice == {"s": "seasonal_naive"}
    hour = 12
    choices = []
    for hours in range(1, 13):
        auto.fit(history.iloc[: 4 * DAY + hours * hour], STEP)
        choices.append(auto.choice["s"])
    assert choices[-1] == "naive"  # half a day after the break; the next reselection is due only at day 5
    assert "seasonal_naive" in choices  # kept until its recent outcomes showed the loss
    assert auto.recent["s"]["seasonal_naive"] > auto.recent["s"]["naive"]
    note = auto.predict(history.iloc[: 4 * DAY + 12 * hour].tail(auto.min_history_steps), 3, LEVELS)["note"].iloc[0]
    assert "seasonal_naive dropped: recent score" in note


def test_a_candidate_that_leads_on_the_folds_but_lost_recently_is_not_chosen() -> None:
    rng = np.random.default_rng(5)
    cycle = 100 + 60 * np.sin(2 * np.pi * np.arange(4 * DAY) / DAY) + rng.normal(0, 0.5, 4 * DAY)
    still = cycle[-1] + rng.normal(0, 0.5, DAY // 12)  # the last two hours
    history = long_frame({"s": np.concatenate([cycle, still])})
    make = [build_calibrated(n, LEVELS) for n in ("naive", "seasonal_naive")]
    auto = AutoForecaster(make, quantiles=LEVELS, recent_window=timedelta(hours=2)).fit(history, STEP)
    assert auto.scores["s"]["seasonal_naive"] < auto.scores["s"]["naive"] * 0.95  # the folds alone would pick it
    assert auto.recent["s"]["seasonal_naive"] > auto.recent["s"]["naive"]
    assert auto.choice == {"s": "naive"}


def test_a_gap_that_fills_half_the_calibration_window_still_leaves_two_folds_to_score() -> None:
    """A day of missing data fills the older half of the held-out window: the folds split the origins whose
    outcomes were observed, so every candidate is still scored (a fold of missing outcomes alone scored nothing,
    and the last value ran for want of evidence)."""
    rng = np.random.default_rng(3)
    n = 5 * DAY
    climb = 100 + 0.5 * np.arange(n) + rng.normal(0, 0.3, n)
    climb[3 * DAY : 4 * DAY] = np.nan
    auto = _auto(("naive", "ets")).fit(long_frame({"climb": climb}), STEP)
    assert all(np.isfinite(score) for score in auto.scores["climb"].values())
    assert "no candidate scored" not in auto.evidence("climb")
