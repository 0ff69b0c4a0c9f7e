"""statsmodels models: damped-trend exponential smoothing, and STL decomposition with damped trend on the rest.

statsmodels estimates the smoothing parameters (once per training); the paths are then produced by running the
same recursion as a linear filter (``scipy.signal.lfilter``), so forecasting hundreds of origins or one tick costs
microseconds instead of a refit. Fitting a 288-step season by maximum likelihood does not finish on this kind of
machine, so the seasonal model decomposes first (STL, daily period) and smooths the seasonally adjusted series.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from forecasting.paths import DAY_NS, PathRequest, forward_filled
from forecasting.series import SeriesData

FIT_DAYS = 3  # parameters are estimated on the newest days only: enough for three numbers, and cheap
MIN_FIT_STEPS = 24


@dataclass(frozen=True)
class DampedParams:
    alpha: float
    beta: float
    phi: float


def estimate_damped(y: np.ndarray) -> DampedParams:
    """Fit additive damped-trend smoothing to a NaN-free series; raises ``ValueError`` when it cannot."""
    if len(y) < MIN_FIT_STEPS:
        raise ValueError(f"needs at least {MIN_FIT_STEPS} observed steps, has {len(y)}")
    if np.ptp(y) == 0:
        return DampedParams(alpha=1.0, beta=0.0, phi=0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from statsmodels.tsa.holtwinters import ExponentialSmoothing  # slow import, needed at fit only

        fit = ExponentialSmoothing(y, trend="add", damped_trend=True, initialization_method="heuristic").fit()
    params = fit.params
    alpha, beta, phi = (float(params[k]) for k in ("smoothing_level", "smoothing_trend", "damping_trend"))
    if not all(np.isfinite([alpha, beta, phi])):
        raise ValueError("smoothing parameters did not converge")
    return DampedParams(alpha=min(max(alpha, 1e-4), 1.0), beta=min(max(beta, 0.0), 1.0), phi=min(max(phi, 0.0), 0.995))


def damped_states(y: np.ndarray, p: DampedParams) -> tuple[np.ndarray, np.ndarray]:
    """Level and trend after each step of ``y`` (NaN carried forward), started flat at the first value."""
    filled = forward_filled(y)
    first = np.flatnonzero(~np.isnan(filled))
    level = np.full(len(y), np.nan)
    trend = np.full(len(y), np.nan)
    if len(first) == 0:
        return level, trend
    lo = int(first[0])
    x = filled[lo:] - filled[lo]  # a constant series with a flat trend is a fixed point: start from zero state
    a, b, phi = p.alpha, p.beta, p.phi
    # state [l, b]: x_t = A x_{t-1} + B u_t; as transfer functions of u (z^-1 polynomials)
    a11, a12, a21, a22 = 1 - a, (1 - a) * phi, -a * b, phi * (1 - a * b)
    den = [1.0, -(a11 + a22), a11 * a22 - a12 * a21]
    num_l = [a, a12 * a * b - a22 * a]
    num_b = [a * b, a21 * a - a11 * a * b]
    from scipy.signal import lfilter  # ~2 s to import; a process that never smooths never pays it

    level[lo:] = lfilter(num_l, den, x) + filled[lo]
    trend[lo:] = lfilter(num_b, den, x)
    return level, trend


def damped_paths(level: np.ndarray, trend: np.ndarray, origins: np.ndarray, phi: float, horizon: int) -> np.ndarray:
    weights = np.cumsum(phi ** np.arange(1, horizon + 1))
    return np.asarray(level[origins][:, None] + trend[origins][:, None] * weights[None, :])


class DampedTrendPaths:
    """Additive damped-trend exponential smoothing (statsmodels ``ExponentialSmoothing``), one per series."""

    base_levels: tuple[float, ...] = (0.5,)

    def __init__(self) -> None:
        self._params: dict[str, DampedParams] = {}

    def context_steps(self, step_ns: int) -> int:
        return max(MIN_FIT_STEPS, DAY_NS // step_ns)

    def train(self, panel: Mapping[str, SeriesData]) -> dict[str, str]:
        self._params = {}
        notes = {}
        for uid, series in panel.items():
            y = series.tail(FIT_DAYS * DAY_NS // series.step_ns).y
            try:
                self._params[uid] = estimate_damped(y[~np.isnan(y)])
            except (ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:
                notes[uid] = f"damped-trend fit failed: {exc}"
        return notes

    def paths(self, requests: Sequence[PathRequest], horizon: int) -> list[np.ndarray]:
        out = []
        for series, origins in requests:
            params = self._params.get(series.uid)
            if params is None:
                out.append(np.full((1, len(origins), horizon), np.nan))
                continue
            level, trend = damped_states(series.y, params)
            out.append(damped_paths(level, trend, origins, params.phi, horizon)[None])
        return out


@dataclass(frozen=True)
class _SeasonalFit:
    profile: np.ndarray  # seasonal component by phase of day (index = (t // step) % period)
    params: DampedParams


class StlDampedPaths:
    """STL (daily period, statsmodels) to remove the daily cycle, damped-trend smoothing on the adjusted series."""

    base_levels: tuple[float, ...] = (0.5,)

    def __init__(self) -> None:
        self._fits: dict[str, _SeasonalFit] = {}

    def context_steps(self, step_ns: int) -> int:
        return max(MIN_FIT_STEPS, DAY_NS // step_ns)

    def train(self, panel: Mapping[str, SeriesData]) -> dict[str, str]:
        self._fits = {}
        notes = {}
        for uid, series in panel.items():
            try:
                self._fits[uid] = self._fit_one(series)
            except (ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:
                notes[uid] = f"STL fit failed: {exc}"
        return notes

    def _fit_one(self, series: SeriesData) -> _SeasonalFit:
        period = DAY_NS // series.step_ns
        recent = series.tail(FIT_DAYS * period)
        filled = forward_filled(recent.y)
        observed = ~np.isnan(filled)
        if observed.sum() < 2 * period + 1:
            raise ValueError("needs two full days of history for a daily season")
        first = int(np.flatnonzero(observed)[0])
        y = filled[first:]
        start_phase = (recent.start_ns // series.step_ns + first) % period
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from statsmodels.tsa.seasonal import STL  # slow import, needed at fit only

            seasonal = STL(y, period=period, robust=False).fit().seasonal
        last = seasonal[-period:]
        phases = (start_phase + np.arange(len(y) - period, len(y))) % period
        profile = np.zeros(period)
        profile[phases] = last
        adjusted = y - seasonal
        return _SeasonalFit(profile=profile, params=estimate_damped(adjusted[-FIT_DAYS * period :]))

    def paths(self, requests: Sequence[PathRequest], horizon: int) -> list[np.ndarray]:
        out = []
        for series, origins in requests:
            fit = self._fits.get(series.uid)
            if fit is None:
                out.append(np.full((1, len(origins), horizon), np.nan))
                continue
            period = len(fit.profile)
            base = series.start_ns // series.step_ns
            phase = (base + np.arange(len(series.y))) % period
            level, trend = damped_states(series.y - fit.profile[phase], fit.params)
            adjusted = damped_paths(level, trend, origins, fit.params.phi, horizon)
            ahead = (base + origins[:, None] + np.arange(1, horizon + 1)[None, :]) % period
            out.append((adjusted + fit.profile[ahead])[None])
        return out
