"""What choosing the service level per demand class in hindsight could buy, at equal service.

The forecast policy provisions one service level for every class, and the equal-service comparison tunes that
one level to each unserved-demand target. When every class has a pool of its own (the slices scenario), a class's
cost and unserved demand depend on its own level only, so the runs at each level give every class's cost against
its unserved chip-hours. This bench chooses one level per class to minimise the total cost subject to the total
unserved fraction (a Lagrangian sweep over a price per unserved chip-hour: the cheapest mix on the lower convex
hull) and prints it against the one-level figure and the perfect-foresight oracle, from the same runs; and, out of
sample, the levels chosen on the first half of the window kept for the second, against one level there.

The choice sees the whole window's outcome, so its figure is a bound, not a policy: no fixed level per class among
these does better on this window (a level that changes with the state of demand is outside what it bounds). Beside
it, the same kind of bound for one level that may change over time: any two levels, each for part of the window.

    .venv/bin/python -m bench.bench_class_levels [--config FILE] [--trace CSV]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agent.simulation import select_window
from agent.simulation.equal_service import SERVICE_LEVELS, Trial, interpolate
from agent.simulation.runner import Simulation
from agent.sources.trace import read_trace
from bench.credit import print_credit
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


def time_mix(points: Sequence[Trial], demanded: float, target: float) -> float:
    """The cheapest cost at ``target`` unserved of one level for every class, where the level may change over time:
    a mix of any two levels, each kept for part of the window, costs and leaves unserved the same shares of what
    each does over the whole window, so its figure is the lower convex hull of the one-level points."""
    whole = ClassCurve(
        {t.setting: t.cost_usd for t in points}, {t.setting: t.unserved_fraction * demanded for t in points}
    )
    return cheapest_mix({"all": whole}, demanded, target)[0]


def _best_level(curve: ClassCurve, lam: float) -> float:
    return min(curve.cost, key=lambda level: curve.cost[level] + lam * curve.unserved[level])


@dataclass(frozen=True)
class Steps:
    """Per-step cost (USD) of each class's pool and unserved chip-hours of each class, at each level; the
    oracle's cost and the demand, per step (gaps count neither, as in the simulator)."""

    cost: Mapping[str, Mapping[float, np.ndarray]]
    unserved: Mapping[str, Mapping[float, np.ndarray]]
    oracle: np.ndarray
    demanded: np.ndarray

    def curves(self, span: slice) -> dict[str, ClassCurve]:
        return {
            name: ClassCurve(
                {level: float(v[span].sum()) for level, v in by_level.items()},
                {level: float(v[span].sum()) for level, v in self.unserved[name].items()},
            )
            for name, by_level in self.cost.items()
        }

    def one_level(self, span: slice) -> list[Trial]:
        curves, demanded = self.curves(span), float(self.demanded[span].sum())
        return [
            Trial(
                level,
                sum(c.cost[level] for c in curves.values()),
                sum(c.unserved[level] for c in curves.values()) / demanded,
            )
            for level in SERVICE_LEVELS
        ]


def record(session: Simulation, own: Mapping[str, str]) -> Steps:
    """The forecast policy at every level and the oracle, as per-step arrays."""
    window, settings = session.window, session.settings
    hours = window.step.total_seconds() / 3600
    observed = window.observed.astype(float)
    prices = {p.pool_id: p.price_per_unit_hour_usd for p in settings.pool_specs()}

    def cost(units: Mapping[str, np.ndarray], pool_ids: Sequence[str]) -> np.ndarray:
        return sum((units[p] * prices[p] * hours * observed for p in pool_ids), np.zeros(len(observed)))

    costs: dict[str, dict[float, np.ndarray]] = {name: {} for name in own}
    unserved: dict[str, dict[float, np.ndarray]] = {name: {} for name in own}
    for level in SERVICE_LEVELS:
        run = session.run("forecast", settings.planner.model_copy(update={"service_level": level}))
        for name, pool_id in own.items():
            costs[name][level] = cost(run.paid_units, [pool_id])
            unserved[name][level] = np.nan_to_num(run.unserved_by_class[name]) * hours
    oracle = session.run("oracle")
    demanded = np.nansum(window.demand, axis=1) * hours * observed
    return Steps(costs, unserved, cost(oracle.paid_units, list(own.values())), demanded)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "config/examples/helios-earth-slices.yaml"))
    parser.add_argument("--trace", default=str(ROOT / "data/helios-earth/demand_5min.csv.gz"))
    args = parser.parse_args()
    settings = load_settings(args.config)
    pools = settings.pool_specs()
    serving = {c.name: [p for p in pools if c.name in p.serves] for c in settings.demand_class_models()}
    if any(len(found) != 1 or len(found[0].serves) != 1 for found in serving.values()):
        raise SystemExit("every demand class needs a pool of its own (as in helios-earth-slices.yaml)")
    own = {name: found[0].pool_id for name, found in serving.items()}
    trace = read_trace(args.trace)
    print_credit(args.trace)
    window = select_window(trace, settings.demand_class_models(), None, None)
    started = time.perf_counter()
    session = Simulation(settings, trace, window, SERVICE_LEVELS)
    session.prepare(("forecast",))
    steps = record(session, own)
    whole, half = slice(None), len(window.index) // 2
    first, second = slice(None, half), slice(half, None)
    print(f"{Path(args.config).name} ({len(window.index)} steps, {time.perf_counter() - started:.0f} s)")
    oracle, demanded = float(steps.oracle.sum()), float(steps.demanded.sum())
    one_level, curves = steps.one_level(whole), steps.curves(whole)
    for target in TARGETS:
        one = interpolate(one_level, target, "service_level")["cost_usd"]
        mixed_in_time = time_mix(one_level, demanded, target)
        cost, pick = cheapest_mix(curves, demanded, target)
        print(
            f"  at {target:.1%} unserved: one level {one / oracle:6.3f}x the oracle;"
            f" any two levels mixed over time in hindsight {mixed_in_time / oracle:6.3f}x;"
            f" a level per class in hindsight {cost / oracle:6.3f}x"
        )
        levels = ", ".join(f"{name.split('/')[-1]} {level:g}" for name, level in sorted(pick.items()))
        print(f"    levels meeting it: {levels}")
        # Out of sample: the levels that meet the target on the first half, kept for the second half, against one
        # level at the unserved fraction they reach there.
        _, chosen = cheapest_mix(steps.curves(first), float(steps.demanded[first].sum()), target)
        later = steps.curves(second)
        mixed = sum(later[n].cost[level] for n, level in chosen.items())
        reached = sum(later[n].unserved[level] for n, level in chosen.items()) / float(steps.demanded[second].sum())
        same = interpolate(steps.one_level(second), reached, "service_level")["cost_usd"]
        second_oracle = float(steps.oracle[second].sum())
        print(
            f"    chosen on the first half, kept for the second: {reached:.3%} unserved there, at"
            f" {mixed / second_oracle:6.3f}x the oracle; one level at that unserved "
            + (f"{same / second_oracle:6.3f}x" if same is not None else "not reached")
        )
    print(f"peak RSS of this process: {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
