"""Reading the demand a tick plans on from its metric source: the classes' demand on the forecast step grid, each
class's demand at the tick's instant, and each group's summed demand now.

A tick reads the recent demand on the forecast step grid (steps in [start, now)), which the forecaster predicts
from, unchanged. The grid's newest step can start up to one step before ``now`` (5 minutes by default, against a
60-second tick), so a source that reads demand at an instant (Prometheus) is also asked for each class's value at
``now``: that is the class's observed demand, the planner's floor, and a burst queued since the newest step counts
at once. A class without a value at ``now`` (the read failed, or Prometheus has no sample within its lookback
delta) keeps the grid's newest value, judged as before; a value at ``now`` that is NaN or not a demand, and an
answer at ``now`` that is malformed (``MalformedAnswer``: a value that is not a number) hold the class, and
staleness (``forecast.max_staleness``) is judged on the time Prometheus evaluated it (a series that stopped keeps
its last sample for Prometheus' lookback delta, 5 minutes by default, on the grid and at an instant alike: keep
``max_staleness`` above it).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

import pandas as pd

from agent.planning.groups import DemandGroup
from agent.sources.base import InstantMetricSource, MetricSource, PerClassMetricSource
from models import DemandClass, MalformedAnswer, MetricsUnavailable

log = logging.getLogger(__name__)


def fetch_demand(
    source: MetricSource, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta
) -> tuple[pd.DataFrame, dict[str, MetricsUnavailable]]:
    """Demand of every class in [start, end); with a per-class source, also why some classes have none."""
    if isinstance(source, PerClassMetricSource):
        return source.fetch_each(classes, start, end, step)
    return source.fetch(classes, start, end, step), {}


def demand_now(
    source: MetricSource, classes: Sequence[DemandClass], names: Sequence[str], now: datetime
) -> tuple[dict[str, tuple[datetime, float]], dict[str, MalformedAnswer]]:
    """Each of the classes ``names``'s demand read at ``now`` where the source can read it at an instant (the grid's
    newest step can start up to a step before ``now``, and work queued since must count), and why each class whose
    answer was malformed has no data this tick. One query per class that has data on the grid; a class whose read
    failed or that has no value at ``now`` keeps the grid's newest value, as if never asked (a failed request is
    likely to get through at the next tick); a ``MalformedAnswer`` (Prometheus answered, with a value that is not a
    number) is not a failed read, and no older value stands in for it: the class is held, as for the same answer
    on the grid."""
    if not names or not isinstance(source, InstantMetricSource):
        return {}, {}
    try:
        readings, unread = source.newest_each([c for c in classes if c.name in names], now)
    except MetricsUnavailable as failed:
        readings, unread = {}, dict.fromkeys(names, failed)
    malformed = {name: why for name, why in unread.items() if isinstance(why, MalformedAnswer)}
    for name, why in unread.items():
        if name in malformed:
            log.warning("demand now malformed, the class is held class=%s reason=%r", name, why.reason)
        else:
            log.warning("demand now not read, the newest step stands in class=%s reason=%r", name, why.reason)
    return readings, malformed


def with_group_demand(observed: Mapping[str, float], groups: Sequence[DemandGroup]) -> dict[str, float]:
    """The observations, and each group's summed demand now where every member of it was observed."""
    summed = {
        g.name: math.fsum(observed[m] for m in g.members)
        for g in groups
        if g.is_aggregate and all(m in observed for m in g.members)
    }
    return {**observed, **summed}
