"""What choosing the service level per demand class in hindsight could buy, at equal service.

The forecast policy provisions one service level for every class, and the equal-service comparison tunes that
one level to each unserved-demand target. When every class has a pool of its own (the slices scenario), a class's
cost and unserved demand depend on its own level only, so the runs at each level give every class's cost against
its unserved chip-hours. This bench chooses one level per class to minimise the total cost subject to the total
unserved fraction (a Lagrangian sweep over a price per unserved chip-hour: the cheapest mix on the lower convex
hull) and prints it against the one-level figure and the perfect-foresight oracle, from the same runs.

The choice sees the whole window's outcome, so its figure is a bound, not a policy: no fixed level per class among
these does better on this window (a level that changes with the state of demand is outside what it bounds).

    .venv/bin/python -m bench.bench_class_levels [--config FILE] [--trace CSV]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agent.simulation import select_window
from agent.simulation.equal_service import SERVICE_LEVELS, Trial, interpolate
from agent.simulation.runner import Simulation
from agent.sources.trace import read_trace
from bench.memory import peak_rss_mib
from config import load_settings

ROOT = Path(__file__).resolve().parents[1]
TARGETS = (0.005, 0.001)


@dataclass(frozen=True)
class ClassCurve:
    """One class's cost (USD) and unserved chip-hours at each service level."""

    cost: Mapping[float, float]
    unserved: Mapping[float, float]


def cheapest_mix(curves: Mapping[str, ClassCurve], demanded: float, target: float) -> tuple[float, dict[str, float]]:
    """The cost of the cheapest choice of one level per class at a total unserved fraction of ``target``, and the
    choice that meets it.

    For a price ``lam`` per unserved chip-hour each class takes the level minimising ``cost + lam * unserved``;
    sweeping ``lam`` walks the lower convex hull of the classes' combined (unserved, cost) points. The cost at the
    target is interpolated between the nearest mixes on either side, as the one-level figure is.
    """
    mixes: list[Trial] = []
    picks: dict[float, dict[str, float]] = {}
    for lam in np.geomspace(1e-2, 1e7, 600):
        pick = {name: _best_level(curve, float(lam)) for name, curve in curves.items()}
        cost = sum(curves[n].cost[level] for n, level in pick.items())
        unserved = sum(curves[n].unserved[level] for n, level in pick.items()) / demanded
        mixes.append(Trial(float(lam), cost, unserved))
        picks[float(lam)] = pick
    found = interpolate(mixes, target, "price")
    if found["cost_usd"] is None:
        raise SystemExit(f"no mix of levels reaches {target:.2%} unserved")
    return float(found["cost_usd"]), picks[found["price"][-1]]


def _best_level(curve: ClassCurve, lam: float) -> float:
    return min(curve.cost, key=lambda level: curve.cost[level] + lam * curve.unserved[level])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "config/examples/helios-earth-slices.yaml"))
    parser.add_argument("--trace", default=str(ROOT / "data/helios-earth/demand_5min.csv.gz"))
    args = parser.parse_args()
    settings = load_settings(args.config)
    pools = settings.pool_specs()
    own = {c.name: [p.pool_id for p in pools if c.name in p.serves] for c in settings.demand_class_models()}
    if any(len(ids) != 1 or len(next(p for p in pools if p.pool_id == ids[0]).serves) != 1 for ids in own.values()):
        raise SystemExit("every demand class needs a pool of its own (as in helios-earth-slices.yaml)")
    trace = read_trace(args.trace)
    window = select_window(trace, settings.demand_class_models(), None, None)
    started = time.perf_counter()
    session = Simulation(settings, trace, window, SERVICE_LEVELS)
    session.prepare(("forecast",))
    oracle = session.run("oracle").cost_usd
    step_hours = window.step.total_seconds() / 3600
    costs: dict[str, dict[float, float]] = {name: {} for name in own}
    unserved: dict[str, dict[float, float]] = {name: {} for name in own}
    trials, demanded = [], 0.0
    for level in SERVICE_LEVELS:
        run = session.run("forecast", settings.planner.model_copy(update={"service_level": level}))
        demanded = run.demanded_accelerator_hours
        trials.append(Trial(level, run.cost_usd, run.unserved_fraction))
        for name, (pool_id,) in own.items():
            costs[name][level] = run.spend_by_pool_usd.get(pool_id, 0.0)
            unserved[name][level] = float(np.nansum(run.unserved_by_class[name])) * step_hours
    curves = {name: ClassCurve(costs[name], unserved[name]) for name in own}
    print(f"{Path(args.config).name} ({len(window.index)} steps, {time.perf_counter() - started:.0f} s)")
    for target in TARGETS:
        one = interpolate(trials, target, "service_level")["cost_usd"]
        cost, pick = cheapest_mix(curves, demanded, target)
        print(
            f"  at {target:.1%} unserved: one level {one / oracle:6.3f}x the oracle;"
            f" a level per class in hindsight {cost / oracle:6.3f}x"
        )
        levels = ", ".join(f"{name.split('/')[-1]} {level:g}" for name, level in sorted(pick.items()))
        print(f"    levels meeting it: {levels}")
    print(f"peak RSS of this process: {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
