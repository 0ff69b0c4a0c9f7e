"""The planner held to budget caps: scale-ups trimmed with a budget skip, overruns shed, held pools spared."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from agent.planning import PlanInput, PlannerMemory, plan_capacity
from agent.planning.budget import Budget, BudgetSpend
from config.schema import PlannerSettings
from models import CapacityPlan, CapacityTier, DemandForecast, PoolSpec, PoolState, SkipReason
from tests.unit.test_planner import forecast, pool

NOW = datetime(2024, 1, 31, 14, tzinfo=UTC)  # 10 hours before the month ends
STEP = timedelta(minutes=5)


def state(target: int, idle_minutes: tuple[int, ...] = (), pool_id: str = "gpu") -> PoolState:
    since = tuple(NOW - timedelta(minutes=m) for m in idle_minutes)
    return PoolState(pool_id, NOW, target, target, idle_units=len(since), idle_since=since)


def plan(
    pools: list[PoolSpec],
    states: list[PoolState],
    demand: dict[str, float],
    budgets: list[BudgetSpend],
    forecasts: dict[str, DemandForecast] | None = None,
    memory: PlannerMemory | None = None,
) -> CapacityPlan:
    return plan_capacity(
        PlanInput(
            now=NOW,
            tick=STEP,
            pools=pools,
            states={s.pool_id: s for s in states},
            forecasts=forecasts if forecasts is not None else {k: forecast(k, [v] * 4) for k, v in demand.items()},
            observed=demand,
            service_levels=dict.fromkeys(demand, 0.9),
            settings=PlannerSettings(),
            memory=memory or PlannerMemory(),
            budgets=budgets,
        )
    )


def monthly(cap: float, spent: float, pools: tuple[str, ...] = ("gpu",)) -> BudgetSpend:
    return BudgetSpend(Budget("team-a", frozenset(pools), monthly_cap_usd=cap), NOW, spent, 0.0)


def test_without_budgets_the_plan_is_unchanged() -> None:
    unbounded = plan([pool()], [state(target=2)], {"a": 80.0}, [])
    assert [(r.from_units, r.to_units) for r in unbounded.resizes] == [(2, 10)]
    assert unbounded.budgets == ()


def test_a_scale_up_is_trimmed_to_the_cap_with_a_budget_skip_and_a_snapshot() -> None:
    # 8 USD per unit-hour, 10 hours left: each extra unit projects 80 USD. Room: 1000 - 200 - 2 x 80 = 640.
    capped = plan([pool()], [state(target=2)], {"a": 80.0}, [monthly(1000.0, 200.0)])
    assert [(r.from_units, r.to_units) for r in capped.resizes] == [(2, 10)]
    tight = plan([pool()], [state(target=2)], {"a": 80.0}, [monthly(600.0, 200.0)])
    assert [(r.from_units, r.to_units) for r in tight.resizes] == [(2, 5)]
    [cut] = tight.decisions["gpu"].budget_cuts
    assert (cut.budget, cut.cap, cut.units) == ("team-a", "monthly", 5)  # 10 wanted, 5 allowed
    assert "budget 'team-a' (monthly cap) -5: 5" in tight.resizes[0].reason
    assert tight.targets["gpu"] == 5
    [skip] = [s for s in tight.skips if s.reason is SkipReason.BUDGET]
    assert "budget 'team-a' (monthly cap 600.00 USD) allows 3 of 8 more units" in skip.detail
    [snapshot] = tight.budgets
    assert snapshot.projected_usd <= 600.0
    assert snapshot.spent_usd == 200.0


def test_an_overrun_sheds_idle_units_and_keeps_busy_ones_with_a_skip() -> None:
    # 6 units billed and wanted, 2 of them idle for 30 minutes. Projection 100 + 6 x 80 = 580 against 420: each
    # released unit saves 8 USD x (10 h - one tick) = 79.33 USD, so three should go; only the idle two may.
    over = plan([pool()], [state(target=6, idle_minutes=(30, 30))], {"a": 48.0}, [monthly(420.0, 100.0)])
    [release] = over.resizes
    assert (release.from_units, release.to_units) == (6, 4)
    decision = over.decisions["gpu"]
    [cut] = decision.budget_cuts
    assert (cut.budget, cut.units) == ("team-a", 2)
    assert "releasing 2 idle units (cheapest to lose first)" in cut.detail
    assert (decision.stepped_units, decision.budgeted_units, decision.target_units) == (6, 4, 4)
    [kept] = decision.holds
    assert kept.reason is SkipReason.BUDGET
    [skip] = [s for s in over.skips if s.reason is SkipReason.BUDGET]
    assert "1 more units should be released but are not idle for 10m; keeping them" in skip.detail


def test_units_idle_for_less_than_the_window_are_not_shed() -> None:
    fresh = plan([pool()], [state(target=6, idle_minutes=(3, 3))], {"a": 48.0}, [monthly(420.0, 100.0)])
    assert fresh.resizes == ()
    assert any(s.reason is SkipReason.BUDGET for s in fresh.skips)


def test_the_planners_own_releases_count_towards_an_overrun() -> None:
    # Demand needs 4 of 6 units; the planner releases the 2 idle ones itself, which is enough for a 430 cap.
    over = plan([pool()], [state(target=6, idle_minutes=(30, 30))], {"a": 32.0}, [monthly(430.0, 100.0)])
    [release] = over.resizes
    assert (release.from_units, release.to_units) == (6, 4)
    assert not any(s.reason is SkipReason.BUDGET for s in over.skips)


def test_a_held_pool_is_never_shed() -> None:
    # No trustworthy demand for class a: the planner holds the pool, and the budget does not override that.
    held = plan([pool()], [state(target=6, idle_minutes=(30,))], {}, [monthly(100.0, 100.0)], forecasts={})
    assert held.resizes == ()
    reasons = {s.reason for s in held.skips}
    assert SkipReason.MISSING_DATA in reasons
    assert any("in a pool that is held" in s.detail for s in held.skips if s.reason is SkipReason.BUDGET)


def test_busy_units_a_new_period_opens_with_are_kept_with_a_skip_never_drained() -> None:
    # Brisbane midnight, 1 February, is NOW: a period opens with 6 busy units bought late in the last one.
    # Projected 6 x 8 USD x 29 days x 24 h = 33,408 USD against a 1,000 USD cap: nothing is idle, nothing goes.
    budget = Budget("team-a", frozenset({"gpu"}), monthly_cap_usd=1000.0, tz=ZoneInfo("Australia/Brisbane"))
    opening = plan([pool()], [state(target=6)], {"a": 48.0}, [BudgetSpend(budget, NOW, 0.0, 0.0)])
    assert opening.resizes == ()
    [skip] = [s for s in opening.skips if s.reason is SkipReason.BUDGET]
    assert "6 more units should be released but are not idle for 10m; keeping them" in skip.detail
    [snapshot] = opening.budgets
    assert snapshot.period_start == NOW
    assert snapshot.projected_usd > 1000.0  # the overrun stays visible: the loop alerts on it


def hard_stop(cap: float, spent: float, horizon: timedelta = timedelta(hours=2)) -> BudgetSpend:
    budget = Budget("team-a", frozenset({"gpu"}), monthly_cap_usd=cap, commit_horizon=horizon)
    return BudgetSpend(budget, NOW, spent, 0.0)


def test_a_commit_horizon_grants_a_scale_up_that_the_period_end_guard_refuses() -> None:
    # 8 USD per unit-hour, 10 hours left, 2 units billed: to the period end the 10-unit target projects
    # 200 + 10 x 80 = 1,000 USD against a 500 USD cap (room for 1 more unit); over a 2-hour horizon
    # 200 + 10 x 16 = 360 USD, so the whole scale-up fits.
    guarded = plan([pool()], [state(target=2)], {"a": 80.0}, [monthly(500.0, 200.0)])
    assert [(r.from_units, r.to_units) for r in guarded.resizes] == [(2, 3)]
    horizon = plan([pool()], [state(target=2)], {"a": 80.0}, [hard_stop(500.0, 200.0)])
    assert [(r.from_units, r.to_units, r.forced) for r in horizon.resizes] == [(2, 10, False)]


def test_the_hard_stop_releases_busy_units_when_the_money_left_does_not_pay_for_two_ticks() -> None:
    # 6 busy units, 1 idle for 30 minutes (7 billed), demand for 6. Two ticks of 5 minutes cost 7 x 8 / 12 = 4.67
    # USD for the first (billed whatever is released) plus 8 / 12 = 0.67 USD per unit kept for the second. With
    # 7.00 USD left, at most 3 units may be kept: 4 go, the idle one first, then 3 busy ones.
    stopped = plan([pool()], [state(target=7, idle_minutes=(30,))], {"a": 48.0}, [hard_stop(1000.0, 993.0)])
    [release] = stopped.resizes
    assert (release.from_units, release.to_units, release.forced) == (7, 3, True)
    assert "budget 'team-a' (hard stop of the monthly cap) -3: 3" in release.reason
    [cut] = stopped.decisions["gpu"].budget_cuts  # the planner released the idle unit itself: 6 -> 3 is the cut
    assert (cut.budget, cut.cap, cut.units) == ("team-a", "hard stop of the monthly", 3)
    assert "releasing 4 units (3 of them busy; their work goes back to the queue)" in cut.detail
    assert not any("keeping them" in s.detail for s in stopped.skips)
    assert stopped.decisions["gpu"].nodes == ()  # the pool's idle nodes are not known by name here
    assert stopped.targets["gpu"] == 3
    # The default guard never releases a busy unit for a cap: only the idle one goes, the rest are kept.
    guarded = plan([pool()], [state(target=7, idle_minutes=(30,))], {"a": 48.0}, [monthly(1000.0, 993.0)])
    assert [(r.from_units, r.to_units, r.forced) for r in guarded.resizes] == [(7, 6, False)]


def test_the_hard_stop_waits_while_the_money_left_pays_for_the_next_two_ticks() -> None:
    # 7 units for two ticks: 7 x 8 x 10 / 60 = 9.33 USD; with 10 USD left nothing busy goes yet, though the
    # 2-hour horizon is over the cap (so no scale-up is granted and the idle unit is shed as usual).
    early = plan([pool()], [state(target=7, idle_minutes=(30,))], {"a": 80.0}, [hard_stop(1000.0, 990.0)])
    assert [(r.from_units, r.to_units, r.forced) for r in early.resizes] == [(7, 6, False)]


def test_a_held_pool_is_not_released_by_a_hard_stop() -> None:
    held = plan([pool()], [state(target=6)], {}, [hard_stop(1000.0, 999.9)], forecasts={})
    assert held.resizes == ()
    assert any("hard stop" in s.detail and "the pool is held" in s.detail for s in held.skips)


def test_a_hard_stop_says_which_nodes_go_when_the_idle_ones_are_too_few() -> None:
    named = PoolState(
        "gpu", NOW, 7, 7, idle_units=1, idle_since=(NOW - timedelta(minutes=30),), idle_nodes=("node-idle",)
    )
    stopped = plan([pool()], [named], {"a": 48.0}, [hard_stop(1000.0, 993.0)])
    [release] = stopped.resizes
    assert (release.from_units, release.to_units, release.forced) == (7, 3, True)
    note = stopped.decisions["gpu"].nodes_note
    assert note == (
        "a hard stop: the 1 nodes idle for 10m go first, then 3 busy nodes the drainer chooses, the least loaded first"
    )


def test_a_pool_whose_state_could_not_be_read_is_held_when_a_broken_cap_needs_its_units() -> None:
    # The h100 pool's state could not be read and the ledger last recorded it holding 10 units (10 x 80 USD an
    # hour). It is held with a budget skip; the gpu pool, read, still sheds its idle unit.
    pools = [pool(hi=10), pool("h100", price=80.0, hi=10)]
    recorded = replace(monthly(1000.0, 5000.0, ("gpu", "h100")), last_units={"h100": 10})
    over = plan(pools, [state(target=4, idle_minutes=(60,))], {"a": 32.0}, [recorded])
    assert [(r.pool_id, r.from_units, r.to_units, r.forced) for r in over.resizes] == [("gpu", 4, 3, False)]
    [held] = [s for s in over.skips if s.pool_id == "h100" and s.reason is SkipReason.BUDGET]
    assert "its units are in a pool that is held (its state could not be read); keeping them" in held.detail
    assert over.decisions["h100"].target_units is None
    [snapshot] = over.budgets
    assert snapshot.projected_usd > 1000.0  # the unread pool's recorded units keep the overrun visible

    # With a commit horizon the money left does not pay for the next two ticks, but no hard stop starts while a
    # pool of the budget is not read: the gpu pool's busy units stay, its idle one is shed as before. The ledger has
    # no record of h100 here and the agent never read it: it is counted at nothing, which the skip says.
    budget = Budget("team-a", frozenset({"gpu", "h100"}), monthly_cap_usd=1000.0, commit_horizon=timedelta(hours=2))
    stopped = plan(pools, [state(target=4, idle_minutes=(60,))], {"a": 32.0}, [BudgetSpend(budget, NOW, 999.0, 0.0)])
    assert [(r.pool_id, r.from_units, r.to_units, r.forced) for r in stopped.resizes] == [("gpu", 4, 3, False)]
    [waits] = [s.detail for s in stopped.skips if s.pool_id == "h100" and "hard stop" in s.detail]
    assert "hard stop not started" in waits
    assert "counted at nothing, neither this agent nor the ledger knowing what it holds" in waits


def test_a_blocked_pool_at_its_desired_size_is_neither_shed_nor_stopped() -> None:
    # Demand wants exactly the 10 units the pool has, so the planner has nothing to skip; a permanent error
    # blocks the pool all the same, and no budget release may resize it.
    blocked = PlannerMemory(blocked={"gpu": "403 permission denied on node pool"})
    over = plan([pool()], [state(target=10, idle_minutes=(60, 60, 60))], {"a": 80.0}, [monthly(100.0, 100.0)],
                memory=blocked)  # fmt: skip
    assert over.resizes == ()
    [kept] = [s for s in over.skips if s.reason is SkipReason.BUDGET]
    assert "are in a pool that is held (blocked by a permanent error: 403 permission denied" in kept.detail
    assert over.decisions["gpu"].target_units == 10
    stopped = plan([pool()], [state(target=10)], {"a": 80.0}, [hard_stop(1000.0, 999.9)], memory=blocked)
    assert stopped.resizes == ()
    assert any("hard stop" in s.detail and "the pool is held (blocked" in s.detail for s in stopped.skips)


def test_a_pool_serving_a_class_with_no_data_at_its_desired_size_is_not_shed() -> None:
    # Class a alone asks for the pool's 10 units; class b, served by the same pool, has no data: the planner
    # holds the pool whatever a wants, and so does the budget.
    shared = pool(serves=("a", "b"))
    over = plan([shared], [state(target=10, idle_minutes=(60, 60))], {"a": 80.0}, [monthly(100.0, 100.0)])
    assert over.resizes == ()
    [kept] = [s for s in over.skips if s.reason is SkipReason.BUDGET]
    assert "in a pool that is held (no trustworthy demand for b)" in kept.detail
    stopped = plan([shared], [state(target=10)], {"a": 80.0}, [hard_stop(1000.0, 999.9)])
    assert stopped.resizes == ()
    assert any("the pool is held (no trustworthy demand for b)" in s.detail for s in stopped.skips)


def test_a_hard_stop_releases_idle_spot_units_before_busy_on_demand_ones() -> None:
    # Demand for 5 units: 4 busy on-demand units (30 USD an hour) and 4 spot units (25 USD), 3 of them idle for 5
    # minutes, less than the 10-minute window. The next two ticks cost 220 x 10 / 60 = 36.67 USD and 5 USD more
    # than is left: each unit released now saves its second tick, 2.08 USD spot, 2.50 on-demand. The 3 spot units
    # idle now cover it; no busy unit has to go.
    pools = [pool("od", price=30.0, hi=10), pool("spot", tier=CapacityTier.SPOT, price=25.0, hi=10)]
    states = [state(target=4, pool_id="od"), state(target=4, idle_minutes=(5, 5, 5), pool_id="spot")]
    budget = Budget("team-a", frozenset({"od", "spot"}), monthly_cap_usd=10_000.0, commit_horizon=timedelta(hours=2))
    spend = BudgetSpend(budget, NOW, 10_000.0 - 220.0 * 10 / 60 + 5.0, 0.0)
    stopped = plan(pools, states, {"a": 40.0}, [spend])
    assert [(r.pool_id, r.from_units, r.to_units, r.forced) for r in stopped.resizes] == [("spot", 4, 1, True)]
    [cut] = [c for c in stopped.decisions["spot"].budget_cuts if c.cap == "hard stop of the monthly"]
    assert "releasing 3 units (0 of them busy" in cut.detail


def _blocked_on_demand(spot_min: int) -> CapacityPlan:
    # Demand for 8 units: 4 busy on-demand units (30 USD an hour), blocked after a permanent error, and 4 busy spot
    # units (25 USD). The next two ticks cost 220 x 10 / 60 = 36.67 USD, 5 USD more than is left: each unit
    # released now saves its second tick, 2.50 USD on-demand, 2.08 spot. On-demand goes first by tier, but the
    # blocked pool may not be touched: the spot pool covers what it can.
    pools = [pool("od", price=30.0, hi=10), pool("spot", tier=CapacityTier.SPOT, price=25.0, lo=spot_min, hi=10)]
    states = [state(target=4, pool_id="od"), state(target=4, pool_id="spot")]
    budget = Budget("team-a", frozenset({"od", "spot"}), monthly_cap_usd=10_000.0, commit_horizon=timedelta(hours=2))
    spend = BudgetSpend(budget, NOW, 10_000.0 - 220.0 * 10 / 60 + 5.0, 0.0)
    blocked = PlannerMemory(blocked={"od": "403 permission denied on node pool"})
    return plan(pools, states, {"a": 64.0}, [spend], memory=blocked)


def test_a_hard_stop_takes_from_the_pools_it_may_release_what_a_held_pool_keeps() -> None:
    stopped = _blocked_on_demand(spot_min=0)
    assert [(r.pool_id, r.from_units, r.to_units, r.forced) for r in stopped.resizes] == [("spot", 4, 1, True)]
    assert not any(s.pool_id == "od" and "hard stop" in s.detail for s in stopped.skips)


def test_a_hard_stop_the_releasable_pools_cannot_cover_says_what_the_held_pool_keeps() -> None:
    # The spot pool may go down to 2 units only: 4.17 USD saved, 0.83 short.
    stopped = _blocked_on_demand(spot_min=2)
    assert [(r.pool_id, r.from_units, r.to_units, r.forced) for r in stopped.resizes] == [("spot", 4, 2, True)]
    [kept] = [s.detail for s in stopped.skips if s.pool_id == "od" and "hard stop" in s.detail]
    assert "0.83 USD more than releasing the units of its other pools saves" in kept
    assert "the pool is held (blocked by a permanent error: 403 permission denied on node pool)" in kept
    assert kept in [h.detail for h in stopped.decisions["od"].holds if h.reason is SkipReason.BUDGET]
