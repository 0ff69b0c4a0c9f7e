"""What the agent saves on the reference scenarios, at equal service.

For each reference configuration, runs the forecast, reactive and oracle policies on the bundled trace (or one
given with --trace), tunes the reactive policy's headroom and the forecast policy's service level to each
unserved-demand target, and prints the cost ratios measured in this run: forecast vs reactive and forecast vs
the perfect-foresight oracle, with the targets the project holds itself to, and peak memory. It also prints how
often the actual peak of demand over the planning horizon stayed at or below the forecast's published peak
quantile (and below the highest per-step quantile, the rule before peaks were calibrated), and how often the
forecast changed the planner's target against the calibrated last value.

    .venv/bin/python -m bench.bench_scenarios [--trace CSV] [--config FILE ...]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from agent.outlook import Outlook
from agent.simulation import SimulationWindow, select_window
from agent.simulation.equal_service import SERVICE_LEVELS, run_and_compare
from agent.simulation.runner import Simulation
from agent.sources.trace import read_trace
from bench.credit import print_credit
from bench.memory import peak_rss_mib
from config import load_settings
from config.schema import Settings

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = {
    "helios-earth-slices.yaml": {"target": 0.005, "vs_reactive": 0.80, "vs_oracle": 1.10},
    "helios-earth.yaml": {"target": 0.001, "vs_reactive": 1.00, "vs_oracle": 1.03},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=str(ROOT / "data/helios-earth/demand_5min.csv.gz"))
    parser.add_argument("--config", nargs="*", default=[str(ROOT / "config/examples" / n) for n in SCENARIOS])
    args = parser.parse_args()
    trace = read_trace(args.trace)
    print_credit(args.trace)
    for config in args.config:
        settings = load_settings(config)
        window = select_window(trace, settings.demand_class_models(), None, None)
        started = time.perf_counter()
        session = Simulation(settings, trace, window, SERVICE_LEVELS)
        session.prepare(("forecast", "reactive"), compare_decisions=True)
        goals = SCENARIOS.get(Path(config).name, {"target": 0.005, "vs_reactive": 1.0, "vs_oracle": 1.1})
        targets = sorted({0.005, 0.001, goals["target"]}, reverse=True)
        runs, same = run_and_compare(session, ("forecast", "reactive", "oracle"), targets)
        assert same is not None
        elapsed = time.perf_counter() - started
        print(f"\n{Path(config).name} on {Path(args.trace).name} ({len(window.index)} steps, {elapsed:.0f} s)")
        for name, run in runs.items():
            print(f"  {name:<9} cost {run.cost_usd:>12,.0f} USD  unserved {run.unserved_fraction:7.3%}")
        for target in targets:
            rows = same[f"{target:g}"]
            forecast, reactive = rows["forecast"]["cost_usd"], rows["reactive"]["cost_usd"]
            oracle = rows["oracle"]["cost_usd"]
            mark = " <- reference target" if target == goals["target"] else ""
            if forecast is None or reactive is None:
                print(f"  at {target:.1%} unserved: not reached (forecast {forecast}, reactive {reactive}){mark}")
                continue
            print(
                f"  at {target:.1%} unserved: forecast/reactive {forecast / reactive:6.3f}x"
                f" (goal <= {goals['vs_reactive']:.2f})   forecast/oracle {forecast / oracle:6.3f}x"
                f" (goal <= {goals['vs_oracle']:.2f}){mark}"
            )
        for level in (0.9, 0.99):
            published, per_step = peak_coverage(settings, window, session.outlooks("forecast"), level)
            print(f"  peak q{level:g} coverage: {published:.3f} (highest per-step q{level:g}: {per_step:.3f})")
        changes = session.decision_changes().values()
        ticks = sum(c.ticks for c in changes)
        up, down = sum(c.up for c in changes), sum(c.down for c in changes)
        print(f"  target vs the calibrated last value: {up / ticks:.1%} of class-ticks up, {down / ticks:.1%} down")
    print(f"\npeak RSS of this process: {peak_rss_mib():.0f} MiB")


def peak_coverage(
    settings: Settings, window: SimulationWindow, outlooks: Sequence[Outlook], level: float
) -> tuple[float, float]:
    """Share of (tick, class) where the actual highest demand over the planning horizon (the longest lead time of
    the pools the agent scales plus a tick, ``Settings.planning_horizon``: what the agent forecasts) was at or below
    the forecast's peak quantile; and the same for the highest per-step quantile."""
    steps = max(1, math.ceil(settings.planning_horizon(window.step) / window.step))
    published, per_step = [], []
    for t, outlook in enumerate(outlooks[: len(outlooks) - steps]):
        for i, name in enumerate(window.classes):
            forecast = outlook.forecasts.get(name)
            ahead = window.demand[t : t + steps, i]
            if forecast is None or np.isnan(ahead).any():
                continue
            chosen = forecast.level_at_or_above(level)
            published.append(ahead.max() <= forecast.peak(level, steps) + 1e-9)
            per_step.append(ahead.max() <= max(forecast.quantiles[chosen][:steps]) + 1e-9)
    return float(np.mean(published)), float(np.mean(per_step))


if __name__ == "__main__":
    main()
