"""What tight service costs when some jumps in demand cannot be foreseen: a floor beside the oracle's.

The perfect-foresight oracle serves all demand; a policy that must leave less than 0.1% unserved pays for what it
cannot see coming. This bench measures the part that no forecast of a demand series' own history can see: a
jump in a pool's need for units (slices, nodes) after a stretch of unchanged need. Each demand class must be
served by one pool (a pool per tenant, or one for all). Two figures, from the trace alone:

* **Perfect foresight at equal service**: the cheapest schedule that knows the future and leaves the target
  fraction unserved (a Lagrangian sweep over a price per unserved chip-hour; each unit of a pool is scheduled on
  its own by dynamic programming: paid from its request, ready one lead time later). It says how much of the
  oracle's cost leaving a little demand unserved can save at best.
* **The blind floor**: a schedule that foresees everything except the jumps that come after at least ``flat``
  of unchanged need. Such a jump is seen when it happens, so the units it needs arrive a lead time later, unless
  standby units were held through the flat stretch before it. If nothing observable tells when in a flat
  stretch the jump comes, standby held for a share of the flat time catches that share of the jumps; the
  cheapest mix of standby per pool that meets the target (the lower convex hull, as in
  ``bench_class_levels``) is then a lower bound on the cost of any policy blind to those jumps. It bounds
  nothing for a policy that can foresee them (a queue that fills before jobs start, a time of day they favour).

Beside each floor, standby chosen on the window's first half and kept for the second: what the floor's choice
costs without hindsight.

With ``--forecast-level``, the forecast policy is run at that service level and its cost above the oracle's is
split by how long before each step the oracle's units last fell: within an hour (releases that lag), one to three
hours, or longer (capacity held through steady demand: the policy's standby).

The jump rate by how long the need has been unchanged is printed too: where it falls with the stretch's length, a
policy that holds standby early in flat stretches catches more jumps per standby hour than the floor assumes.
Beside each floor, the same schedules with standby chosen per pool and per span of time unchanged (``flat`` to
twice it, twice to four times, ..., sixteen times or longer): what knowing how long the need has stood still is
worth.

    .venv/bin/python -m bench.bench_surprise_floor [--config FILE] [--trace CSV] [--flat 1h,2h,4h]
        [--forecast-level 0.98]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import numpy as np

from agent.simulation import select_window
from agent.simulation.equal_service import SERVICE_LEVELS, Trial, interpolate
from agent.simulation.oracle import oracle_schedule
from agent.simulation.window import required_units
from agent.sources.trace import read_trace
from bench.bench_class_levels import ClassCurve, cheapest_mix
from bench.memory import peak_rss_mib
from config import load_settings
from config.durations import parse_duration

ROOT = Path(__file__).resolve().parents[1]
TARGETS = (0.005, 0.001)


@dataclass(frozen=True)
class PoolDemand:
    """One pool and the demand of the classes it alone serves: demand (chips, NaN on gaps), units needed per
    step, the unit size, lead time in steps, the price of one unit for one step and the most units it may hold."""

    demand: np.ndarray
    required: np.ndarray
    chips_per_unit: int
    lead_steps: int
    unit_step_usd: float
    max_units: int


def oracle_cost(pools: Iterable[PoolDemand], observed: np.ndarray, step: timedelta) -> float:
    """What the perfect-foresight oracle pays to serve all of the pools' demand (gap steps are not billed)."""
    return sum(
        float((oracle_schedule(c.required, step * c.lead_steps, step) * observed).sum()) * c.unit_step_usd
        for c in pools
    )


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


