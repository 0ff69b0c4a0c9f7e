"""What the agent tells about a budget pool nobody knows the units of: never read (a permission not granted yet, an
API that cannot be reached since the agent started) and with no record in the ledger. Pure.

The trim counts such a pool at its ``max_units`` (``agent.planning.budget_caps.Cap.unknown_usd``): over each
scale-up's hold where the budget has a ``commit_horizon`` (its hard stop can take the units granted back), to the
period's end where it has none. The budget's other pools may be trimmed for it while the pool-unreadable alert of the
pool says only that it cannot be read. ``unknown_pool_events`` raises a warning per budget whose scale-ups a cap of it
cut further this tick for the room such pools kept back (``BudgetCut.unknown_usd``: a cut the pools changed nothing
of, and a shared budget's cut for the other agents' reservations, are not theirs), naming them, the USD kept back,
the pools trimmed and how to lift it; the budget watch raises it every tick while it holds, so that
``agent.conditions`` tells its end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from agent.planning.budget import Budget, BudgetSpend
from agent.planning.budget_caps import unknown_pools
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
    """One event per budget with pools nobody knows the units of and scale-ups a cap of it trimmed further for them
    in ``plan``. A scale-up holds its units for its pool's lead time, ``release_after`` (the idle window) and one
    ``tick``: the USD told is the most the trim kept back of the budget's room for one of them
    (``BudgetCut.unknown_usd``; for a budget without a ``commit_horizon``, what the pools cost at their most to the
    period's end)."""
    events = []
    for budget in budgets:
        trimmed = {p: d for p, d in sorted(plan.decisions.items()) if p in budget.pools and _trimmed(d, budget.name)}
        if not trimmed:
            continue
        hold = max(pools[p].lead_time for p in trimmed) + release_after + tick
        unknown = sorted(budget.pools & unknown_pools(spends, pools, billed, last_read))
        if unknown:
            usd = max(cut.unknown_usd for d in trimmed.values() for cut in d.budget_cuts if cut.budget == budget.name)
            cuts = [_cut(d, budget.name) for d in trimmed.values()]
            span = None if budget.commit_horizon is None else hold
            events.append(unknown_pool_event(budget.name, unknown, usd, span, cuts, now))
    return events


def unknown_pool_event(
    budget: str, unknown: Sequence[str], usd: float, hold: timedelta | None, trimmed: Sequence[str], at: datetime
) -> AlertEvent:
    """A budget's scale-ups trimmed because its pools in ``unknown`` keep ``usd`` of its room back, over a scale-up's
    ``hold`` (``None``: to the period's end, the budget having no ``commit_horizon``): a person can make the pools
    readable (or take them out of the budget) to give the room back, or, to the period's end, give the budget a
    ``commit_horizon`` so that they are counted over a scale-up's hold only."""
    names = ", ".join(unknown)
    over = (
        f"over the {format_duration(hold)} the scale-up holds its units"
        if hold is not None
        else "to the period's end (the budget has no commit_horizon, so busy units granted are never released)"
    )
    todo = (
        "See the pool-unreadable alert of each pool named for why its state cannot be read (a permission not "
        "granted yet, an API that cannot be reached); once it is read, the budget counts what it holds. Or take "
        "the pool out of the budget's pools"
    )
    if hold is None:
        todo += (
            f". Or give budget {budget} a commit_horizon: its hard stop can then release the units granted once "
            f"{names} is read holding more, so {names} is counted at max_units over each scale-up's hold only"
        )
    return AlertEvent(
        kind=AlertKind.POOL_UNREADABLE,
        severity=Severity.WARNING,
        at=at,
        subject=f"budget {budget}: {names} not known",
        summary=(
            f"{names} of budget {budget} could never be read and the ledger has no record of what "
            f"{'it holds' if len(unknown) == 1 else 'they hold'}: a scale-up of the budget's other pools is granted "
            f"only where it fits {names} at max_units {over}, {usd:,.2f} USD of the budget's room kept back, and "
            f"this tick trimmed {'; '.join(trimmed)} for it. Until "
            f"{names} is read, the projection, the overspend alert and the releases count it at nothing"
        ),
        details={
            "pools not known": names,
            "room kept back": f"{usd:,.2f} USD (at max_units "
            + (f"over {format_duration(hold)})" if hold is not None else "to the period's end)"),
            "scale-ups trimmed": "; ".join(trimmed),
            "what to do": todo,
        },
    )


def _trimmed(decision: PoolDecision, budget: str) -> bool:
    """Whether a cap of ``budget`` cut the pool's scale-up this tick further for the room its pools nobody knows the
    units of kept back (a shared cut, for the other agents' reservations, never is)."""
    current = decision.current_units
    return (
        current is not None
        and decision.stepped_units > current
        and any(cut.budget == budget and cut.unknown_usd > 0.0 for cut in decision.budget_cuts)
    )


def _cut(decision: PoolDecision, budget: str) -> str:
    units = sum(cut.units for cut in decision.budget_cuts if cut.budget == budget)
    target = decision.target_units if decision.target_units is not None else decision.current_units
    return f"{decision.pool_id} {decision.current_units}->{target} instead of ->{(target or 0) + units}"
