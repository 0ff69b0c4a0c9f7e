"""Building the configured forecaster from settings."""

from __future__ import annotations

from config.schema import ForecastSettings
from forecasting.base import Forecaster
from forecasting.last_value import LastValueForecaster, PersistenceForecaster


def build_forecaster(settings: ForecastSettings) -> Forecaster:
    if settings.model == "last-value":
        return LastValueForecaster(lookback=settings.history)
    if settings.model == "naive":
        return PersistenceForecaster()
    raise ValueError(f"unknown forecast model {settings.model!r}")
