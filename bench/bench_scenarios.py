"""What the agent saves on the reference scenarios, at equal service.

For each reference configuration, runs the forecast, reactive and oracle policies on the bundled trace (or one
given with --trace), tunes the reactive policy's headroom and the forecast policy's service level to each
unserved-demand target, and prints the cost ratios measured in this run: forecast vs reactive and forecast vs
the perfect-foresight oracle, with the targets the project holds itself to, and peak memory.

    .venv/bin/python -m bench.bench_scenarios [--trace CSV] [--config FILE ...]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from agent.simulation import select_window, simulate
from agent.simulation.equal_service import equal_service
from agent.sources.trace import read_trace
from bench.memory import peak_rss_mib
from config import load_settings

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
    for config in args.config:
        settings = load_settings(config)
        window = select_window(trace, settings.demand_class_models(), None, None)
        started = time.perf_counter()
        runs = simulate(settings, trace, window, ("forecast", "reactive", "oracle"))
        goals = SCENARIOS.get(Path(config).name, {"target": 0.005, "vs_reactive": 1.0, "vs_oracle": 1.1})
        targets = sorted({0.005, 0.001, goals["target"]}, reverse=True)
        same = equal_service(settings, trace, window, targets, known=runs)
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
    print(f"\npeak RSS of this process: {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
