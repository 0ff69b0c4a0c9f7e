"""Accuracy benchmark: every model against ``naive`` (the calibrated last value), level-weighted, on real traces.

Runs the rolling-origin backtest (hourly origins, 14 days of history per fit) on the bundled traces: the Helios
trace's last week (tenants and the total reported apart), the ServeGen LLM-serving models (their last 3 days) and
the Philly cluster's busy nodes (its last two weeks).
Prints, measured in the same run, per group and horizon: each model's level-weighted pinball loss at q0.9 (sum of
per-series losses over the sum of mean levels) as a ratio to ``naive``'s, the median per-series ratio, and the
coverage of q0.9. Ratios only: no absolute timings. Not a timed test: it takes minutes.

    python bench/bench_forecast_accuracy.py [--models naive,ets,lightgbm,auto] [--only helios|servegen|philly]
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from agent.sources import read_trace
from bench.credit import print_credit
from forecasting.backtest import BacktestResult, BacktestSpec, Grid, run_backtest
from forecasting.registry import FAMILIES, build

DATA = Path(__file__).resolve().parents[1] / "data"
Q = "0.9"


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    start: str  # first origin; origins run to the end of the trace
    horizons: tuple[str, ...]


CASES = (
    Case("helios", DATA / "helios-earth" / "demand_5min.csv.gz", "2020-05-15T00:00:00+08:00", ("15m", "30m", "60m")),
    Case("servegen", DATA / "servegen" / "demand_10min.csv.gz", "2025-03-10T00:00:00+08:00", ("30m", "60m")),
    Case("philly", DATA / "philly" / "busy_nodes_5min.csv.gz", "2017-10-31T00:00:00+00:00", ("15m", "30m", "60m")),
)


def _weighted(result: BacktestResult, name: str, members: list[str], levels: dict[str, float], h: str) -> float:
    losses = [(result["series"][u][name][f"pinball_{Q}_{h}"], levels[u]) for u in members]
    kept = [(loss, level) for loss, level in losses if math.isfinite(loss) and level > 0]
    return sum(loss * level for loss, level in kept) / sum(level for _, level in kept) if kept else float("nan")


def _median_ratio(result: BacktestResult, name: str, members: list[str], h: str) -> float:
    pairs = [
        (result["series"][u][name][f"pinball_{Q}_{h}"], result["series"][u]["naive"][f"pinball_{Q}_{h}"])
        for u in members
    ]
    ratios = [a / b for a, b in pairs if math.isfinite(a) and math.isfinite(b) and b > 0]
    return float(np.median(ratios)) if ratios else float("nan")


def _coverage(result: BacktestResult, name: str, members: list[str]) -> float:
    values = [result["series"][u][name][f"coverage_{Q}"] for u in members]
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else float("nan")


def bench(case: Case, models: list[str]) -> None:
    trace = read_trace(case.path)
    print_credit(case.path)
    grid = Grid(trace.index, trace.series, trace.values, trace.step)
    start = pd.Timestamp(case.start).tz_convert("UTC")
    end = trace.index[-1] + trace.step
    horizons = tuple((h, pd.Timedelta(h).to_pytimedelta()) for h in case.horizons)
    spec = BacktestSpec(start, end, horizons, (("0.5", 0.5), (Q, 0.9)), history=timedelta(days=14))
    factories = {n: (lambda n=n: build(n, quantiles=(0.5, 0.9))) for n in models}
    result = run_backtest(grid, factories, spec, families=FAMILIES)
    window = trace.values[int(trace.index.searchsorted(start)) :]
    counts = (~np.isnan(window)).sum(axis=0)
    means = np.where(counts > 0, np.nansum(window, axis=0) / np.maximum(counts, 1), np.nan)
    levels = {s: float(means[i]) for i, s in enumerate(trace.series)}
    empty = [s for i, s in enumerate(trace.series) if counts[i] == 0]
    groups = {
        "tenants / models": [s for s in trace.series if not s.endswith("/total")],
        "aggregate": [s for s in trace.series if s.endswith("/total")],
    }
    print(f"\n{case.name}: {case.path.name}, {len(trace.series)} series at {trace.step}, hourly origins {start} ..")
    if empty:
        print(f"  no value in the window, so not scored: {', '.join(empty)}")
    for group, members in groups.items():
        if not members:
            continue
        print(f"  {group} ({len(members)} series): q{Q} pinball, level-weighted ratio to naive | median ratio")
        for name in models:
            weighted = [
                _weighted(result, name, members, levels, h) / _weighted(result, "naive", members, levels, h)
                for h in case.horizons
            ]
            medians = [_median_ratio(result, name, members, h) for h in case.horizons]
            cells = "  ".join(f"{h} {w:.3f}" for h, w in zip(case.horizons, weighted, strict=True))
            median_cells = "  ".join(f"{m:.3f}" for m in medians)
            print(f"    {name:10s} {cells} | {median_cells}   coverage {_coverage(result, name, members):.3f}")
    auto = result["models"].get("auto")
    used = auto["models_used"] if auto else {}
    print(f"  auto ran: {used}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="naive,ets,lightgbm,auto", help="comma-separated; naive is always run")
    parser.add_argument("--only", choices=[c.name for c in CASES], help="one trace only")
    args = parser.parse_args(argv)
    models = ["naive", *(m for m in args.models.split(",") if m and m != "naive")]
    for case in CASES:
        if args.only in (None, case.name):
            bench(case, models)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"\npeak RSS {peak:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
