"""Forecasters by name, with their family: what the configuration and the backtest may ask for.

``naive`` here is the calibrated last value (the bar every model must clear); ``persistence`` is the bare last
value with no spread, and ``last-value`` the older empirical-change forecaster. The configuration's ``naive``
keeps meaning bare persistence (see ``forecasting.factory``), because the reactive baseline depends on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from forecasting.base import Forecaster
from forecasting.boosting import LightGbmPaths
from forecasting.calibrated import CalibratedForecaster, last_value_forecaster
from forecasting.last_value import LastValueForecaster, PersistenceForecaster
from forecasting.paths import SeasonalNaivePaths
from forecasting.selection import AutoForecaster
from forecasting.smoothing import DampedTrendPaths, StlDampedPaths

FAMILIES = {
    "naive": "baseline",
    "persistence": "baseline",
    "last-value": "baseline",
    "seasonal_naive": "baseline",
    "ets": "statsmodels",
    "stl": "statsmodels",
    "lightgbm": "lightgbm",
    "auto": "auto",
}
AUTO_CANDIDATES = ("naive", "ets", "stl", "lightgbm")


def model_names() -> tuple[str, ...]:
    return tuple(FAMILIES)


def build_calibrated(name: str, quantiles: Sequence[float]) -> CalibratedForecaster:
    """One of the calibrated models (``naive``, ``seasonal_naive``, ``ets``, ``stl``, ``lightgbm``)."""
    if name == "naive":
        return last_value_forecaster()
    fallback = last_value_forecaster()
    if name == "seasonal_naive":
        return CalibratedForecaster(name, SeasonalNaivePaths, fallback=fallback)
    if name == "ets":
        return CalibratedForecaster(name, DampedTrendPaths, fallback=fallback)
    if name == "stl":
        return CalibratedForecaster(name, StlDampedPaths, fallback=fallback)
    if name == "lightgbm":
        levels = tuple(sorted({0.5, *quantiles}))
        return CalibratedForecaster(name, lambda: LightGbmPaths(levels), fallback=fallback)
    raise ValueError(f"{name!r} is not a calibrated model; known: {', '.join(FAMILIES)}")


def build(
    name: str, quantiles: Sequence[float] = (0.5, 0.9, 0.95), lookback: timedelta = timedelta(days=7)
) -> Forecaster:
    """The forecaster called ``name``; ``ValueError`` names the known ones when it is not one of them."""
    if name == "persistence":
        return PersistenceForecaster()
    if name == "last-value":
        return LastValueForecaster(lookback=lookback)
    if name == "auto":
        return AutoForecaster([build_calibrated(n, quantiles) for n in AUTO_CANDIDATES], quantiles=quantiles)
    return build_calibrated(name, quantiles)
