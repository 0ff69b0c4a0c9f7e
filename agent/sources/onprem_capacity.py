"""On-prem capacity as Prometheus reports it: the units of each on-prem pool that can take work now.

An on-prem pool is never resized, but its nodes go down and are taken out for maintenance. Its
``prometheus.pools.<id>.capacity_query`` (one series, in nodes), read at the tick's time, says how many of them
are there: written to count the pool's Ready, schedulable nodes (README gives a kube-state-metrics query), it is
the room the planner gives the pool. The same query is the pool's ``actual`` row in ``simulate --source
prometheus``.

A value is returned as read: the caller (``agent.onprem_capacity``) judges it. A query that answers nothing,
fails, or answers several series leaves its pool unread, with the reason: missing capacity is never zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol, Self

from agent.sources.prometheus import PrometheusSource
from config.prometheus import PrometheusSettings
from models import PoolKind, PoolSpec


class OnPremCapacitySource(Protocol):
    def ready_units(self, pools: Sequence[PoolSpec], at: datetime) -> tuple[dict[str, float], dict[str, str]]:
        """For each on-prem pool among ``pools`` that the source can read: its units at ``at``, as read; and why
        each other pool it was asked for has none. A pool the source has no way to read is in neither."""
        ...


class PrometheusOnPremCapacity:
    """Reads each on-prem pool's ``capacity_query`` with an instant query at the tick's time."""

    def __init__(self, source: PrometheusSource, queries: Mapping[str, str]) -> None:
        self._source = source
        self._queries = dict(queries)

    @classmethod
    def from_settings(cls, settings: PrometheusSettings, pools: Sequence[PoolSpec]) -> Self:
        return cls(PrometheusSource.from_settings(settings, {}), onprem_queries(settings, pools))

    @property
    def pools(self) -> tuple[str, ...]:
        """The on-prem pools this source reads."""
        return tuple(sorted(self._queries))

    def ready_units(self, pools: Sequence[PoolSpec], at: datetime) -> tuple[dict[str, float], dict[str, str]]:
        """Read as the demand classes are (``PrometheusSource.newest_of``): once Prometheus has failed, or the
        read deadline has passed, the pools left are not queried, and the reason says which."""
        names = {
            f"pool {p.pool_id}": p.pool_id for p in pools if p.kind is PoolKind.ON_PREM and p.pool_id in self._queries
        }
        queries = {name: self._queries[pool_id] for name, pool_id in names.items()}
        readings, missing = self._source.newest_of(queries, at, "on-prem capacity")
        units = {names[name]: value for name, (_, value) in readings.items()}
        return units, {names[name]: exc.reason for name, exc in missing.items()}


def onprem_queries(settings: PrometheusSettings, pools: Sequence[PoolSpec]) -> dict[str, str]:
    """The capacity query of each on-prem pool that has one."""
    out: dict[str, str] = {}
    for pool in pools:
        override = settings.pools.get(pool.pool_id)
        if pool.kind is PoolKind.ON_PREM and override is not None and override.capacity_query is not None:
            out[pool.pool_id] = override.capacity_query
    return out


def unobserved_onprem_pools(settings: PrometheusSettings | None, pools: Sequence[PoolSpec]) -> list[str]:
    """On-prem pools without a capacity query: the planner gives them their configured ``max_units`` at every
    tick, whether their nodes are up or not."""
    queries = onprem_queries(settings, pools) if settings is not None else {}
    return sorted(p.pool_id for p in pools if p.kind is PoolKind.ON_PREM and p.pool_id not in queries)
