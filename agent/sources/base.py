"""The MetricSource interface.

``fetch`` returns a long frame ``unique_id, ds, y`` with one row per demand class and step in [start, end),
``unique_id`` being the demand class name and ``ds`` tz-aware UTC at the start of each step. A step with no
trustworthy value is NaN, never 0. A source that cannot answer at all raises ``MetricsUnavailable``.
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
