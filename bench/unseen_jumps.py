"""The jumps in a pool's need that no forecast of its history sees, those after a stretch of unchanged need, and the
floor of a policy blind to them, for the surprise-floor benchmark (``bench.bench_surprise_floor``): how long the need
has stood still (``unchanged_for``, ``flat_steps_before``) and how often it jumps then (``jump_rates``), the schedule
that foresees all but those jumps with standby held through flat stretches (``blind_run``, ``blind_curve``), the
cheapest standby at a target (``blind_floor``), chosen per span of time unchanged (``duration_curves``,
``duration_floor``) or on the window's first half and kept for the second (``learned_standby``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from itertools import pairwise

import numpy as np

from agent.simulation.oracle import oracle_schedule
from bench.bench_class_levels import ClassCurve, cheapest_mix
from bench.surprise_pools import PoolDemand, half, oracle_cost


def unchanged_for(required: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Per step, for how many steps before it the need has been unchanged and observed (0 at a change or a gap):
    a step is in a flat stretch of ``flat`` steps (``flat_steps_before``) exactly when this is at least ``flat``."""
    runs = np.zeros(len(required), dtype=int)
    for t in range(1, len(required)):
        same = observed[t] and observed[t - 1] and required[t] == required[t - 1]
        runs[t] = runs[t - 1] + 1 if same else 0
    return runs


def flat_steps_before(required: np.ndarray, observed: np.ndarray, flat: int) -> np.ndarray:
    """Steps that end at least ``flat`` steps of unchanged, observed need (the step itself and ``flat`` before)."""
    return np.asarray(unchanged_for(required, observed) >= flat)


def jump_rates(
    pools: Iterable[PoolDemand], observed: np.ndarray, bounds: Sequence[int]
) -> list[tuple[int, int, int, int]]:
    """How often the need jumps after a stretch of unchanged need, by how long it has been unchanged: per span
    [``bounds[i]``, ``bounds[i + 1]``) of steps unchanged so far (the last span open-ended), the flat steps seen in it
    and the jumps at their next step. A jump rate that falls with the stretch's length is what the floor above
    ignores: there, a jump is as likely at any moment of a flat stretch."""
    edges = [*bounds, np.iinfo(np.int64).max]
    steps, jumps = np.zeros(len(bounds), dtype=int), np.zeros(len(bounds), dtype=int)
    seen = observed.astype(bool)
    for series in pools:
        need = series.required
        t = np.arange(1, len(need) - 1)  # steps with a next step to jump at
        runs = unchanged_for(need, observed)[t]
        jumped = seen[t + 1] & (need[t + 1] > need[t])
        for i, (low, high) in enumerate(pairwise(edges)):
            in_span = seen[t] & (runs >= low) & (runs < high)
            steps[i] += int(in_span.sum())
            jumps[i] += int((in_span & jumped).sum())
    return [(edges[i], edges[i + 1], int(steps[i]), int(jumps[i])) for i in range(len(bounds))]


def surprises(required: np.ndarray, flat_mask: np.ndarray) -> np.ndarray:
    """Steps ``t`` of a flat stretch after which the need jumps (``required[t + 1] > required[t]``)."""
    t = np.flatnonzero(flat_mask[:-1] & (required[1:] > required[:-1]))
    return t.astype(int)


def blind_run(
    series: PoolDemand, flat_mask: np.ndarray, events: np.ndarray, standby: int, step: timedelta, observed: np.ndarray
) -> tuple[float, float]:
    """Cost (USD) and unserved chip-hours of the schedule that foresees all but the jumps after ``events``, holding
    ``standby`` units beyond the need through every flat step. A jump is seen at the step it happens, so for a
    lead time its need is capped at what was ready: the flat need plus the standby units."""
    ready = series.required.copy()
    for t in events:
        end = min(t + 1 + series.lead_steps, len(ready))
        ready[t + 1 : end] = np.minimum(ready[t + 1 : end], series.required[t] + standby)
    lead = step * series.lead_steps
    paid = oracle_schedule(ready, lead, step)
    held = np.where(flat_mask, np.minimum(series.required + standby, series.max_units), 0)
    paid = np.maximum(paid, held)
    hours = step.total_seconds() / 3600
    cost = float((paid * observed).sum() * series.unit_step_usd)
    short = np.clip(np.nan_to_num(series.demand) - series.chips_per_unit * ready, 0.0, None)
    return cost, float(short.sum() * hours)


def blind_curve(series: PoolDemand, flat: int, step: timedelta, observed: np.ndarray) -> tuple[ClassCurve, int, float]:
    """The pool's blind cost and unserved chip-hours per number of standby units (0 up to the largest jump or the
    pool's size), the number of surprise jumps, and the unserved chip-hours they leave with no standby."""
    flat_mask = flat_steps_before(series.required, observed, flat)
    events = surprises(series.required, flat_mask)
    jump = int(
        max((series.required[t + 1 : t + 1 + series.lead_steps].max() - series.required[t] for t in events), default=0)
    )
    cost: dict[float, float] = {}
    unserved: dict[float, float] = {}
    for standby in range(min(jump, series.max_units) + 1):
        cost[float(standby)], unserved[float(standby)] = blind_run(series, flat_mask, events, standby, step, observed)
    return ClassCurve(cost, unserved), len(events), unserved[0.0]


