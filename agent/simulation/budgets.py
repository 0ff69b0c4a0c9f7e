"""Each policy's spend against each budget cap over a simulated window, from the units it paid for.

A unit is paid for every step it is held, gap steps included (money is spent whether or not the trace recorded
demand), so this can differ slightly from a policy's ``cost_usd``, which follows the runner's billing note.

Each month period that opens inside the window is also reported with the units it opened with and the spend
projected for it at that moment (those units run to the period's end, as the agent projects it): what capacity
bought late in the previous period commits the new one to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from agent.planning.budget import Budget, Period
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
    openings: tuple[PeriodOpening, ...] = ()

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
            "period_openings": [o.summary() for o in self.openings],
        }


@dataclass(frozen=True)
class PeriodOpening:
    """A month period opening inside the window: the units held when it opened, the spend projected for the
    period then (those units to its end), and what was spent in it by the end of the window."""

    period: Period
    units: dict[str, int]
    projected_usd: float
    spent_in_window_usd: float

    def summary(self) -> dict[str, object]:
        return {
            "opened_at": self.period.start.isoformat(),
            "units": dict(sorted(self.units.items())),
            "projected_usd": round(self.projected_usd, 2),
            "spent_in_window_usd": round(self.spent_in_window_usd, 2),
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
        periods = [budget.period(t) for t in stamps]
        period = _running_sum(cost, [p.start for p in periods])
        hour = _running_sum(cost, [budget.hour(t).start for t in stamps])
        openings = _openings(budget, periods, period, run, prices) if budget.monthly_cap_usd is not None else ()
        usages.append(BudgetUsage(budget, period, hour, openings))
    return usages


def _openings(
    budget: Budget, periods: Sequence[Period], spend: np.ndarray, run: PolicyRun, prices: dict[str, float]
) -> tuple[PeriodOpening, ...]:
    """Each period opening after the window's first step, with the units paid for in the step before it."""
    out = []
    for t in range(1, len(periods)):
        if periods[t] == periods[t - 1]:
            continue
        opened = periods[t]
        units = {p: int(run.paid_units[p][t - 1]) for p in sorted(budget.pools) if p in run.paid_units}
        hours = (opened.end - opened.start) / timedelta(hours=1)
        projected = sum(n * prices[p] * hours for p, n in units.items())
        last = max(i for i in range(t, len(periods)) if periods[i] == opened)
        out.append(PeriodOpening(opened, units, projected, float(spend[last])))
    return tuple(out)


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
