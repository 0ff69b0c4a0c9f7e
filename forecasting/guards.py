"""Guards on a forecast before anyone sees it: finite, not negative, not absurd against the series' history."""

from __future__ import annotations

import numpy as np

from models.demand import MAX_DEMAND

ABSURD_RANGES = 3.0  # how many history ranges above the history's maximum a forecast may reach
NEGATIVE_TOLERANCE = 1e-6


def check_forecast(values: np.ndarray, history_range: tuple[float, float] | None) -> str:
    """Why ``values`` (levels, horizon) cannot be used, or ``""`` when it can."""
    if not np.all(np.isfinite(values)):
        return "forecast has NaN or infinite values"
    if values.size and values.max() > MAX_DEMAND:
        return f"forecast {values.max():.3g} is above {MAX_DEMAND:g} accelerators, not a plausible demand"
    if history_range is None:
        return ""
    low, high = history_range
    spread = max(high - low, 0.1 * abs(high), 1.0)
    if values.min() < -spread:
        return f"forecast {values.min():.3g} is far below zero"
    ceiling = high + ABSURD_RANGES * spread
    if values.max() > ceiling:
        return f"forecast {values.max():.3g} is above {ceiling:.3g}, beyond a sane multiple of the history's range"
    return ""
