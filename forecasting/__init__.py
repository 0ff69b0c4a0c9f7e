"""Demand forecasting: series preparation, forecasters that yield calibrated quantiles, and their backtests."""

from forecasting.base import Forecaster, quantile_column
from forecasting.last_value import LastValueForecaster, PersistenceForecaster

__all__ = ["Forecaster", "LastValueForecaster", "PersistenceForecaster", "quantile_column"]
