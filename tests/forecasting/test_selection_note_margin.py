"""The selection note explains a runner-up that scores better than the choice: the margin it did not clear."""

from __future__ import annotations

import numpy as np

from forecasting.registry import build_calibrated
from forecasting.selection import AutoForecaster
from tests.forecasting.conftest import DAY, STEP, long_frame

LEVELS = (0.5, 0.9)


def test_a_better_scored_runner_up_that_missed_the_margin_is_said_to_have_missed_it() -> None:
    rng = np.random.default_rng(3)
    n = 5 * DAY
    cycle = 100 + 60 * np.sin(2 * np.pi * np.arange(n) / DAY) + rng.normal(0, 0.5, n)
    # A margin no model clears: the seasonal model scores lower on the cycle, yet the last value runs.
    auto = AutoForecaster(
        [build_calibrated(name, LEVELS) for name in ("naive", "seasonal_naive")], quantiles=LEVELS, margin=0.99
    ).fit(long_frame({"cycle": cycle}), STEP)
    scores = auto.scores["cycle"]
    assert auto.choice == {"cycle": "naive"}
    assert scores["seasonal_naive"] < scores["naive"]
    note = auto.evidence("cycle")
    assert note.startswith(f"selected naive (score {scores['naive']:.4g}, runner-up seasonal_naive")
    assert "lower, but not by the 99% margin a model needs to replace naive" in note
    assert f"(below {scores['naive'] * 0.01:.4g})" in note


def test_a_runner_up_that_scores_worse_than_the_choice_carries_no_margin_clause() -> None:
    rng = np.random.default_rng(3)
    n = 5 * DAY
    cycle = 100 + 60 * np.sin(2 * np.pi * np.arange(n) / DAY) + rng.normal(0, 0.5, n)
    auto = AutoForecaster(
        [build_calibrated(name, LEVELS) for name in ("naive", "seasonal_naive")], quantiles=LEVELS
    ).fit(long_frame({"cycle": cycle}), STEP)
    assert auto.choice == {"cycle": "seasonal_naive"}
    note = auto.evidence("cycle")
    assert f"runner-up naive {auto.scores['cycle']['naive']:.4g})" in note
    assert "margin" not in note
