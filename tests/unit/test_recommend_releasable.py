"""What recommend reports the forecast would release once units are seen idle: pools the daemon shrinks by releasing
idle units, held because none has been idle for the hold (whether none is idle or some are idle only since now),
and never Cloud TPU queued resources, which the daemon does not release for idleness."""

from __future__ import annotations

from dataclasses import replace

from agent.commands.recommend_document import releasable_once_idle
from config.schema import PlannerSettings
from models import CapacityTier, PoolKind, PoolState, SkipReason
from tests.unit.test_decision_records import NOW, SPOT, _plan

DEMAND = [8.0, 8.0, 8.0]  # one 8-chip unit's worth, against a pool of 6


def test_a_pool_with_no_unit_idle_counts_what_the_forecast_would_let_go() -> None:
    decision = _plan(SPOT, PoolState("spot", NOW, 6, 6), DEMAND, 8.0, PlannerSettings()).decisions["spot"]
    assert [h.reason for h in decision.holds] == [SkipReason.NOT_IDLE]
    assert 0 < decision.bounded_units < 6
    assert releasable_once_idle(SPOT, 6, decision) == 6 - decision.bounded_units


def test_a_pool_whose_units_are_idle_only_since_now_counts_too() -> None:
    state = PoolState("spot", NOW, 6, 6, idle_units=4, idle_since=(NOW,) * 4)
    decision = _plan(SPOT, state, DEMAND, 8.0, PlannerSettings()).decisions["spot"]
    assert [h.reason for h in decision.holds] == [SkipReason.STABILIZING]
    assert releasable_once_idle(SPOT, 6, decision) == 6 - decision.bounded_units > 0


def test_queued_resources_are_never_counted() -> None:
    queued = replace(
        SPOT, kind=PoolKind.TPU_QUEUED_RESOURCE, tier=CapacityTier.ON_DEMAND, spot_interruption_per_hour=0.0
    )
    decision = _plan(queued, PoolState("spot", NOW, 6, 6), DEMAND, 8.0, PlannerSettings()).decisions["spot"]
    assert decision.bounded_units < 6
    assert releasable_once_idle(queued, 6, decision) == 0


def test_nothing_is_counted_for_a_pool_at_its_need_or_unobserved() -> None:
    decision = _plan(SPOT, PoolState("spot", NOW, 6, 6), DEMAND, 8.0, PlannerSettings()).decisions["spot"]
    assert releasable_once_idle(SPOT, None, decision) == 0
    assert releasable_once_idle(SPOT, 6, None) == 0
