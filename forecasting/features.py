"""Features for the global gradient-boosted model: lags, rolling windows, seasonal lags and calendar.

Everything is relative to the series' own scale (its mean over the last day), so one model learns across
tenants of very different sizes, and every window is defined in minutes, so the same features mean the same
thing at 1- and 5-minute steps. A row is (series, origin, steps ahead); the target is the change from the last
observed value to the value ``h`` steps ahead, divided by the scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import warnings

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from forecasting.paths import DAY_NS, WEEK_NS, forward_filled
from forecasting.series import SeriesData

MINUTE_NS = 60 * 10**9
LAG_MINUTES = (1, 2, 5, 10, 15, 30, 60, 120, 240)
MEAN_MINUTES = (30, 60, 180, 720)
SPREAD_MINUTES = (60, 180)
EXTREME_MINUTES = (60,)
ORIGIN_FEATURES = (
    ["level", "log_scale", "missing_1h"]
    + [f"diff_{m}m" for m in LAG_MINUTES]
    + [f"mean_{m}m" for m in MEAN_MINUTES]
    + [f"std_{m}m" for m in SPREAD_MINUTES]
    + [f"max_{m}m" for m in EXTREME_MINUTES]
    + [f"min_{m}m" for m in EXTREME_MINUTES]
)
STEP_FEATURES = ["ahead_minutes", "day_ago_move", "week_ago_move", "hour_of_day", "day_of_week"]
FEATURE_NAMES = ORIGIN_FEATURES + STEP_FEATURES


@dataclass(frozen=True)
class Rows:
    """Feature rows for (origin, step ahead) pairs of one series, flattened origin-major."""

    features: np.ndarray  # (origins * len(ahead), features)
    last: np.ndarray  # (origins,) newest observed value at each origin
    scale: np.ndarray  # (origins,)


def context_steps(step_ns: int) -> int:
    """How far back the features look: a week and a step (the weekly seasonal lag)."""
    return WEEK_NS // step_ns + 2


def _steps(minutes: int, step_ns: int) -> int:
    return max(1, round(minutes * MINUTE_NS / step_ns))


def _window_sums(values: np.ndarray, origins: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Sum and count of the observed values in (o - width, o] for each origin."""
    observed = ~np.isnan(values)
    csum = np.concatenate(([0.0], np.cumsum(np.where(observed, values, 0.0))))
    ccount = np.concatenate(([0], np.cumsum(observed)))
    hi = origins + 1
    lo = np.clip(origins + 1 - width, 0, None)
    return csum[hi] - csum[lo], (ccount[hi] - ccount[lo]).astype(float)


def _windowed(values: np.ndarray, origins: np.ndarray, width: int) -> np.ndarray:
    padded = np.concatenate((np.full(width - 1, np.nan), values))
    return sliding_window_view(padded, width)[origins]


def origin_rows(series: SeriesData, origins: np.ndarray, ahead: np.ndarray) -> Rows:
    """Features for every origin in ``origins`` and every step count in ``ahead`` (1-based)."""
    y, step = series.y, series.step_ns
    filled = forward_filled(y)
    last = filled[origins]
    day_sum, day_count = _window_sums(y, origins, DAY_NS // step)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        scale = np.maximum(np.where(day_count > 0, day_sum / np.maximum(day_count, 1), np.nan), 1.0)
        cols: list[np.ndarray] = [last / scale, np.log1p(scale)]
        _, hour_count = _window_sums(y, origins, _steps(60, step))
        cols.append(1.0 - hour_count / _steps(60, step))
        for minutes in LAG_MINUTES:
            lag = _steps(minutes, step)
            prior = np.where(origins - lag >= 0, filled[np.clip(origins - lag, 0, None)], np.nan)
            cols.append((last - prior) / scale)
        for minutes in MEAN_MINUTES:
            total, count = _window_sums(y, origins, _steps(minutes, step))
            cols.append((total / np.where(count > 0, count, np.nan) - last) / scale)
        squares = y * y
        for minutes in SPREAD_MINUTES:
            width = _steps(minutes, step)
            total, count = _window_sums(y, origins, width)
            total_sq, _ = _window_sums(squares, origins, width)
            mean = total / np.where(count > 1, count, np.nan)
            cols.append(np.sqrt(np.maximum(total_sq / np.where(count > 1, count, np.nan) - mean * mean, 0.0)) / scale)
        for minutes in EXTREME_MINUTES:
            cols.append((np.nanmax(_windowed(y, origins, _steps(minutes, step)), axis=1) - last) / scale)
        for minutes in EXTREME_MINUTES:
            cols.append((np.nanmin(_windowed(y, origins, _steps(minutes, step)), axis=1) - last) / scale)
    per_origin = np.column_stack(cols)
    n_o, n_h = len(origins), len(ahead)
    target = origins[:, None] + ahead[None, :]
    step_cols = [np.broadcast_to((ahead * step / MINUTE_NS)[None, :], (n_o, n_h))]
    for season in (DAY_NS, WEEK_NS):
        lag = season // step
        then_target, then_origin = target - lag, origins[:, None] - lag
        ok = then_origin >= 0
        moved = filled[np.clip(then_target, 0, None)] - filled[np.clip(then_origin, 0, None)]
        step_cols.append(np.where(ok, moved / scale[:, None], np.nan))
    stamp_ns = series.start_ns + target * step
    step_cols.append((stamp_ns % DAY_NS) / 3.6e12)
    step_cols.append(((stamp_ns // DAY_NS) + 3) % 7)  # 1970-01-01 was a Thursday: Monday = 0
    features = np.concatenate(
        [np.repeat(per_origin, n_h, axis=0), np.column_stack([c.reshape(-1) for c in step_cols])], axis=1
    )
    return Rows(features=features, last=last, scale=scale)
