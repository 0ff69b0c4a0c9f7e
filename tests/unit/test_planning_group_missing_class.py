"""One class of a demand group without data: its pools are held as before, but the plan names only that class as
lacking data (the hold, the budget's held pool, the Event), and the group's peak, worked out from its members' own
forecasts for want of a forecast of the group's summed demand, is told as the sum of the known classes' peaks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.decision_events import decision_events
from agent.planning import PlanInput, PlannerMemory, plan_capacity
from agent.planning.budget import Budget, BudgetSpend
from agent.planning.groups import demand_groups
from config.schema import PlannerSettings
from models import CapacityPlan, PoolSpec, PoolState, SkipReason
from tests.unit.test_planner import forecast, pool

NOW = datetime(2024, 1, 31, 14, tzinfo=UTC)  # 10 hours before the month ends
STEP = timedelta(minutes=5)
CLASSES = ("a", "b", "c", "x")  # x has no data
OBSERVED = {"a": 100.0, "b": 60.0, "c": 0.0}
PEAKS = {"a": 120.0, "b": 64.0, "c": 0.0}


def _plan(
    pools: list[PoolSpec], states: list[PoolState], budgets: list[BudgetSpend], observed: dict[str, float]
) -> CapacityPlan:
    return plan_capacity(
        PlanInput(
            now=NOW,
            tick=STEP,
            pools=pools,
            states={s.pool_id: s for s in states},
            forecasts={name: forecast(name, [peak] * 4) for name, peak in PEAKS.items() if name in observed},
            observed=observed,
            service_levels=dict.fromkeys(CLASSES, 0.9),
            settings=PlannerSettings(idle_hold_lead_times=0),
            memory=PlannerMemory(),
            budgets=budgets,
            groups=demand_groups(list(CLASSES), pools),
            forecast_step=STEP,
        )
    )


def _idle(pool_id: str, units: int, idle: int) -> PoolState:
    since = tuple(NOW - timedelta(hours=1) for _ in range(idle))
    return PoolState(pool_id, NOW, units, units, idle_units=idle, idle_since=since)


SHARED = pool("gpu", serves=CLASSES, price=29.36)


def test_the_hold_names_only_the_class_without_data() -> None:
    plan = _plan([SHARED], [_idle("gpu", 50, 20)], [], OBSERVED)
    assert plan.resizes == ()
    assert plan.decisions["gpu"].target_units == 50  # held: 23 units would do for the known classes
    [skip] = [s for s in plan.skips if s.reason is SkipReason.MISSING_DATA]
    assert skip.detail == "no trustworthy demand for x; holding"
    [event] = [e for e in decision_events(plan, (), recommend=False) if e.reason == "HeldMissingData"]
    assert event.message == "pool gpu: held: no trustworthy demand for x; holding"


def test_a_fallback_peak_is_told_as_the_sum_of_the_known_classes_peaks() -> None:
    plan = _plan([SHARED], [_idle("gpu", 50, 20)], [], OBSERVED)
    decision = plan.decisions["gpu"]
    [share] = decision.demand
    assert (share.peak, share.summed, share.missing) == (184.0, ("a", "b", "c"), ("x",))
    why = decision.why()
    assert "pool-group:gpu: sum of the q0.9 peaks of a, b, c: 184, now 160, x without data, not counted" in why
    assert "q0.9 peak 184" not in why
    fields = decision.log_fields()["demand"]
    assert fields == "pool-group:gpu:q0.9:peak=184:now=160:chips=184:peak_summed=a+b+c:missing=x"


def test_a_budget_keeping_the_held_pool_names_only_the_class_without_data() -> None:
    # 50 units at 29.36 USD an hour for 10 hours: 14,680 USD more, over a 10,000 USD cap with 2,000 spent.
    budget = BudgetSpend(Budget("research", frozenset({"gpu"}), monthly_cap_usd=10_000.0), NOW, 2_000.0, 0.0)
    plan = _plan([SHARED], [_idle("gpu", 50, 20)], [budget], OBSERVED)
    assert plan.decisions["gpu"].target_units == 50
    [kept] = [s for s in plan.skips if s.reason is SkipReason.BUDGET]
    assert "its units are in a pool that is held (no trustworthy demand for x)" in kept.detail
    assert "a, b" not in kept.detail


def test_a_group_with_every_class_known_keeps_its_own_peak_and_names_no_one() -> None:
    """The group's own forecast is the peak, labelled as it always was; a pool of another group is not held."""
    other = pool("tpu", serves=("y",))
    observed = {**OBSERVED, "x": 0.0, "y": 1.0}
    plan = plan_capacity(
        PlanInput(
            now=NOW,
            tick=STEP,
            pools=[SHARED, other],
            states={"gpu": _idle("gpu", 50, 20), "tpu": _idle("tpu", 4, 3)},
            forecasts={
                **{name: forecast(name, [peak] * 4) for name, peak in {**PEAKS, "x": 0.0, "y": 1.0}.items()},
                "pool-group:gpu": forecast("pool-group:gpu", [150.0] * 4),
            },
            observed=observed,
            service_levels=dict.fromkeys(observed, 0.9),
            settings=PlannerSettings(idle_hold_lead_times=0),
            memory=PlannerMemory(),
            groups=demand_groups([*CLASSES, "y"], [SHARED, other]),
            forecast_step=STEP,
        )
    )
    assert not [s for s in plan.skips if s.reason is SkipReason.MISSING_DATA]
    [share] = plan.decisions["gpu"].demand
    assert (share.summed, share.missing) == ((), ())
    assert "(pool-group:gpu: q0.9 peak 150, now 160)" in plan.decisions["gpu"].why()


def test_only_the_pools_of_the_group_lacking_data_are_held() -> None:
    """x's group holds gpu; y's pool, in a group of its own with data, still releases its idle units."""
    other = pool("tpu", serves=("y",))
    pools = [SHARED, other]
    plan = plan_capacity(
        PlanInput(
            now=NOW,
            tick=STEP,
            pools=pools,
            states={"gpu": _idle("gpu", 50, 20), "tpu": _idle("tpu", 4, 3)},
            forecasts={name: forecast(name, [peak] * 4) for name, peak in {**PEAKS, "y": 1.0}.items()},
            observed={**OBSERVED, "y": 1.0},
            service_levels=dict.fromkeys([*CLASSES, "y"], 0.9),
            settings=PlannerSettings(idle_hold_lead_times=0),
            memory=PlannerMemory(),
            groups=demand_groups([*CLASSES, "y"], pools),
            forecast_step=STEP,
        )
    )
    assert plan.decisions["gpu"].target_units == 50
    assert [(r.pool_id, r.to_units) for r in plan.resizes] == [("tpu", 1)]
    [skip] = [s for s in plan.skips if s.reason is SkipReason.MISSING_DATA]
    assert (skip.pool_id, skip.detail) == ("gpu", "no trustworthy demand for x; holding")
