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

This module keeps the report, its command line and the split of the forecast policy's cost; the pools and the
oracle's cost are ``bench.surprise_pools``, perfect foresight ``bench.perfect_foresight`` and the blind floors
``bench.unseen_jumps``.

    .venv/bin/python -m bench.bench_surprise_floor [--config FILE] [--trace CSV] [--flat 1h,2h,4h]
        [--forecast-level 0.98]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from agent.simulation import select_window
from agent.simulation.equal_service import SERVICE_LEVELS
from agent.sources.trace import read_trace
from bench.credit import print_credit
from bench.memory import peak_rss_mib
from bench.perfect_foresight import foresight_at
from bench.surprise_pools import oracle_cost, pool_demands
from bench.unseen_jumps import blind_curve, blind_floor, duration_floor, jump_rates, learned_standby
from config import load_settings
from config.durations import parse_duration

ROOT = Path(__file__).resolve().parents[1]
TARGETS = (0.005, 0.001)


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
    print_credit(trace_path)
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
