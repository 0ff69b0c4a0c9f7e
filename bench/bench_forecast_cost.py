"""Cost benchmark: refit and predict for 100 series of 14 days at 5 minutes, and the demo's forecasting schedule.

The 100 series are built from a real trace (default: the bundled Helios one): its tenants, each repeated with a
different time shift, so the data keeps real burstiness. Prints, against budgets and against the calibrated last
value measured in the same run: a full fit of ``auto`` (every candidate trained), an hourly refit (recalibration
and reselection only), and a predict of all 100 series; then, on the demo's own schedule (16 tenants, 7 days of
history, 14 days of 5-minute ticks, hourly refits), the total forecasting time; and the peak RSS.

    python bench/bench_forecast_cost.py [TRACE] [--series 100] [--skip-demo]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from agent.sources import read_trace
from bench.credit import print_credit
from forecasting.base import Forecaster
from forecasting.registry import build

BUNDLED = Path(__file__).resolve().parents[1] / "data" / "helios-earth" / "demand_5min.csv.gz"
LEVELS = (0.5, 0.9, 0.95)


def _frame(index: pd.DatetimeIndex, names: list[str], values: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "unique_id": np.repeat(np.asarray(names, dtype=object), len(index)),
            "ds": np.tile(index, len(names)),
            "y": values.T.reshape(-1),
        }
    )


def _timed(action: Callable[..., object], *args: object) -> float:
    began = time.perf_counter()
    action(*args)
    return time.perf_counter() - began


def _many_series(path: Path, count: int, days: int) -> tuple[pd.DataFrame, pd.DataFrame, timedelta]:
    trace = read_trace(path)
    tenants = [i for i, s in enumerate(trace.series) if not s.endswith("/total")]
    steps = round(timedelta(days=days) / trace.step)
    hour = round(timedelta(hours=1) / trace.step)
    if len(trace.index) < steps + hour + 1:
        raise SystemExit(f"{path} is shorter than {days} days and an hour")
    spare = len(trace.index) - steps - hour
    columns, names = [], []
    for k in range(count):
        shift = (k // len(tenants)) * (spare // max(1, count // len(tenants)))
        column = trace.values[shift : shift + steps + hour, tenants[k % len(tenants)]]
        columns.append(column)
        names.append(f"{trace.series[tenants[k % len(tenants)]]}#{k}")
    values = np.stack(columns, axis=1)
    index = trace.index[: steps + hour]
    return _frame(index[:steps], names, values[:steps]), _frame(index, names, values), trace.step


def cost(path: Path, count: int) -> None:
    history, longer, step = _many_series(path, count, days=14)
    print(f"{count} series x 14 days at {step} (rows: {len(history)})")
    for name in ("naive", "auto"):
        model = build(name, quantiles=LEVELS)
        full = _timed(model.fit, history, step)
        refit = _timed(model.fit, longer, step)
        recent = longer.groupby("unique_id").tail(model.min_history_steps)
        model.predict(recent, 12, LEVELS)
        predict = min(_timed(model.predict, recent, 12, LEVELS) for _ in range(5))
        print(f"  {name:6s} full fit {full:7.2f} s   hourly refit {refit:6.2f} s   predict {predict * 1000:7.1f} ms")
        if name == "naive":
            base = (full, refit, predict)
        else:
            print(
                f"  auto / naive: full fit {full / base[0]:.0f}x  refit {refit / base[1]:.0f}x  "
                f"predict {predict / base[2]:.1f}x"
            )
            print(f"  auto against budgets: full fit {full / 60:.2f} of 60 s, predict {predict:.3f} of 1 s")


def demo_schedule(path: Path) -> None:
    """The demo's loop: fit hourly, predict every 5-minute tick, 16 tenants, 14 days after 7 days of history."""
    trace = read_trace(path)
    tenants = [s for s in trace.series if not s.endswith("/total")]
    values = trace.values[:, [trace.series.index(s) for s in tenants]]
    per_hour = round(timedelta(hours=1) / trace.step)
    first = round(timedelta(days=7) / trace.step)
    last = min(len(trace.index), first + round(timedelta(days=14) / trace.step))
    for name in ("naive", "auto"):
        model: Forecaster = build(name, quantiles=LEVELS)
        fit_s = predict_s = 0.0
        ticks = 0
        for now in range(first, last):
            if (now - first) % per_hour == 0:
                hist = _frame(trace.index[max(0, now - first) : now], tenants, values[max(0, now - first) : now])
                fit_s += _timed(model.fit, hist, trace.step)
            lo = now - model.min_history_steps
            recent = _frame(trace.index[lo:now], tenants, values[lo:now])
            predict_s += _timed(model.predict, recent, 3, LEVELS)
            ticks += 1
        print(
            f"  {name:6s} {ticks} ticks: fits {fit_s:6.1f} s, predicts {predict_s:6.1f} s "
            f"({predict_s / ticks * 1000:.2f} ms per tick), total {fit_s + predict_s:6.1f} s"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", type=Path, default=BUNDLED)
    parser.add_argument("--series", type=int, default=100)
    parser.add_argument("--skip-demo", action="store_true")
    args = parser.parse_args(argv)
    print_credit(args.trace)
    cost(args.trace, args.series)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"  peak RSS after the 100-series runs {peak:.2f} GiB (budget 1.5 GiB: {peak / 1.5:.2f})")
    if not args.skip_demo:
        print("demo schedule (16 tenants, hourly refits, 5-minute ticks over 14 days)")
        demo_schedule(args.trace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
