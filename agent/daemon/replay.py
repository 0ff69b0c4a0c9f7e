"""Replaying a recorded demand trace as if it were live: a rehearsal source for ``leadtime run --replay``.

The trace is shifted in time so that ``replay_from`` (a moment in the trace) lines up with the moment the daemon
started; every fetch asks the trace for the matching earlier window and moves the timestamps forward again.
Steps beyond the end of the trace are missing, never zero, exactly as with the plain trace source.

The simulated cluster that stands in for the pools is served the same replayed demand, step by step, as the
simulator serves it: that is how it knows which units sit idle (and since when) and how much demand waits.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import pandas as pd

from actuators import SimulatedCluster
from actuators.simulated import gap_lengths
from agent.sources.trace import Trace, TraceSource
from models import ActionResult, DemandClass, PoolState
from models.clock import Clock

log = logging.getLogger(__name__)


class ShiftedTraceSource:
    def __init__(self, trace: Trace, replay_from: datetime, started_at: datetime) -> None:
        steps = (started_at - replay_from) // trace.step  # a whole number of steps keeps the grid aligned
        self.offset = steps * trace.step
        self._inner = TraceSource(trace)

    def fetch(self, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta) -> pd.DataFrame:
        frame = self._inner.fetch(classes, start - self.offset, end - self.offset, step)
        frame["ds"] = frame["ds"] + pd.Timedelta(self.offset)
        return frame


@dataclass(frozen=True)
class ReplayedDemand:
    """The demand the rehearsal serves: ``values[t, i]`` for class ``classes[i]`` at trace time ``index[t]`` (NaN:
    not observed), replayed ``offset`` later (``ShiftedTraceSource.offset``), one trace ``step`` apart."""

    index: pd.DatetimeIndex
    classes: tuple[str, ...]
    values: np.ndarray
    step: timedelta
    offset: timedelta

    def at(self, t: int) -> dict[str, float] | None:
        """Step ``t``'s demand per class, or None when a class has no value there (unknown is not zero)."""
        row = self.values[t]
        if np.isnan(row).any():
            return None
        return {name: float(v) for name, v in zip(self.classes, row, strict=True)}

    def known(self, t: int) -> dict[str, float]:
        """Step ``t``'s demand of the classes that have a value there."""
        return {name: float(v) for name, v in zip(self.classes, self.values[t], strict=True) if not np.isnan(v)}


class RehearsalCluster:
    """The simulated cluster as a live actuator. At every read, each replayed step whose time has come is served
    on it in order (units ready by then, spot interruptions, then the step's demand, as the simulator steps), and
    units that finished their lead time are ready. Without ``demand`` nothing is served: no unit is ever idle."""

    def __init__(self, cluster: SimulatedCluster, clock: Clock, demand: ReplayedDemand | None = None) -> None:
        self._cluster = cluster
        self._clock = clock
        self._demand = demand
        self._next = 0  # the first replayed step not served yet
        self._gaps = gap_lengths(~np.isnan(demand.values).any(axis=1)) if demand is not None else np.zeros(0, int)

    def list_pools(self) -> Sequence[PoolState]:
        now = self._clock.now()
        if self._demand is not None:
            self._serve_until(self._demand, now)
        self._cluster.advance(now)
        return self._cluster.list_pools()

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        return self._cluster.resize(pool_id, to_units, key)

    def _serve_until(self, demand: ReplayedDemand, now: datetime) -> None:
        steps = len(demand.index)
        offset = pd.Timedelta(demand.offset)
        served_any = False
        while self._next < steps and demand.index[self._next] + offset <= now:
            t = self._next
            at = (demand.index[t] + offset).to_pydatetime()
            self._cluster.advance(at)
            self._cluster.interrupt_spot(demand.step)
            self._serve(demand, t, at)
            self._next += 1
            served_any = True
        if served_any and self._next == steps:
            log.warning(
                "the replayed trace ended at %s (trace time): no more demand is served, and every tick from now "
                "finds none and holds",
                demand.index[-1].isoformat(),
            )

    def _serve(self, demand: ReplayedDemand, t: int, at: datetime) -> None:
        wanted = demand.at(t)
        if wanted is None:
            gap = demand.step * int(self._gaps[t])  # unknown demand: never read as idle, as in simulate
            self._cluster.pause_idle(demand.step, gap, demand.known(t))
            return
        outcome = self._cluster.serve(at, wanted)
        waiting = {name: chips for name, chips in outcome.unserved.items() if chips > 0}
        if waiting:
            log.info(
                "rehearsal: %g of %g accelerators of demand wait at %s (trace time %s): %s",
                sum(waiting.values()),
                sum(wanted.values()),
                at.isoformat(),
                demand.index[t].isoformat(),
                ", ".join(f"{name} {chips:g}" for name, chips in sorted(waiting.items())),
                extra={"unserved": waiting},
            )
