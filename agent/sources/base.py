"""The MetricSource interface.

``fetch`` returns a long frame ``unique_id, ds, y`` with one row per demand class and step in [start, end),
``unique_id`` being the demand class name and ``ds`` tz-aware UTC at the start of each step. A step with no
trustworthy value is NaN, never 0. A source that cannot answer at all raises ``MetricsUnavailable``.

A source that can also read demand at one instant (``InstantMetricSource``, Prometheus) gives the loop the newest
sample at the tick's time: the grid's newest step can start up to one step before it.

``read_deadline`` bounds the reads made inside it: a source that reads classes one by one (Prometheus) holds the
classes it has not read when the time is up, and cuts its requests' timeouts and retries to the time left, so a
slow source cannot keep the tick from planning, enforcing budgets and alerting.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
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
    grid, with the time the value holds for; and why each other class has none (a ``MalformedAnswer`` when the
    answer was nonsense rather than missing or failed). Values come as read: NaN and implausible values are the
    caller's to judge."""

    def newest_each(
        self, classes: Sequence[DemandClass], at: datetime
    ) -> tuple[dict[str, tuple[datetime, float]], dict[str, MetricsUnavailable]]: ...


# The setting a read the deadline ended names for a person to raise, unless the deadline was given another: a tick's
# reads are bounded by loop.read_deadline.
READ_DEADLINE_SETTING = "loop.read_deadline (the time a tick reads in, half of loop.tick_interval unless set)"

# The monotonic time by which reads should end, the budget it was given and the setting that set it; None outside
# ``read_deadline``.
_READ_BY: ContextVar[tuple[float, timedelta, str] | None] = ContextVar("read_by", default=None)


@contextmanager
def read_deadline(budget: timedelta | None, setting: str = READ_DEADLINE_SETTING) -> Iterator[None]:
    """Reads made inside the block (in this thread) should end within ``budget``; None lifts an outer deadline
    (a refit's history read inside a tick's observation). ``setting`` names the setting the budget comes from, with
    how, for a read the deadline ends to name (``read_deadline_setting``): a deadline that is a share of the tick
    names loop.tick_interval, not loop.read_deadline."""
    by = None if budget is None else (time.monotonic() + budget.total_seconds(), budget, setting)
    token = _READ_BY.set(by)
    try:
        yield
    finally:
        _READ_BY.reset(token)


def read_time_left() -> tuple[float, timedelta] | None:
    """Seconds left (0 or less once it passed) of the current read deadline, and the budget it was given; None
    when reads are not bounded."""
    deadline = _READ_BY.get()
    return None if deadline is None else (deadline[0] - time.monotonic(), deadline[1])


def read_deadline_setting() -> str | None:
    """The setting the current read deadline comes from (``read_deadline``'s ``setting``), the one to raise when it
    ends a read; None when reads are not bounded."""
    deadline = _READ_BY.get()
    return None if deadline is None else deadline[2]
