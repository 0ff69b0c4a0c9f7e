"""Replaying a recorded demand trace as if it were live: a rehearsal source for ``leadtime run --replay``.

The trace is shifted in time so that ``replay_from`` (a moment in the trace) lines up with the moment the daemon
started; every fetch asks the trace for the matching earlier window and moves the timestamps forward again.
Steps beyond the end of the trace are missing, never zero, exactly as with the plain trace source.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import pandas as pd

from actuators import SimulatedCluster
from agent.sources.trace import Trace, TraceSource
from models import ActionResult, DemandClass, PoolState
from models.clock import Clock


class ShiftedTraceSource:
    def __init__(self, trace: Trace, replay_from: datetime, started_at: datetime) -> None:
        steps = (started_at - replay_from) // trace.step  # a whole number of steps keeps the grid aligned
        self.offset = steps * trace.step
        self._inner = TraceSource(trace)

    def fetch(self, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta) -> pd.DataFrame:
        frame = self._inner.fetch(classes, start - self.offset, end - self.offset, step)
        frame["ds"] = frame["ds"] + pd.Timedelta(self.offset)
        return frame


class RehearsalCluster:
    """The simulated cluster as a live actuator: units that finished their lead time are ready at every read."""

    def __init__(self, cluster: SimulatedCluster, clock: Clock) -> None:
        self._cluster = cluster
        self._clock = clock

    def list_pools(self) -> Sequence[PoolState]:
        self._cluster.advance(self._clock.now())
        return self._cluster.list_pools()

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        return self._cluster.resize(pool_id, to_units, key)
