"""A budget pool nobody knows the units of, in a budget without a commit_horizon, is counted at its max_units to the
period's end when a scale-up of the budget's other pools asks for room: busy units granted are never released and
bill to the period's end, so counting it over the scale-up's hold only let a grant commit the month past the cap once
the pool was read. With a commit_horizon the hard stop can release them, and the hold bound stays
(tests/unit/test_budget_unknown_pool_hold.py). The budget's warning names the unknown pool only where it changed a
trim, and says how to lift it.

The pools and figures are those of test_budget_unknown_pool_hold: on January 15 at 12:00, 396 hours left; gpu at
8 USD a unit-hour read at 4 units (12,672 USD to the month's end, 3,168 USD a unit more), wanting 10; h100 at 80 USD
a unit-hour, up to 10 units, unknown (316,800 USD at its most to the month's end, 280 USD over gpu's 21m hold).
"""

from __future__ import annotations

from agent.budget_watch import BudgetWatch
from agent.ledger import InMemoryLedger
from agent.planning import PlanInput, plan_capacity
from config.schema import PlannerSettings, Settings
from models import AlertKind, BudgetSnapshot, CapacityPlan, PoolState, SkipReason
from tests.unit.test_budget_unknown_pool_hold import NOW, POOLS, STATES, TICK, _gpu_to, _plan, _settings
from tests.unit.test_planner import forecast


def _plan_on(states: dict[str, PoolState], watch: BudgetWatch, last_read: dict[str, int]) -> CapacityPlan:
    return plan_capacity(
        PlanInput(
            now=NOW,
            tick=TICK,
            pools=POOLS,
            states=states,
            forecasts={"a": forecast("a", [80.0] * 4)},
            observed={"a": 80.0},
            service_levels={"a": 0.9},
            settings=PlannerSettings(),
            budgets=[watch.observe(NOW, states, last_read)[0]],
            last_read_units={},
        )
    )


def _watch(settings: Settings) -> BudgetWatch:
    return BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, InMemoryLedger(), tick=TICK)


def _snapshot_once_read(settings: Settings, h100_units: int) -> tuple[int, BudgetSnapshot]:
    """gpu's target granted while h100 is unknown, and the budget's snapshot at the next tick, h100 read."""
    watch = _watch(settings)
    granted = _gpu_to(_plan_on(STATES, watch, {})) or 4
    after = {"gpu": PoolState("gpu", NOW, granted, granted), "h100": PoolState("h100", NOW, h100_units, h100_units)}
    [snapshot] = _plan_on(after, watch, {"gpu": granted}).budgets
    return granted, snapshot


def test_a_scale_up_granted_while_a_pool_is_unknown_does_not_commit_the_month_past_the_cap() -> None:
    # h100 in truth holds 1 unit (31,680 USD to the month's end); gpu's 4 units 12,672: 44,352 of 50,000. Counted
    # over the hold only, gpu went 4 -> 10 and the month projected 63,360 with no release possible (busy units).
    granted, snapshot = _snapshot_once_read(_settings(50_000.0), h100_units=1)
    assert granted == 4
    assert snapshot.projected_usd <= 50_000.0


def test_the_trim_skip_and_the_warning_count_the_unknown_pool_to_the_period_end_and_say_how_to_lift_it() -> None:
    settings = _settings(50_000.0)
    watch = _watch(settings)
    spends = watch.observe(NOW, STATES, {})
    plan = _plan(spends[0])
    [skip] = [s for s in plan.skips if s.pool_id == "gpu" and s.reason is SkipReason.BUDGET]
    assert "allows 0 of 6 more units" in skip.detail
    assert "at its max_units to the period's end" in skip.detail
    assert "316,800.00 USD of the room kept back" in skip.detail
    [event] = [a for a in watch.alerts(NOW, plan, spends, STATES, []) if a.kind is AlertKind.POOL_UNREADABLE]
    assert event.details["room kept back"] == "316,800.00 USD (at max_units to the period's end)"
    assert event.details["scale-ups trimmed"] == "gpu 4->4 instead of ->10"
    assert "give budget team a commit_horizon" in event.details["what to do"]


def test_with_a_commit_horizon_the_unknown_pool_still_counts_over_the_hold_only() -> None:
    # the hard stop holds the cap: once h100 is read at 1 unit it can release gpu's units granted
    granted, _ = _snapshot_once_read(_settings(50_000.0, commit_horizon="31d"), h100_units=1)
    assert granted == 10


def test_no_unknown_pool_warning_when_the_unknown_pool_changed_no_trim() -> None:
    # the cap pays for gpu 4 -> 7 and 2,000 USD more: h100's 280 USD kept back over the hold changes nothing
    cap = 12_672.0 + 3 * 3_168.0 + 2_000.0
    watch = _watch(_settings(cap, commit_horizon="31d"))
    spends = watch.observe(NOW, STATES, {})
    plan = _plan(spends[0])
    assert _gpu_to(plan) == 7
    [cut] = plan.decisions["gpu"].budget_cuts
    assert cut.unknown_usd == 0.0
    assert not [a for a in watch.alerts(NOW, plan, spends, STATES, []) if a.kind is AlertKind.POOL_UNREADABLE]


def test_the_cut_records_the_room_kept_back_where_the_unknown_pool_made_it_deeper() -> None:
    cap = 12_672.0 + 6 * 3_168.0 + 100.0  # gpu at 10 without h100's 280 USD, at 9 with it
    watch = _watch(_settings(cap, commit_horizon="31d"))
    spends = watch.observe(NOW, STATES, {})
    plan = _plan(spends[0])
    [cut] = plan.decisions["gpu"].budget_cuts
    assert cut.units == 1
    assert round(cut.unknown_usd, 2) == 280.0
    assert [a.subject for a in watch.alerts(NOW, plan, spends, STATES, []) if a.kind is AlertKind.POOL_UNREADABLE] == [
        "budget team: h100 not known"
    ]
