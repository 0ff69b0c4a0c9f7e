"""Enforcing budget caps on a plan: trimming scale-ups, shedding when already over, and the invariants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.planning.budget import Budget, BudgetSpend, CapKind
from agent.planning.enforcement import enforce_budgets, find_overspends
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec, SkipReason

NOW = datetime(2024, 3, 31, 14, 0, tzinfo=UTC)  # 10 hours before the month ends (UTC)
TICK = timedelta(minutes=1)


def spec(
    pool_id: str,
    price: float,
    tier: CapacityTier = CapacityTier.ON_DEMAND,
    kind: PoolKind = PoolKind.GPU_NODE_POOL,
    min_units: int = 0,
    max_units: int = 20,
) -> PoolSpec:
    family = AcceleratorFamily.TPU if kind is PoolKind.TPU_SLICE_GROUP else AcceleratorFamily.GPU
    return PoolSpec(pool_id, kind, tier, family, 8, min_units, max_units, price, timedelta(minutes=10), ("c",))


POOLS = {
    "onprem": spec("onprem", 5.0, CapacityTier.ON_PREM, PoolKind.ON_PREM, 4, 4),
    "spot": spec("spot", 10.0, CapacityTier.SPOT),
    "ondemand": spec("ondemand", 30.0),
    "reserved": spec("reserved", 8.0, CapacityTier.RESERVED, min_units=1),
}


def monthly(cap: float, spent: float, pools: set[str] | None = None, name: str = "team-a") -> BudgetSpend:
    budget = Budget(name, frozenset(pools or {"spot", "ondemand"}), monthly_cap_usd=cap)
    return BudgetSpend(budget, NOW, spent, 0.0)


def test_a_scale_up_that_fits_is_left_alone() -> None:
    out = enforce_budgets(NOW, [monthly(5000.0, 500.0)], POOLS, {"spot": 2, "ondemand": 1}, {"spot": 5}, {}, TICK)
    assert out.targets == {"spot": 5}
    assert out.skips == ()
    assert out.shed == ()
    assert out.snapshots[0].projected_usd == pytest.approx(500.0 + 5 * 100.0 + 1 * 300.0)


def test_scale_ups_are_trimmed_to_the_cap_in_fill_order_with_a_budget_skip() -> None:
    # Billed now: spot 2 x 10 USD + on-demand 1 x 30 USD for 10 h = 500 on top of 500 spent; cap 1500.
    spend = monthly(1500.0, 500.0)
    out = enforce_budgets(NOW, [spend], POOLS, {"spot": 2, "ondemand": 1}, {"spot": 5, "ondemand": 3}, {}, TICK)
    assert out.targets == {"spot": 5, "ondemand": 1}  # spot (filled first) gets the 300 USD; on-demand nothing
    assert [(s.pool_id, s.reason) for s in out.skips] == [("ondemand", SkipReason.BUDGET)]
    assert "budget 'team-a' (monthly cap 1,500.00 USD) allows 0 of 2 more units" in out.skips[0].detail
    assert [(t.pool_id, t.wanted_units, t.allowed_units, t.budget) for t in out.trims] == [("ondemand", 3, 1, "team-a")]
    assert out.snapshots[0].projected_usd == pytest.approx(1300.0)
    assert out.snapshots[0].projected_usd <= 1500.0


def test_a_partial_scale_up_keeps_whole_units() -> None:
    spend = monthly(1000.0 + 250.0, 500.0)  # room for 2.5 spot units: 2 granted
    out = enforce_budgets(NOW, [spend], POOLS, {"spot": 2, "ondemand": 1}, {"spot": 9}, {}, TICK)
    assert out.targets == {"spot": 4}
    assert "allows 2 of 7 more units" in out.skips[0].detail


def test_releases_in_the_same_tick_are_not_counted_as_room() -> None:
    spend = monthly(1000.0, 500.0)  # exactly at the cap with what is billed now
    out = enforce_budgets(NOW, [spend], POOLS, {"spot": 2, "ondemand": 1}, {"spot": 3, "ondemand": 0}, {}, TICK)
    assert out.targets == {"spot": 2, "ondemand": 0}
    assert out.shed == ()


def test_the_tighter_of_two_budgets_binds_and_is_named() -> None:
    fleet = monthly(100_000.0, 0.0, {"spot", "ondemand", "reserved"}, "fleet")
    team = monthly(1100.0, 500.0, {"spot"}, "team-b")  # spot billed 2 -> 200; room 400 = 4 units
    out = enforce_budgets(NOW, [team, fleet], POOLS, {"spot": 2, "ondemand": 1, "reserved": 1}, {"spot": 9})
    assert out.targets == {"spot": 6}
    assert "budget 'team-b'" in out.skips[0].detail
    assert [s.budget for s in out.snapshots] == ["fleet", "team-b"]


def test_an_unobserved_pool_known_by_nobody_frees_no_room_but_is_no_overspend() -> None:
    # on-demand is not in ``billed``, never read and not recorded: without a commit horizon the trim counts it at its
    # max_units to the period's end (20 units x 30 USD x 10 h = 6,000 USD, over a 5,000 USD cap alone), as a busy
    # unit granted is never released; the projection counts only the units known, spot's 2 (200 USD).
    out = enforce_budgets(NOW, [monthly(5000.0, 0.0)], POOLS, {"spot": 2}, {"spot": 3}, {}, TICK)
    assert out.targets == {"spot": 2}
    assert out.overspends == ()
    assert out.snapshots[0].projected_usd == pytest.approx(200.0)
    # with a commit horizon (the hard stop can release the units granted) it is counted over spot's hold only (lead
    # time 10m + one tick): 20 units x 30 USD x 11 min = 110 USD; of the 150 USD a 350 USD cap leaves beside spot's
    # 2 units too little is left for a third (100 USD), while 5,000 USD pays for it
    horizon = timedelta(days=31)
    for cap, spot in ((350.0, 2), (5000.0, 3)):
        budget = Budget("team-a", frozenset({"spot", "ondemand"}), monthly_cap_usd=cap, commit_horizon=horizon)
        spend = BudgetSpend(budget, NOW, 0.0, 0.0)
        assert enforce_budgets(NOW, [spend], POOLS, {"spot": 2}, {"spot": 3}, {}, TICK).targets == {"spot": spot}
    # read at 5 units last tick, it is counted at them: 1,700 USD projected, room for spot's third unit
    seen = enforce_budgets(
        NOW, [monthly(5000.0, 0.0)], POOLS, {"spot": 2}, {"spot": 3}, {}, TICK, last_read={"ondemand": 5}
    )
    assert seen.targets == {"spot": 3}


def test_over_the_cap_anyway_sheds_idle_units_first_then_the_dearest_burst() -> None:
    # The cap was lowered to 800 with 1000 projected: 200 USD to shed with 10 h left.
    spend = monthly(800.0, 500.0)
    billed = {"spot": 2, "ondemand": 1}
    out = enforce_budgets(NOW, [spend], POOLS, billed, {"spot": 4, "ondemand": 1}, {"spot": 1}, TICK)
    assert out.targets == {"spot": 2, "ondemand": 1}  # no scale-up in a broken budget
    assert [(s.pool_id, s.units, s.idle_units) for s in out.shed] == [("ondemand", 1, 0), ("spot", 1, 1)]
    assert [(o.budget, o.cap, round(o.projected_usd, 6)) for o in out.overspends] == [("team-a", CapKind.MONTH, 1000.0)]
    assert out.snapshots[0].projected_usd <= 800.0


def test_shedding_counts_the_planners_own_releases_and_spares_fixed_and_minimum_units() -> None:
    pools = {"onprem": POOLS["onprem"], "reserved": POOLS["reserved"], "ondemand": POOLS["ondemand"]}
    spend = monthly(300.0, 100.0, {"onprem", "reserved", "ondemand"})
    billed = {"onprem": 4, "reserved": 3, "ondemand": 2}
    # Projected: 100 + (4x5 + 3x8 + 2x30) x 10 = 1140. The planner already releases one on-demand unit.
    out = enforce_budgets(NOW, [spend], pools, billed, {"ondemand": 1}, {}, TICK)
    by_pool = {s.pool_id: s.units for s in out.shed}
    assert "onprem" not in by_pool
    assert by_pool == {"ondemand": 1, "reserved": 2}  # reserved keeps its minimum of 1
    assert out.snapshots[0].projected_usd > 300.0  # cannot get under: the rest is fixed or at minimum


def test_an_hourly_cap_also_holds_the_whole_next_hour() -> None:
    late = datetime(2024, 3, 5, 10, 50, tzinfo=UTC)
    budget = Budget("burst", frozenset({"ondemand"}), hourly_cap_usd=100.0)
    spend = BudgetSpend(budget, late, 0.0, 0.0)
    # 10 minutes left: 4 units would cost 20 USD this hour, but 120 USD over the next.
    out = enforce_budgets(late, [spend], POOLS, {"ondemand": 0}, {"ondemand": 4}, {}, TICK)
    assert out.targets == {"ondemand": 3}
    assert "hourly cap 100.00 USD" in out.skips[0].detail
    assert [s.budget for s in out.snapshots] == ["burst/hourly"]


def test_a_pool_outside_every_budget_is_untouched() -> None:
    out = enforce_budgets(NOW, [monthly(0.01, 0.0, {"spot"})], POOLS, {"spot": 0, "reserved": 1}, {"reserved": 9})
    assert out.targets == {"reserved": 9}
    assert out.skips == ()


# A period boundary inside the minimum hold: April has 720 hours; a unit at 2 USD/h costs 1,440 USD over it.
CHEAP = {"cheap": spec("cheap", 2.0)}  # lead time 10 minutes
BOUNDARY = datetime(2024, 4, 1, tzinfo=UTC)
IDLE_WINDOW = timedelta(minutes=30)


def _month_end(now: datetime, proposed: int) -> tuple[dict[str, int], list[str]]:
    budget = Budget("team-a", frozenset({"cheap"}), monthly_cap_usd=6000.0)
    spend = BudgetSpend(budget, now, 100.0, 0.0)
    out = enforce_budgets(now, [spend], CHEAP, {"cheap": 1}, {"cheap": proposed}, {}, TICK, IDLE_WINDOW)
    assert out.shed == ()  # the next period is never shed for before it opens
    assert out.overspends == ()
    return out.targets, [s.detail for s in out.skips]


def test_a_scale_up_whose_minimum_hold_crosses_the_period_end_must_fit_the_next_period() -> None:
    # 20 minutes before the boundary, a unit bought now bills at least 10 + 30 + 1 minutes: into April, where the
    # projection runs it to the end of the month. 6000 USD fits 4 units there; 1 is billed now.
    targets, details = _month_end(BOUNDARY - timedelta(minutes=20), 10)
    assert targets == {"cheap": 4}
    assert len(details) == 1
    assert "for the period opening 2024-04-01 00:00 UTC" in details[0]
    assert "allows 3 of 9 more units" in details[0]


def test_a_scale_up_that_can_be_released_before_the_period_end_is_held_to_this_period_only() -> None:
    # 45 minutes before the boundary the minimum hold (41 minutes) ends inside March: March's cap alone binds.
    targets, details = _month_end(BOUNDARY - timedelta(minutes=45), 10)
    assert targets == {"cheap": 10}
    assert details == []


def test_a_commit_horizon_projects_the_units_held_only_that_far_ahead() -> None:
    budget = Budget("team-a", frozenset({"spot", "ondemand"}), monthly_cap_usd=800.0, commit_horizon=timedelta(hours=2))
    spend = BudgetSpend(budget, NOW, 500.0, 0.0)
    billed = {"spot": 2, "ondemand": 1}  # 50 USD an hour: 500 USD to the period end, 100 over the horizon
    assert find_overspends(NOW, [monthly(800.0, 500.0)], POOLS, billed)[0].projected_usd == pytest.approx(1000.0)
    assert find_overspends(NOW, [spend], POOLS, billed) == []
    out = enforce_budgets(NOW, [spend], POOLS, billed, {"spot": 40}, {}, TICK)
    assert out.targets == {"spot": 2 + 10}  # room 200 USD over 2 hours at 10 USD an hour: 10 more units
    [over] = find_overspends(NOW, [BudgetSpend(budget, NOW, 750.0, 0.0)], POOLS, billed)
    assert over.projected_usd == pytest.approx(850.0)
    assert over.by == NOW + timedelta(hours=2)


def test_a_hard_stop_takes_units_idle_for_the_window_then_idle_now_then_busy_across_the_budgets_pools() -> None:
    # 4 spot (10 USD an hour) and 4 on-demand units (30 USD): 160 USD an hour, 5.33 USD for the next two ticks.
    # 0.90 USD short: a unit released now saves its second tick, 0.17 USD spot and 0.50 on-demand. The on-demand
    # unit idle for the window goes first (0.50), then the three spot units idle for less (0.50), before any busy
    # on-demand unit, which the tiers alone would shed first.
    budget = Budget("team-a", frozenset({"spot", "ondemand"}), monthly_cap_usd=800.0, commit_horizon=timedelta(hours=2))
    spend = BudgetSpend(budget, NOW, 800.0 - 160.0 * 2 / 60 + 0.9, 0.0)
    billed = {"spot": 4, "ondemand": 4}
    settled, idle_now = {"ondemand": 1}, {"spot": 3, "ondemand": 1}
    out = enforce_budgets(NOW, [spend], POOLS, billed, {}, settled, TICK, idle_now=idle_now)
    stops = [(s.pool_id, s.units, s.idle_units) for s in out.shed if s.forced]
    assert stops == [("ondemand", 1, 1), ("spot", 3, 3)]
    # Without the spot units idle now, a busy on-demand unit is the cheapest left to lose.
    out = enforce_budgets(NOW, [spend], POOLS, billed, {}, settled, TICK, idle_now={"ondemand": 1})
    assert [(s.pool_id, s.units, s.idle_units) for s in out.shed if s.forced] == [("ondemand", 2, 1)]