def pool_demands(config: str, trace_path: str) -> tuple[dict[str, PoolDemand], np.ndarray, timedelta, float]:
    """Each pool with the summed demand of the classes it serves, the observed steps, the step and the demand in
    chip-hours. Every class must be served by one pool only (a pool per tenant, or one pool for all)."""
    settings = load_settings(config)
    pools = settings.pool_specs()
    classes = settings.demand_class_models()
    serving = {c.name: [p.pool_id for p in pools if c.name in p.serves] for c in classes}
    shared = sorted(name for name, found in serving.items() if len(found) != 1)
    if shared:
        raise SystemExit(f"every demand class needs exactly one pool; these have none or several: {shared}")
    window = select_window(read_trace(trace_path), classes, None, None)
    required = required_units(window.demand, window.classes, pools)
    hours = window.step.total_seconds() / 3600
    out = {}
    for pool in pools:
        columns = [i for i, name in enumerate(window.classes) if serving[name] == [pool.pool_id]]
        if not columns:
            continue
        out[pool.pool_id] = PoolDemand(
            demand=_summed(window.demand[:, columns]),
            required=required[pool.pool_id],
            chips_per_unit=pool.chips_per_unit,
            lead_steps=math.ceil(pool.lead_time / window.step),
            unit_step_usd=pool.price_per_unit_hour_usd * hours,
            max_units=pool.max_units,
        )
    observed = window.observed.astype(float)
    demanded = float(np.nansum(window.demand, axis=1) @ observed * hours)
    return out, observed, window.step, demanded


