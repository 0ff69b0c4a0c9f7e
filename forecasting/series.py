"""Preparing long demand frames (``unique_id, ds, y``) for models.

Models work on :class:`SeriesData`: one series on a regular grid (``y[i]`` at ``start_ns + i * step``), NaN where
a value is missing. Converting a long frame splits it by series with one sort (no per-group pandas work), so a
tick stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import pandas as pd

from models import ForecastError

REQUIRED_COLUMNS = ("unique_id", "ds", "y")


@dataclass(frozen=True)
class SeriesData:
    """One series on a regular grid. ``start_ns`` is the UTC epoch nanoseconds of ``y[0]``."""

    uid: str
    start_ns: int
    step_ns: int
    y: np.ndarray

    @property
    def end_ns(self) -> int:
        """Timestamp of the newest step."""
        return self.start_ns + (len(self.y) - 1) * self.step_ns

    def tail(self, steps: int) -> SeriesData:
        if steps >= len(self.y):
            return self
        cut = len(self.y) - steps
        return SeriesData(self.uid, self.start_ns + cut * self.step_ns, self.step_ns, self.y[cut:])

    def without(self, stamps: np.ndarray | None) -> SeriesData:
        """The series with the samples at ``stamps`` missing (the same series when none of them is in it)."""
        if stamps is None or not len(stamps):
            return self
        offset = stamps - self.start_ns
        index = offset[(offset >= 0) & (offset % self.step_ns == 0)] // self.step_ns
        index = index[index < len(self.y)]
        if not len(index):
            return self
        y = self.y.copy()
        y[index] = np.nan
        return SeriesData(self.uid, self.start_ns, self.step_ns, y)

    def until(self, end_ns: int) -> SeriesData:
        """The part strictly before ``end_ns``."""
        keep = max(0, min(len(self.y), -(-(end_ns - self.start_ns) // self.step_ns)))
        return SeriesData(self.uid, self.start_ns, self.step_ns, self.y[:keep])


def check_long_frame(df: pd.DataFrame) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ForecastError(f"demand frame lacks column(s) {missing}; expected unique_id, ds, y")


def step_ns(step: timedelta) -> int:
    ns = round(step.total_seconds() * 1e9)
    if ns <= 0:
        raise ForecastError(f"forecast step must be positive, got {step}")
    return ns


def to_panel(df: pd.DataFrame, step: timedelta) -> dict[str, SeriesData]:
    """Split a long frame into per-series grids of ``step``; missing steps become NaN, duplicates keep the last."""
    check_long_frame(df)
    size = step_ns(step)
    if df.empty:
        return {}
    codes, names = pd.factorize(df["unique_id"].astype(str), sort=True)
    stamps = pd.DatetimeIndex(df["ds"])
    if stamps.tz is None:
        raise ForecastError("demand frame column ds must be tz-aware (UTC)")
    ns = stamps.as_unit("ns").asi8
    y = pd.to_numeric(df["y"], errors="coerce").to_numpy(dtype=float)
    order = np.lexsort((ns, codes))
    codes, ns, y = codes[order], ns[order], y[order]
    bounds = np.searchsorted(codes, np.arange(len(names) + 1))
    panel: dict[str, SeriesData] = {}
    for i, name in enumerate(names):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        panel[str(name)] = _regular(str(name), ns[lo:hi], y[lo:hi], size)
    return panel


def _regular(uid: str, ns: np.ndarray, y: np.ndarray, size: int) -> SeriesData:
    start = int(ns[0])
    idx = (ns - start) // size
    if len(idx) == int(idx[-1]) + 1 and np.all(np.diff(idx) == 1):
        return SeriesData(uid, start, size, y.astype(float, copy=True))
    grid = np.full(int(idx[-1]) + 1, np.nan)
    grid[idx] = y  # later duplicates win: input is sorted by time
    return SeriesData(uid, start, size, grid)


def merge(older: SeriesData | None, newer: SeriesData, keep: int) -> SeriesData:
    """The newest ``keep`` steps of ``older`` overlaid with ``newer`` (``newer`` wins, NaN in it does not erase)."""
    if older is None or older.step_ns != newer.step_ns or older.end_ns < newer.start_ns - keep * newer.step_ns:
        return newer.tail(keep)
    end = newer.end_ns
    start = max(min(older.start_ns, newer.start_ns), end - (keep - 1) * newer.step_ns)
    # align older onto newer's grid phase
    offset = (older.start_ns - newer.start_ns) % newer.step_ns
    if offset:
        return newer.tail(keep)
    length = (end - start) // newer.step_ns + 1
    out = np.full(length, np.nan)
    for part in (older, newer):
        lo = (part.start_ns - start) // part.step_ns
        src = part.y
        if lo < 0:
            src = src[-lo:]
            lo = 0
        src = src[: max(0, length - lo)]
        if len(src):
            target = out[lo : lo + len(src)]
            np.copyto(target, src, where=~np.isnan(src))
    return SeriesData(newer.uid, int(start), newer.step_ns, out)


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
