"""decision_events: each decision of a tick, carried out or refused, as one event with its reason and numbers;
in dry-run, recorded actions are recommendations and every message says dry-run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.decision_events import DecisionEvent, SubjectKind, decision_events
from models import (
    ActionResult,
    ActionStatus,
    BudgetCut,
    CapacityPlan,
    DemandShare,
    Hold,
    PoolDecision,
    Resize,
    SkipReason,
)

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
UP = Resize("spot", 1, 3, "forecast needs 3 units", "spot@t->3")
DOWN = Resize("ondemand", 3, 1, "2 units idle", "ondemand@t->1")


def _reasons(events: tuple[DecisionEvent, ...]) -> list[tuple[str, str]]:
    return [(e.subject, e.reason) for e in events]


def test_an_accepted_scale_up_is_one_pool_event_with_the_numbers() -> None:
    plan = CapacityPlan(T0, resizes=(UP,))
    (event,) = decision_events(plan, [ActionResult(UP.key, "spot", ActionStatus.STARTED, T0)], recommend=False)
    assert event == DecisionEvent(
        SubjectKind.POOL,
        "spot",
        "spot",
        "ScaleUp",
        "pool spot: scale up from 1 to 3 units: forecast needs 3 units",
        False,
        {"from_units": "1", "to_units": "3"},
    )


def test_refused_resizes_are_warnings_that_say_why() -> None:
    plan = CapacityPlan(T0, resizes=(UP, DOWN))
    results = [
        ActionResult(UP.key, "spot", ActionStatus.FAILED, T0, error="ZONE_RESOURCE_POOL_EXHAUSTED"),
        ActionResult(DOWN.key, "ondemand", ActionStatus.REJECTED, T0, detail="the pool is now 4 units"),
    ]
    events = decision_events(plan, results, recommend=False)
    assert [(e.reason, e.warning, e.message) for e in events] == [
        ("ScaleUpFailed", True, "pool spot: could not scale up from 1 to 3 units: ZONE_RESOURCE_POOL_EXHAUSTED"),
        ("ScaleDownRejected", True, "pool ondemand: did not scale down from 3 to 1 units: the pool is now 4 units"),
    ]


def test_a_drain_begun_this_tick_cordons_starts_and_reports_a_budget_block_per_node() -> None:
    plan = CapacityPlan(T0, resizes=(DOWN,))
    results = [
        ActionResult(
            f"{DOWN.key}/drain/n1",
            "ondemand",
            ActionStatus.STARTED,
            T0,
            detail="waiting for disruption budgets to allow evicting [('ml', 'train-0')] from n1",
        ),
        ActionResult(f"{DOWN.key}/drain/n2", "ondemand", ActionStatus.DONE, T0, detail="node n2 drained"),
    ]
    events = decision_events(plan, results, recommend=False)
    assert _reasons(events) == [
        ("ondemand", "ScaleDown"),
        ("n1", "Cordoned"),
        ("n1", "DrainStarted"),
        ("n1", "DrainBlocked"),
        ("n2", "Cordoned"),
        ("n2", "DrainStarted"),
        ("n2", "DrainFinished"),
    ]
    assert events[0].message == "pool ondemand: scale down from 3 to 1 units by draining n1, n2: 2 units idle"
    assert all(e.subject_kind is SubjectKind.NODE for e in events[1:])


def test_a_drain_continued_from_an_earlier_tick_reports_only_its_outcome() -> None:
    results = [
        ActionResult(
            "ondemand@t0->1/drain/n1", "ondemand", ActionStatus.STARTED, T0, detail="waiting for disruption budgets"
        ),
        ActionResult("ondemand@t0->1/drain/n2", "ondemand", ActionStatus.FAILED, T0, detail="gave up"),
        ActionResult("ondemand@t0->1/drain/n3", "ondemand", ActionStatus.REJECTED, T0, detail="must not move"),
    ]
    events = decision_events(CapacityPlan(T0), results, recommend=False)
    assert _reasons(events) == [("n1", "DrainBlocked"), ("n2", "DrainFailed"), ("n3", "DrainRejected")]
    assert all(e.warning for e in events)


def test_pods_shutting_down_within_their_grace_period_are_waited_for_not_a_budget_block() -> None:
    detail = "waiting for [('ml', 'train-0')] on n1 to finish terminating"
    results = [ActionResult("ondemand@t0->1/drain/n1", "ondemand", ActionStatus.STARTED, T0, detail=detail)]
    (event,) = decision_events(CapacityPlan(T0), results, recommend=False)
    assert (event.reason, event.warning, event.message) == ("DrainWaiting", False, f"pool ondemand: {detail}")


def _record(
    pool_id: str, current: int, *, cuts: tuple[BudgetCut, ...] = (), holds: tuple[Hold, ...] = ()
) -> PoolDecision:
    """A pool at ``current`` units whose demand wants two more (16 chips of 8-chip units)."""
    share = DemandShare("training", 0.9, 16.0, 12.0, 16.0, 16.0)
    budgeted = current + 2 - sum(c.units for c in cuts)
    target = current if holds and not cuts else budgeted
    return PoolDecision(
        pool_id, False, timedelta(minutes=10), 8, 0, 10, current, (share,), 2, current, 0, current + 2,
        current + 2, target, budget_cuts=cuts, holds=holds,
    )  # fmt: skip


def test_holds_on_missing_data_and_budget_trims_are_pool_events_other_holds_are_not() -> None:
    missing = Hold(SkipReason.MISSING_DATA, "no trustworthy demand for training; holding")
    cut = BudgetCut("b", "monthly", 1, "budget 'b' allows 1 of 2 more units")
    plan = CapacityPlan(
        T0,
        decisions={
            "spot": _record("spot", 0, cuts=(cut,), holds=(missing,)),
            "ondemand": _record("ondemand", 0, holds=(Hold(SkipReason.COOLDOWN, "scaled up too recently"),)),
        },
    )
    events = decision_events(plan, [], recommend=False)
    assert [(e.reason, e.message) for e in events] == [
        ("BudgetTrimmed", "pool spot: budget 'b' allows 1 of 2 more units"),
        ("HeldMissingData", "pool spot: held: no trustworthy demand for training; holding"),
    ]
    assert events[0].numbers == {
        "need_chips": "16",
        "rounded_units": "2",
        "bounded_units": "2",
        "stepped_units": "2",
        "budgeted_units": "1",
        "target_units": "1",
    }


def test_dry_run_marks_recorded_actions_and_every_message_as_recommendations() -> None:
    cut = BudgetCut("b", "monthly", 1, "budget 'b' allows 2 of 3 more units")
    plan = CapacityPlan(T0, resizes=(UP, DOWN), decisions={"spot": _record("spot", 1, cuts=(cut,))})
    results = [
        ActionResult(UP.key, "spot", ActionStatus.RECORDED, T0),
        ActionResult(f"{DOWN.key}/drain/n1", "ondemand", ActionStatus.RECORDED, T0),
    ]
    events = decision_events(plan, results, recommend=True)
    assert [(e.subject, e.reason, e.message) for e in events] == [
        ("spot", "RecommendScaleUp", "dry-run: pool spot: would scale up from 1 to 3 units: forecast needs 3 units"),
        (
            "ondemand",
            "RecommendScaleDown",
            "dry-run: pool ondemand: would scale down from 3 to 1 units by draining n1: 2 units idle",
        ),
        ("n1", "RecommendDrain", "dry-run: would cordon and drain it to shrink pool ondemand: 2 units idle"),
        ("spot", "BudgetTrimmed", "dry-run: pool spot: budget 'b' allows 2 of 3 more units"),
    ]


def test_no_plan_no_events() -> None:
    assert decision_events(None, [], recommend=False) == ()