def _summed(columns: np.ndarray) -> np.ndarray:
    """Row sums, NaN where every value is (a gap step)."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(columns).all(axis=1), np.nan, np.nansum(columns, axis=1))


def blind_floor(curves: Mapping[str, ClassCurve], demanded: float, target: float) -> float | None:
    try:
        return cheapest_mix(curves, demanded, target)[0]
    except SystemExit:  # no mix of standby reaches the target
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "config/examples/helios-earth-slices.yaml"))
    parser.add_argument("--trace", default=str(ROOT / "data/helios-earth/demand_5min.csv.gz"))
    parser.add_argument("--flat", default="1h,2h,4h", help="stretches of unchanged need after which a jump is unseen")
    parser.add_argument("--forecast-level", type=float, help="also split the forecast policy's cost at this level")
    args = parser.parse_args()
    started = time.perf_counter()
    pools, observed, step, demanded = pool_demands(args.config, args.trace)
    hours = step.total_seconds() / 3600
    oracle = oracle_cost(pools.values(), observed, step)
    print(f"{Path(args.config).name}: {len(observed)} steps; the oracle serves all demand for {oracle:,.0f} USD")
    foresight = foresight_at(list(pools.values()), observed, hours, demanded, TARGETS)
    print(
        "  perfect foresight at equal service: "
        + "; ".join(f"{t:.1%} unserved {_ratio(foresight[t], oracle)}" for t in TARGETS)
    )
    for text in args.flat.split(","):
        flat = round(parse_duration(text.strip()) / step)
        found = {name: blind_curve(c, flat, step, observed) for name, c in pools.items()}
        curves = {name: curve for name, (curve, _, _) in found.items()}
        events = sum(n for _, n, _ in found.values())
        unseen = sum(u for _, _, u in found.values())
        floors = "; ".join(f"{t:.1%} unserved {_ratio(blind_floor(curves, demanded, t), oracle)}" for t in TARGETS)
        print(
            f"  blind to jumps after {text.strip()} of unchanged need ({events} jumps, {unseen:,.0f} chip-hours a lead"
            f" time late without standby, {unseen / demanded:.3%} of demand): {floors}"
        )
        doubling = [flat * 2**i for i in range(5)]  # unchanged for 1, 2, 4, 8, 16 times the stretch, or longer
        aware = duration_floor(pools, flat, step, observed, doubling, demanded, TARGETS[-1])
        print(
            f"    with standby by how long the need has been unchanged ({flat}, {2 * flat}, {4 * flat}, ... steps): "
            f"{TARGETS[-1]:.1%} unserved {_ratio(aware, oracle)}"
        )
        kept = learned_standby(pools, observed, step, flat, TARGETS[-1])
        if kept is not None:
            reached, cost, floor = kept
            print(
                f"    standby chosen on the first half for {TARGETS[-1]:.1%}, kept for the second: {reached:.3%} "
                f"unserved there at {cost:.3f}x that half's oracle; the floor at that unserved: "
                + (f"{floor:.3f}x" if floor is not None else "not reached")
            )
    minutes = step.total_seconds() / 60
    bounds = [round(m / minutes) for m in (30, 60, 120, 240, 480)]
    rates = []
    for low, high, seen, jumped in jump_rates(pools.values(), observed, bounds):
        span = f"{low * minutes:.0f}-{high * minutes:.0f} min" if high < np.iinfo(np.int64).max else "longer"
        rates.append(f"{span} {1000 * jumped / max(seen, 1):.1f} ({jumped} of {seen:,})")
    print("  jumps per 1,000 steps of unchanged need, by how long it has been unchanged: " + "; ".join(rates))
    if args.forecast_level is not None:
        _split_excess(args.config, args.trace, args.forecast_level)
    print(f"({time.perf_counter() - started:.0f} s; peak RSS of this process: {peak_rss_mib():.0f} MiB)")


def half(series: PoolDemand, span: slice) -> PoolDemand:
    return replace(series, demand=series.demand[span], required=series.required[span])


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


SPLIT_HOURS = (1.0, 3.0)  # the bounds of the three parts of the forecast policy's cost above the oracle's


def excess_by_time_since_fall(
    paid: np.ndarray, oracle: np.ndarray, observed: np.ndarray, steps_per_hour: float
) -> tuple[float, float, float]:
    """Unit-steps ``paid`` holds above ``oracle`` at steps less than one hour after the oracle's units last fell,
    one to three hours after, and longer (or before any fall)."""
    since = np.full(len(oracle), np.inf)
    last = -np.inf
    for t in range(1, len(oracle)):
        if oracle[t] < oracle[t - 1]:
            last = t
        since[t] = t - last
    above = np.clip(paid - oracle, 0, None) * observed
    near, far = (h * steps_per_hour for h in SPLIT_HOURS)
    return (
        float(above[since <= near].sum()),
        float(above[(since > near) & (since <= far)].sum()),
        float(above[since > far].sum()),
    )


def _split_excess(config: str, trace_path: str, level: float) -> None:
    from agent.simulation.runner import Simulation  # the forecast replay: only for this figure

    settings = load_settings(config)
    trace = read_trace(trace_path)
    window = select_window(trace, settings.demand_class_models(), None, None)
    session = Simulation(settings, trace, window, SERVICE_LEVELS)  # the levels the demo's forecasts carry
    session.prepare(("forecast",))
    run = session.run("forecast", settings.planner.model_copy(update={"service_level": level}))
    oracle = session.run("oracle")
    observed = window.observed.astype(float)
    hours = window.step.total_seconds() / 3600
    prices = {p.pool_id: p.price_per_unit_hour_usd * hours for p in settings.pool_specs()}
    parts = np.zeros(3)
    for pool_id, price in prices.items():
        split = excess_by_time_since_fall(
            run.paid_units[pool_id].astype(float), oracle.paid_units[pool_id].astype(float), observed, 1 / hours
        )
        parts += np.array(split) * price
    print(
        f"  the forecast policy at level {level:g}: {run.unserved_fraction:.3%} unserved, "
        f"{run.cost_usd / oracle.cost_usd:.3f}x the oracle; above it: {parts[0]:,.0f} USD within an hour of the "
        f"oracle's last release, {parts[1]:,.0f} USD one to three hours after, {parts[2]:,.0f} USD later "
        "(standby through steady demand)"
    )


def _ratio(cost: float | None, oracle: float) -> str:
    return "not reached" if cost is None else f"{cost / oracle:.3f}x the oracle"


if __name__ == "__main__":
    main()
