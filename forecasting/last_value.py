"""Last-value forecasters: the bar every model has to clear at 15-60 minutes ahead.

At these horizons accelerator demand is very persistent, so the last observed value is a strong point forecast.
``LastValueForecaster`` adds calibrated uncertainty: the ``q`` quantile at ``h`` steps ahead is the last value
plus the empirical ``q`` quantile of how much the series moved over ``h`` steps in its recent history.
``PersistenceForecaster`` (``naive``) gives the last value for every quantile: no uncertainty at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Self, cast

import numpy as np
import pandas as pd

from forecasting.base import quantile_column
from forecasting.series import last_valid, series_arrays

MIN_CHANGES = 24  # fewer observed h-step changes than this and the spread is not trusted


class PersistenceForecaster:
    """Every quantile equals the newest observed value."""

    name = "naive"

    def __init__(self) -> None:
        self._step = timedelta(minutes=5)

    @property
    def min_history_steps(self) -> int:
        return 1

    def fit(self, history: pd.DataFrame, step: timedelta) -> Self:
        self._step = step
        return self

    def predict(self, recent: pd.DataFrame, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        rows = []
        for uid, (ds, y) in series_arrays(recent).items():
            value, note = last_valid(y)
            rows.append(_rows(uid, ds[-1], self._step, horizon, quantiles, np.full(horizon, value), self.name, note))
        return _frame(rows, quantiles)


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
        rows = []
        for uid, (ds, y) in series_arrays(recent).items():
            value, note = last_valid(y)
            spreads, spread_note = self._spreads(uid, horizon, levels)
            values = value + spreads  # shape (len(levels), horizon)
            rows.append(
                _rows(uid, ds[-1], self._step, horizon, levels, np.maximum(values, 0.0), self.name, note or spread_note)
            )
        return _frame(rows, levels)

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


def _rows(
    uid: str,
    last_ds: pd.Timestamp,
    step: timedelta,
    horizon: int,
    levels: Sequence[float],
    values: np.ndarray,
    model: str,
    note: str,
) -> dict[str, object]:
    grid = np.broadcast_to(values, (len(levels), horizon)) if values.ndim == 1 else values
    out: dict[str, object] = {
        "unique_id": np.full(horizon, uid, dtype=object),
        "ds": pd.date_range(start=last_ds + step, periods=horizon, freq=step),
        "model": np.full(horizon, model, dtype=object),
        "note": np.full(horizon, note, dtype=object),
    }
    for i, level in enumerate(levels):
        out[quantile_column(level)] = np.asarray(grid[i], dtype=float)
    return out


def _frame(rows: list[dict[str, object]], levels: Sequence[float]) -> pd.DataFrame:
    """One frame from per-series column blocks, built column-wise (no per-series DataFrames)."""
    columns = ["unique_id", "ds", "model", "note", *[quantile_column(q) for q in levels]]
    if not rows:
        return pd.DataFrame(columns=columns)
    data: dict[str, object] = {}
    for column in columns:
        parts = [row[column] for row in rows]
        if column == "ds":
            stamps = [cast(pd.DatetimeIndex, p).tz_convert("UTC").as_unit("ns").asi8 for p in parts]
            data[column] = pd.DatetimeIndex(np.concatenate(stamps), tz="UTC")
        else:
            data[column] = np.concatenate([np.asarray(p) for p in parts])
    return pd.DataFrame(data, columns=columns)
