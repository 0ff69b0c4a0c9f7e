"""Perfect foresight at equal service for the surprise-floor benchmark (``bench.bench_surprise_floor``): the
cheapest schedule that knows the future at a price per unserved chip-hour, each unit of a pool scheduled on its own
by dynamic programming (``perfect_foresight`` over the rows of ``unit_layers``), and its cost at each target unserved
fraction by a sweep over that price (``foresight_at``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agent.simulation.equal_service import Trial, interpolate
from bench.surprise_pools import PoolDemand


def perfect_foresight(
    layers: np.ndarray,
    unit_step_usd: np.ndarray,
    lead_steps: np.ndarray,
    start_ready: np.ndarray,
    observed: np.ndarray,
    hours: float,
    price: float,
) -> tuple[float, float]:
    """The cheapest schedule knowing the future at ``price`` USD per unserved chip-hour: (cost, unserved chip-hours).

    Each row of ``layers`` is one unit of a pool: the chips it serves at each step when it is ready. A unit is
    paid from its request and ready once it has been paid for its lead time and one step more (the oracle's
    rule: a unit needed at ``t`` is requested at ``t - L``); ``start_ready`` units are ready at the first step, as
    every policy starts. Dynamic programming over how long each unit has been paid (capped at ready)."""
    rows, steps = layers.shape
    ready_state = lead_steps + 1  # per row
    states = int(ready_state.max()) + 1
    inf = np.inf
    score = np.full((rows, states), inf)
    cost = np.zeros((rows, states))
    short = np.zeros((rows, states))
    score[np.arange(rows), np.where(start_ready, ready_state, 0)] = 0.0
    col = np.arange(states)[None, :]
    valid = col <= ready_state[:, None]
    for t in range(steps):
        if t > 0:
            best = np.argmin(score, axis=1)
            idle_score = score[np.arange(rows), best]
            new_score = np.full((rows, states), inf)
            new_cost = np.zeros((rows, states))
            new_short = np.zeros((rows, states))
            new_score[:, 0] = idle_score
            new_cost[:, 0] = cost[np.arange(rows), best]
            new_short[:, 0] = short[np.arange(rows), best]
            for c in range(states):
                to = np.minimum(c + 1, ready_state)
                better = score[:, c] < new_score[np.arange(rows), to]
                r = np.flatnonzero(better & valid[:, c])
                new_score[r, to[r]] = score[r, c]
                new_cost[r, to[r]] = cost[r, c]
                new_short[r, to[r]] = short[r, c]
            score, cost, short = new_score, new_cost, new_short
        pay = np.where(col > 0, unit_step_usd[:, None] * observed[t], 0.0)
        missed = np.where(col < ready_state[:, None], layers[:, t][:, None] * hours, 0.0)
        score = score + pay + price * missed
        cost = cost + pay
        short = short + missed
    best = np.argmin(score, axis=1)
    return float(cost[np.arange(rows), best].sum()), float(short[np.arange(rows), best].sum())


def unit_layers(pools: Sequence[PoolDemand]) -> tuple[np.ndarray, ...]:
    """Every unit any class ever needs as a row: chips served per step, its price per step, lead, start state."""
    rows, prices, leads, start = [], [], [], []
    for series in pools:
        demand = np.nan_to_num(series.demand)
        first = int(series.required[: series.lead_steps + 1].max(initial=0))
        for j in range(int(series.required.max(initial=0))):
            rows.append(np.clip(demand - series.chips_per_unit * j, 0.0, float(series.chips_per_unit)))
            prices.append(series.unit_step_usd)
            leads.append(series.lead_steps)
            start.append(j < first)
    return np.array(rows), np.array(prices), np.array(leads, dtype=int), np.array(start, dtype=bool)


def foresight_at(
    pools: Sequence[PoolDemand], observed: np.ndarray, hours: float, demanded: float, targets: Sequence[float]
) -> dict[float, float | None]:
    """Perfect foresight's cheapest cost at each target unserved fraction (None when no price tried reaches it)."""
    layers, prices, leads, start = unit_layers(pools)
    trials = []
    for price in np.geomspace(1.0, 1e5, 40):
        cost, short = perfect_foresight(layers, prices, leads, start, observed, hours, float(price))
        trials.append(Trial(float(price), cost, short / demanded))
    return {target: interpolate(trials, target, "price")["cost_usd"] for target in targets}
