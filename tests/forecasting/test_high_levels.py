"""Service levels above what the residuals can place: a split-conformal offset at level q needs the
``ceil((n + 1) q)``-th of ``n`` residuals, so q0.999 needs 999 of them (two days of five-minute steps hold 576).
Beyond that the offset is extrapolated from the highest residuals, never clipped to the largest, which would be
exceeded about 1 / (n + 1) of the time at every such level."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd

from forecasting.calibration import conformal_offsets
from forecasting.registry import build
from tests.forecasting.conftest import STEP

LEVELS = (0.5, 0.9, 0.99, 0.999)


def test_levels_beyond_the_largest_residual_rise_above_it_in_order() -> None:
    residuals = np.random.default_rng(3).exponential(2.0, size=(1, 72, 3))
    offsets, short = conformal_offsets(residuals, (0.5,), LEVELS, 3)
    assert short == 3
    largest = residuals[0].max(axis=0)
    assert (offsets[2] > largest).all() and (offsets[3] > offsets[2]).all()
    # Within the residuals' reach the split-conformal order statistic is kept exactly.
    assert (offsets[1] == np.sort(residuals[0], axis=0)[int(np.ceil(73 * 0.9)) - 1]).all()


def test_a_young_class_is_covered_at_high_levels_about_as_often_as_asked() -> None:
    """Six hours of history (72 steps): before, q0.99 and q0.999 were both exceeded 3% of the time."""
    rng = np.random.default_rng(0)
    hits = dict.fromkeys(LEVELS, 0)
    trials = 600
    end = pd.Timestamp("2025-03-10T12:00Z")
    for _ in range(trials):
        y = 50.0 + rng.normal(0.0, 3.0, 73)
        history = pd.DataFrame({"unique_id": "young", "ds": pd.date_range(end=end, periods=72, freq=STEP), "y": y[:72]})
        model = build("naive", quantiles=LEVELS, horizon=timedelta(minutes=5))
        model.fit(history, STEP)
        forecast = model.predict(history, 1, LEVELS)
        for q in LEVELS:
            hits[q] += int(y[72] <= float(forecast[f"q{q:g}"].iloc[0]))
    exceeded = {q: 1.0 - hits[q] / trials for q in LEVELS}
    assert exceeded[0.99] <= 0.02
    assert exceeded[0.999] <= 0.006
