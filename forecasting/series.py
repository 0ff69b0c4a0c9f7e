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
    return {uid: (pd.DatetimeIndex(stamps, tz="UTC"), values) for uid, (stamps, values) in series_values(df).items()}


def series_values(df: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Like ``series_arrays`` with timestamps as int64 nanoseconds since the epoch (UTC).

    Vectorised and free of per-series pandas objects: the agent calls it several times every tick.
    """
    check_long_frame(df)
    if df.empty:
        return {}
    codes, names = pd.factorize(df["unique_id"], sort=True)
    stamps = pd.DatetimeIndex(df["ds"]).as_unit("ns").asi8
    order = np.lexsort((stamps, codes))
    codes = codes[order]
    stamps = stamps[order]
    values = df["y"].to_numpy(dtype=float)[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    ends = np.r_[starts[1:], len(codes)]
    return {str(names[codes[b]]): (stamps[b:e], values[b:e]) for b, e in zip(starts, ends, strict=True)}


def timestamp(nanoseconds: int | np.integer) -> pd.Timestamp:
    return pd.Timestamp(int(nanoseconds), unit="ns", tz="UTC")


def last_valid(y: np.ndarray) -> tuple[float, str]:
    """The newest non-NaN value, or NaN with a note saying there is none."""
    valid = np.flatnonzero(~np.isnan(y))
    if len(valid) == 0:
        return float("nan"), "no observed value in the recent window"
    return float(y[valid[-1]]), ""
