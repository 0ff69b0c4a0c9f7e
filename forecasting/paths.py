"""Point-path models: the inside of every calibrated forecaster, and the two baselines.

A path model answers one question fast and in bulk: from each of these origins of a series, what is the forecast
for the next ``horizon`` steps? ``paths`` returns an array of shape (bases, origins, horizon) where base ``k``
estimates the ``base_levels[k]`` quantile (a point model has one base, read as the median). Origin ``o`` may
only use ``y[: o + 1]``. The same call serves calibration (hundreds of past origins) and a tick (the newest one),
so a tick never refits and calibration never leaks the future.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from forecasting.series import SeriesData

DAY_NS = 86_400 * 10**9
WEEK_NS = 7 * DAY_NS

PathRequest = tuple[SeriesData, np.ndarray]  # a series and the origins (indices into its y) to forecast from


class PathModel(Protocol):
    base_levels: tuple[float, ...]

    def context_steps(self, step_ns: int) -> int:
        """How many steps up to an origin ``paths`` looks at."""
        ...

    def train(self, panel: Mapping[str, SeriesData]) -> dict[str, str]:
        """Learn from the panel; returns a note per series it could not learn (those fall back)."""
        ...

    def paths(self, requests: Sequence[PathRequest], horizon: int) -> list[np.ndarray]: ...


def forward_filled(y: np.ndarray) -> np.ndarray:
    """``y`` with each NaN replaced by the newest earlier value (leading NaNs stay NaN)."""
    valid = ~np.isnan(y)
    if valid.all():
        return y
    idx = np.where(valid, np.arange(len(y)), -1)
    np.maximum.accumulate(idx, out=idx)
    return np.where(idx >= 0, y[np.maximum(idx, 0)], np.nan)


class LastValuePaths:
    """The newest observed value, for every step ahead."""

    base_levels: tuple[float, ...] = (0.5,)

    def context_steps(self, step_ns: int) -> int:
        return max(1, (6 * 3600 * 10**9) // step_ns)  # look back up to 6 hours for an observed value

    def train(self, panel: Mapping[str, SeriesData]) -> dict[str, str]:
        return {}

    def paths(self, requests: Sequence[PathRequest], horizon: int) -> list[np.ndarray]:
        out = []
        for series, origins in requests:
            filled = forward_filled(series.y)
            out.append(np.repeat(filled[origins][None, :, None], horizon, axis=2))
        return out


class SeasonalNaivePaths:
    """The value one season ago at the same time of day (daily) or week (weekly, when the history allows)."""

    base_levels: tuple[float, ...] = (0.5,)

    def __init__(self) -> None:
        self._lag_ns: dict[str, int] = {}

    def context_steps(self, step_ns: int) -> int:
        return WEEK_NS // step_ns + 1

    def train(self, panel: Mapping[str, SeriesData]) -> dict[str, str]:
        notes = {}
        self._lag_ns = {}
        for uid, series in panel.items():
            span = len(series.y) * series.step_ns
            self._lag_ns[uid] = WEEK_NS if span >= 2 * WEEK_NS else DAY_NS
            if span < DAY_NS:
                notes[uid] = "less than a day of history: no season to repeat"
        return notes

    def paths(self, requests: Sequence[PathRequest], horizon: int) -> list[np.ndarray]:
        out = []
        for series, origins in requests:
            lag = max(1, self._lag_ns.get(series.uid, DAY_NS) // series.step_ns)
            filled = forward_filled(series.y)
            target = origins[:, None] + np.arange(1, horizon + 1)[None, :]
            source = target - lag * (1 + (np.arange(1, horizon + 1)[None, :] - 1) // lag)
            values = np.where(source >= 0, filled[np.maximum(source, 0)], np.nan)
            out.append(values[None, :, :])
        return out
