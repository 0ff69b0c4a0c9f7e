"""The MetricSource interface.

``fetch`` returns a long frame ``unique_id, ds, y`` with one row per demand class and step in [start, end),
``unique_id`` being the demand class name and ``ds`` tz-aware UTC at the start of each step. A step with no
trustworthy value is NaN, never 0. A source that cannot answer at all raises ``MetricsUnavailable``.

A source that can also read demand at one instant (``InstantMetricSource``, Prometheus) gives the loop the newest
sample at the tick's time: the grid's newest step can start up to one step before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

import pandas as pd

from models import DemandClass, MetricsUnavailable


class MetricSource(Protocol):
    def fetch(
        self, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta
    ) -> pd.DataFrame: ...


@runtime_checkable
class PerClassMetricSource(Protocol):
    """An optional ability: answer for every class that has data and say why each other class has none, so
    the agent holds only the pools of the classes it cannot see."""

    def fetch_each(
        self, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta
    ) -> tuple[pd.DataFrame, dict[str, MetricsUnavailable]]: ...


@runtime_checkable
class InstantMetricSource(Protocol):
    """An optional ability: each class's demand at the instant ``at``, from the newest samples rather than the step
    grid, with the time the value holds for; and why each other class has none (the caller keeps the grid's newest
    value for those). Values come as read: NaN and implausible values are the caller's to judge."""

    def newest_each(
        self, classes: Sequence[DemandClass], at: datetime
    ) -> tuple[dict[str, tuple[datetime, float]], dict[str, MetricsUnavailable]]: ...
