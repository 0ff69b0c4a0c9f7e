"""Features for the global gradient-boosted model: lags, rolling windows, seasonal lags and calendar.

Everything is relative to the series' own scale (its mean over the last day), so one model learns across
tenants of very different sizes, and every window is defined in minutes, so the same features mean the same
thing at 1- and 5-minute steps. A row is (series, origin, steps ahead); the target is the change from the last
observed value to the value ``h`` steps ahead, divided by the scale. All series are computed together as one
matrix, so a tick costs a handful of numpy calls whatever the number of series.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from forecasting.paths import DAY_NS

MINUTE_NS = 60 * 10**9
LAG_MINUTES = (1, 2, 5, 10, 15, 30, 60, 120, 240)
MEAN_MINUTES = (30, 60, 180, 720)
SPREAD_MINUTES = (60, 180)
EXTREME_MINUTES = (15, 60)
ORIGIN_FEATURES = (
    ["level", "log_scale", "missing_1h"]
    + [f"diff_{m}m" for m in LAG_MINUTES]
    + [f"mean_{m}m" for m in MEAN_MINUTES]
    + [f"std_{m}m" for m in SPREAD_MINUTES]
    + [f"max_{m}m" for m in EXTREME_MINUTES]
    + [f"min_{m}m" for m in EXTREME_MINUTES]
)
STEP_FEATURES = ["ahead_minutes", "day_ago_move", "hour_of_day", "day_of_week"]
FEATURE_NAMES = ORIGIN_FEATURES + STEP_FEATURES


@dataclass(frozen=True)
class Rows:
    """Feature rows for (series, origin, step ahead), flattened in that order."""

    features: np.ndarray  # (series * origins * len(ahead), features)
    last: np.ndarray  # (series, origins) newest observed value at each origin
    scale: np.ndarray  # (series, origins)


def context_steps(step_ns: int) -> int:
    """How far back the features look: a day and two hours (the daily seasonal lag, and the day's scale before
    it). A weekly lag was tried; at 15-60 minutes ahead it did not pay for a seven-times longer window per tick."""
    return (DAY_NS + 2 * 3600 * 10**9) // step_ns + 2


def _steps(minutes: int, step_ns: int) -> int:
    return max(1, round(minutes * MINUTE_NS / step_ns))


def filled_matrix(values: np.ndarray) -> np.ndarray:
    """Forward-fill NaN along each row (leading NaNs stay NaN)."""
    valid = ~np.isnan(values)
    idx = np.where(valid, np.arange(values.shape[1])[None, :], -1)
    np.maximum.accumulate(idx, axis=1, out=idx)
    taken = np.take_along_axis(values, np.maximum(idx, 0), axis=1)
    return np.where(idx >= 0, taken, np.nan)


class _Windows:
    """Sums and counts of observed values over trailing windows, by cumulative sums along each row."""

    def __init__(self, values: np.ndarray) -> None:
        observed = ~np.isnan(values)
        zeros = np.zeros((values.shape[0], 1))
        clean = np.where(observed, values, 0.0)
        self.sum = np.concatenate((zeros, np.cumsum(clean, axis=1)), axis=1)
        self.sq = np.concatenate((zeros, np.cumsum(clean * clean, axis=1)), axis=1)
        self.count = np.concatenate((zeros, np.cumsum(observed, axis=1)), axis=1)

    def over(self, cumulative: np.ndarray, origins: np.ndarray, width: int) -> np.ndarray:
        hi = np.take_along_axis(cumulative, origins + 1, axis=1)
        lo = np.take_along_axis(cumulative, np.clip(origins + 1 - width, 0, None), axis=1)
        return np.asarray(hi - lo)


def _extreme(values: np.ndarray, origins: np.ndarray, width: int, largest: bool) -> np.ndarray:
    offsets = np.arange(-width + 1, 1)
    idx = origins[:, :, None] + offsets[None, None, :]
    rows = np.arange(values.shape[0])[:, None, None]
    picked = np.where(idx >= 0, values[rows, np.clip(idx, 0, None)], np.nan)
    return np.asarray(np.nanmax(picked, axis=2) if largest else np.nanmin(picked, axis=2))


def feature_rows(values: np.ndarray, start_ns: np.ndarray, step: int, origins: np.ndarray, ahead: np.ndarray) -> Rows:
    """Features of series ``values`` (series, time; NaN = missing) at ``origins`` (series, n) for each ``ahead``.

    ``start_ns[i]`` stamps ``values[i, 0]``. Targets beyond a row's end are not needed here, only timestamps.
    """
    filled = filled_matrix(values)
    take = np.take_along_axis
    last = take(filled, origins, axis=1)
    win = _Windows(values)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        day_count = win.over(win.count, origins, DAY_NS // step)
        day_mean = win.over(win.sum, origins, DAY_NS // step) / day_count
        scale = np.maximum(np.where(day_count > 0, day_mean, np.nan), 1.0)
        hour = _steps(60, step)
        cols: list[np.ndarray] = [last / scale, np.log1p(scale), 1.0 - win.over(win.count, origins, hour) / hour]
        for minutes in LAG_MINUTES:
            lag = _steps(minutes, step)
            prior = np.where(origins >= lag, take(filled, np.clip(origins - lag, 0, None), axis=1), np.nan)
            cols.append((last - prior) / scale)
        for minutes in MEAN_MINUTES:
            width = _steps(minutes, step)
            cols.append((win.over(win.sum, origins, width) / win.over(win.count, origins, width) - last) / scale)
        for minutes in SPREAD_MINUTES:
            width = _steps(minutes, step)
            count = win.over(win.count, origins, width)
            mean = win.over(win.sum, origins, width) / count
            var = win.over(win.sq, origins, width) / count - mean * mean
            cols.append(np.where(count > 1, np.sqrt(np.maximum(var, 0.0)), np.nan) / scale)
        for largest in (True, False):
            for minutes in EXTREME_MINUTES:
                cols.append((_extreme(values, origins, _steps(minutes, step), largest) - last) / scale)
        per_origin = np.stack(cols, axis=-1)  # (series, n, origin features)
        n_s, n_o = origins.shape
        n_h = len(ahead)
        target = origins[:, :, None] + ahead[None, None, :]
        step_cols = [np.broadcast_to((ahead * step / MINUTE_NS)[None, None, :], (n_s, n_o, n_h))]
        for season in (DAY_NS,):
            lag = season // step
            then_target = np.clip(target - lag, 0, values.shape[1] - 1).reshape(n_s, -1)
            then_origin = np.clip(origins - lag, 0, None)
            moved = (
                take(filled, then_target, axis=1).reshape(n_s, n_o, n_h) - take(filled, then_origin, axis=1)[:, :, None]
            )
            step_cols.append(np.where((origins >= lag)[:, :, None], moved / scale[:, :, None], np.nan))
    stamp_ns = start_ns[:, None, None] + target * step
    step_cols.append((stamp_ns % DAY_NS) / 3.6e12)
    step_cols.append(((stamp_ns // DAY_NS) + 3) % 7)  # 1970-01-01 was a Thursday: Monday = 0
    repeated = np.broadcast_to(per_origin[:, :, None, :], (n_s, n_o, n_h, per_origin.shape[-1]))
    features = np.concatenate([repeated, np.stack(step_cols, axis=-1)], axis=-1).reshape(n_s * n_o * n_h, -1)
    return Rows(features=features, last=last, scale=scale)
