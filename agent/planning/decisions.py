"""The budget step of each pool's decision record: what the caps took off the targets. Pure.

``apply_budgets`` trims scale-ups and releases over-cap units; this writes what it did into the records the
planner filled before it (``models.decision.PoolDecision``): a cut per cap that took units off a target, and a
budget hold where units a cap wants gone are kept (busy, or in a held pool).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from agent.planning.budgeting import BudgetedDecisions
from models import BudgetCut, Hold, PoolDecision, Skip, SkipReason


def with_budgets(
    decisions: Mapping[str, PoolDecision], before: Sequence[Skip], held: BudgetedDecisions
) -> dict[str, PoolDecision]:
    """The records with the budget cuts of ``held`` (the planner's decisions after ``apply_budgets``)."""
    out = dict(decisions)
    added: dict[str, list[Skip]] = {}
    for skip in held.skips[len(before) :]:
        if skip.reason is SkipReason.BUDGET:
            added.setdefault(skip.pool_id, []).append(skip)
    resized = {r.pool_id: r for r in held.resizes}
    for trim in held.trims:
        texts = added.get(trim.pool_id, [])
        detail = texts.pop(0).detail if texts else ""
        units = trim.wanted_units - trim.allowed_units
        out[trim.pool_id] = _cut(
            out[trim.pool_id], BudgetCut(trim.budget, str(trim.cap), units, detail, trim.unknown_usd)
        )
    # one record per pool: a hard stop (listed after the ordinary sheds) stands for both
    for shed in {s.pool_id: s for s in held.shed}.values():
        decision = out[shed.pool_id]
        resize = resized.get(shed.pool_id)
        after = resize.to_units if resize is not None else decision.current_units
        released = decision.budgeted_units - after if after is not None else 0
        if released > 0:
            detail = (
                resize.reason
                if resize is not None and resize.forced
                else f"budget {shed.budget!r} projected over its {shed.cap} cap: releasing {released} idle units "
                f"(cheapest to lose first)"
            )
            cap = f"hard stop of the {shed.cap}" if shed.forced else str(shed.cap)
            decision = _cut(decision, BudgetCut(shed.budget, cap, released, detail))
        kept = tuple(Hold(SkipReason.BUDGET, s.detail) for s in added.pop(shed.pool_id, []))
        out[shed.pool_id] = replace(decision, holds=(*decision.holds, *kept))
    for pool_id, left in added.items():  # a held pool keeping units a broken cap could not do without
        kept = tuple(Hold(SkipReason.BUDGET, s.detail) for s in left)
        out[pool_id] = replace(out[pool_id], holds=(*out[pool_id].holds, *kept))
    for pool_id, decision in out.items():
        resize = resized.get(pool_id)
        target = resize.to_units if resize is not None else decision.current_units
        if target != decision.target_units:
            out[pool_id] = replace(decision, target_units=target)
    return out


def _cut(decision: PoolDecision, cut: BudgetCut) -> PoolDecision:
    return replace(decision, budget_cuts=(*decision.budget_cuts, cut))
