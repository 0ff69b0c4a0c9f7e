"""The ``actual`` row of a replay from Prometheus: what the pools really ran in the window, from each pool's
recorded capacity, next to what every policy would have run.

There is an ``actual`` row only when every pool has a recorded capacity in the window: a total that leaves out
a pool would understate the cost. Otherwise the results say which pools lack it and why.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agent.simulation.runner import PolicyRun, run_actual
from agent.simulation.window import SimulationWindow
from agent.sources.prometheus_history import ClusterHistory
from config.schema import Settings


def actual_run(settings: Settings, history: ClusterHistory, window: SimulationWindow) -> PolicyRun | None:
    units = _window_units(history, window)
    if _missing(settings, history, units):
        return None
    return run_actual(settings, window, units)


def actual_note(settings: Settings, history: ClusterHistory) -> dict[str, Any]:
    """For ``results.json``: the capacity query of each pool, and why there is no ``actual`` row, if there
    is none."""
    return {
        "capacity_queries": dict(history.capacity_queries),
        "missing": _missing(settings, history, history.capacity) or None,
        "method": "recorded units per step, ready at once, billed and served like the policies; a step without "
        "a record holds the last recorded value",
    }


def _window_units(history: ClusterHistory, window: SimulationWindow) -> dict[str, np.ndarray]:
    lo = history.trace.position(window.index[0].to_pydatetime())
    hi = lo + len(window.index)
    return {pool_id: values[lo:hi] for pool_id, values in history.capacity.items()}


def _missing(settings: Settings, history: ClusterHistory, units: dict[str, np.ndarray]) -> str:
    reasons = []
    for pool in settings.pool_specs():
        if pool.pool_id not in history.capacity_queries:
            reasons.append(f"{pool.pool_id}: no prometheus.pools.{pool.pool_id}.capacity_query is configured")
        elif pool.pool_id in history.capacity_problems:
            reasons.append(f"{pool.pool_id}: {history.capacity_problems[pool.pool_id]}")
        elif np.isnan(units[pool.pool_id]).all():
            reasons.append(f"{pool.pool_id}: no recorded capacity in the window")
    return "; ".join(reasons)
