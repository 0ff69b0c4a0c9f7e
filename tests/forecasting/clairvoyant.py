"""A path model that sees the target: what look-ahead looks like, for the tests that must catch it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from forecasting.paths import PathRequest
from forecasting.series import SeriesData


class Clairvoyant:
    """Forecasts the outcome itself wherever it exists. At the newest origin there is no outcome yet, and it
    repeats the last value."""

    base_levels: tuple[float, ...] = (0.5,)

    def context_steps(self, step_ns: int) -> int:
        return 1

    def train(self, panel: Mapping[str, SeriesData]) -> dict[str, str]:
        return {}

    def paths(self, requests: Sequence[PathRequest], horizon: int) -> list[np.ndarray]:
        out = []
        for series, origins in requests:
            target = np.clip(origins[:, None] + np.arange(1, horizon + 1)[None, :], 0, len(series.y) - 1)
            out.append(series.y[target][None, :, :])
        return out
