"""Forecasters by name, with their family: what the configuration and the backtest may ask for.

``naive`` here is the calibrated last value (the bar every model must clear); ``persistence`` is the bare last
value with no spread, and ``last-value`` the older empirical-change forecaster. A configuration's
``forecast.model`` names them the same way (``forecasting.factory``); the simulator's reactive baseline builds
bare persistence itself (``agent.simulation.assembly``), whatever the configuration names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

from forecasting.base import Forecaster
from forecasting.boosting import MAX_ROWS, TRAIN_AHEAD_MINUTES, LightGbmPaths, ahead_minutes_within
from forecasting.calibrated import CALIBRATION_HORIZON, CalibratedForecaster, last_value_forecaster
from forecasting.last_value import LastValueForecaster, PersistenceForecaster
from forecasting.paths import PathModel, SeasonalNaivePaths
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
AUTO_CANDIDATES = ("naive", "ets", "lightgbm")  # stl lost to them on every trace tried, at twice the cost
AUTO_COMBINATIONS = (("ets", "naive"),)  # the global model is judged on its own, level by level (AUTO_POOLED)
SELECTION_HORIZON = timedelta(hours=1)
SELECTION_ROWS = 30_000  # training rows per booster of auto's held-out global model: evidence only, at half the cost
AUTO_POOLED = ("lightgbm",)  # one model for every series: judged on all of them at once (forecasting.pooling)


def model_names() -> tuple[str, ...]:
    return tuple(FAMILIES)


def build_calibrated(
    name: str,
    quantiles: Sequence[float],
    retrain_interval: timedelta = timedelta(days=1),
    for_selection: bool = False,
    horizon: timedelta | None = None,
) -> CalibratedForecaster:
    """One of the calibrated models (``naive``, ``seasonal_naive``, ``ets``, ``stl``, ``lightgbm``).

    ``lightgbm`` on its own trains on all history up to the retrain point (its quantiles stand as trained, so it
    needs no held-out residuals: on the Helios tenants' last week that took its q0.9 loss from 0.890 / 0.933 / 0.928
    of the calibrated last value to 0.854 / 0.895 / 0.941 at 15 / 30 / 60 minutes, with the trees of then). As a
    candidate of ``auto`` (``for_selection``) it holds out the calibration window, so the residuals selection scores
    are out of sample, and trains on fewer rows (``SELECTION_ROWS``): ``auto`` forecasts with a namesake trained on
    all history, and the held-out copy only provides the evidence.
    ``horizon``, when the caller knows how far ahead it will ever ask, spares the boosters of longer horizons and,
    when longer than ``CALIBRATION_HORIZON``, is how far ahead the model and its fallback keep residuals (a step
    past them has no offset of its own). A candidate of ``auto`` trains no booster past ``SELECTION_HORIZON``: it
    is only judged that far.
    """
    calibrated = CALIBRATION_HORIZON if horizon is None else max(horizon, CALIBRATION_HORIZON)
    if name == "naive":
        return last_value_forecaster(calibrated)
    fallback = last_value_forecaster(calibrated)
    judged = SELECTION_HORIZON if horizon is None else min(horizon, SELECTION_HORIZON)
    boosted = judged if for_selection else horizon
    ahead = TRAIN_AHEAD_MINUTES if boosted is None else ahead_minutes_within(boosted.total_seconds() / 60)
    makers: dict[str, Callable[[], PathModel]] = {
        "seasonal_naive": SeasonalNaivePaths,
        "ets": DampedTrendPaths,
        "stl": StlDampedPaths,
        "lightgbm": lambda: LightGbmPaths(
            tuple(sorted({0.5, *quantiles})),
            ahead_minutes=ahead,
            max_rows=SELECTION_ROWS if for_selection else MAX_ROWS,
        ),
    }
    if name in makers:
        return CalibratedForecaster(
            name,
            makers[name],
            fallback=fallback,
            calibration_horizon=calibrated,
            retrain_interval=retrain_interval,
            offset_bases=name != "lightgbm",  # trained at each asked level: its quantiles stand as they are
            hold_out=for_selection or name != "lightgbm",
        )
    raise ValueError(f"{name!r} is not a calibrated model; known: {', '.join(FAMILIES)}")


def build(
    name: str,
    quantiles: Sequence[float] = (0.5, 0.9, 0.95),
    lookback: timedelta = timedelta(days=7),
    retrain_interval: timedelta = timedelta(days=1),
    reselect_interval: timedelta = timedelta(days=1),
    horizon: timedelta | None = None,
) -> Forecaster:
    """The forecaster called ``name``; ``ValueError`` names the known ones when it is not one of them."""
    if name == "persistence":
        return PersistenceForecaster()
    if name == "last-value":
        return LastValueForecaster(lookback=lookback)
    if name == "auto":
        # Candidates are judged over the horizon asked, at most an hour (their boosters stop there too), and
        # calibrated over all of it: the chosen one forecasts that far. The global model forecasts from a namesake
        # trained on all history.
        judged = SELECTION_HORIZON if horizon is None else min(horizon, SELECTION_HORIZON)
        candidates = [
            build_calibrated(n, quantiles, retrain_interval, for_selection=True, horizon=horizon)
            for n in AUTO_CANDIDATES
        ]
        return AutoForecaster(
            candidates,
            quantiles=quantiles,
            selection_horizon=judged,
            combinations=AUTO_COMBINATIONS,
            reselect_interval=reselect_interval,
            pooled=AUTO_POOLED,
            forecasters=[build_calibrated(n, quantiles, retrain_interval, horizon=horizon) for n in AUTO_POOLED],
        )
    return build_calibrated(name, quantiles, retrain_interval, horizon=horizon)
