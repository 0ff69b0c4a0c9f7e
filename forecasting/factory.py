"""Building the configured forecaster from settings.

A name means the same model here as in ``leadtime backtest``, ``auto``'s notes and the reports: ``naive`` is the
calibrated last value, ``persistence`` the bare last value (every quantile the newest value). ``forecasting.registry``
builds them all.
"""

from __future__ import annotations

from datetime import timedelta

from config.schema import ForecastSettings
from forecasting.base import Forecaster
from forecasting.calibrated import CALIBRATION_HORIZON, last_value_forecaster
from forecasting.registry import FAMILIES, build


def build_forecaster(settings: ForecastSettings, horizon: timedelta | None = None) -> Forecaster:
    """``horizon``: the furthest ahead the caller will ask (``Settings.planning_horizon``: the longest lead time of
    the pools the agent scales, plus a tick)."""
    return build(
        settings.model,
        quantiles=settings.quantiles,
        lookback=settings.history,
        retrain_interval=settings.retrain_interval,
        reselect_interval=settings.reselect_interval,
        horizon=horizon,
    )


def stand_in_forecaster(settings: ForecastSettings, horizon: timedelta | None = None) -> Forecaster | None:
    """A cheap model to forecast with while the configured one is first fitted (the calibrated last value,
    fitted in well under a second), or None when the configured model is a baseline and as cheap itself.
    ``horizon`` as for ``build_forecaster``: the stand-in is calibrated as far ahead as the configured model (an hour
    at least), since a forecast asked past its calibration is the bare last value, with no spread."""
    if FAMILIES.get(settings.model) == "baseline":
        return None
    return last_value_forecaster(CALIBRATION_HORIZON if horizon is None else max(horizon, CALIBRATION_HORIZON))
