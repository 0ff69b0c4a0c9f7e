"""Budgets count a broken TPU slice (in ERROR, short of hosts, its job's pod on it) as the ledger charges it, a whole
slice: in the planner's projection and trim, in a hard stop's money left, in the projected-overspend alert and in
the units a shared budget keeps reserved. A resize still starts at the group's target, which leaves the broken
slice out."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from agent.budget_watch import BudgetWatch
from agent.ledger import InMemoryLedger
from agent.planning import PlanInput, plan_capacity
from agent.planning.budget import Budget, BudgetSpend
from config import settings_from_mapping
from config.schema import PlannerSettings, Settings
from models import AlertKind, CapacityPlan, PoolState, SkipReason
from tests.actuators.test_gke_broken_slices import _lose_hosts
from tests.actuators.test_gke_slice_errors import Rig, rig  # noqa: F401  (the fixture)
from tests.contract.harnesses import POOL
from tests.unit.test_planner import forecast

PRICE = 20.0  # USD a slice-hour
TICK = timedelta(minutes=1)


def _settings(budget: Mapping[str, Any]) -> Settings:
    return settings_from_mapping(
        {
            "demand_classes": [{"name": "train", "family": "tpu"}],
            "pools": [
                {
                    "id": POOL,
                    "kind": "tpu-slice-group",
                    "family": "tpu",
                    "chips_per_unit": 16,
                    "max_units": 4,
                    "price_per_unit_hour_usd": PRICE,
                    "lead_time": "30m",
                    "serves": ["train"],
                }
            ],
            "budgets": [{"name": "tpu", "pools": [POOL], **budget}],
        }
    )


@pytest.fixture
def broken(rig: Rig) -> PoolState:  # noqa: F811
    """The group read with v5e-0 ready and v5e-1 broken: 1 of its 4 hosts left, the job's pod on it."""
    rig.train("v5e-1")
    _lose_hosts(rig, "v5e-1", keep=1)
    rig.gke.report_error("v5e-1", conditions=())
    (state,) = rig.actuator.list_pools()
    assert (state.ready_units, state.target_units, state.billed_units) == (1, 1, 2)
    return state


def _hours_left(state: PoolState) -> float:
    """Hours left in the monthly period (from the 1st, UTC) at the group's read."""
    budget = Budget("tpu", frozenset({POOL}), monthly_cap_usd=1.0)
    return budget.period(state.observed_at).remaining(state.observed_at).total_seconds() / 3600.0


def _plan(settings: Settings, state: PoolState, spends: list[BudgetSpend], slices: float) -> CapacityPlan:
    return plan_capacity(
        PlanInput(
            now=state.observed_at,
            tick=TICK,
            pools=settings.pool_specs(),
            states={POOL: state},
            forecasts={"train": forecast("train", [slices * 16] * 60)},
            observed={"train": slices * 16},
            service_levels={"train": 0.9},
            settings=PlannerSettings(),
            budgets=spends,
        )
    )


def _spend(settings: Settings, state: PoolState, spent: float) -> list[BudgetSpend]:
    return [BudgetSpend(Budget.from_settings(settings.budgets[0]), state.observed_at, spent, 0.0)]


def test_a_scale_up_the_broken_slice_leaves_no_room_for_is_trimmed(broken: PoolState) -> None:
    hours = _hours_left(broken)
    # room for the two slices billed now and half of a third, nothing spent yet
    settings = _settings({"monthly_cap_usd": round(2.5 * PRICE * hours, 2)})
    unbudgeted = _plan(settings, broken, [], slices=2)
    assert [(r.from_units, r.to_units) for r in unbudgeted.resizes] == [(1, 2)]  # a slice in the broken one's place

    plan = _plan(settings, broken, _spend(settings, broken, 0.0), slices=2)

    assert plan.resizes == ()  # a third slice billed would project 3 x 20 USD an hour to the period's end
    assert [s.reason for s in plan.skips if s.pool_id == POOL] == [SkipReason.BUDGET]
    (snapshot,) = plan.budgets
    assert snapshot.projected_usd == pytest.approx(2 * PRICE * hours)  # the ready slice and the broken one


def test_a_hard_stop_counts_the_broken_slice_and_releases_from_the_groups_target(broken: PoolState) -> None:
    # 1 USD left: the two slices billed cost 1.33 USD over the next two ticks; the ready slice alone 0.67
    settings = _settings({"monthly_cap_usd": 1000.0, "commit_horizon": "2h"})
    plan = _plan(settings, broken, _spend(settings, broken, 999.0), slices=1)

    assert [(r.pool_id, r.from_units, r.to_units, r.forced) for r in plan.resizes] == [(POOL, 1, 0, True)]
    assert "hard stop of the monthly cap" in plan.resizes[0].reason


def test_the_projected_overspend_alert_counts_the_broken_slice(broken: PoolState) -> None:
    hours = _hours_left(broken)
    settings = _settings({"monthly_cap_usd": round(1.5 * PRICE * hours, 2)})  # one slice fits, two do not
    watch = BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, InMemoryLedger(), tick=TICK)
    spends = watch.observe(broken.observed_at, {POOL: broken})
    plan = _plan(settings, broken, spends, slices=1)

    events = watch.alerts(broken.observed_at, plan, spends, {POOL: broken}, [])

    (overspend,) = [e for e in events if e.kind is AlertKind.PROJECTED_OVERSPEND]
    assert "tpu" in overspend.subject


def test_a_shared_budget_keeps_the_broken_slice_reserved(broken: PoolState) -> None:
    settings = _settings({"monthly_cap_usd": 1_000_000.0, "remote_pools": ["elsewhere"]})
    hours = _hours_left(broken)
    ledger = InMemoryLedger()
    watch = BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, ledger, tick=TICK)
    spends = watch.observe(broken.observed_at, {POOL: broken})
    plan = _plan(settings, broken, spends, slices=1)
    assert plan.resizes == ()

    watch.acted(broken.observed_at, plan, [], {POOL: broken})

    # what the other agents sharing the budget see held: both slices to the period's end
    assert ledger.reserved("tpu", broken.observed_at) == pytest.approx(2 * PRICE * hours)
