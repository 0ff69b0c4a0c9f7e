"""Building the configured forecaster from settings.

The configuration's ``persistence`` (formerly ``naive``) is bare persistence: every quantile is the last value.
Every other name is built by ``forecasting.registry``.
"""

from __future__ import annotations

from datetime import timedelta

from config.schema import ForecastSettings
from forecasting.base import Forecaster
from forecasting.calibrated import last_value_forecaster
from forecasting.last_value import PersistenceForecaster
from forecasting.registry import FAMILIES, build


def build_forecaster(settings: ForecastSettings, horizon: timedelta | None = None) -> Forecaster:
    """``horizon``: the furthest ahead the caller will ask (``Settings.planning_horizon``: the longest lead time of
    the pools the agent scales, plus a tick)."""
    if settings.model == "persistence":
        return PersistenceForecaster()
    return build(
        settings.model,
        quantiles=settings.quantiles,
        lookback=settings.history,
        retrain_interval=settings.retrain_interval,
        reselect_interval=settings.reselect_interval,
        horizon=horizon,
    )


def stand_in_forecaster(settings: ForecastSettings) -> Forecaster | None:
    """A cheap model to forecast with while the configured one is first fitted (the calibrated last value,
    fitted in well under a second), or None when the configured model is a baseline and as cheap itself."""
    if FAMILIES.get(settings.model) == "baseline":
        return None
    return last_value_forecaster()
