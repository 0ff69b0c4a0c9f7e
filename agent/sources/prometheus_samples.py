"""The step grid a range of Prometheus samples is read on, and the checks on the samples read.

The grid is aligned to the step (whole multiples of the step since the epoch, tz-aware UTC), so that the chunks a
long range is read in meet without duplicate or missing steps. A sample that cannot be a demand (negative,
infinite, absurdly large: ``models.demand.implausible_demand``) holds the class when it is the newest, and is a gap
(NaN), never 0, otherwise. Used by ``agent.sources.prometheus``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from models import MetricsUnavailable
from models.demand import implausible_demand

log = logging.getLogger("agent.sources.prometheus")


def step_grid(start: datetime, end: datetime, step: timedelta) -> pd.DatetimeIndex:
    """Steps in [start, end) that are whole multiples of ``step`` since the epoch, tz-aware UTC."""
    seconds = step_seconds(step)
    first = math.ceil(epoch_seconds(start) / seconds) * seconds
    last = math.ceil(epoch_seconds(end) / seconds) * seconds  # exclusive
    stamps = np.arange(first, last, seconds, dtype=np.int64)
    return pd.DatetimeIndex(pd.to_datetime(stamps, unit="s", utc=True))


def chunks(grid: pd.DatetimeIndex, size: int) -> list[pd.DatetimeIndex]:
    return [grid[i : i + size] for i in range(0, len(grid), size)]


def refuse_implausible(name: str, query: str, samples: dict[int, float], hold: bool = True) -> None:
    """Hold the class (``hold``) when its newest value cannot be a demand; earlier such values, and with ``hold``
    off every such value, become gaps (NaN)."""
    bad = {stamp: why for stamp, value in samples.items() if (why := implausible_demand(value))}
    if not bad:
        return
    newest = max(samples)
    if hold and newest in bad:
        when = datetime.fromtimestamp(newest, UTC).isoformat()
        raise MetricsUnavailable(
            name, f"the newest value Prometheus returned ({when}) is not a demand: {bad[newest]}", query
        )
    first = min(bad)
    log.warning(
        "implausible demand read as missing class=%s count=%d first=%s reason=%r query=%r",
        name,
        len(bad),
        datetime.fromtimestamp(first, UTC).isoformat(),
        bad[first],
        query,
    )
    for stamp in bad:
        samples[stamp] = math.nan


def label_set(labels: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{k}={v!r}" for k, v in sorted(labels.items())) + "}"


def age_text(delta: pd.Timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


def epoch_seconds(when: datetime) -> float:
    if when.tzinfo is None:
        raise ValueError(f"expected a tz-aware time, got {when.isoformat()}")
    return when.astimezone(UTC).timestamp()


def step_seconds(step: timedelta) -> int:
    seconds = step.total_seconds()
    if seconds < 1 or seconds != int(seconds):
        raise ValueError(f"the step must be a whole number of seconds, got {step}")
    return int(seconds)
