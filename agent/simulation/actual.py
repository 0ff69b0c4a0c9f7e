"""The ``actual`` row of a replay from Prometheus: what the pools really ran in the window, from each pool's
recorded capacity, next to what every policy would have run.

There is an ``actual`` row only when every pool has a recorded capacity at every step the window bills: a total
that leaves out a pool, or a stretch of one, would understate the cost, and the last value held across a long
gap overstated it (a pool scaled to zero answers a ``count()`` query with no sample at all). A record missing for
``HELD_STEPS`` steps or fewer holds the last one. Otherwise the results say which pools lack it, where and why.
A pool that reads 0 at every step where its classes had demand is refused too (``_zero_reads``): its query most
likely selects no node, and the row would have the cluster run its demand on nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from agent.simulation.runner import HELD_STEPS, PolicyRun, run_actual, unrecorded_steps
from agent.simulation.window import SimulationWindow
from agent.sources.node_label_hints import pool_label_fallback
from agent.sources.prometheus_history import ClusterHistory
from config.schema import Settings
from models import PoolKind, PoolSpec

log = logging.getLogger(__name__)


def actual_run(settings: Settings, history: ClusterHistory, window: SimulationWindow) -> PolicyRun | None:
    """The ``actual`` row, or None when a pool's record is missing (``actual_note`` says why). A pool whose query
    read 0 wherever its classes had demand is told in a warning as well: its query most likely selects no node."""
    units = _window_units(history, window)
    if _missing(settings, history, window, units):
        for reason in _zero_reads(settings, history, window, units).values():
            log.warning("no actual row: %s", reason)
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
    zeros = _zero_reads(settings, history, window, units)
    for pool in settings.pool_specs():
        query = history.capacity_queries.get(pool.pool_id)
        if query is None:
            reasons.append(f"{pool.pool_id}: no prometheus.pools.{pool.pool_id}.capacity_query is configured")
        elif pool.pool_id in history.capacity_problems:
            reasons.append(f"{pool.pool_id}: {history.capacity_problems[pool.pool_id]}{_guard_hint(query)}")
        elif np.isnan(units[pool.pool_id]).all():
            reasons.append(f"{pool.pool_id}: no recorded capacity in the window{_guard_hint(query)}")
        elif pool.pool_id in zeros:
            reasons.append(zeros[pool.pool_id])
        elif gaps := _gaps(units[pool.pool_id], window):
            (first, last), more = gaps[0], len(gaps) - 1
            reasons.append(
                f"{pool.pool_id}: no recorded capacity for {last - first + 1} steps, from "
                f"{window.index[first].isoformat()} to {window.index[last].isoformat()}, while demand was recorded"
                + (f" (and {more} more such gaps)" if more else "")
                + _guard_hint(query)
            )
    return "; ".join(reasons)


def _zero_reads(
    settings: Settings, history: ClusterHistory, window: SimulationWindow, units: dict[str, np.ndarray]
) -> dict[str, str]:
    """The pools whose capacity query read 0 (or nothing) at every step where their classes had demand, with the
    reason to refuse the row: an on-prem pool (its nodes are owned: all of them down for the whole window is far
    less likely than a query that selects none), or a cloud pool no other pool serving those classes ran a unit
    beside. A query whose label value names no node (a misspelt pool name) reads 0 through a fallback on the label
    (``or on() (0 * count(kube_node_labels{label_...!=""}))``), not nothing, and the row said the cluster ran its
    demand on nothing: 0 USD, all of it unserved."""
    pools = [p for p in settings.pool_specs() if p.pool_id in units and p.pool_id in history.capacity_queries]
    found: dict[str, str] = {}
    for pool in pools:
        steps = _demand_steps(pool, window)
        values = units[pool.pool_id][steps]
        if not steps.any() or np.isnan(values).all() or np.nanmax(values) > 0:
            continue
        others = [p for p in pools if p.pool_id != pool.pool_id and set(p.serves) & set(pool.serves)]
        ran_elsewhere = any(np.nanmax(units[p.pool_id][steps], initial=0.0) > 0 for p in others)
        if ran_elsewhere and pool.kind is not PoolKind.ON_PREM:
            continue  # a pool kept at none while another ran the demand
        query = history.capacity_queries[pool.pool_id]
        beside = "" if pool.kind is PoolKind.ON_PREM else ", while no other pool serving them ran a unit"
        found[pool.pool_id] = (
            f"{pool.pool_id}: prometheus.pools.{pool.pool_id}.capacity_query reads 0 units at each of the "
            f"{int(steps.sum())} steps where its classes ({', '.join(pool.serves)}) had demand{beside}: a query "
            "whose label value names none of the pool's nodes (a misspelt pool name) reads 0 through its fallback, "
            f"not nothing; check the label value in {query}{_label_values(history, pool.pool_id)}"
        )
    return found


def _demand_steps(pool: PoolSpec, window: SimulationWindow) -> np.ndarray:
    """The steps the window bills at which a class the pool serves had demand."""
    columns = [i for i, name in enumerate(window.classes) if name in pool.serves]
    demand = np.nan_to_num(window.demand[:, columns], nan=0.0).sum(axis=1) if columns else np.zeros(len(window.index))
    steps: np.ndarray = window.observed & (demand > 0)
    return steps


def _label_values(history: ClusterHistory, pool_id: str) -> str:
    """The values Prometheus holds of the node labels the pool's query selects on, when they were read."""
    labels = history.capacity_labels.get(pool_id, {})
    told = [f"{name} is {', '.join(repr(v) for v in values) or 'on no node'}" for name, values in labels.items()]
    return f" (in Prometheus, {'; '.join(told)})" if told else ""


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