def duration_curves(
    series: PoolDemand, flat: int, step: timedelta, observed: np.ndarray, bounds: Sequence[int]
) -> tuple[float, dict[int, ClassCurve]]:
    """The floor's curves when standby may depend on how long the need has been unchanged: the blind cost with no
    standby, and per span [``bounds[i]``, ``bounds[i + 1]``) of steps unchanged (the last open-ended; the first
    should be ``flat``), what standby held through that span's flat steps only adds to the cost and the unserved
    chip-hours of the jumps that come in it. Spans add up: a jump is met by the standby of the span it comes in."""
    flat_mask = flat_steps_before(series.required, observed, flat)
    events = surprises(series.required, flat_mask)
    runs = unchanged_for(series.required, observed)
    base, _ = blind_run(series, flat_mask, events, 0, step, observed)
    edges = [*bounds, len(runs) + 1]
    curves: dict[int, ClassCurve] = {}
    for low, high in pairwise(edges):
        in_span = flat_mask & (runs >= low) & (runs < high)
        caught = events[in_span[events]]
        if not len(caught):
            continue
        jump = int(max(series.required[t + 1 : t + 1 + series.lead_steps].max() - series.required[t] for t in caught))
        cost, unserved = {}, {}
        for standby in range(min(jump, series.max_units) + 1):
            spent, short = blind_run(series, in_span, caught, standby, step, observed)
            cost[float(standby)], unserved[float(standby)] = spent, short
        curves[low] = ClassCurve({k: v - cost[0.0] for k, v in cost.items()}, unserved)
    return base, curves


def duration_floor(
    pools: Mapping[str, PoolDemand],
    flat: int,
    step: timedelta,
    observed: np.ndarray,
    bounds: Sequence[int],
    demanded: float,
    target: float,
) -> float | None:
    """The cheapest cost at ``target`` unserved of a schedule that foresees all but the jumps after ``flat`` steps
    of unchanged need, with standby chosen per pool and per span of time unchanged (None: not reached)."""
    base, curves = 0.0, dict[str, ClassCurve]()
    for name, series in pools.items():
        blind, spans = duration_curves(series, flat, step, observed, bounds)
        base += blind
        curves |= {f"{name}@{low}": curve for low, curve in spans.items()}
    if not curves:
        return None
    found = blind_floor(curves, demanded, target)
    return None if found is None else base + found


def blind_floor(curves: Mapping[str, ClassCurve], demanded: float, target: float) -> float | None:
    """The cheapest mix of the pools' standby at ``target`` unserved (``cheapest_mix``); None when none reaches it."""
    try:
        return cheapest_mix(curves, demanded, target)[0]
    except SystemExit:  # no mix of standby reaches the target
        return None


def learned_standby(
    pools: Mapping[str, PoolDemand], observed: np.ndarray, step: timedelta, flat: int, target: float
) -> tuple[float, float, float | None] | None:
    """Standby per pool chosen on the window's first half (the cheapest mix at ``target`` there), kept for the
    second half: the unserved fraction it reaches there, its cost as a multiple of that half's oracle, and the
    second half's own floor at that unserved fraction (None: not reached). None when the first half's target
    cannot be met."""
    middle = len(observed) // 2
    first, second = slice(None, middle), slice(middle, None)
    hours = step.total_seconds() / 3600

    def curves(span: slice) -> tuple[dict[str, ClassCurve], float]:
        found = {name: blind_curve(half(c, span), flat, step, observed[span])[0] for name, c in pools.items()}
        demanded = sum(float(np.nansum(c.demand[span] * observed[span])) for c in pools.values()) * hours
        return found, demanded

    early, early_demand = curves(first)
    try:
        _, picks = cheapest_mix(early, early_demand, target)
    except SystemExit:
        return None
    late, late_demand = curves(second)
    for name, curve in late.items():  # a standby the second half never needed to try costs what it would there
        if picks[name] not in curve.cost:
            series = half(pools[name], second)
            mask = flat_steps_before(series.required, observed[second], flat)
            spent, short = blind_run(
                series, mask, surprises(series.required, mask), int(picks[name]), step, observed[second]
            )
            late[name] = ClassCurve({**curve.cost, picks[name]: spent}, {**curve.unserved, picks[name]: short})
    cost = sum(late[name].cost[s] for name, s in picks.items())
    reached = sum(late[name].unserved[s] for name, s in picks.items()) / late_demand
    oracle = oracle_cost([half(c, second) for c in pools.values()], observed[second], step)
    floor = blind_floor(late, late_demand, reached)
    return reached, cost / oracle, None if floor is None else floor / oracle
