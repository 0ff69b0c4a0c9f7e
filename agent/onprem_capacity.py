"""What on-prem capacity a tick plans on, and what it tells people about it.

An on-prem pool is filled first, up to the units of it that can take work now: those its capacity source reads
(``agent.sources.onprem_capacity``), at most its ``max_units``. When nodes are down or cordoned, the demand above
what is left goes to the next eligible pools, as it would for any full pool, and an alert names the pool and the
units missing; it is resolved when the pool is whole again.

Missing capacity is never zero: a pool whose capacity cannot be read (no answer, a failed query, a value that is
not a unit count) is planned on its configured ``max_units``, as a pool without a capacity query always is, and
the alert says so. Bursting everything to the cloud on a failed read would buy capacity for work that on-prem
serves in the common case (a metrics outage, not a power cut); holding the cloud pools would stop bursting even
for demand above ``max_units``. Planning on ``max_units`` keeps today's behaviour for that tick and tells a person
that queued work may wait if on-prem nodes are in fact down.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from agent.sources.onprem_capacity import OnPremCapacitySource
from models import AlertEvent, AlertKind, MetricsUnavailable, PoolKind, PoolSpec, Severity


@dataclass(frozen=True)
class OnPremReading:
    """Per on-prem pool read this tick: its units that can take work (``units``, whole, at most ``max_units``), or
    why it has none (``problems``). A pool in neither is not read at all (no capacity source for it)."""

    units: dict[str, int] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    above_max: dict[str, float] = field(default_factory=dict)  # reads above max_units, as read (units holds max)


def read_onprem(source: OnPremCapacitySource | None, pools: Sequence[PoolSpec], now: datetime) -> OnPremReading:
    """Each on-prem pool's units now, judged: a value that is not a count of units (NaN, negative, infinite) is a
    problem, never a number; a fraction is rounded down (a part of a node takes no work); more than ``max_units``
    counts as ``max_units``, the pool's size as planned, and is kept in ``above_max`` for a warning: a query that
    counts a node twice (two kube-state-metrics replicas) reads a pool with nodes down as whole."""
    onprem = [p for p in pools if p.kind is PoolKind.ON_PREM]
    if source is None or not onprem:
        return OnPremReading()
    try:
        values, problems = source.ready_units(onprem, now)
    except MetricsUnavailable as exc:
        return OnPremReading(problems={p.pool_id: exc.reason for p in onprem})
    units: dict[str, int] = {}
    above_max: dict[str, float] = {}
    by_id = {p.pool_id: p for p in onprem}
    for pool_id, value in values.items():
        pool = by_id.get(pool_id)
        if pool is None:
            continue
        if math.isnan(value) or math.isinf(value) or value < 0:
            problems[pool_id] = f"the capacity read is {value:g}, not a number of units"
            continue
        units[pool_id] = min(pool.max_units, math.floor(value + 1e-9))
        if math.floor(value + 1e-9) > pool.max_units:
            above_max[pool_id] = value
    kept = {p: why for p, why in problems.items() if p in by_id and p not in units}
    return OnPremReading(units, kept, above_max)


def onprem_capacity_events(reading: OnPremReading, pools: Sequence[PoolSpec], now: datetime) -> list[AlertEvent]:
    """One alert per on-prem pool with fewer units than its ``max_units`` (critical when none is left), whose
    capacity could not be read (a warning: it is planned on ``max_units``), or whose read is above ``max_units``
    (a warning: planned on ``max_units``, but a query that counts nodes twice hides the nodes that are down)."""
    by_id = {p.pool_id: p for p in pools}
    events: list[AlertEvent] = [
        _above_max_event(by_id[p], value, now) for p, value in sorted(reading.above_max.items())
    ]
    for pool_id, units in sorted(reading.units.items()):
        pool = by_id[pool_id]
        missing = pool.max_units - units
        if missing <= 0:
            continue
        burst = _burst_pools(pool, pools)
        goes = (
            f"demand above them goes to {', '.join(burst)}"
            if burst
            else "no other pool serves its demand classes: demand above them waits"
        )
        events.append(
            AlertEvent(
                AlertKind.ONPREM_CAPACITY,
                Severity.CRITICAL if units == 0 else Severity.WARNING,
                now,
                pool_id,
                f"On-prem pool {pool_id} has {units} of its {pool.max_units} units ready and schedulable: {missing} "
                f"missing ({missing * pool.chips_per_unit} chips); {goes}{none_read(pool_id) if units == 0 else ''}",
                {
                    "ready_units": str(units),
                    "max_units": str(pool.max_units),
                    "missing_units": str(missing),
                    "missing_chips": str(missing * pool.chips_per_unit),
                },
            )
        )
    for pool_id, why in sorted(reading.problems.items()):
        pool = by_id[pool_id]
        events.append(
            AlertEvent(
                AlertKind.ONPREM_CAPACITY,
                Severity.WARNING,
                now,
                pool_id,
                f"Capacity of on-prem pool {pool_id} could not be read; planning on its configured {pool.max_units} "
                "units: if some of them are down, work that would run there waits instead of bursting",
                {"error": why},
            )
        )
    return events


def none_read(pool_id: str) -> str:
    """What a read of 0 may mean besides every node down: a query that selects none of the pool's nodes. A label
    value that names no node (a misspelt pool name) reads 0, not nothing, through a fallback on any value of the
    label (``or on() (0 * count(kube_node_labels{label_...!=""}))``), and the pool's work all bursts."""
    return (
        f". If its nodes are up, its prometheus.pools.{pool_id}.capacity_query selects none of them: a label value "
        "that names no node (a misspelt pool name) reads 0 through a fallback on the label, not nothing; check the "
        "value, and fall back on the pool's own label (README, On-prem capacity)"
    )


def _above_max_event(pool: PoolSpec, value: float, now: datetime) -> AlertEvent:
    """A read above ``max_units``: the pool is planned on ``max_units``, but the read cannot be trusted to show a
    node that is down, so a person fixes the query (or ``max_units``)."""
    return AlertEvent(
        AlertKind.ONPREM_CAPACITY,
        Severity.WARNING,
        now,
        pool.pool_id,
        f"On-prem pool {pool.pool_id} reads {value:g} units, more than its max_units {pool.max_units}; planning on "
        f"{pool.max_units}: its prometheus.pools.{pool.pool_id}.capacity_query most likely counts a node twice "
        "(two kube-state-metrics replicas: count each node once, count(max by (node) (...))) or other pools' nodes, "
        "and so reads the pool whole while nodes are down; fix the query, or max_units if the pool has grown "
        "(README, On-prem capacity)",
        {"read_units": f"{value:g}", "max_units": str(pool.max_units)},
    )


def _burst_pools(onprem: PoolSpec, pools: Sequence[PoolSpec]) -> list[str]:
    """The other pools that serve a class of ``onprem``, in the order they are filled."""
    classes = set(onprem.serves)
    others = [p for p in pools if p.pool_id != onprem.pool_id and classes & set(p.serves)]
    return [p.pool_id for p in sorted(others, key=lambda p: p.fill_key)]
