"""The sheds a tick's claim may cut (``agent.budget_shed_claims``), and the plan once cut: pure.

A shed is a release a broken cap of a shared budget asked for, with the readings whose new marks must each pay for a
unit it keeps (``ShedAsked.readings``); ``kept_units`` says how many units each pool's shed keeps for the marks the
other agents wrote since the planner read them, and ``cut_plan`` makes the plan release that many fewer, its record
and skip saying why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from agent.planning.budget import Budget, CapKind
from models import DRAIN_KEY_MARK, CapacityPlan, Drain, Hold, Resize, Skip, SkipReason
from models.plan import drain_key

EPS_USD = 1e-6
STOP = "hard stop"  # the reading of a hard stop: the monthly marks over its next two ticks


@dataclass(frozen=True)
class ShedAsked:
    """A release of ``plan`` a broken cap of the shared ``budget`` asked for: ``units`` of it (the cut), and the
    readings whose new marks must each pay for a unit it keeps: ``budget``'s as ``kinds``, and every reading of the
    pool's other budgets (``also``), which the planner may have counted on the release too (its record names one)."""

    resize: Resize
    budget: Budget
    units: int
    kinds: tuple[str, ...]
    also: tuple[Budget, ...] = ()

    @property
    def readings(self) -> tuple[tuple[Budget, str], ...]:
        return (*((self.budget, k) for k in self.kinds), *((b, k) for b in self.also for k in cap_kinds(b)))


def cap_kinds(budget: Budget, stop: bool = True) -> tuple[str, ...]:
    """The readings of ``budget``'s caps: monthly and hourly, and (``stop``) its hard stop where it has one."""
    caps = ((CapKind.MONTH, budget.monthly_cap_usd), (CapKind.HOUR, budget.hourly_cap_usd))
    kinds = tuple(k for k, c in caps if c is not None)
    return (*kinds, STOP) if stop and budget.monthly_cap_usd is not None and budget.commit_horizon else kinds


def kept_units(
    sheds: Sequence[ShedAsked],
    new: Mapping[tuple[str, str], float],
    per_unit: Callable[[ShedAsked, Budget, str], float],
) -> dict[str, int]:
    """The units each pool's shed keeps: what every one of its readings saw newly marked pays for, in units of the
    pool, each reading's new marks taken once. A reading that saw nothing marked keeps none: a pool in two budgets
    keeps a unit only where the marks of both pay for it."""
    left = dict(new)
    out: dict[str, int] = {}
    for shed in sheds:
        values = {(b.name, k): per_unit(shed, b, k) for b, k in shed.readings}
        if not values or any(v <= 0.0 or key not in left for key, v in values.items()):
            continue
        n = min(shed.units, *(math.floor((left[key] + EPS_USD) / v) for key, v in values.items()))
        if n <= 0:
            continue
        out[shed.resize.pool_id] = out.get(shed.resize.pool_id, 0) + n
        for key, v in values.items():
            left[key] -= n * v
    return out


def cut_plan(
    now: datetime,
    plan: CapacityPlan,
    sheds: Sequence[ShedAsked],
    cuts: Mapping[str, int],
    new: Mapping[tuple[str, str], float],
) -> CapacityPlan:
    """``plan`` with each shed's release ``cuts`` units smaller (a release cut to nothing is dropped), its drains
    chosen at plan time the longest idle of those it keeps, and its record and skip saying why."""
    if not cuts:
        return plan
    resizes, drains, skips = [], list(plan.drains), list(plan.skips)
    targets, decisions = dict(plan.targets), dict(plan.decisions)
    by_pool = {s.resize.pool_id: s for s in sheds}
    for resize in plan.resizes:
        kept = cuts.get(resize.pool_id, 0)
        if not kept or resize.is_scale_up:
            resizes.append(resize)
            continue
        shed = by_pool[resize.pool_id]
        marked = sum(usd for (name, _), usd in new.items() if name == shed.budget.name and usd > 0.0)
        detail = (
            f"budget {shed.budget.name!r} shared with other agents: {kept} of the units to release kept, as another "
            f"agent marked units of its own as being released after this tick read the ledger (counted as shed "
            f"already, up to {marked:,.2f} USD read in the readings of its caps)"
        )
        to_units = min(resize.from_units, resize.to_units + kept)
        targets[resize.pool_id] = to_units
        skips.append(Skip(resize.pool_id, SkipReason.BUDGET, detail))
        ours = [d for d in drains if d.key.startswith(resize.key + DRAIN_KEY_MARK)]
        drains = [d for d in drains if d not in ours]
        key = resize_key(now, resize.pool_id, to_units)
        decision = decisions.get(resize.pool_id)
        if decision is not None:
            budget_cuts = tuple(
                replace(c, units=c.units - kept) if c.budget == shed.budget.name and c.units >= kept else c
                for c in decision.budget_cuts
            )
            decision = replace(
                decision,
                budget_cuts=tuple(c for c in budget_cuts if c.units > 0),
                holds=(*decision.holds, Hold(SkipReason.BUDGET, detail)),
                target_units=to_units,
                nodes=decision.nodes[: max(0, resize.from_units - to_units)],
            )
            decisions[resize.pool_id] = decision
        if to_units >= resize.from_units:
            continue
        reason = decision.why() if decision is not None else f"{resize.reason}; {detail}"
        resizes.append(replace(resize, to_units=to_units, key=key, reason=reason))
        drains += [
            Drain(d.pool_id, d.node, reason, drain_key(key, d.node)) for d in ours[: resize.from_units - to_units]
        ]
    return replace(plan, resizes=tuple(resizes), drains=tuple(drains), skips=tuple(skips), targets=targets,
                   decisions=decisions)  # fmt: skip


def resize_key(now: datetime, pool_id: str, to_units: int) -> str:
    """The planner's idempotency key format: one key per pool, tick and target."""
    return f"{pool_id}@{now.isoformat()}->{to_units}"
