"""Accuracy benchmark: ``auto`` against the baselines and the best single statsmodels model, on real traces.

Runs the rolling-origin backtest (hourly origins) on each trace given (default: the bundled Helios trace) and
prints, measured in the same run, the ratio of ``auto``'s pinball loss at the 0.9 quantile (averaged over the
15/30/60-minute horizons and over series) to that of ``naive`` (calibrated last value), ``persistence`` (bare
last value), ``last-value`` (the previous default), ``seasonal_naive`` and the best statsmodels model, for
per-tenant series and for aggregates (series named ``*/total``) separately, with the 0.9 coverage. Not a timed
test: it takes minutes.

    python bench/bench_forecast_accuracy.py [TRACE ...] [--days 7] [--start ISO]
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import time
from datetime import timedelta
from pathlib import Path

import pandas as pd

from agent.sources import read_trace
from forecasting.backtest import BacktestSpec, Grid, run_backtest
from forecasting.registry import FAMILIES, build

BUNDLED = Path(__file__).resolve().parents[1] / "data" / "helios-earth" / "demand_5min.csv.gz"
HORIZONS = (("15m", timedelta(minutes=15)), ("30m", timedelta(minutes=30)), ("60m", timedelta(minutes=60)))
QUANTILES = (("0.5", 0.5), ("0.9", 0.9), ("0.95", 0.95))
MODELS = ("naive", "persistence", "last-value", "seasonal_naive", "ets", "stl", "lightgbm", "auto")


def _group_score(result: dict, name: str, series: list[str]) -> float:
    values = []
    for uid in series:
        row = result["series"][uid][name]
        per_h = [row[f"pinball_0.9_{h}"] for h, _ in HORIZONS]
        if all(math.isfinite(v) for v in per_h):
            values.append(sum(per_h) / len(per_h))
    return sum(values) / len(values) if values else float("nan")


def _group_coverage(result: dict, name: str, series: list[str]) -> float:
    values = [result["series"][uid][name]["coverage_0.9"] for uid in series]
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else float("nan")


def bench(path: Path, days: float, start: str | None) -> None:
    trace = read_trace(path)
    grid = Grid(trace.index, trace.series, trace.values, trace.step)
    first = pd.Timestamp(start) if start else trace.index[0] + timedelta(days=7)
    if first.tzinfo is None:
        first = first.tz_localize("UTC")
    end = min(first + timedelta(days=days), trace.index[-1] + trace.step)
    spec = BacktestSpec(first, end, HORIZONS, QUANTILES)
    began = time.perf_counter()
    result = run_backtest(grid, {n: (lambda n=n: build(n)) for n in MODELS}, spec, families=FAMILIES)
    elapsed = time.perf_counter() - began
    groups = {
        "tenants": [s for s in trace.series if not s.endswith("/total")],
        "aggregates": [s for s in trace.series if s.endswith("/total")],
    }
    print(f"\n{path}: {len(trace.series)} series at {trace.step}, hourly origins {first} .. {end} ({elapsed:.0f} s)")
    for group, members in groups.items():
        if not members:
            continue
        score = {n: _group_score(result, n, members) for n in MODELS}
        best_sm = min(("ets", "stl"), key=lambda n: score[n])
        auto = score["auto"]
        print(f"  {group} ({len(members)} series): pinball@0.9 / mean level, mean of 15/30/60m")
        for n in MODELS:
            print(f"    {n:15s} {score[n]:.5f}  coverage@0.9 {_group_coverage(result, n, members):.3f}")
        print(f"    auto / naive (calibrated last value)  {auto / score['naive']:.3f}")
        print(f"    auto / persistence (bare last value)  {auto / score['persistence']:.3f}")
        print(f"    auto / last-value (empirical changes) {auto / score['last-value']:.3f}")
        print(f"    auto / seasonal_naive                 {auto / score['seasonal_naive']:.3f}")
        print(f"    auto / best statsmodels ({best_sm:4s})       {auto / score[best_sm]:.3f}")
        print(f"    lightgbm / naive                      {score['lightgbm'] / score['naive']:.3f}")
    used = result["models"]["auto"]["models_used"]
    print(f"  auto ran: {used}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path, default=[BUNDLED])
    parser.add_argument("--days", type=float, default=7.0, help="length of the evaluated window (default 7)")
    parser.add_argument("--start", help="first origin (default: 7 days after the trace starts)")
    args = parser.parse_args(argv)
    for path in args.traces:
        bench(path, args.days, args.start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"\npeak RSS {peak:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
