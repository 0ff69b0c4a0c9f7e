"""A cluster's own history read from Prometheus, for replaying it offline (``simulate --source prometheus``,
``export-trace``).

Demand per class comes through the same configured queries, chunking and checks as the live source
(``PrometheusSource``) and becomes a ``Trace`` on the step grid: a step without a value is a gap (NaN), never 0.
What each pool really ran comes from its ``prometheus.pools.<id>.capacity_query`` (units per step), when one is
configured; a pool whose query answers nothing is named with the reason instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from agent.sources.node_label_values import node_label_values
from agent.sources.prometheus import PrometheusSource, no_usable_data
from agent.sources.prometheus_queries import demand_queries
from agent.sources.prometheus_samples import step_grid
from agent.sources.trace import Trace
from config.schema import Settings
from models import ConfigError, ConfigProblem, LeadtimeError, MetricSourceUnavailable, MetricsUnavailable


@dataclass(frozen=True)
class ClusterHistory:
    """Demand per class (``trace``, columns named by series id) and recorded units per pool on the same grid."""

    trace: Trace
    capacity: dict[str, np.ndarray] = field(default_factory=dict)
    capacity_queries: dict[str, str] = field(default_factory=dict)
    capacity_problems: dict[str, str] = field(default_factory=dict)
    # the values of the node labels its query selects on, for a pool that reads 0 throughout (a misspelt one?)
    capacity_labels: dict[str, dict[str, list[str]]] = field(default_factory=dict)


def prometheus_source(settings: Settings, config_path: str, reader: str = "--source prometheus") -> PrometheusSource:
    """``reader`` names what reads Prometheus, for the error when the configuration says nothing of it."""
    prometheus = settings.prometheus
    if prometheus is None:
        raise ConfigError(
            config_path,
            [ConfigProblem("prometheus", f"{reader} reads Prometheus: add a prometheus section (url)")],
        )
    return PrometheusSource.from_settings(prometheus, demand_queries(settings.demand_class_models(), prometheus))


def read_history(settings: Settings, source: PrometheusSource, start: datetime, end: datetime) -> ClusterHistory:
    """Every class's demand in [start, end) at the forecast step; stops (``MetricSourceUnavailable``, naming the
    range and ``--end``) when Prometheus cannot be reached or any class has no value in the whole range, since a
    replay without a class is not the cluster's. A class is judged on the whole range, not on its newest value
    (as the live source judges it): one whose collector is down at ``end``, or that was retired inside the
    range, keeps the values it has, and the steps without one are gaps (NaN), never 0. Capacities likewise."""
    step = settings.forecast.step
    grid = step_grid(start, end, step)
    if len(grid) < 2:
        raise LeadtimeError(f"the range {start.isoformat()} .. {end.isoformat()} holds fewer than two steps of {step}")
    source.probe()
    classes = settings.demand_class_models()
    frame, missing = source.fetch_history(classes, start, end, step)
    if missing:
        refusal = no_usable_data(source.url, missing, every_class=len(missing) == len(classes))
        raise MetricSourceUnavailable(f"{refusal} (in {start.isoformat()} .. --end {end.isoformat()})")
    names = {c.name: c.series_id for c in classes}
    wide = frame.pivot(index="ds", columns="unique_id", values="y").reindex(index=grid, columns=list(names))
    trace = Trace(
        path=f"prometheus {source.url}",
        index=grid,
        series=tuple(names.values()),
        values=wide.to_numpy(dtype=float),
        step=step,
    )
    history = ClusterHistory(trace)
    overrides = settings.prometheus.pools if settings.prometheus is not None else {}
    for pool in settings.pool_specs():
        query = overrides.get(pool.pool_id)
        if query is None or query.capacity_query is None:
            continue
        history.capacity_queries[pool.pool_id] = query.capacity_query
        try:
            values = source.series(f"pool {pool.pool_id}", query.capacity_query, start, end, step, history=True)
        except MetricsUnavailable as exc:
            history.capacity_problems[pool.pool_id] = exc.reason
            continue
        history.capacity[pool.pool_id] = values.to_numpy(dtype=float)
        if (values == 0).any() and not (values > 0).any():
            history.capacity_labels[pool.pool_id] = node_label_values(source, query.capacity_query, start, end)
    return history
