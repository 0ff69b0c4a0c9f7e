"""One stray sample (a counter read as a gauge) in the calibration window: calibration takes it as missing, so
neither the per-step quantiles nor the peaks the planner sizes on take it for demand, at any level; a real burst,
even one that has only just begun, stays in the residuals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting.base import peak_column, quantile_column
from forecasting.calibrated import CalibratedForecaster
from forecasting.guards import stray_samples
from forecasting.registry import build
from tests.forecasting.conftest import DAY, STEP, long_frame

LEVELS = (0.5, 0.9, 0.98, 0.995)
HORIZON = 13


def _daily(days: int = 4) -> np.ndarray:
    rng = np.random.default_rng(3)
    t = np.arange(days * DAY)
    return np.maximum(0.0, 20.0 + 5.0 * np.sin(2 * np.pi * t / DAY) + rng.normal(0.0, 1.5, len(t))).round()


def _forecast(y: np.ndarray, levels: tuple[float, ...] = LEVELS) -> pd.DataFrame:
    history = long_frame({"s": y})
    model = build("naive", quantiles=(0.5, 0.9, 0.95), horizon=HORIZON * STEP).fit(history, STEP)
    return model.predict(history, HORIZON, levels)


@pytest.mark.parametrize("ago", [20 * 12, 12 * 12, 30])
def test_one_bad_sample_forecasts_as_if_it_were_missing(ago: int) -> None:
    clean = _daily()
    glitch, missing = clean.copy(), clean.copy()
    glitch[-ago] = 5000.0
    missing[-ago] = np.nan
    assert np.flatnonzero(stray_samples(glitch[-2 * DAY :])).tolist() == [2 * DAY - ago]
    out = _forecast(glitch)
    pd.testing.assert_frame_equal(out, _forecast(missing), check_exact=True)
    last = clean[-1]
    assert set(out["model"]) == {"naive"}
    for level in LEVELS:
        assert (out[peak_column(level)] < 2 * last).all(), level
    # the highest level still has its spread (a band, not the last value repeated)
    assert (out[quantile_column(0.995)] > out[quantile_column(0.5)]).all()


def test_a_real_burst_stays_in_the_residuals() -> None:
    y = _daily()
    y[-10 * 12 : -9 * 12] = 200.0  # ten times the demand, for an hour, ten hours ago
    assert not stray_samples(y[-2 * DAY :]).any()
    model = build("naive", quantiles=(0.5, 0.9), horizon=HORIZON * STEP).fit(long_frame({"s": y}), STEP)
    assert isinstance(model, CalibratedForecaster)
    residuals = model.residuals("s")
    assert residuals is not None
    assert np.nanmax(residuals.values) >= 170.0  # the jump into it, as an outcome


def test_a_burst_first_taken_for_stray_samples_is_calibrated_on_once_it_goes_on() -> None:
    """The first two samples of a burst are all the history shows of it at one fit: they are left out then. At the
    next fit the burst has gone on, and the residuals are those of a model that saw it all at once."""
    y = _daily()
    y[-3:] = 200.0
    frame = long_frame({"s": y})
    model = build("naive", quantiles=(0.5, 0.9), horizon=HORIZON * STEP).fit(frame.iloc[:-1], STEP)
    assert isinstance(model, CalibratedForecaster)
    first = model.residuals("s")
    assert first is not None and np.nanmax(first.values) < 100.0
    model.fit(frame, STEP)
    fresh = build("naive", quantiles=(0.5, 0.9), horizon=HORIZON * STEP).fit(frame, STEP)
    assert isinstance(fresh, CalibratedForecaster)
    after, expected = model.residuals("s"), fresh.residuals("s")
    assert after is not None and expected is not None
    assert np.nanmax(after.values) >= 170.0
    np.testing.assert_array_equal(after.origins_ns, expected.origins_ns)
    np.testing.assert_array_equal(after.values, expected.values)
    np.testing.assert_array_equal(after.scales, expected.scales)
