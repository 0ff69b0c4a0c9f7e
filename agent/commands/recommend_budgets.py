"""Each budget as ``leadtime recommend`` reports it (``agent.commands.recommend``): its spend so far, whether the
ledger holds its period whole, and its projection to the end of each cap's period with the current and with the
recommended units, as the planner enforces the caps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from agent.commands.recommend_document import staying
from agent.commands.recommend_ledger import MonthToDate
from agent.ledger.coverage import NEW_OR_LOST, LedgerCoverage
from agent.loop import Agent, TickReport
from agent.planning.budget import BudgetSpend, CapKind
from agent.planning.budgeting import draining_going_units
from agent.planning.enforcement import budget_snapshots
from models import PoolState


def budgets(
    agent: Agent,
    tick: TickReport,
    spends: Sequence[BudgetSpend],
    pools: Sequence[Mapping[str, Any]],
    month_to_date: MonthToDate,
    states: Mapping[str, PoolState],
) -> list[dict[str, Any]]:
    """Each budget's spend so far and its projection to the end of each cap's period, as the planner enforces the
    caps: spend so far plus the units held from now to the period's end (``agent.planning.enforcement``). The
    recommended projection is the planner's own, with the plan's units; the current one holds the units billed now
    (``PoolState.billed_units``: a broken slice counts, a queued resource waiting for resources does not), the nodes
    being drained (``states``, as the tick planned on them) billing one more tick only, as the daemon projects them
    with no resize (``draining_going_units``): they go whether or not the plan is followed. The rates per hour leave
    them out as well (the pools' ``draining_units`` and ``recommended_draining_units``, those a scale-up takes back
    not among the latter).
    """
    billed = {p["pool_id"]: p["billed_units"] for p in pools if p["billed_units"] is not None}
    coverage = {c.budget: c for c in agent.budget_watch.coverage}  # as the daemon judges it (monthly caps only)
    planned = {s.budget: s for s in tick.plan.budgets}
    going = draining_going_units(states, ())
    held = {
        s.budget: s
        for s in budget_snapshots(tick.now, spends, agent.pool_by_id, billed, billed, agent.tick, draining=going)
    }
    entries = []
    for spend in spends:
        budget = spend.budget
        period = budget.period(tick.now)
        local = sorted(budget.pools - budget.remote_pools)
        entry: dict[str, Any] = {
            "name": budget.name,
            "pools": local,
            "remote_pools": sorted(budget.remote_pools),
            "period_start": period.start.isoformat(),
            "period_end": period.end.isoformat(),
            "period_hours": _hours(period.end - period.start),
            "hours_left": round(_hours(period.remaining(tick.now)), 4),
            "spend_known": month_to_date.known,
            **_coverage(coverage.get(budget.name)),
            "spent_period_usd": round(spend.spent_period_usd, 2),
            "spent_hour_usd": round(spend.spent_hour_usd, 2),
            "monthly_cap_usd": budget.monthly_cap_usd,
            "hourly_cap_usd": budget.hourly_cap_usd,
        }
        rates = (
            ("current", "billed_units", "draining_units"),
            ("recommended", "recommended_billed_units", "recommended_draining_units"),
        )
        for which, units, draining in rates:  # the nodes being drained bill for one more tick only
            rate = sum(
                (staying(p[units], p[draining]) or 0) * p["price_per_unit_hour_usd"]
                for p in pools
                if p["pool_id"] in local
            )
            entry[f"{which}_per_hour_usd"] = round(rate, 2)
        caps = (
            ("period", "monthly", budget.name, budget.monthly_cap_usd),
            ("hour", "hourly", f"{budget.name}/{CapKind.HOUR}", budget.hourly_cap_usd),
        )
        for span, kind, key, cap in caps:
            now_held, plan = held.get(key), planned.get(key)
            entry[f"current_projected_{span}_usd"] = None if now_held is None else round(now_held.projected_usd, 2)
            entry[f"recommended_projected_{span}_usd"] = None if plan is None else round(plan.projected_usd, 2)
            if cap and plan is not None:
                entry[f"recommended_fraction_of_{kind}_cap"] = round(plan.projected_usd / cap, 4)
        entries.append(entry)
    return entries


def _coverage(coverage: LedgerCoverage | None) -> dict[str, Any]:
    """Whether the ledger holds the budget's period from its start (``None``: not judged, no monthly cap); while
    it does not, since when it holds every pool, the pools recorded late, and what that means."""
    if coverage is None:
        return {"spend_complete": None, "spend_recorded_since": None, "pools_recorded_late": [], "spend_partial": None}
    late = [{"pool_id": p, "first_record": None if at is None else at.isoformat()} for p, at in coverage.late]
    partial = None
    if late:
        since = (
            "not recorded whole yet" if coverage.since is None else f"recorded whole since {coverage.since.isoformat()}"
        )
        partial = (
            f"{since}, after the period started at {coverage.period_start.isoformat()}; the ledger at "
            f"{coverage.where} holds these pools only from later: {coverage.late_pools()}, so their spend before is "
            f"counted as 0 (import the period's bill of each with leadtime ledger import-billing; {NEW_OR_LOST})"
        )
    return {
        "spend_complete": coverage.complete,
        "spend_recorded_since": None if coverage.since is None else coverage.since.isoformat(),
        "pools_recorded_late": late,
        "spend_partial": partial,
    }


def _hours(span: timedelta) -> float:
    return span.total_seconds() / 3600.0
