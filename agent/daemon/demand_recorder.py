"""Remembering the demand a tick read, for the shadow account (an instrumentation wrapper around the source).

The shadow account charges each interval with the demand measured for it: the newest complete step (the one
that ended at most one step before ``now``), class by class. A class whose value for that step is missing or
implausible has no demand for the interval; an older value is never carried forward into it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta

import pandas as pd

from agent.sources.base import InstantMetricSource, MetricSource, PerClassMetricSource
from models import DemandClass, MetricsUnavailable
from models.demand import implausible_demand


class DemandRecorder:
    """Passes ``fetch`` through and keeps the newest frame it returned."""

    def __init__(self, inner: MetricSource) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self._frame: pd.DataFrame | None = None
        self._step = timedelta(0)

    def fetch(self, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta) -> pd.DataFrame:
        frame = self._inner.fetch(classes, start, end, step)
        self._keep(frame, step)
        return frame

    def newest_step(self, now: datetime) -> dict[str, float]:
        """Demand per class in the newest step that ended by ``now`` and less than one step before it."""
        with self._lock:
            frame, step = self._frame, self._step
        if frame is None or frame.empty or step <= timedelta(0):
            return {}
        ds = pd.to_datetime(frame["ds"], utc=True)
        ends = ds + pd.Timedelta(step)
        now_ts = pd.Timestamp(now)
        complete = (ends <= now_ts) & (ends > now_ts - pd.Timedelta(step))
        demand: dict[str, float] = {}
        for name, value in zip(frame.loc[complete, "unique_id"], frame.loc[complete, "y"], strict=True):
            y = float(value)
            if not math.isnan(y) and not implausible_demand(y):
                demand[str(name)] = y
        return demand

    def _keep(self, frame: pd.DataFrame, step: timedelta) -> None:
        with self._lock:
            self._frame, self._step = frame, step


class PerClassDemandRecorder(DemandRecorder):
    """The same for a source that answers per class (``PerClassMetricSource``), keeping that ability."""

    def __init__(self, inner: PerClassMetricSource) -> None:
        super().__init__(inner)  # type: ignore[arg-type]  # a per-class source also has ``fetch``
        self._per_class = inner

    def fetch_each(
        self, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta
    ) -> tuple[pd.DataFrame, dict[str, MetricsUnavailable]]:
        frame, unavailable = self._per_class.fetch_each(classes, start, end, step)
        self._keep(frame, step)
        return frame, unavailable


class InstantDemandRecorder(PerClassDemandRecorder):
    """The same for a source that also reads demand at an instant (``InstantMetricSource``), passed through."""

    def __init__(self, inner: PerClassMetricSource, instant: InstantMetricSource) -> None:
        super().__init__(inner)
        self._instant = instant

    def newest_each(
        self, classes: Sequence[DemandClass], at: datetime
    ) -> tuple[dict[str, tuple[datetime, float]], dict[str, MetricsUnavailable]]:
        return self._instant.newest_each(classes, at)


def demand_recorder(source: MetricSource) -> DemandRecorder:
    if isinstance(source, PerClassMetricSource):
        if isinstance(source, InstantMetricSource):
            return InstantDemandRecorder(source, source)
        return PerClassDemandRecorder(source)
    return DemandRecorder(source)
