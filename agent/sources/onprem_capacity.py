"""On-prem capacity as Prometheus reports it: the units of each on-prem pool that can take work now.

An on-prem pool is never resized, but its nodes go down and are taken out for maintenance. Its
``prometheus.pools.<id>.capacity_query`` (one series, in nodes), read at the tick's time, says how many of them
are there: written to count the pool's Ready, schedulable nodes (README gives a kube-state-metrics query), it is
the room the planner gives the pool. The same query is the pool's ``actual`` row in ``simulate --source
prometheus``.

A value is returned as read: the caller (``agent.onprem_capacity``) judges it. A query that answers nothing,
fails, or answers several series leaves its pool unread, with the reason: missing capacity is never zero.

The query is read as written, never rewritten: with ``prometheus.cluster_selector`` set, a query with a series
selector that lacks one of its matchers is named in a warning at start (``unscoped_onprem_queries``), since in a
Prometheus view of several clusters another cluster's series would count, or keep a fallback answering 0.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol, Self, runtime_checkable

import pandas as pd

from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_queries import cluster_matchers
from agent.sources.promql_scope import unscoped_selectors
from config.prometheus import PrometheusSettings
from models import PoolKind, PoolSpec

log = logging.getLogger(__name__)


class OnPremCapacitySource(Protocol):
    def ready_units(self, pools: Sequence[PoolSpec], at: datetime) -> tuple[dict[str, float], dict[str, str]]:
        """For each on-prem pool among ``pools`` that the source can read: its units at ``at``, as read; and why
        each other pool it was asked for has none. A pool the source has no way to read is in neither."""
        ...


@runtime_checkable
class OnPremCapacityHistory(Protocol):
    """An ``OnPremCapacitySource`` that can also read its pools' capacity over a past range (the burst history a
    paced budget plans on, ``agent.burst_history``)."""

    def units_between(
        self, pools: Sequence[PoolSpec], start: datetime, end: datetime, step: timedelta
    ) -> tuple[dict[str, pd.Series], dict[str, str]]:
        """For each on-prem pool among ``pools`` the source can read: its units on the step grid of [start, end),
        as read (NaN where there is none); and why each other pool it was asked for has none."""
        ...


class PrometheusOnPremCapacity:
    """Reads each on-prem pool's ``capacity_query`` with an instant query at the tick's time."""

    def __init__(self, source: PrometheusSource, queries: Mapping[str, str]) -> None:
        self._source = source
        self._queries = dict(queries)

    @classmethod
    def from_settings(cls, settings: PrometheusSettings, pools: Sequence[PoolSpec]) -> Self:
        """The reader of the configured queries; each that ``prometheus.cluster_selector`` does not scope is named
        in a warning (``unscoped_onprem_queries``), once, as the agent or ``recommend`` starts."""
        for problem in unscoped_onprem_queries(settings, pools):
            log.warning("configuration check: %s", problem)
        return cls(PrometheusSource.from_settings(settings, {}), onprem_queries(settings, pools))

    @property
    def pools(self) -> tuple[str, ...]:
        """The on-prem pools this source reads."""
        return tuple(sorted(self._queries))

    def ready_units(self, pools: Sequence[PoolSpec], at: datetime) -> tuple[dict[str, float], dict[str, str]]:
        """Read as the demand classes are (``PrometheusSource.newest_of``): once Prometheus has failed, or the
        read deadline has passed, the pools left are not queried, and the reason says which."""
        names = self._names(pools)
        queries = {name: self._queries[pool_id] for name, pool_id in names.items()}
        readings, missing = self._source.newest_of(queries, at, "on-prem capacity")
        units = {names[name]: value for name, (_, value) in readings.items()}
        return units, {names[name]: exc.reason for name, exc in missing.items()}

    def units_between(
        self, pools: Sequence[PoolSpec], start: datetime, end: datetime, step: timedelta
    ) -> tuple[dict[str, pd.Series], dict[str, str]]:
        """Each pool's ``capacity_query`` as a range query, read one by one as the demand classes are
        (``PrometheusSource.fetch_each``): once a query has failed for a reason of the server's and a probe
        confirms it, or the read deadline has passed, the pools left are not queried, and the reason says which.
        Asked of every pool regardless, a Prometheus that does not answer cost each pool its own retries,
        (retries + 1) x timeout (about 91 s with the defaults).

        Read as a history (``PrometheusSource.series`` with ``history``), not judged by its newest value: a pool
        whose kube-state-metrics went down minutes before ``end`` keeps the units read at every step before, and
        the steps without a value (or without one that is a count of units) are NaN, never 0. Judged by its newest
        value, that one stale end threw the whole history away. Only a range without any value is refused."""
        names = self._names(pools)
        queries = {name: self._queries[pool_id] for name, pool_id in names.items()}
        units: dict[str, pd.Series] = {}

        def read(name: str) -> None:
            units[names[name]] = self._source.series(name, queries[name], start, end, step, history=True)

        # the path fetch_each and newest_of read by, which PrometheusSource offers for instant reads alone
        missing = self._source._read_named(list(queries), queries, read, "on-prem capacity history")
        return units, {names[name]: exc.reason for name, exc in missing.items()}

    def _names(self, pools: Sequence[PoolSpec]) -> dict[str, str]:
        """Each on-prem pool among ``pools`` that has a query, by the name it is read under (``pool <id>``)."""
        return {
            f"pool {p.pool_id}": p.pool_id for p in pools if p.kind is PoolKind.ON_PREM and p.pool_id in self._queries
        }


def onprem_queries(settings: PrometheusSettings, pools: Sequence[PoolSpec]) -> dict[str, str]:
    """The capacity query of each on-prem pool that has one."""
    out: dict[str, str] = {}
    for pool in pools:
        override = settings.pools.get(pool.pool_id)
        if pool.kind is PoolKind.ON_PREM and override is not None and override.capacity_query is not None:
            out[pool.pool_id] = override.capacity_query
    return out


def unscoped_onprem_queries(settings: PrometheusSettings, pools: Sequence[PoolSpec]) -> list[str]:
    """With ``prometheus.cluster_selector`` set, one line per on-prem pool whose capacity query has a series
    selector without one of its matchers, naming the pool, the matchers and the selectors. The query is read as
    written: in a Prometheus view of several clusters such a selector counts other clusters' nodes too, and a
    fallback over it (``or on() (0 * count(kube_node_info))``) is kept alive by another cluster's
    kube-state-metrics while this cluster's is down, so the pool reads 0 units instead of no answer and its work
    bursts to the cloud."""
    cluster = cluster_matchers(settings)
    problems: list[str] = []
    for pool_id, query in sorted(onprem_queries(settings, pools).items()):
        unscoped = unscoped_selectors(query, cluster)
        if not unscoped:
            continue
        missing = list(dict.fromkeys(m for _, lacking in unscoped for m in lacking))
        selectors = ", ".join(" ".join(selector.split()) for selector, _ in unscoped)
        problems.append(
            f"on-prem pool {pool_id}: prometheus.pools.{pool_id}.capacity_query lacks {', '.join(missing)} of "
            f"prometheus.cluster_selector on {selectors}: in a Prometheus view of several clusters those count "
            "other clusters' series too, and another cluster's kube-state-metrics can keep the query answering "
            "(0 units, its work bursting to the cloud) while this cluster's is down; put the matchers on every "
            "selector, the fallback's too (README, On-prem capacity)"
        )
    return problems


def unobserved_onprem_pools(settings: PrometheusSettings | None, pools: Sequence[PoolSpec]) -> list[str]:
    """On-prem pools without a capacity query: the planner gives them their configured ``max_units`` at every
    tick, whether their nodes are up or not."""
    queries = onprem_queries(settings, pools) if settings is not None else {}
    return sorted(p.pool_id for p in pools if p.kind is PoolKind.ON_PREM and p.pool_id not in queries)
