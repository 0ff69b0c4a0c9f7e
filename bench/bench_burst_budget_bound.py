"""The most a value-aware burst budget can gain over first-come spending, on the hybrid reference scenario.

An idealized bound, not a policy: the on-prem-only queue of ``helios-hybrid.yaml`` is bought back at a flat price
per accelerator-hour (no lead time, no node rounding, no interruptions) until a cap is spent. First-come spends
in time order, all classes alike, until the cap is reached; value-aware buys the dearest class's waiting first.
With waiting costs of two tiers (4x apart) the ratio of the waiting cost each avoids is the ceiling for what
pacing and priorities can achieve at that cap: a real policy pays lead times and whole nodes on top.

    .venv/bin/python -m bench.bench_burst_budget_bound --cap-usd 14292 [--price 1.10] [--trace CSV]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from agent.simulation import select_window
from agent.simulation.hybrid import baseline_queue
from agent.sources.trace import read_trace
from bench.credit import print_credit
from config import load_settings
from models import PoolKind

ROOT = Path(__file__).resolve().parents[1]
HIGH, LOW = 4.0, 1.0


def first_come(queued: np.ndarray, cost: np.ndarray, budget: float) -> float:
    """Waiting cost avoided spending ``budget`` accelerator-hours on the queue in time order."""
    per_step = queued.sum(axis=1)
    before = np.concatenate([[0.0], np.cumsum(per_step)[:-1]])
    share = np.clip((budget - before) / np.where(per_step > 0, per_step, 1.0), 0.0, 1.0)
    return float((queued * cost).sum(axis=1) @ share)


def value_aware(queued: np.ndarray, cost: np.ndarray, budget: float) -> float:
    """Waiting cost avoided spending ``budget`` accelerator-hours on the dearest classes' queue first."""
    avoided, left = 0.0, budget
    for i in np.argsort(-cost, kind="stable"):
        take = min(left, float(queued[:, i].sum()))
        avoided += take * float(cost[i])
        left -= take
    return avoided


def guarded_value_aware(queued: np.ndarray, cost: np.ndarray, budget: float, step_hours: float) -> float:
    """The most waiting cost any policy can avoid with ``budget`` accelerator-hours when, as a budget's default
    guard requires, every accelerator held at a step is paid for to the end of the window (the period end).

    ``queued`` holds chips waiting per step (rows, gap steps as zeros) and class (columns). A linear programme
    over the chips ``s[t, c]`` served from the queue: ``0 <= s <= queued``, and at every step the accelerator-hours
    spent before it plus those held now counted to the end fit the budget. Releases are free and instant and the
    price is flat, so no real policy under that guard does better.
    """
    steps, classes = queued.shape
    left = step_hours * (steps - np.arange(steps))  # hours from each step to the end
    n = steps * classes
    # variables: s (steps x classes, row-major), then spent[t]: accelerator-hours bought before step t
    objective = np.concatenate([-np.tile(cost, steps) * step_hours, np.zeros(steps)])
    bounds = [(0.0, float(q)) for q in queued.reshape(-1)] + [(0.0, None)] * steps
    serve = sparse.kron(sparse.eye(steps), np.ones((1, classes)))  # S[t] = sum over classes of s[t, c]
    spent = sparse.eye(steps)
    # spent[t] - spent[t - 1] - hours * S[t - 1] = 0, spent[0] = 0
    shift = sparse.eye(steps, k=-1)
    equal = sparse.hstack([-step_hours * (shift @ serve), spent - shift])
    # spent[t] + left[t] * S[t] <= budget
    guard = sparse.hstack([sparse.diags(left) @ serve, spent])
    result = linprog(
        objective,
        A_ub=guard.tocsr(),
        b_ub=np.full(steps, budget),
        A_eq=equal.tocsr(),
        b_eq=np.zeros(steps),
        bounds=bounds,
        method="highs",
    )
    if result.status != 0:
        raise RuntimeError(f"the guarded bound did not solve: {result.message}")
    return float(-result.fun) if n else 0.0


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap-usd", type=float, required=True, help="burst budget for the window")
    parser.add_argument("--price", type=float, default=1.10, help="USD per burst accelerator-hour (Spot)")
    parser.add_argument("--trace", default=str(ROOT / "data" / "helios-earth" / "demand_5min.csv.gz"))
    args = parser.parse_args(argv)
    settings = load_settings(ROOT / "config" / "examples" / "helios-hybrid.yaml")
    window = select_window(read_trace(args.trace), settings.demand_class_models(), None, None)
    print_credit(args.trace)
    queue, _ = baseline_queue(window, settings.pool_specs())
    hours = window.step.total_seconds() / 3600.0
    names = list(window.classes)
    queued = np.stack([np.nan_to_num(queue[n]) for n in names], axis=1)[window.observed] * hours
    budget = args.cap_usd / args.price
    print(f"queued {queued.sum():,.0f} accelerator-hours; the cap buys {budget:,.0f}")
    quota = {p.serves[0]: p.max_units * p.chips_per_unit for p in settings.pool_specs() if p.kind is PoolKind.ON_PREM}
    by_queue = sorted(names, key=lambda n: -float(queued[:, names.index(n)].sum()))
    tiers = {
        "the two longest queues": set(by_queue[:2]),
        "every other tenant by name": set(names[::2]),
        "the eight smallest quotas": set(sorted(names, key=lambda n: (quota[n], n))[:8]),
    }
    for label, high in tiers.items():
        cost = np.array([HIGH if n in high else LOW for n in names])
        fc, va = first_come(queued, cost, budget), value_aware(queued, cost, budget)
        share = float(queued[:, cost == HIGH].sum())
        print(f"high tier = {label} ({share:,.0f} accelerator-hours queued): value-aware / first-come {va / fc:.3f}x")


if __name__ == "__main__":
    main()
