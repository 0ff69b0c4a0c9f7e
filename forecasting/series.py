"""Preparing long demand frames (``unique_id, ds, y``) for models: checks, per-series arrays, last values."""

from __future__ import annotations

import numpy as np
import pandas as pd

from models import ForecastError

REQUIRED_COLUMNS = ("unique_id", "ds", "y")


def check_long_frame(df: pd.DataFrame) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ForecastError(f"demand frame lacks column(s) {missing}; expected unique_id, ds, y")


def series_arrays(df: pd.DataFrame) -> dict[str, tuple[pd.DatetimeIndex, np.ndarray]]:
    """Split a long frame into per-series (timestamps, values), each sorted by time; NaN stays NaN."""
    check_long_frame(df)
    out: dict[str, tuple[pd.DatetimeIndex, np.ndarray]] = {}
    for uid, group in df.groupby("unique_id", sort=True):
        ordered = group.sort_values("ds")
        out[str(uid)] = (pd.DatetimeIndex(ordered["ds"]), ordered["y"].to_numpy(dtype=float))
    return out


def last_valid(y: np.ndarray) -> tuple[float, str]:
    """The newest non-NaN value, or NaN with a note saying there is none."""
    valid = np.flatnonzero(~np.isnan(y))
    if len(valid) == 0:
        return float("nan"), "no observed value in the recent window"
    return float(y[valid[-1]]), ""
