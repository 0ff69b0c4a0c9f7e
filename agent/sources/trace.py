"""Recorded demand traces: reading and checking a long-format CSV, writing one, and replaying it as a
MetricSource."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from models import DemandClass, MetricsUnavailable, TraceError

REQUIRED = ("unique_id", "ds", "y")
OPTIONAL = ("running", "pending", "capacity")


@dataclass(frozen=True)
class Trace:
    """A checked trace as a dense grid: ``values[t, i]`` is series ``series[i]`` at ``index[t]`` (NaN = gap)."""

    path: str
    index: pd.DatetimeIndex
    series: tuple[str, ...]
    values: np.ndarray
    step: timedelta

    def column(self, series_id: str) -> np.ndarray:
        try:
            return self.values[:, self.series.index(series_id)]
        except ValueError:
            known = ", ".join(self.series[:20])
            raise TraceError(f"trace {self.path} has no series {series_id!r} (it has: {known})") from None

    def position(self, when: datetime) -> int:
        """Index of the first step at or after ``when``."""
        return int(self.index.searchsorted(pd.Timestamp(when)))


def read_trace(path: str | Path) -> Trace:
    """Read a long-format demand CSV (optionally gzipped) and check it; every problem is a ``TraceError``."""
    source = str(path)
    if not Path(path).is_file():
        raise TraceError(f"trace file not found: {source}")
    try:
        frame = pd.read_csv(path)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read trace {source} as CSV: {exc}") from None
    _check_columns(frame, source)
    frame["ds"] = _timestamps(frame["ds"], source)
    y = pd.to_numeric(frame["y"], errors="coerce")
    bad = frame["y"].notna() & y.isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise TraceError(f"trace {source}: column y must be numeric; row {row + 2} has {frame['y'].iloc[row]!r}")
    if (y < 0).any():
        row = int(np.flatnonzero((y < 0).to_numpy())[0])
        raise TraceError(f"trace {source}: demand y must not be negative; row {row + 2} has {y.iloc[row]}")
    frame["y"] = y
    _check_order(frame, source)
    wide = frame.pivot(index="ds", columns="unique_id", values="y")
    step = _step(pd.DatetimeIndex(wide.index), source)
    full = pd.date_range(wide.index[0], wide.index[-1], freq=step)
    wide = wide.reindex(full)
    return Trace(
        path=source,
        index=pd.DatetimeIndex(full),
        series=tuple(str(c) for c in wide.columns),
        values=wide.to_numpy(dtype=float),
        step=step,
    )


def write_trace(trace: Trace, path: str | Path) -> int:
    """Write ``trace`` as a long-format CSV (gzipped when the name ends in ``.gz``) that ``read_trace`` reads back
    unchanged: one row per series and step, UTC ISO-8601 timestamps, an empty ``y`` for a gap. Returns rows."""
    steps = len(trace.index)
    stamps = trace.index.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%S+00:00")
    frame = pd.DataFrame(
        {
            "unique_id": np.repeat(np.array(trace.series, dtype=object), steps),
            "ds": np.tile(np.asarray(stamps, dtype=object), len(trace.series)),
            "y": trace.values.T.reshape(-1),
        }
    )
    try:
        frame.to_csv(path, index=False, float_format="%.10g")
    except OSError as exc:
        raise TraceError(f"cannot write trace {path}: {exc}") from None
    return len(frame)


def _check_columns(frame: pd.DataFrame, source: str) -> None:
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise TraceError(f"trace {source} lacks column(s) {missing}; expected {list(REQUIRED)} (+ {list(OPTIONAL)})")
    unknown = [c for c in frame.columns if c not in REQUIRED + OPTIONAL]
    if unknown:
        raise TraceError(f"trace {source} has unknown column(s) {unknown}; allowed: {list(REQUIRED + OPTIONAL)}")
    if frame.empty:
        raise TraceError(f"trace {source} has no rows")


def _timestamps(column: pd.Series, source: str) -> pd.Series:
    if column.isna().any():
        row = int(np.flatnonzero(column.isna().to_numpy())[0])
        raise TraceError(f"trace {source}: row {row + 2} has an empty timestamp")
    try:
        parsed = pd.to_datetime(column, format="ISO8601", utc=False)
    except (ValueError, TypeError) as exc:
        raise TraceError(f"trace {source}: timestamps must be ISO-8601: {exc}") from None
    if parsed.dt.tz is None:
        return parsed.dt.tz_localize("UTC")  # naive means "zone unknown, read as UTC"
    return parsed.dt.tz_convert("UTC")


def _check_order(frame: pd.DataFrame, source: str) -> None:
    for uid, group in frame.groupby("unique_id", sort=False):
        deltas = group["ds"].diff().dropna()
        if (deltas <= pd.Timedelta(0)).any():
            row = int(group.index[1:][(deltas <= pd.Timedelta(0)).to_numpy()][0])
            raise TraceError(
                f"trace {source}: timestamps of series {uid!r} must increase strictly; row {row + 2} "
                f"({frame['ds'].iloc[row].isoformat()}) does not come after the row before it"
            )


def _step(index: pd.DatetimeIndex, source: str) -> timedelta:
    if len(index) < 2:
        raise TraceError(f"trace {source} has fewer than two timestamps; a step cannot be inferred")
    seconds = np.diff(index.as_unit("ns").asi8) / 1e9
    step = float(seconds.min())
    if step <= 0 or np.any(np.abs(seconds / step - np.round(seconds / step)) > 1e-9):
        raise TraceError(f"trace {source}: timestamps are not on a regular grid of {step:g} s")
    return timedelta(seconds=step)


class TraceSource:
    """Replays a trace as a MetricSource. Steps outside the trace are missing, never zero."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    def fetch(self, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta) -> pd.DataFrame:
        if step != self.trace.step:
            raise MetricsUnavailable("*", f"trace step is {self.trace.step}, asked for {step}")
        lo, hi = self.trace.position(start), self.trace.position(end)
        stamps = self.trace.index[lo:hi]
        columns = [self.trace.column(c.series_id)[lo:hi] for c in classes]
        names = np.repeat(np.array([c.name for c in classes], dtype=object), len(stamps))
        return pd.DataFrame(
            {
                "unique_id": names,
                "ds": pd.DatetimeIndex(np.tile(stamps.as_unit("ns").asi8, len(classes)), tz="UTC"),
                "y": np.concatenate(columns) if columns else np.empty(0),
            }
        )
