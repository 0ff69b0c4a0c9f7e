"""What a hybrid fleet (fixed on-prem pools plus cloud pools that demand bursts to) gains from each policy.

The baseline is "on-prem only": the on-prem pools at their fixed size and no cloud capacity, with demand filled
by the same rule the simulated cluster uses (cheapest pool first, the dearest waiting class first). Against it,
per policy and per demand class:

- queued accelerator-hours: demand left waiting (no ready capacity for it) summed over observed steps, times the
  step length. Gap steps count nothing, as in the rest of the results.
- the waiting it implies: hours in which the class had demand waiting, and the mean number of accelerators
  waiting (queued accelerator-hours over observed hours; by Little's law, the waiting rate). Waiting time per
  job needs job arrivals, which a demand trace does not carry.
- on-prem utilization: chips served on on-prem pools over on-prem chips held, over observed steps: the chips of
  the on-prem units each run had ready (the baseline: every on-prem unit), so the ``actual`` row divides by the
  units its pools were recorded to have, not by their max_units.
- burst spend: what each cloud pool cost (the runner's billing), and dollars per avoided queued
  accelerator-hour: total burst spend over (baseline queued accelerator-hours minus the policy's).
- waiting cost, when every class has a waiting cost per accelerator-hour: queued accelerator-hours priced at
  their class's cost, and the waiting cost each policy avoided (per class: the class's cost times the queued
  accelerator-hours it avoided against the baseline). A class without a cost makes it unknown, never 0.
- with a burst budget: each policy's peak spend in a month period against each monthly cap, whether it was held
  to the cap (the forecast and reactive policies are; static and oracle run as if no cap were set; actual ran
  under whatever caps the cluster enforced: ``as_recorded``) and whether it stayed within it, and the avoided
  waiting cost of the forecast policy over the reactive burst's under the same cap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agent.simulation.budgets import BudgetUsage
from agent.simulation.policies import AGENT_POLICIES
from agent.simulation.runner import PolicyRun
from agent.simulation.window import SimulationWindow
from models import PoolKind, PoolSpec
from models.allocation import allocate, unassigned

BASELINE = "on-prem only"
_EPS_CHIPS = 1e-9

METHOD = (
    "baseline: on-prem pools at their fixed size, no cloud capacity, serving the dearest waiting first; queued "
    "accelerator-hours: demand with no ready capacity, summed over observed steps; hours with a queue: observed "
    "hours in which some of the class's demand waited; mean accelerators waiting: queued accelerator-hours over "
    "observed hours; on-prem utilization: chips served on on-prem pools over on-prem chips held (the units each run "
    "had ready: for actual, those recorded; for the baseline, max_units); dollars per "
    "avoided queued accelerator-hour: burst spend over (baseline queued accelerator-hours minus the policy's); "
    "waiting cost: queued accelerator-hours priced at each class's waiting cost (unknown when a class has none)"
)


def is_hybrid(pools: Sequence[PoolSpec]) -> bool:
    """On-prem pools and at least one cloud pool to burst to."""
    kinds = {p.kind is PoolKind.ON_PREM for p in pools}
    return kinds == {True, False}


def baseline_queue(
    window: SimulationWindow, pools: Sequence[PoolSpec], priority: Mapping[str, float] | None = None
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per class, chips left waiting at each step with the on-prem pools alone (NaN on gap steps); and the chips
    the on-prem pools serve at each step. ``priority`` (each class's waiting cost, as the simulated cluster has
    them) decides who a shared pool serves first."""
    onprem = [p for p in pools if p.kind is PoolKind.ON_PREM]
    room = {p.pool_id: float(p.max_units * p.chips_per_unit) for p in onprem}
    steps = len(window.index)
    queued = {name: np.full(steps, np.nan) for name in window.classes}
    served = np.full(steps, np.nan)
    for t, row in enumerate(window.demand):
        if np.isnan(row).any():
            continue
        demand = dict(zip(window.classes, row.tolist(), strict=True))
        assigned = allocate(demand, onprem, room, priority=priority)
        for name, left in unassigned(demand, assigned).items():
            queued[name][t] = left
        served[t] = sum(sum(chips.values()) for chips in assigned.values())
    return queued, served


