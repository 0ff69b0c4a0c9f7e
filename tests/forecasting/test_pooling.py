"""A global model is judged on every series at once, level by level, and a series it serves worse keeps its own."""

from __future__ import annotations

import numpy as np
import pytest

from forecasting.calibrated import CalibratedForecaster
from forecasting.paths import LastValuePaths
from forecasting.pooling import PooledScore, pooled_scores, serves, won_levels
from forecasting.registry import build_calibrated
from forecasting.selection import AutoForecaster
from tests.forecasting.conftest import DAY, STEP, long_frame

LEVELS = (0.5, 0.9)


def test_pooled_scores_sum_losses_in_demand_units_per_fold_and_level() -> None:
    """By hand: a big series where the model wins and a small one where it loses; the sum weighs them by level."""
    inf = np.inf
    losses = {
        "big": {"m": np.array([[8.0, 4.0], [6.0, 5.0]]), "b": np.array([[10.0, 5.0], [10.0, 5.0]])},
        "small": {"m": np.array([[2.0, 1.0], [2.0, 1.0]]), "b": np.array([[1.0, 0.5], [1.0, 0.5]])},
        "unscored": {"m": np.array([[inf, 1.0], [1.0, 1.0]]), "b": np.array([[1.0, 1.0], [1.0, 1.0]])},
        "no model": {"b": np.array([[50.0, 50.0], [50.0, 50.0]])},
    }
    q5, q9 = pooled_scores(losses, "m", "b", LEVELS)
    assert q5 == PooledScore(0.5, 2, (10.0, 8.0), (11.0, 11.0))  # "unscored" lacks fold 0 at q0.5
    assert q9 == PooledScore(0.9, 3, (6.0, 7.0), (6.5, 6.5))
    assert q5.ratio == pytest.approx(10.0 / 11.0)  # the worse fold
    assert q9.ratio == pytest.approx(7.0 / 6.5)
    assert won_levels([q5, q9]) == (0.5,)  # beats the baseline on both folds at q0.5 only
    assert PooledScore(0.9, 0, (0.0, 0.0), (0.0, 0.0)).ratio == np.inf


def test_a_series_keeps_its_own_choice_where_the_pooled_model_serves_it_clearly_worse() -> None:
    own = {"m": np.array([[2.0, 1.0], [2.0, 3.0]]), "b": np.array([[1.5, 2.0], [1.5, 2.5]])}
    assert not serves(own, "m", "b", 0)  # 4.0 against 3.0
    assert serves(own, "m", "b", 1)  # 4.0 against 4.5
    assert serves(own, "m", "b", 0, tolerance=0.34)  # within a third more
    assert not serves(own, "m", "b", 0, tolerance=0.33)
    assert not serves({"b": own["b"]}, "m", "b", 1)  # the model could not score this series
    assert serves({"m": own["m"]}, "m", "b", 1)  # nor its own choice


def _cycles_and_a_walk(walk_level: float) -> tuple[dict[str, np.ndarray], list[str]]:
    rng = np.random.default_rng(11)
    n = 5 * DAY
    t = np.arange(n)
    series = {f"cycle{i}": 50 + 30 * np.sin(2 * np.pi * (t / DAY + i / 7)) + rng.normal(0, 1.0, n) for i in range(3)}
    series["walk"] = np.maximum(walk_level + np.cumsum(rng.normal(0, walk_level / 2000, n)), 0)
    return series, list(series)


def _pooled_auto() -> AutoForecaster:
    return AutoForecaster(
        [build_calibrated(n, LEVELS) for n in ("naive", "seasonal_naive")], quantiles=LEVELS, pooled=("seasonal_naive",)
    )


