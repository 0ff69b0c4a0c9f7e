"""The calibrated peak quantile: the quantile of the highest demand over the next ``h`` steps, not the highest of
the per-step quantiles, calibrated at past origins without looking past them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from agent.observation import forecasts_from_frame
from forecasting.base import Forecaster
from forecasting.calibrated import CalibratedForecaster, last_value_forecaster
from forecasting.calibration import peak_residuals
from forecasting.paths import LastValuePaths, PathRequest
from forecasting.series import SeriesData
from tests.forecasting.clairvoyant import Clairvoyant
from tests.forecasting.conftest import DAY, STEP, long_frame

LEVELS = (0.5, 0.9)
HORIZON = 6  # 30 minutes at 5-minute steps


def _random_walk(days: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 500.0 + np.cumsum(rng.normal(0.0, 2.0, days * DAY))


def _walk_forward(make: Callable[[], Forecaster], y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """At origins over the last two days, refitted every hour on what came before: the actual peak over the next
    ``HORIZON`` steps, the published q0.9 peak and the highest per-step q0.9 (the old rule)."""
    frame = long_frame({"s": y})
    model = make()
    actual, peaks, per_step = [], [], []
    start = len(y) - 2 * DAY
    for origin in range(start, len(y) - HORIZON, 2):
        if (origin - start) % 12 == 0:
            model.fit(frame.iloc[:origin], STEP)
        out = model.predict(frame.iloc[origin - model.min_history_steps : origin], HORIZON, LEVELS)
        actual.append(y[origin : origin + HORIZON].max())
        peaks.append(out["peak_q0.9"].iloc[-1])
        per_step.append(out["q0.9"].max())
    return np.array(actual), np.array(peaks), np.array(per_step)


def test_peak_residuals_are_the_running_highest_and_a_gap_hides_the_peak() -> None:
    residuals = np.array([[[1.0, 3.0, 2.0, np.nan, 5.0]]])
    np.testing.assert_array_equal(peak_residuals(residuals)[0, 0, :3], [1.0, 3.0, 3.0])
    assert np.isnan(peak_residuals(residuals)[0, 0, 3:]).all()


def test_the_peak_quantile_is_calibrated_on_a_random_walk_where_the_per_step_rule_is_not() -> None:
    actual, peaks, per_step = _walk_forward(last_value_forecaster, _random_walk(5, seed=5))
    assert (peaks >= per_step - 1e-9).all()
    coverage = float(np.mean(actual <= peaks))
    assert 0.84 <= coverage <= 0.97, coverage
    # The highest per-step q0.9 holds at each step, not at all of them at once: it covers the peak less often.
    assert float(np.mean(actual <= per_step)) < coverage - 0.02


def test_a_model_that_sees_the_target_fails_the_peak_coverage() -> None:
    # Calibrated on its own past forecasts, which saw their outcomes, it learns no spread at all; at a live origin
    # (the outcome unknown) its peak is then far too low. Calibration that leaked the future would look like this.
    def peeking() -> CalibratedForecaster:
        return CalibratedForecaster("peek", Clairvoyant, scale_window=None)

    actual, peaks, _ = _walk_forward(peeking, _random_walk(5, seed=5))
    assert float(np.mean(actual <= peaks)) < 0.7


def test_the_agent_reads_the_published_peaks_into_its_forecasts() -> None:
    y = _random_walk(3, seed=2)
    frame = long_frame({"s": y})
    model = last_value_forecaster().fit(frame, STEP)
    out = model.predict(frame.iloc[-model.min_history_steps :], HORIZON, LEVELS)
    now = frame["ds"].iloc[-1].to_pydatetime() + STEP
    forecasts, problems = forecasts_from_frame(out, now, STEP, LEVELS, {"s": float(y[-1])})
    assert problems == {}
    forecast = forecasts["s"]
    assert forecast.peaks[0.9] == tuple(out["peak_q0.9"])
    assert forecast.peak(0.9, 3) == out["peak_q0.9"].iloc[2] > out["q0.9"].iloc[:3].max()


class OneMissPerPath:
    """At past origins, the outcome itself except at one step of one origin in four, missed by 1000 below: every
    step's q0.9 residual is 0, yet a quarter of the origins have a 1000 among the first ``HORIZON`` steps, so
    the q0.9 peak is 1000 above demand (the q0.5 peak is not). At the newest origin: the last value."""

    base_levels: tuple[float, ...] = (0.5,)

    def context_steps(self, step_ns: int) -> int:
        return LastValuePaths().context_steps(step_ns)  # its fallback then sees the same recent window

    def train(self, panel: Mapping[str, SeriesData]) -> dict[str, str]:
        return {}

    def paths(self, requests: Sequence[PathRequest], horizon: int) -> list[np.ndarray]:
        out = []
        for series, origins in requests:
            target = np.clip(origins[:, None] + np.arange(1, horizon + 1)[None, :], 0, len(series.y) - 1)
            path = series.y[target].copy()
            miss = (series.start_ns // series.step_ns + origins) // 2 % (4 * HORIZON)
            rows = np.flatnonzero(miss < HORIZON)
            path[rows, miss[rows]] -= 1000.0
            newest = origins == len(series.y) - 1
            path[newest] = series.y[-1]
            out.append(path[None, :, :])
        return out


def test_a_peak_that_fails_the_guards_falls_back_at_its_own_level_only() -> None:
    y = 20.0 + np.round(5.0 * np.sin(2 * np.pi * np.arange(3 * DAY) / DAY))
    frame = long_frame({"s": y})
    recent = frame.iloc[-100:]

    def model() -> CalibratedForecaster:
        # No tail probe: its q0.999 (a miss of 1000 at one origin in 4 x HORIZON per step) would refuse the row.
        return CalibratedForecaster(
            "miss", OneMissPerPath, scale_window=None, fallback=last_value_forecaster(), tail_probe=None
        )

    out = model().fit(frame, STEP).predict(recent, HORIZON, LEVELS)
    assert set(out["model"]) == {"miss"}
    assert out["note"].str.contains("peak_q0.9: forecast").all()
    fallback = last_value_forecaster().fit(frame, STEP).predict(recent, HORIZON, LEVELS)
    own_median = model().fit(frame, STEP).predict(recent, HORIZON, (0.5,))
    np.testing.assert_array_equal(out["peak_q0.5"], own_median["peak_q0.5"])
    expected = np.maximum.reduce([fallback["peak_q0.9"], out["q0.9"].cummax(), out["peak_q0.5"]])
    np.testing.assert_array_equal(out["peak_q0.9"], expected)
    assert (out["peak_q0.9"] < 3 * y[-1]).all()