def hybrid_summary(
    pools: Sequence[PoolSpec],
    window: SimulationWindow,
    runs: Mapping[str, PolicyRun],
    waiting_costs: Mapping[str, float | None] | None = None,
    usages: Mapping[str, Sequence[BudgetUsage]] | None = None,
) -> dict[str, Any]:
    """The hybrid section of ``results.json``: the baseline row, then one row per policy run. ``waiting_costs``
    (USD per queued accelerator-hour, per class) prices the waiting when every class has one; ``usages`` (per
    policy) are its spend against each budget cap."""
    costs = waiting_costs or {}
    known = all(costs.get(name) is not None for name in window.classes)
    prices = {name: float(costs[name] or 0.0) for name in window.classes} if known else None
    hours = window.step.total_seconds() / 3600.0
    observed = window.observed
    onprem_chips = sum(p.max_units * p.chips_per_unit for p in pools if p.kind is PoolKind.ON_PREM)
    held = onprem_chips * float(observed.sum()) * hours
    priority = {name: float(cost) for name, cost in costs.items() if cost is not None}  # the cluster's order
    queued, served = baseline_queue(window, pools, priority)
    base = _row(queued, float(np.nansum(served)) * hours, held, observed, hours)
    base["waiting_cost_usd"] = _waiting_cost(base, prices)
    rows: dict[str, dict[str, Any]] = {BASELINE: base}
    onprem_ids = [p.pool_id for p in pools if p.kind is PoolKind.ON_PREM]
    burst_ids = [p.pool_id for p in pools if p.kind is not PoolKind.ON_PREM]
    chips = {p.pool_id: p.chips_per_unit for p in pools}
    for name, run in runs.items():
        served_onprem = sum(float(np.nansum(run.served_by_pool[pid])) for pid in onprem_ids) * hours
        ready = sum(float(run.ready_units[pid][observed].sum()) * chips[pid] for pid in onprem_ids) * hours
        row = _row(run.unserved_by_class, served_onprem, ready, observed, hours)
        spend = {pid: round(run.spend_by_pool_usd.get(pid, 0.0), 2) for pid in burst_ids}
        total = sum(run.spend_by_pool_usd.get(pid, 0.0) for pid in burst_ids)
        avoided = base["queued_accelerator_hours"] - row["queued_accelerator_hours"]
        row["burst_spend_by_pool_usd"] = spend
        row["burst_spend_usd"] = round(total, 2)
        row["avoided_queued_accelerator_hours"] = round(avoided, 2)
        row["usd_per_avoided_queued_accelerator_hour"] = round(total / avoided, 4) if avoided > 0 else None
        row["waiting_cost_usd"] = _waiting_cost(row, prices)
        before, after = base["waiting_cost_usd"], row["waiting_cost_usd"]
        row["avoided_waiting_cost_usd"] = round(before - after, 2) if before is not None and after is not None else None
        row["avoided_waiting_cost_by_class_usd"] = _avoided_by_class(base, row, prices)
        caps = [u for u in (usages or {}).get(name, ()) if u.budget.monthly_cap_usd is not None]
        if caps:
            row["monthly_caps"] = {
                u.budget.name: {
                    "cap_usd": u.budget.monthly_cap_usd,
                    "peak_spent_usd": round(u.peak_period_usd, 2),
                    "held_to_cap": name in AGENT_POLICIES,
                    **({"as_recorded": True} if name == "actual" else {}),
                    "within_cap": not u.exceeded,
                }
                for u in caps
            }
            row["hard_stop_released_units"] = run.forced_release_units
        rows[name] = row
    return {
        "baseline": BASELINE,
        "onprem_pools": onprem_ids,
        "burst_pools": burst_ids,
        "onprem_chips": onprem_chips,
        "observed_hours": round(float(observed.sum()) * hours, 4),
        "rows": rows,
        "avoided_waiting_cost_forecast_over_reactive": _ratio(rows, "forecast", "reactive"),
        "method": METHOD,
    }


def _ratio(rows: Mapping[str, Mapping[str, Any]], over: str, under: str) -> float | None:
    """One policy's avoided waiting cost over another's (None when either is unknown or the second is not > 0)."""
    if over not in rows or under not in rows:
        return None
    a, b = rows[over].get("avoided_waiting_cost_usd"), rows[under].get("avoided_waiting_cost_usd")
    return round(a / b, 4) if a is not None and b is not None and b > 0 else None


def _avoided_by_class(
    base: Mapping[str, Any], row: Mapping[str, Any], prices: Mapping[str, float] | None
) -> dict[str, float] | None:
    if prices is None:
        return None
    before: Mapping[str, float] = base["queued_accelerator_hours_by_class"]
    after: Mapping[str, float] = row["queued_accelerator_hours_by_class"]
    return {name: round((before[name] - after[name]) * prices[name], 2) for name in sorted(before)}


def _row(
    queued: Mapping[str, np.ndarray], served_onprem: float, held: float, observed: np.ndarray, hours: float
) -> dict[str, Any]:
    observed_hours = float(observed.sum()) * hours
    by_class = {name: float(np.nansum(q[observed])) * hours for name, q in queued.items()}
    with_queue = {name: float((np.nan_to_num(q[observed]) > _EPS_CHIPS).sum()) * hours for name, q in queued.items()}
    return {
        "queued_accelerator_hours": round(sum(by_class.values()), 4),
        "queued_accelerator_hours_by_class": {name: round(v, 4) for name, v in sorted(by_class.items())},
        "hours_with_queue_by_class": {name: round(v, 4) for name, v in sorted(with_queue.items())},
        "mean_accelerators_waiting_by_class": {
            name: round(v / observed_hours, 4) if observed_hours > 0 else None for name, v in sorted(by_class.items())
        },
        "onprem_utilization": served_onprem / held if held > 0 else None,
    }


def _waiting_cost(row: Mapping[str, Any], prices: Mapping[str, float] | None) -> float | None:
    if prices is None:
        return None
    by_class: Mapping[str, float] = row["queued_accelerator_hours_by_class"]
    return round(sum(hours * prices[name] for name, hours in by_class.items()), 2)
