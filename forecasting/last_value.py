"""Last-value forecasters: the bar every model has to clear at 15-60 minutes ahead.

At these horizons accelerator demand is very persistent, so the last observed value is a strong point forecast.
``LastValueForecaster`` adds calibrated uncertainty: the ``q`` quantile at ``h`` steps ahead is the last value
plus the empirical ``q`` quantile of how much the series moved over ``h`` steps in its recent history.
``PersistenceForecaster`` (``naive``) gives the last value for every quantile: no uncertainty at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Self

import numpy as np
import pandas as pd

from forecasting.output import forecast_frame
from forecasting.series import last_valid, series_arrays, step_ns, to_panel

MIN_CHANGES = 24  # fewer observed h-step changes than this and the spread is not trusted


class PersistenceForecaster:
    """Every quantile equals the newest observed value."""

    name = "persistence"

    def __init__(self) -> None:
        self._step = timedelta(minutes=5)

    @property
    def min_history_steps(self) -> int:
        return 1

    def fit(self, history: pd.DataFrame, step: timedelta) -> Self:
        self._step = step
        return self

    def predict(self, recent: pd.DataFrame, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        panel = to_panel(recent, self._step)
        uids = sorted(panel)
        values = np.full((len(uids), len(quantiles), max(horizon, 0)), np.nan)
        notes = []
        for i, uid in enumerate(uids):
            value, note = last_valid(panel[uid].y)
            values[i] = value
            notes.append(note)
        ends = [panel[u].end_ns for u in uids]
        return forecast_frame(uids, ends, step_ns(self._step), values, [self.name] * len(uids), notes, quantiles)


class LastValueForecaster:
    """Last value plus the empirical quantile of recent ``h``-step changes, for each ``h`` of the horizon."""

    name = "last-value"

    def __init__(self, lookback: timedelta = timedelta(days=7)) -> None:
        self.lookback = lookback
        self._step = timedelta(minutes=5)
        self._history: dict[str, np.ndarray] = {}
        self._spread_cache: dict[tuple[str, int, tuple[float, ...]], np.ndarray] = {}

    @property
    def min_history_steps(self) -> int:
        return 1

    def fit(self, history: pd.DataFrame, step: timedelta) -> Self:
        self._step = step
        keep = max(1, int(self.lookback / step))
        self._history = {uid: y[-keep:] for uid, (_, y) in series_arrays(history).items()}
        self._spread_cache = {}
        return self

    def predict(self, recent: pd.DataFrame, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        levels = tuple(quantiles)
        panel = to_panel(recent, self._step)
        uids = sorted(panel)
        values = np.full((len(uids), len(levels), max(horizon, 0)), np.nan)
        notes = []
        for i, uid in enumerate(uids):
            value, note = last_valid(panel[uid].y)
            spreads, spread_note = self._spreads(uid, horizon, levels)
            values[i] = np.maximum(value + spreads, 0.0)  # shape (len(levels), horizon)
            notes.append(note or spread_note)
        ends = [panel[u].end_ns for u in uids]
        return forecast_frame(uids, ends, step_ns(self._step), values, [self.name] * len(uids), notes, levels)

    def _spreads(self, uid: str, horizon: int, levels: tuple[float, ...]) -> tuple[np.ndarray, str]:
        key = (uid, horizon, levels)
        cached = self._spread_cache.get(key)
        if cached is not None:
            return cached, ""
        y = self._history.get(uid)
        spreads = np.zeros((len(levels), horizon))
        note = ""
        if y is None:
            note = "no fitted history for this series: persistence only"
        else:
            for h in range(1, horizon + 1):
                changes = y[h:] - y[:-h] if len(y) > h else np.empty(0)
                changes = changes[~np.isnan(changes)]
                if len(changes) < MIN_CHANGES:
                    note = f"fewer than {MIN_CHANGES} observed {h}-step changes: persistence beyond that"
                    break
                spreads[:, h - 1] = np.quantile(changes, levels)
            spreads = np.maximum.accumulate(spreads, axis=1) if horizon else spreads
        self._spread_cache[key] = spreads
        return spreads, note
