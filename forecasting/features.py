"""Features for the global gradient-boosted model, relative to the last value and the series' mean level.

A row is (series, origin, steps ahead ``h``). Everything is measured from the last observed value at the origin
and divided by the series' mean level, so one model learns across tenants of very different sizes: the last
value itself (as a multiple of the mean level), lags 1-12, the value one day and one week before the target time
and how it moved from the origin's own time then to the target's, rolling means over 1 h / 6 h / 24 h, rolling
standard deviations over 1 h / 6 h, and the hour of day and day of week of the target. A row at origin ``o`` reads
only ``y[: o + 1]``: the seasonal lags look one day or one week back from the target, which is never after the
origin as long as ``h`` is shorter than a day.
"""

from __future__ import annotations

import warnings

import numpy as np

from forecasting.paths import DAY_NS, WEEK_NS, forward_filled

MINUTE_NS = 60 * 10**9
LAGS = tuple(range(1, 13))
MEAN_MINUTES = (60, 360, 1440)
SPREAD_MINUTES = (60, 360)
SEASONS = (("day", DAY_NS), ("week", WEEK_NS))
FEATURE_NAMES = (
    ["level"]
    + [f"lag_{k}" for k in LAGS]
    + [f"{name}_{part}" for name, _ in SEASONS for part in ("value", "move")]
    + [f"mean_{m}m" for m in MEAN_MINUTES]
    + [f"std_{m}m" for m in SPREAD_MINUTES]
    + ["hour_of_day", "day_of_week"]
)
SEASON_COLUMNS = tuple(FEATURE_NAMES.index(f"{name}_value") for name, _ in SEASONS)  # each followed by its move
MEAN_COLUMNS = tuple(FEATURE_NAMES.index(f"mean_{m}m") for m in MEAN_MINUTES)
SPREAD_COLUMNS = tuple(FEATURE_NAMES.index(f"std_{m}m") for m in SPREAD_MINUTES)
HOUR_COLUMN = FEATURE_NAMES.index("hour_of_day")  # followed by the day of week


def context_steps(step_ns: int) -> int:
    """How far back the features look: a week (the weekly seasonal lag) and a day's window before it."""
    return (WEEK_NS + DAY_NS) // step_ns + 2


def window_steps(minutes: int, step_ns: int) -> int:
    return max(1, round(minutes * MINUTE_NS / step_ns))


class SeriesFeatures:
    """One series made ready for feature rows: forward-filled values and running sums for the rolling windows."""

    def __init__(self, y: np.ndarray, start_ns: int, step_ns: int, scale: float) -> None:
        self.y = y
        self.filled = forward_filled(y)
        self.start_ns = start_ns
        self.step_ns = step_ns
        self.scale = scale
        observed = ~np.isnan(y)
        clean = np.where(observed, y, 0.0)
        self._sum = np.concatenate(([0.0], np.cumsum(clean)))
        self._sq = np.concatenate(([0.0], np.cumsum(clean * clean)))
        self._count = np.concatenate(([0], np.cumsum(observed)))

    def _over(self, cumulative: np.ndarray, origins: np.ndarray, width: int) -> np.ndarray:
        return np.asarray(cumulative[origins + 1] - cumulative[np.maximum(origins + 1 - width, 0)])

    def _at(self, index: np.ndarray) -> np.ndarray:
        return np.where(index >= 0, self.filled[np.maximum(index, 0)], np.nan)

    def rows(self, origins: np.ndarray, ahead: int) -> tuple[np.ndarray, np.ndarray]:
        """Features at ``origins`` for ``ahead`` steps, shape (origins, features), and the last value at each."""
        common, last = self.common(origins)
        return self.for_ahead(common, origins, last, np.array([ahead]))[0], last

    def common(self, origins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The features that do not depend on the steps ahead, shape (origins, features) with the others left
        NaN for ``for_ahead`` to fill, and the last value at each origin."""
        last = self.filled[origins]
        scale = self.scale
        out = np.full((len(origins), len(FEATURE_NAMES)), np.nan)
        out[:, 0] = last / scale
        lags = origins[:, None] - np.asarray(LAGS)[None, :]
        out[:, 1 : 1 + len(LAGS)] = (self._at(lags) - last[:, None]) / scale
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for col, minutes in zip(MEAN_COLUMNS, MEAN_MINUTES, strict=True):
                width = window_steps(minutes, self.step_ns)
                mean = self._over(self._sum, origins, width) / self._over(self._count, origins, width)
                out[:, col] = (mean - last) / scale
            for col, minutes in zip(SPREAD_COLUMNS, SPREAD_MINUTES, strict=True):
                width = window_steps(minutes, self.step_ns)
                count = self._over(self._count, origins, width)
                mean = self._over(self._sum, origins, width) / count
                var = self._over(self._sq, origins, width) / count - mean * mean
                out[:, col] = np.where(count > 1, np.sqrt(np.maximum(var, 0.0)), np.nan) / scale
        return out, last

    def for_ahead(self, common: np.ndarray, origins: np.ndarray, last: np.ndarray, aheads: np.ndarray) -> np.ndarray:
        """``common`` completed for each of ``aheads``: shape (aheads, origins, features). The seasonal values and
        the target's calendar are all that the steps ahead change."""
        out = np.repeat(common[None, :, :], len(aheads), axis=0)
        target = origins[None, :] + aheads[:, None]
        for col, (_, season_ns) in zip(SEASON_COLUMNS, SEASONS, strict=True):
            lag = season_ns // self.step_ns
            then = self._at(target - lag)
            out[:, :, col] = (then - last[None, :]) / self.scale
            out[:, :, col + 1] = (then - self._at(origins - lag)[None, :]) / self.scale
        stamp_ns = self.start_ns + target * self.step_ns
        out[:, :, HOUR_COLUMN] = (stamp_ns % DAY_NS) / 3.6e12
        out[:, :, HOUR_COLUMN + 1] = ((stamp_ns // DAY_NS) + 3) % 7  # 1970-01-01 was a Thursday: Monday = 0
        return out


def mean_level(y: np.ndarray) -> float:
    """The scale every row of a series is divided by: its mean observed level (1 when there is none)."""
    observed = y[~np.isnan(y)]
    mean = float(np.mean(observed)) if len(observed) else 0.0
    return mean if mean > 1e-6 else 1.0
