"""Each pool's decision record: the whole chain from demand to target, with numbers worked out by hand."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from agent.planning import PlanInput, PlannerMemory, plan_capacity
from agent.planning.budget import Budget, BudgetSpend
from config.schema import PlannerSettings
from models import (
    AcceleratorFamily,
    CapacityPlan,
    CapacityTier,
    DemandForecast,
    DemandShare,
    Hold,
    PoolKind,
    PoolSpec,
    PoolState,
    SkipReason,
)

NOW = datetime(2024, 1, 31, 14, tzinfo=UTC)  # 10 hours before the month ends
STEP = timedelta(minutes=5)
# Spot, 8 chips a unit, 8 USD a unit-hour, 10 minutes' lead time, at most 10 units; 3 reclaims an hour.
SPOT = PoolSpec(
    "spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 10, 8.0, timedelta(minutes=10),
    ("train",), spot_interruption_per_hour=3.0,
)  # fmt: skip


def _plan(
    pool: PoolSpec,
    state: PoolState,
    forecast: list[float],
    observed: float,
    settings: PlannerSettings,
    budgets: list[BudgetSpend] | None = None,
) -> CapacityPlan:
    quantiles = {0.5: tuple(v / 2 for v in forecast), 0.9: tuple(forecast)}
    return plan_capacity(
        PlanInput(
            now=NOW,
            tick=STEP,
            pools=[pool],
            states={state.pool_id: state},
            forecasts={"train": DemandForecast("train", NOW, STEP, quantiles, observed, "test")},
            observed={"train": observed},
            service_levels={"train": 0.9},
            settings=settings,
            memory=PlannerMemory(),
            budgets=budgets or [],
        )
    )


def test_the_record_reads_the_whole_chain_need_rounded_bounded_stepped_budgeted() -> None:
    # Horizon: lead 10m + tick 5m = 3 steps, so the q0.9 peak is max(30, 50, 44) = 50 (the 99 at step 4 is
    # beyond it); 41 observed now is below it: need 50 chips. 50 / 8 = 6.25 -> 7 whole units. Headroom 1.
    # Spot reserve: 3 reclaims/h x 10 min = 0.5 of the 7 units -> 4. 7 + 1 + 4 = 12 -> max 10. From 2 units the
    # step limit of 5 allows 7. Budget: 10 hours left at 8 USD = 80 USD a unit; 100 spent + 2 units billed x 80 =
    # 260 of a 600 cap leaves 340 = 4 more units (4 x 80 = 320): 6, one unit cut.
    settings = PlannerSettings(headroom_units=1, max_scale_up_units_per_tick=5)
    budget = BudgetSpend(Budget("team", frozenset({"spot"}), monthly_cap_usd=600.0), NOW, 100.0, 0.0)
    plan = _plan(SPOT, PoolState("spot", NOW, 2, 2), [30, 50, 44, 99], 41.0, settings, [budget])

    decision = plan.decisions["spot"]
    assert decision.demand == (DemandShare("train", 0.9, 50.0, 41.0, 50.0, 50.0),)
    assert decision.need_chips == 50.0
    assert (decision.rounded_units, decision.headroom_units, decision.spot_reserve_units) == (7, 1, 4)
    assert decision.bounded_units == 10
    assert (decision.step_limit, decision.stepped_units) == (5, 7)
    [cut] = decision.budget_cuts
    assert (cut.budget, cut.cap, cut.units) == ("team", "monthly", 1)
    assert (decision.budgeted_units, decision.target_units) == (6, 6)
    assert decision.holds == ()
    assert decision.stages() == {
        "need": 6.25,
        "rounded": 7.0,
        "bounded": 10.0,
        "stepped": 7.0,
        "budgeted": 6.0,
        "target": 6.0,
    }
    # what is carried out, and the reason it gives, come from the record
    [resize] = plan.resizes
    assert (resize.from_units, resize.to_units) == (2, 6)
    assert (
        resize.reason
        == decision.why()
        == (
            "need 50 chips within lead time 10m (train: q0.9 peak 50, now 41) -> 7 units of 8 chips + 1 headroom "
            "+ 4 spot reserve = 12 -> bounds 0..10: 10 -> 16 chips of spot reserve over the bound not held: "
            "no eligible pool has room -> step limit +5/tick: 7 -> budget 'team' (monthly cap) -1: 6 -> target 6"
        )
    )
    assert decision.log_fields()["budget_cuts"] == "team/monthly:1"


def test_a_step_limit_cut_is_in_the_record_and_skipped_with_its_reason() -> None:
    # 80 chips observed = 10 units wanted, 2 billed, at most 3 more per tick: 5 this tick.
    on_demand = replace(SPOT, tier=CapacityTier.ON_DEMAND, spot_interruption_per_hour=0.0)
    plan = _plan(
        on_demand, PoolState("spot", NOW, 2, 2), [80, 80, 80], 80.0, PlannerSettings(max_scale_up_units_per_tick=3)
    )
    decision = plan.decisions["spot"]
    assert (decision.bounded_units, decision.step_limit, decision.stepped_units, decision.target_units) == (10, 3, 5, 5)
    [skip] = [s for s in plan.skips if s.reason is SkipReason.STEP_LIMIT]
    assert skip.detail == "step limit +3 units per tick: 2->5 this tick instead of ->10"
    assert "step limit +3/tick: 5" in plan.resizes[0].reason


def test_a_release_is_paced_by_the_units_idle_for_the_window_and_by_the_step() -> None:
    # Nothing needed: all 6 units may go, 3 are idle for the 20-minute window (two lead times), 1 per tick.
    state = PoolState(
        "spot", NOW, 6, 6, idle_units=4, idle_since=tuple(NOW - timedelta(minutes=m) for m in (40, 30, 25, 5))
    )
    on_demand = replace(SPOT, tier=CapacityTier.ON_DEMAND, spot_interruption_per_hour=0.0)
    plan = _plan(on_demand, state, [0, 0, 0], 0.0, PlannerSettings(max_scale_down_units_per_tick=1))
    decision = plan.decisions["spot"]
    assert (decision.bounded_units, decision.idle_settled, decision.step_limit) == (0, 3, 1)
    assert (decision.stepped_units, decision.target_units) == (5, 5)
    assert decision.idle_window == timedelta(minutes=20)
    assert "3 units idle for 20m and step limit -1/tick: 5" in plan.resizes[0].reason
    assert decision.nodes == () and "the cloud chooses" in decision.nodes_note  # no idle node names here


def test_a_held_pool_records_the_hold_and_keeps_its_size() -> None:
    state = PoolState("spot", NOW, 6, 6)  # nothing idle
    on_demand = replace(SPOT, tier=CapacityTier.ON_DEMAND, spot_interruption_per_hour=0.0)
    plan = _plan(on_demand, state, [8, 8, 8], 8.0, PlannerSettings())
    decision = plan.decisions["spot"]
    assert decision.holds == (Hold(SkipReason.NOT_IDLE, "forecast allows 1 units but no unit is idle"),)
    assert (decision.bounded_units, decision.stepped_units, decision.target_units) == (1, 6, 6)
    assert [s.detail for s in plan.skips] == [decision.holds[0].detail]
    assert decision.why().endswith("not-idle: forecast allows 1 units but no unit is idle -> target 6")


def test_a_queued_resource_pool_says_its_idleness_is_not_observed() -> None:
    """Cloud TPU queued resources are TPU VMs, not Kubernetes nodes: no drainer reports them idle, so the hold says
    what releases them instead of suggesting that idleness was looked for."""
    queued = replace(
        SPOT, kind=PoolKind.TPU_QUEUED_RESOURCE, tier=CapacityTier.ON_DEMAND, spot_interruption_per_hour=0.0
    )
    plan = _plan(queued, PoolState("spot", NOW, 6, 6), [8, 8, 8], 8.0, PlannerSettings())
    (hold,) = plan.decisions["spot"].holds
    assert hold == Hold(
        SkipReason.NOT_IDLE,
        "forecast allows 1 units, but queued resources are released only by a budget's hard stop or by hand: "
        "their idleness is not observed",
    )


def test_every_pool_has_a_record_an_unobserved_one_with_no_target() -> None:
    plan = plan_capacity(
        PlanInput(
            now=NOW,
            tick=STEP,
            pools=[SPOT],
            states={},
            forecasts={},
            observed={},
            service_levels={},
            settings=PlannerSettings(),
        )
    )
    decision = plan.decisions["spot"]
    assert (decision.current_units, decision.target_units) == (None, None)
    assert decision.holds[0].reason is SkipReason.MISSING_DATA
    assert "target" not in decision.stages()  # unknown is absent, never zero
