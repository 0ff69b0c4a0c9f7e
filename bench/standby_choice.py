"""Choosing standby tables for the standby benchmark (``bench.bench_standby_policy``): one price per unserved
chip-hour across pools picks each pool's table (``lagrangian``), the least cost at a target on the lower convex hull
of those picks (``hull_cost``), the tables chosen before each day on the days before it (``causal_tables``), and the
nested rule families as masks over the tables (``families``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from agent.simulation.equal_service import Trial, interpolate
from bench.standby_sim import N_BUCKETS

PRICES = np.geomspace(1e-2, 1e6, 400)  # USD per unserved chip-hour


def lagrangian(
    costs: Sequence[np.ndarray], shorts: Sequence[np.ndarray], prices: Sequence[float] | np.ndarray = PRICES
) -> list[tuple[float, float, list[int]]]:
    """For each price: per pool the configuration minimising cost + price * unserved; (cost, unserved, picks)."""
    out = []
    for price in prices:
        picks = [int(np.argmin(c + price * u)) for c, u in zip(costs, shorts, strict=True)]
        total_cost = sum(float(c[i]) for c, i in zip(costs, picks, strict=True))
        total_short = sum(float(u[i]) for u, i in zip(shorts, picks, strict=True))
        out.append((total_cost, total_short, picks))
    return out


def hull_cost(
    costs: Sequence[np.ndarray], shorts: Sequence[np.ndarray], demanded: float, target: float
) -> float | None:
    """The least cost at which a choice per pool (or a mix of two adjacent ones on the lower convex hull) leaves
    ``target`` of ``demanded`` unserved; ``shorts`` in the unit of ``demanded``. None when no choice meets it."""
    trials = [Trial(float(p), c, u / demanded) for p, (c, u, _) in zip(PRICES, lagrangian(costs, shorts), strict=True)]
    found: float | None = interpolate(trials, target, "price")["cost_usd"]
    return found


def causal_tables(
    cost: Mapping[str, np.ndarray],
    short: Mapping[str, np.ndarray],
    configs: np.ndarray,
    demanded_by_day: np.ndarray,
    first_day: int,
    n_days: int,
    history_target: float,
    pooled: float,
) -> dict[str, np.ndarray]:
    """Per pool a (days, buckets) table: for each day from ``first_day``, the configurations that meet
    ``history_target`` on all days before it at the least cost (one price for all pools; when none does, the
    fewest unserved). With ``pooled`` > 0 each pool's history is blended with the sum of all pools' (scaled to
    the pool's share of cost), with weight ``pooled`` on the latter. ``short`` and ``demanded_by_day`` in one
    unit."""
    names = list(cost)
    tables = {name: np.zeros((n_days, N_BUCKETS), dtype=np.int64) for name in names}
    for day in range(first_day, n_days):
        c = {n: cost[n][:, :day].sum(axis=1) for n in names}
        u = {n: short[n][:, :day].sum(axis=1) for n in names}
        demanded = float(demanded_by_day[:day].sum())
        if pooled > 0:
            all_c, all_u = sum(c.values()), sum(u.values())
            share = {n: max(float(c[n].min()), 1e-9) / max(float(np.min(all_c)), 1e-9) for n in names}
            c = {n: (1 - pooled) * c[n] + pooled * share[n] * all_c for n in names}
            u = {n: (1 - pooled) * u[n] + pooled * share[n] * all_u for n in names}
        # the cheapest price whose picks meet the target on the history (the hull's passing point)
        chosen = None
        for _cost, total_short, picks in lagrangian([c[n] for n in names], [u[n] for n in names]):
            if total_short / demanded <= history_target:
                chosen = picks
                break
        if chosen is None:
            chosen = [int(np.argmin(u[n] * 1e9 + c[n])) for n in names]
        for n, i in zip(names, chosen, strict=True):
            tables[n][day] = configs[i]
    return tables


def families(configs: np.ndarray) -> dict[str, np.ndarray]:
    """The nested rule families, as masks over ``configs`` (bucket 6: under ``base`` steps after a fall)."""
    return {
        "one standby per pool": np.all(configs == configs[:, :1], axis=1),
        "by time unchanged": configs[:, 6] == configs[:, 0],
        "by time unchanged, and after a fall": np.ones(len(configs), dtype=bool),
        "by time unchanged, never more for longer": (configs[:, 6] == configs[:, 0])
        & np.all(np.diff(configs[:, :6], axis=1) <= 0, axis=1),
    }
