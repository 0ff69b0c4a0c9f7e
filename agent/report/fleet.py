"""Summarising a large fleet for a report: which pools and classes get a chart of their own.

A chart per pool is readable for a dozen pools and unreadable (and minutes of rendering) for a thousand, so a
report draws at most ``MAX_PANELS`` small multiples: the pools that cost most and the classes with the most demand,
and says how many it left out. Every pool's numbers stay in ``results.json``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import numpy as np

from agent.simulation.runner import PolicyRun
from models import PoolSpec

MAX_PANELS = 24


def pool_costs(pools: Sequence[PoolSpec], runs: Mapping[str, PolicyRun]) -> dict[str, float]:
    """Each pool's cost summed over the policies, the measure of which pools matter most to the reader."""
    return {p.pool_id: sum(run.spend_by_pool_usd.get(p.pool_id, 0.0) for run in runs.values()) for p in pools}


def top_pools(pools: Sequence[PoolSpec], runs: Mapping[str, PolicyRun], limit: int = MAX_PANELS) -> list[PoolSpec]:
    """The ``limit`` pools that cost most, in configuration order when there are no more than that."""
    if len(pools) <= limit:
        return list(pools)
    costs = pool_costs(pools, runs)
    chosen = set(sorted(costs, key=lambda pid: (-costs[pid], pid))[:limit])
    return [p for p in pools if p.pool_id in chosen]


def top_classes(classes: Sequence[str], demand: np.ndarray, limit: int = MAX_PANELS) -> list[int]:
    """Column indices of the ``limit`` classes with the most observed demand, in their original order."""
    if len(classes) <= limit:
        return list(range(len(classes)))
    totals = np.nansum(demand, axis=0)
    chosen = sorted(np.argsort(-totals, kind="stable")[:limit].tolist())
    return [int(i) for i in chosen]


def top_pools_table(pools: Sequence[PoolSpec], runs: Mapping[str, PolicyRun], limit: int = MAX_PANELS) -> str:
    """For a fleet above the panel limit: the costliest pools with each policy's cost, and what was left out."""
    if len(pools) <= limit:
        return ""
    costs = pool_costs(pools, runs)
    shown = sorted(costs, key=lambda pid: (-costs[pid], pid))[:limit]
    names = list(runs)
    head = "<tr><th>pool</th>" + "".join(f"<th>{html.escape(n)} (USD)</th>" for n in names) + "</tr>"
    rows = [
        f"<tr><td>{html.escape(pid)}</td>"
        + "".join(f"<td>{runs[n].spend_by_pool_usd.get(pid, 0.0):,.0f}</td>" for n in names)
        + "</tr>"
        for pid in shown
    ]
    rest = sum(costs[pid] for pid in costs if pid not in set(shown))
    note = (
        f"<p class='note'>{len(pools)} pools: the {limit} that cost most (all policies together) are shown here and "
        f"drawn below; the other {len(pools) - limit} cost {rest:,.0f} USD over all policies together. Every pool's "
        "spend is in results.json (spend_by_pool_usd).</p>"
    )
    return f"<h2>Pools that cost most</h2>{note}<table>{head}{''.join(rows)}</table>"
