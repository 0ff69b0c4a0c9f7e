"""Value-aware burst budgets on the hybrid reference scenario: the forecast policy pacing a capped burst budget
against the reactive burst under the same cap, in waiting cost avoided.

``helios-hybrid.yaml`` with one burst budget over both cloud pools, capped at half the forecast policy's burst
spend without a budget (measured first on the same window, or ``--cap-usd``), and waiting costs of two tiers 4x
apart: the two tenants with the longest on-prem-only queues cost 4 USD per waiting accelerator-hour, the others
1 USD (the 1.225x case of ``bench.bench_burst_budget_bound``). The budget's month period is set to end where the
window ends (periods open on the 22nd at midnight, Asia/Shanghai: the trace's own time zone), so the cap is the
window's burst budget.

The forecast policy paces it (``pacing: forecast``) twice: with the budget's default guard (units counted to the
period end, so busy units are never released for the cap), and with a ``commit_horizon`` (units counted a day
ahead; the cap is held by a hard stop that releases burst units, busy ones too, when the money left no longer pays
for the units held through the next two ticks). The reactive burst spends the cap first-come, held by a kill
switch that cuts its pools, busy units too, once the money is gone. The forecast policy forecasts short-term
demand with the last value plus its recent changes (``last-value``) by default (``--model``; the scenario's ``auto``
takes several times longer): pacing does not depend on that choice.

Prints each run's spend (and its peak against the cap: it exits with an error if a cap broke), avoided waiting
cost and the units its hard stop released; the ratios forecast / reactive; the fluid bound for the same tiers at
the list price and at the cost per avoided queued accelerator-hour measured without a budget; the ceiling of any
policy under the default guard (``bench_burst_budget_bound.guarded_value_aware``); and peak memory.

    .venv/bin/python -m bench.bench_burst_budget [--cap-usd N] [--commit-horizon 24h] [--model last-value] [--days N]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from agent.simulation import select_window
from agent.simulation.budgets import budget_usage
from agent.simulation.hybrid import BASELINE, baseline_queue, hybrid_summary
from agent.simulation.runner import Simulation, run_policy
from agent.sources.trace import read_trace
from bench.bench_burst_budget_bound import HIGH, LOW, first_come, guarded_value_aware, value_aware
from bench.credit import print_credit
from bench.memory import peak_rss_mib
from config import load_settings, parse_duration
from config.schema import BudgetSettings, Settings
from models import PoolKind
from models.durations import format_duration

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.2
POLICIES = ("forecast", "reactive")


def tiered(settings: Settings, high: set[str], cap_usd: float, horizon: timedelta | None = None) -> Settings:
    """The scenario with two waiting-cost tiers and a paced burst budget over its cloud pools."""
    classes = tuple(
        c.model_copy(update={"waiting_cost_per_accelerator_hour_usd": HIGH if c.name in high else LOW})
        for c in settings.demand_classes
    )
    budget = BudgetSettings(
        name="burst",
        pools=tuple(p.id for p in settings.pools if p.kind is not PoolKind.ON_PREM),
        monthly_cap_usd=cap_usd,
        period_start_day=22,
        timezone="Asia/Shanghai",
        pacing="forecast",
        commit_horizon=horizon,
    )
    return settings.model_copy(update={"demand_classes": classes, "budgets": (budget,)})


def print_tenants(rows: Mapping[str, Mapping[str, Any]], labels: Sequence[str], high: set[str]) -> None:
    """Per tenant: its waiting cost tier, the GPU-hours it queues on-prem only and under each run."""
    queued = {label: rows[label]["queued_accelerator_hours_by_class"] for label in (BASELINE, *labels)}
    print("queued GPU-hours per tenant (on-prem only, then each run):")
    print(f"{'tenant':<14} {'USD/h':>5} {'on-prem only':>12} " + " ".join(f"{label:>26}" for label in labels))
    for name in sorted(queued[BASELINE], key=lambda n: (n not in high, n)):
        tier = HIGH if name in high else LOW
        cells = " ".join(f"{queued[label][name]:>26,.0f}" for label in labels)
        print(f"{name:<14} {tier:>5.0f} {queued[BASELINE][name]:>12,.0f} {cells}")


def print_bounds(
    chips: np.ndarray,
    observed: np.ndarray,
    hours: float,
    cost: np.ndarray,
    cap: float,
    prices: tuple[float, float],
    reactive: float,
) -> None:
    """The fluid bounds at the list and the realized price, and the ceiling the default guard alone allows."""
    queued = chips[observed] * hours
    for label, price in zip(("list price", "realized cost per avoided hour"), prices, strict=True):
        bound = value_aware(queued, cost, cap / price) / first_come(queued, cost, cap / price)
        print(f"fluid bound for these tiers at the {label} ({price:.2f} USD): value-aware / first-come {bound:.3f}x")
    # The default guard counts every unit held to the period end (here the window's end): what that alone allows.
    ceiling = guarded_value_aware(chips, cost, cap / prices[0], hours)
    print(
        f"ceiling under the default guard (fluid, at the list price): {ceiling:,.0f} USD avoided, "
        f"{ceiling / reactive:.3f}x the reactive with cap"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cap-usd",
        type=float,
        default=None,
        help="burst budget for the window (USD); default: "
        "half the forecast policy's burst spend without a budget, measured first",
    )
    parser.add_argument("--model", default="last-value", help="the forecast policy's short-term forecaster")
    parser.add_argument(
        "--commit-horizon",
        type=parse_duration,
        default=timedelta(hours=24),
        help="the budget's commit_horizon for the hard-stop run (default 24h)",
    )
    parser.add_argument("--days", type=float, default=None, help="simulate only the window's last N days")
    parser.add_argument("--trace", default=str(ROOT / "data" / "helios-earth" / "demand_5min.csv.gz"))
    args = parser.parse_args(argv)
    base = load_settings(ROOT / "config" / "examples" / "helios-hybrid.yaml")
    trace = read_trace(args.trace)
    print_credit(args.trace)
    window = select_window(trace, base.demand_class_models(), None, None)
    if args.days is not None:
        end = window.index[-1].to_pydatetime() + window.step
        window = select_window(trace, base.demand_class_models(), end - timedelta(days=args.days), end)
    queue, _ = baseline_queue(window, base.pool_specs())
    hours = window.step.total_seconds() / 3600.0
    names = list(window.classes)
    chips = np.stack([np.nan_to_num(queue[n]) for n in names], axis=1)  # waiting per step, gap steps as zeros
    queued = chips[window.observed] * hours
    high = set(sorted(names, key=lambda n: -float(queued[:, names.index(n)].sum()))[:2])
    base = base.model_copy(update={"forecast": base.forecast.model_copy(update={"model": args.model})})
    started = time.perf_counter()
    simulation = Simulation(tiered(base, high, 1.0), trace, window)
    simulation.prepare(POLICIES)
    unconstrained = run_policy(base, trace, window, "forecast", outlooks=simulation.outlooks("forecast"))
    burst_pools = [p.pool_id for p in base.pool_specs() if p.kind is not PoolKind.ON_PREM]
    free_spend = sum(unconstrained.spend_by_pool_usd[p] for p in burst_pools)
    cap = args.cap_usd if args.cap_usd is not None else free_spend / 2.0
    horizon = format_duration(args.commit_horizon)
    print(
        f"window {window.index[0]} .. {window.index[-1]}; forecaster {args.model}; high tier {sorted(high)}; "
        f"forecast burst spend without a budget {free_spend:,.0f} USD; cap {cap:,.0f} USD"
    )
    variants = {
        # the budget's default: units counted to the period end, busy units never released for the cap
        "forecast": tiered(base, high, cap),
        # commit_horizon: units counted a horizon ahead, the cap held by the hard stop
        f"forecast, hard stop ({horizon})": tiered(base, high, cap, args.commit_horizon),
        "reactive": tiered(base, high, cap),
    }
    policies = {label: label.split(",")[0] for label in variants}
    runs = {
        label: run_policy(settings, trace, window, policies[label], outlooks=simulation.outlooks(policies[label]))
        for label, settings in variants.items()
    }
    elapsed = time.perf_counter() - started
    settings = variants["reactive"]
    rows = hybrid_summary(settings.pool_specs(), window, runs, settings.waiting_costs())["rows"]
    for label, run in runs.items():
        (usage,) = budget_usage(variants[label], window, run)
        if usage.exceeded:
            raise SystemExit(f"{label} spent over the cap: peak {usage.peak_period_usd:,.2f} USD")
        row = rows[label]
        print(
            f"{label:>26}: spend {row['burst_spend_usd']:>7,.0f} USD (peak {usage.peak_period_usd:,.0f} of cap "
            f"{cap:,.0f}); queued {row['queued_accelerator_hours']:,.0f} accelerator-hours; avoided waiting cost "
            f"{row['avoided_waiting_cost_usd']:,.0f} USD; units released busy or idle by a hard stop "
            f"{run.forced_release_units}"
        )
    print_tenants(rows, list(variants), high)
    reactive = rows["reactive"]["avoided_waiting_cost_usd"]
    for label in list(variants)[:2]:
        ratio = rows[label]["avoided_waiting_cost_usd"] / reactive
        print(f"avoided waiting cost, {label} / reactive with cap: {ratio:.3f}x (target >= {TARGET}x)")
    cost = np.array([HIGH if n in high else LOW for n in names])
    list_price = min(p.price_per_chip_hour_usd for p in settings.pool_specs() if p.kind is not PoolKind.ON_PREM)
    # What an avoided queued accelerator-hour really cost without a budget: whole nodes, lead times, idle holds
    # and interruptions on top of the list price.
    realized = free_spend / (float(queued.sum()) - unconstrained.unserved_accelerator_hours)
    print_bounds(chips, window.observed, hours, cost, cap, (list_price, realized), reactive)
    print(f"simulation {elapsed:.0f} s; peak memory {peak_rss_mib():,.0f} MiB")


if __name__ == "__main__":
    main()
