"""Each policy's spend against each budget cap over a simulated window, from the units it paid for.

A unit is paid for every step it is held, gap steps included (money is spent whether or not the trace recorded
demand), so this can differ slightly from a policy's ``cost_usd``, which follows the runner's billing note.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from agent.planning.budget import Budget
from agent.simulation.runner import PolicyRun
from agent.simulation.window import SimulationWindow
from config.schema import Settings
from models import AlertEvent

_EPS_USD = 1e-6


@dataclass(frozen=True)
class BudgetUsage:
    """``period_spend[t]``: spend so far in the month period holding step t; ``hour_spend[t]``: in its hour."""

    budget: Budget
    period_spend: np.ndarray
    hour_spend: np.ndarray

    @property
    def peak_period_usd(self) -> float:
        return float(self.period_spend.max()) if len(self.period_spend) else 0.0

    @property
    def peak_hour_usd(self) -> float:
        return float(self.hour_spend.max()) if len(self.hour_spend) else 0.0

    @property
    def exceeded(self) -> bool:
        monthly, hourly = self.budget.monthly_cap_usd, self.budget.hourly_cap_usd
        return (monthly is not None and self.peak_period_usd > monthly + _EPS_USD) or (
            hourly is not None and self.peak_hour_usd > hourly + _EPS_USD
        )

    def summary(self) -> dict[str, object]:
        return {
            "monthly_cap_usd": self.budget.monthly_cap_usd,
            "peak_period_spent_usd": round(self.peak_period_usd, 2),
            "hourly_cap_usd": self.budget.hourly_cap_usd,
            "peak_hour_spent_usd": round(self.peak_hour_usd, 2),
            "exceeded": self.exceeded,
        }


def budget_usage(settings: Settings, window: SimulationWindow, run: PolicyRun) -> list[BudgetUsage]:
    hours = window.step / timedelta(hours=1)
    prices = {p.pool_id: p.price_per_unit_hour_usd for p in settings.pool_specs()}
    usages = []
    for budget in (Budget.from_settings(b) for b in settings.budgets):
        cost = np.zeros(len(window.index))
        for pool in sorted(budget.pools):
            if pool in run.paid_units:
                cost += run.paid_units[pool] * prices[pool] * hours
        stamps = [t.to_pydatetime() for t in window.index]
        period = _running_sum(cost, [budget.period(t).start for t in stamps])
        hour = _running_sum(cost, [budget.hour(t).start for t in stamps])
        usages.append(BudgetUsage(budget, period, hour))
    return usages


def budget_summary(settings: Settings, window: SimulationWindow, run: PolicyRun) -> dict[str, object]:
    """The figures ``results.json`` carries per policy: budget use, whether any cap broke, the alerts raised."""
    usages = budget_usage(settings, window, run)
    return {
        "budget_exceeded": any(u.exceeded for u in usages),
        "budgets": {u.budget.name: u.summary() for u in usages},
        "alerts_raised": alerts_raised(run.alerts),
    }


def alerts_raised(events: Sequence[AlertEvent]) -> list[dict[str, object]]:
    """Alerts grouped by what a notifier de-duplicates on: first time, how many times, and the first summary."""
    groups: dict[str, dict[str, object]] = {}
    for event in events:
        group = groups.get(event.dedup_key)
        if group is None:
            groups[event.dedup_key] = {
                "kind": str(event.kind),
                "severity": str(event.severity),
                "subject": event.subject,
                "first_at": event.at.isoformat(),
                "count": 1,
                "summary": event.summary,
            }
        else:
            group["count"] = int(str(group["count"])) + 1
    return list(groups.values())


def _running_sum(cost: np.ndarray, groups: Sequence[object]) -> np.ndarray:
    """Cumulative ``cost`` that starts again whenever the group (a period or an hour) changes."""
    out = np.zeros(len(cost))
    total, current = 0.0, None
    for t, group in enumerate(groups):
        if group != current:
            total, current = 0.0, group
        total += float(cost[t])
        out[t] = total
    return out
