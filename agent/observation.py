"""Turning frames from a metric source and a forecaster into per-class observations and forecasts.

A class's observation (its demand now, the planner's floor) is the value read at the tick's time when the source
can read one (see ``agent.sources.base.InstantMetricSource``), else the newest value of the step grid; forecasts
are made from the grid alone, the one the models are fitted and calibrated on.

Missing, NaN, stale or implausible (negative, infinite, absurdly large) values never become zero: a class without
a trustworthy value is simply absent, and the reason is returned so the loop can hold and alert.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

import numpy as np
import pandas as pd

from agent.planning.groups import DemandGroup
from forecasting.base import peak_column, quantile_column
from forecasting.series import series_values, timestamp
from models import DemandForecast
from models.demand import implausible_demand
from models.durations import format_duration


def latest_observations(
    frame: pd.DataFrame,
    classes: Sequence[str],
    now: datetime,
    step: timedelta,
    max_staleness: timedelta,
    newest: Mapping[str, tuple[datetime, float]] | None = None,
) -> tuple[dict[str, float], dict[str, str]]:
    """Newest trustworthy value per class, and why each other class has none.

    ``newest`` holds values read at an instant (the tick's), each with the time it holds for; such a value is the
    class's observation and the frame's is not used, even when the instant value cannot be trusted (an older value
    never stands in for a newer one that is not a demand). A value from the frame observed at ``ds`` covers
    [ds, ds + step); it is stale when that interval ended more than ``max_staleness`` before ``now``. An instant
    value is stale when its own time is more than ``max_staleness`` before ``now``. Both times are when
    Prometheus evaluated the value, which answers with a stopped series' last sample for its lookback delta (5
    minutes by default): a reading can be that much older than its time, which ``max_staleness`` should exceed.
    """
    observed: dict[str, float] = {}
    problems: dict[str, str] = {}
    by_class: dict[str, tuple[pd.Timestamp, float]] = {}
    for name, (stamps, values) in series_values(frame).items():
        valid = np.flatnonzero(~np.isnan(values))
        if len(valid):
            by_class[name] = (timestamp(stamps[valid[-1]]), float(values[valid[-1]]))
    instant = newest or {}
    for name in classes:
        if name in instant:
            at, value = instant[name]
            ends = at
            if math.isnan(value):
                problems[name] = f"newest value at {at.isoformat()} is NaN"
                continue
        elif name in by_class:
            stamp, value = by_class[name]
            at, ends = stamp.to_pydatetime(), stamp.to_pydatetime() + step
        else:
            problems[name] = "no observed value in the recent window (empty or NaN)"
            continue
        if why := implausible_demand(value):
            problems[name] = f"newest value at {at.isoformat()} is not a demand: {why}"
            continue
        age = now - ends
        if age > max_staleness:
            problems[name] = f"newest value is {format_duration(age)} old (limit {format_duration(max_staleness)})"
            continue
        observed[name] = value
    return observed, problems


def with_group_series(frame: pd.DataFrame, groups: Sequence[DemandGroup]) -> pd.DataFrame:
    """Add one summed series per group of several classes; a step where any member is missing stays missing."""
    aggregates = [g for g in groups if g.is_aggregate]
    if not aggregates or frame.empty:
        return frame
    series = series_values(frame)
    names, stamps, values = [], [], []
    for group in aggregates:
        if any(m not in series for m in group.members):
            continue  # a member without any data leaves the group without a total
        grid = series[group.members[0]][0]
        if all(np.array_equal(series[m][0], grid) for m in group.members):
            total = np.sum([series[m][1] for m in group.members], axis=0)  # NaN in any member stays NaN
        else:
            wide = pd.DataFrame({m: pd.Series(series[m][1], index=series[m][0]) for m in group.members})
            grid = wide.index.to_numpy(dtype=np.int64)
            total = wide.sum(axis=1, skipna=False).to_numpy()
        names.append(np.full(len(grid), group.name, dtype=object))
        stamps.append(grid)
        values.append(total)
    if not names:
        return frame
    ds = pd.DatetimeIndex(np.concatenate(stamps), tz="UTC")
    extra = pd.DataFrame({"unique_id": np.concatenate(names), "ds": ds, "y": np.concatenate(values)})
    return pd.concat([frame, extra], ignore_index=True)


def forecasts_from_frame(
    frame: pd.DataFrame, issued_at: datetime, step: timedelta, levels: Sequence[float], last: dict[str, float]
) -> tuple[dict[str, DemandForecast], dict[str, str]]:
    """Per-class ``DemandForecast`` from a forecaster's output; a class with NaN values has no forecast. Peak
    quantiles come along where the forecaster published them (a NaN one leaves that class without peaks)."""
    forecasts: dict[str, DemandForecast] = {}
    problems: dict[str, str] = {}
    if frame.empty:
        return forecasts, problems
    ordered = frame.sort_values(["unique_id", "ds"], kind="stable")
    ids = ordered["unique_id"].to_numpy()
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    bounds = [*starts[1:], len(ids)]
    columns = {level: ordered[quantile_column(level)].to_numpy(dtype=float) for level in levels}
    peak_columns = {
        level: ordered[peak_column(level)].to_numpy(dtype=float) for level in levels if peak_column(level) in ordered
    }
    models = ordered["model"].to_numpy()
    notes = ordered["note"].to_numpy()
    for begin, end in zip(starts, bounds, strict=True):
        name = str(ids[begin])
        if any(np.isnan(columns[level][begin:end]).any() for level in levels):
            problems[name] = f"forecast has no value ({notes[begin] or 'NaN from the model'})"
            continue
        values = {level: tuple(columns[level][begin:end].tolist()) for level in levels}
        peaks = {level: tuple(column[begin:end].tolist()) for level, column in peak_columns.items()}
        if any(np.isnan(column[begin:end]).any() for column in peak_columns.values()):
            peaks = {}
        forecasts[name] = DemandForecast(
            demand_class=name,
            issued_at=issued_at,
            step=step,
            quantiles=values,
            last_observed=last.get(name, math.nan),
            model=str(models[begin]),
            note=str(notes[begin]),
            peaks=peaks,
        )
    return forecasts, problems
