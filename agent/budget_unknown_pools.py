"""What the agent tells about a budget pool nobody knows the units of: never read (a permission not granted yet, an
API that cannot be reached since the agent started) and with no record in the ledger. Pure.

The trim counts such a pool at its ``max_units`` over each scale-up's hold (``agent.planning.budget_caps``), so the
budget's other pools may be trimmed for it while the pool-unreadable alert of the pool says only that it cannot be
read. ``unknown_pool_events`` raises a warning per budget whose scale-ups a cap trimmed this tick while such pools
kept room back, naming them, the USD kept back and the pools trimmed; the budget watch raises it every tick while it
holds, so that ``agent.conditions`` tells its end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from agent.planning.budget import Budget, BudgetSpend
from agent.planning.budget_caps import unknown_held_back
from models import AlertEvent, AlertKind, CapacityPlan, PoolDecision, PoolSpec, Severity
from models.durations import format_duration


def unknown_pool_events(
    now: datetime,
    plan: CapacityPlan,
    budgets: Sequence[Budget],
    spends: Sequence[BudgetSpend],
    pools: Mapping[str, PoolSpec],
    billed: Mapping[str, int],
    release_after: timedelta,
    tick: timedelta,
    last_read: Mapping[str, int] | None = None,
) -> list[AlertEvent]:
    """One event per budget with pools nobody knows the units of and scale-ups a cap of it trimmed in ``plan``. A
    scale-up holds its units for its pool's lead time, ``release_after`` (the idle window) and one ``tick``: the USD
    told is what the longest of those holds keeps back of the budget's room."""
    events = []
    for budget in budgets:
        trimmed = {p: d for p, d in sorted(plan.decisions.items()) if p in budget.pools and _trimmed(d, budget.name)}
        if not trimmed:
            continue
        hold = max(pools[p].lead_time for p in trimmed) + release_after + tick
        mine = [s for s in spends if s.budget.name == budget.name]
        held = unknown_held_back(now, mine, pools, billed, hold, last_read).get(budget.name)
        if held is not None:
            cuts = [_cut(d, budget.name) for d in trimmed.values()]
            events.append(unknown_pool_event(budget.name, held[0], held[1], hold, cuts, now))
    return events


def unknown_pool_event(
    budget: str, unknown: Sequence[str], usd: float, hold: timedelta, trimmed: Sequence[str], at: datetime
) -> AlertEvent:
    """A budget's scale-ups trimmed while its pools in ``unknown`` keep ``usd`` of its room back: a person can make
    the pools readable (or take them out of the budget) to give the room back."""
    names = ", ".join(unknown)
    return AlertEvent(
        kind=AlertKind.POOL_UNREADABLE,
        severity=Severity.WARNING,
        at=at,
        subject=f"budget {budget}: {names} not known",
        summary=(
            f"{names} of budget {budget} could never be read and the ledger has no record of what "
            f"{'it holds' if len(unknown) == 1 else 'they hold'}: a scale-up of the budget's other pools is granted "
            f"only where it fits {names} at max_units over the {format_duration(hold)} the scale-up holds its units, "
            f"{usd:,.2f} USD of the budget's room kept back, and this tick trimmed {'; '.join(trimmed)}. Until "
            f"{names} is read, the projection, the overspend alert and the releases count it at nothing"
        ),
        details={
            "pools not known": names,
            "room kept back": f"{usd:,.2f} USD (at max_units over {format_duration(hold)})",
            "scale-ups trimmed": "; ".join(trimmed),
            "what to do": (
                "See the pool-unreadable alert of each pool named for why its state cannot be read (a permission not "
                "granted yet, an API that cannot be reached); once it is read, the budget counts what it holds"
            ),
        },
    )


def _trimmed(decision: PoolDecision, budget: str) -> bool:
    """Whether a cap of ``budget`` cut the pool's scale-up this tick."""
    current = decision.current_units
    return (
        current is not None
        and decision.stepped_units > current
        and any(cut.budget == budget for cut in decision.budget_cuts)
    )


def _cut(decision: PoolDecision, budget: str) -> str:
    units = sum(cut.units for cut in decision.budget_cuts if cut.budget == budget)
    target = decision.target_units if decision.target_units is not None else decision.current_units
    return f"{decision.pool_id} {decision.current_units}->{target} instead of ->{(target or 0) + units}"