def test_a_pooled_model_that_wins_on_all_series_forecasts_those_it_serves_and_the_others_keep_their_own() -> None:
    series, uids = _cycles_and_a_walk(walk_level=100.0)
    history = long_frame(series)
    auto = _pooled_auto().fit(history, STEP)
    assert auto.choice == dict.fromkeys(uids, "naive")  # a pooled model is never a series' own choice
    assert auto.won["seasonal_naive"] == LEVELS
    out = auto.predict(history.groupby("unique_id").tail(auto.min_history_steps), 3, LEVELS)
    models = out.groupby("unique_id")["model"].first().to_dict()
    assert models == {
        "cycle0": "seasonal_naive",
        "cycle1": "seasonal_naive",
        "cycle2": "seasonal_naive",
        "walk": "naive",
    }
    seasonal = auto.candidates["seasonal_naive"].predict(history[history["unique_id"] == "cycle0"], 3, LEVELS)
    assert np.allclose(out[out["unique_id"] == "cycle0"]["q0.9"], seasonal["q0.9"])
    note = out[out["unique_id"] == "cycle0"]["note"].iloc[0]
    evidence = auto.pooled_evidence["seasonal_naive"][1]
    scores = ", ".join(f"{s.ratio:.3f}" for s in auto.pooled_evidence["seasonal_naive"])
    here = auto.scores["cycle0"]["seasonal_naive"]
    clause = f"seasonal_naive at q0.5, q0.9 (pooled scores {scores} of naive's over 4 series; score here {here:.4g})"
    assert clause in note
    assert evidence.ratio < 0.95
    # It scores better on the cycle than the series' own choice, yet is never the choice, so never the runner-up
    assert here < auto.scores["cycle0"]["naive"]
    assert note.startswith(f"auto: selected naive (score {auto.scores['cycle0']['naive']:.4g})")
    assert "runner-up" not in note


def test_a_pooled_model_that_loses_on_the_level_weighted_sum_forecasts_no_series() -> None:
    """The same cycles beside a random walk whose level is a hundred times theirs: summed in demand units the walk
    decides, so the seasonal model loses overall and even the cycles keep the last value."""
    series, _ = _cycles_and_a_walk(walk_level=20_000.0)
    history = long_frame(series)
    auto = _pooled_auto().fit(history, STEP)
    assert auto.won["seasonal_naive"] == ()
    assert all(s.ratio > 1.0 for s in auto.pooled_evidence["seasonal_naive"])
    out = auto.predict(history.groupby("unique_id").tail(auto.min_history_steps), 3, LEVELS)
    assert set(out["model"]) == {"naive"}


def test_levels_from_two_models_do_not_cross() -> None:
    series, _ = _cycles_and_a_walk(walk_level=100.0)
    history = long_frame(series)
    auto = _pooled_auto().fit(history, STEP)
    auto.won["seasonal_naive"] = (0.5,)  # the median from the seasonal model, q0.9 from the last value
    out = auto.predict(history.groupby("unique_id").tail(auto.min_history_steps), 3, LEVELS)
    cycle = out[out["unique_id"] == "cycle0"]
    assert set(cycle["model"]) == {"seasonal_naive (q0.5), naive (q0.9)"}
    assert (cycle["q0.9"] >= cycle["q0.5"]).all()


def test_pooled_models_must_be_candidates_other_than_the_baseline() -> None:
    with pytest.raises(ValueError, match="pooled models"):
        AutoForecaster([build_calibrated("naive", LEVELS)], pooled=("naive",))
    with pytest.raises(ValueError, match="pooled models"):
        AutoForecaster([build_calibrated("naive", LEVELS)], pooled=("lightgbm",))


def test_a_forecaster_named_after_a_candidate_forecasts_in_its_place_on_the_candidates_evidence() -> None:
    """The candidate's held-out residuals choose; its namesake (here a plain last value, to tell them apart)
    forecasts."""
    series, _ = _cycles_and_a_walk(walk_level=100.0)
    history = long_frame(series)
    namesake = CalibratedForecaster("seasonal_naive", LastValuePaths)
    auto = AutoForecaster(
        [build_calibrated(n, LEVELS) for n in ("naive", "seasonal_naive")],
        quantiles=LEVELS,
        pooled=("seasonal_naive",),
        forecasters=[namesake],
    ).fit(history, STEP)
    assert auto.won["seasonal_naive"] == LEVELS  # chosen on the seasonal model's residuals
    recent = history.groupby("unique_id").tail(auto.min_history_steps)
    out = auto.predict(recent, 3, LEVELS)
    cycle = out[out["unique_id"] == "cycle0"]
    assert set(cycle["model"]) == {"seasonal_naive"}
    assert np.allclose(cycle["q0.9"], namesake.predict(recent[recent["unique_id"] == "cycle0"], 3, LEVELS)["q0.9"])
    seasonal = auto.candidates["seasonal_naive"].predict(recent[recent["unique_id"] == "cycle0"], 3, LEVELS)
    assert not np.allclose(cycle["q0.9"], seasonal["q0.9"])


def test_forecasters_must_be_named_after_candidates() -> None:
    with pytest.raises(ValueError, match="named after candidates"):
        AutoForecaster([build_calibrated("naive", LEVELS)], forecasters=[build_calibrated("ets", LEVELS)])
