"""How the planner's budget projection counts a pool whose state could not be read this tick.

Like its room for demand, such a pool is counted at what is known of it: the units the agent last read it at
(``PlanInput.last_read_units``) and those the ledger last recorded it holding, the more of the two, since a cap must
count what the pool may bill. A pool known by neither is counted at nothing in the projection, so that no overspend is
alerted and nothing is shed on a guess; but it never frees money for new spend: a scale-up is granted only where it
fits the unknown pool at its ``max_units`` to the period's end (over the scale-up's hold only where a commit horizon
lets the hard stop release the units granted).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from agent.budget_watch import BudgetWatch
from agent.ledger import InMemoryLedger
from agent.planning import PlanInput, plan_capacity
from agent.planning.budget import Budget, BudgetSpend
from agent.planning.enforcement import find_overspends
from config import settings_from_mapping
from config.schema import PlannerSettings
from models import AlertKind, CapacityPlan, PoolState, SkipReason
from tests.unit.test_planner import forecast, pool

NOW = datetime(2024, 1, 31, 14, tzinfo=UTC)  # 10 hours before the month ends
TICK = timedelta(minutes=1)
# gpu: 8 USD a unit-hour, read at 2 units; h100: 80 USD a unit-hour, up to 10 units, not read this tick.
POOLS = [pool("gpu", hi=10), pool("h100", price=80.0, hi=10)]
BUDGET = Budget("team", frozenset({"gpu", "h100"}), monthly_cap_usd=3000.0)
_SPEC = {"kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 10, "lead_time": "10m", "serves": ["a"]}


def _plan(spend: BudgetSpend, last_read: Mapping[str, int], gpu_idle: int = 0) -> CapacityPlan:
    since = tuple(NOW - timedelta(hours=1) for _ in range(gpu_idle))
    gpu = PoolState("gpu", NOW, 4, 4, idle_units=gpu_idle, idle_since=since)
    demand = 80.0 if gpu_idle == 0 else 16.0  # 10 gpu units wanted; else 2 of its 4
    return plan_capacity(
        PlanInput(
            now=NOW,
            tick=TICK,
            pools=POOLS,
            states={"gpu": gpu},
            forecasts={"a": forecast("a", [demand] * 4)},
            observed={"a": demand},
            service_levels={"a": 0.9},
            settings=PlannerSettings(),
            budgets=[spend],
            last_read_units=last_read,
        )
    )


def _gpu_to(plan: CapacityPlan) -> int | None:
    return next((r.to_units for r in plan.resizes if r.pool_id == "gpu"), None)


def test_an_unread_pool_the_agent_read_before_is_projected_at_the_units_it_was_last_read_at() -> None:
    # h100 read at 1 unit last tick, no ledger record (the ledger's first write is still to come). At 1 unit the
    # 10 hours left cost 4 x 8 x 10 + 800 = 1,120 USD of the 3,000 cap, room for gpu's 6 more units (480 USD).
    # Counted at its max_units (8,000 USD), a failed read trimmed gpu to nothing and projected an overspend.
    spend = BudgetSpend(BUDGET, NOW, 0.0, 0.0)
    plan = _plan(spend, {"h100": 1})
    assert _gpu_to(plan) == 10
    assert not [s for s in plan.skips if s.reason is SkipReason.BUDGET]
    [snapshot] = plan.budgets
    assert snapshot.projected_usd == pytest.approx(10 * 8 * 10 + 800.0)
    assert find_overspends(NOW, [spend], {p.pool_id: p for p in POOLS}, {"gpu": 4}, {"h100": 1}) == []


def test_the_more_of_the_units_last_read_and_last_recorded_is_counted() -> None:
    # The agent grew h100 to 3 units since the ledger recorded 1: 3 units cost 2,400 to the period end and gpu's 4
    # cost 320, leaving 280 USD, room for 3 more gpu units (80 USD each). Counted at the record alone (800 USD), gpu
    # went 4 -> 10 and the projection ended at 3,200 USD, over the cap.
    recorded = BudgetSpend(BUDGET, NOW, 0.0, 0.0, last_units={"h100": 1})
    plan = _plan(recorded, {"h100": 3})
    assert _gpu_to(plan) == 7
    [trim] = [s for s in plan.skips if s.pool_id == "gpu" and s.reason is SkipReason.BUDGET]
    assert "allows 3 of 6 more units" in trim.detail
    [snapshot] = plan.budgets
    assert snapshot.projected_usd <= 3000.0
    # and the other way round: a record above the units last read (nodes still billed after a release) counts
    assert _gpu_to(_plan(BudgetSpend(BUDGET, NOW, 0.0, 0.0, last_units={"h100": 3}), {"h100": 1})) == 7


def test_a_pool_known_by_nobody_frees_no_money_for_scale_ups_but_sheds_and_alerts_nothing() -> None:
    # h100 never read and with no record: nothing is known of what it holds. The budget has no commit horizon, so a
    # busy unit granted is never released: the trim counts h100 at its max_units to the period end (8,000 USD, over
    # the cap alone), gpu gets no more units, and the skip says why. (With a commit horizon it is counted over the
    # scale-up's hold only: tests/unit/test_budget_unknown_pool_hold.py.)
    spend = BudgetSpend(BUDGET, NOW, 0.0, 0.0)
    plan = _plan(spend, {})
    assert _gpu_to(plan) is None
    [trim] = [s for s in plan.skips if s.pool_id == "gpu" and s.reason is SkipReason.BUDGET]
    assert "counting h100, not read and with no record of what it holds, at its max_units to the period's end" in (
        trim.detail
    )
    assert "8,000.00 USD of the room kept back" in trim.detail
    # The projection counts only what is known: no overspend alert, and gpu's idle units are not shed for a guess
    # (the planner's own release keeps its idle hold: 2 of 4 units wanted, 2 idle for an hour).
    assert find_overspends(NOW, [spend], {p.pool_id: p for p in POOLS}, {"gpu": 4}) == []
    [snapshot] = plan.budgets
    assert snapshot.projected_usd < 3000.0
    idle = _plan(spend, {}, gpu_idle=2)
    assert _gpu_to(idle) == 2
    assert not [s for s in idle.skips if s.reason is SkipReason.BUDGET]


def test_the_overspend_alert_projects_an_unread_pool_as_the_planner_does() -> None:
    # The budget watch raises the projected-overspend alert on its own projection of the units billed now. h100 is
    # not read this tick and the ledger has no record of it; the agent last read it at some units, and the alert
    # counts them, as the planner does: at 1 unit (1,120 USD to the period end) nothing is over the 3,000 USD cap, at
    # 10 units (8,320 USD) the alert is raised, where a projection blind to the units last read saw nothing.
    settings = settings_from_mapping(
        {
            "demand_classes": [{"name": "a"}],
            "pools": [
                {**_SPEC, "id": "gpu", "price_per_unit_hour_usd": 8.0},
                {**_SPEC, "id": "h100", "price_per_unit_hour_usd": 80.0},
            ],
            "budgets": [{"name": "team", "pools": ["gpu", "h100"], "monthly_cap_usd": 3000.0}],
        }
    )
    states = {"gpu": PoolState("gpu", NOW, 4, 4)}
    overspent = {}
    for units in (1, 10):
        watch = BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, InMemoryLedger(), tick=TICK)
        spends = watch.observe(NOW, states, {"h100": units})
        alerts = watch.alerts(NOW, _plan(spends[0], {"h100": units}), spends, states, [])
        overspent[units] = [a.subject for a in alerts if a.kind is AlertKind.PROJECTED_OVERSPEND]
    assert overspent == {1: [], 10: ["budget team (monthly)"]}
