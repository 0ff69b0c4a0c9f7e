"""The ``actual`` row of a replay from Prometheus: what the pools really ran in the window, from each pool's
recorded capacity, next to what every policy would have run.

There is an ``actual`` row only when every pool has a recorded capacity at every step the window bills: a total
that leaves out a pool, or a stretch of one, would understate the cost, and the last value held across a long
gap overstated it (a pool scaled to zero answers a ``count()`` query with no sample at all). A record missing for
``HELD_STEPS`` steps or fewer holds the last one. Otherwise the results say which pools lack it, where and why.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agent.simulation.runner import HELD_STEPS, PolicyRun, run_actual, unrecorded_steps
from agent.simulation.window import SimulationWindow
from agent.sources.node_label_hints import pool_label_fallback
from agent.sources.prometheus_history import ClusterHistory
from config.schema import Settings


def actual_run(settings: Settings, history: ClusterHistory, window: SimulationWindow) -> PolicyRun | None:
    units = _window_units(history, window)
    if _missing(settings, history, window, units):
        return None
    return run_actual(settings, window, units)


def actual_note(settings: Settings, history: ClusterHistory, window: SimulationWindow) -> dict[str, Any]:
    """For ``results.json``: the capacity query of each pool, and why there is no ``actual`` row, if there
    is none."""
    return {
        "capacity_queries": dict(history.capacity_queries),
        "missing": _missing(settings, history, window, _window_units(history, window)) or None,
        "method": "recorded units per step, serving from the step they are recorded, billed and served like the "
        "policies; each unit a pool added is billed from its pool's lead time before it is recorded (from the "
        "window's start at the latest), as a policy's unit is billed from its request; a step without "
        f"a record holds the last recorded value for up to {HELD_STEPS} steps, and a longer gap at a step with "
        "demand leaves no actual row",
    }


def _window_units(history: ClusterHistory, window: SimulationWindow) -> dict[str, np.ndarray]:
    lo = history.trace.position(window.index[0].to_pydatetime())
    hi = lo + len(window.index)
    return {pool_id: values[lo:hi] for pool_id, values in history.capacity.items()}


def _missing(
    settings: Settings, history: ClusterHistory, window: SimulationWindow, units: dict[str, np.ndarray]
) -> str:
    reasons = []
    for pool in settings.pool_specs():
        query = history.capacity_queries.get(pool.pool_id)
        if query is None:
            reasons.append(f"{pool.pool_id}: no prometheus.pools.{pool.pool_id}.capacity_query is configured")
        elif pool.pool_id in history.capacity_problems:
            reasons.append(f"{pool.pool_id}: {history.capacity_problems[pool.pool_id]}{_guard_hint(query)}")
        elif np.isnan(units[pool.pool_id]).all():
            reasons.append(f"{pool.pool_id}: no recorded capacity in the window{_guard_hint(query)}")
        elif gaps := _gaps(units[pool.pool_id], window):
            (first, last), more = gaps[0], len(gaps) - 1
            reasons.append(
                f"{pool.pool_id}: no recorded capacity for {last - first + 1} steps, from "
                f"{window.index[first].isoformat()} to {window.index[last].isoformat()}, while demand was recorded"
                + (f" (and {more} more such gaps)" if more else "")
                + _guard_hint(query)
            )
    return "; ".join(reasons)


def _gaps(values: np.ndarray, window: SimulationWindow) -> list[tuple[int, int]]:
    """The first and last step of each run of steps without a record that ``unrecorded_steps`` will not fill."""
    unfilled = unrecorded_steps(values, window.observed)
    runs, start = [], None
    for t, missing in enumerate(np.isnan(values)):
        if missing and start is None:
            start = t
        if start is not None and (not missing or t == len(values) - 1):
            last = t if missing else t - 1
            if unfilled[start : last + 1].any():
                runs.append((start, last))
            start = None
    return runs


def _guard_hint(query: str) -> str:
    """How to make a capacity query read 0 while the pool has no nodes, for a query without a fallback: fall back
    on the nodes that carry the pool's label, never on every node (``count(kube_node_info)`` reads 0 while
    kube-state-metrics exports no node label, and the pool then ran nothing in the ``actual`` row)."""
    if " or " in query:
        return ""
    fallback = pool_label_fallback(query)
    example = f", e.g. {query} {fallback}" if fallback else ""
    return (
        " (a count() over the pool's nodes answers nothing while it has none: add a fallback that reads 0 while "
        f"kube-state-metrics reports nodes with the pool's label{example}; not count(kube_node_info), which reads 0 "
        "while the label is not exported at all)"
    )
