"""Budgets count Cloud TPU queued resources as the ledger charges them: those still waiting for resources bill
nothing (Cloud TPU charges a TPU once it is provisioned), so they raise no projected overspend and take no room
from the budget's other pools. A scale-up of the pool counts the units it adds from the moment they are asked for
(they may be granted at any moment: the cap must hold then), in the trim and in a shared budget's reservations,
but the ledger charges them only once a read finds them granted."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actuators.cloud_tpu import CloudTpuQueuedResourceActuator
from agent.budget_watch import BudgetWatch
from agent.ledger import InMemoryLedger
from agent.planning import PlanInput, plan_capacity
from config import settings_from_mapping
from config.schema import PlannerSettings, Settings
from models import ActionResult, ActionStatus, AlertKind, CapacityPlan, PoolState
from models.clock import SimulatedClock
from tests.contract.harnesses import POOL, QUEUED
from tests.fakes.fixtures import google_clients
from tests.fakes.tpu_api import FakeTpuApi
from tests.unit.test_planner import forecast

NOW = datetime(2024, 5, 1, tzinfo=UTC)
HOURS = 31 * 24.0  # left in May at its first midnight
TICK = timedelta(minutes=1)
QR_PRICE, OD_PRICE = 10.0, 15.0  # USD a unit-hour
OD = "od"


def _settings(budget: Mapping[str, Any]) -> Settings:
    pool = {"chips_per_unit": 8, "min_units": 0, "lead_time": "10m"}
    return settings_from_mapping(
        {
            "demand_classes": [{"name": "batch", "family": "tpu"}, {"name": "serve"}],
            "pools": [
                {
                    **pool,
                    "id": POOL,
                    "kind": "tpu-queued-resource",
                    "tier": "spot",
                    "family": "tpu",
                    "max_units": 8,
                    "price_per_unit_hour_usd": QR_PRICE,
                    "serves": ["batch"],
                },
                {
                    **pool,
                    "id": OD,
                    "kind": "gpu-node-pool",
                    "max_units": 4,
                    "price_per_unit_hour_usd": OD_PRICE,
                    "serves": ["serve"],
                },
            ],
            "budgets": [{"name": "team", "pools": [POOL, OD], **budget}],
        }
    )


@pytest.fixture
def waiting(tpu_api: FakeTpuApi) -> PoolState:
    """The queued-resource pool read with 4 requests waiting for resources (the zone has none)."""
    clock = SimulatedClock(NOW)
    tpu_api.clock = clock.now
    actuator = CloudTpuQueuedResourceActuator(
        google_clients(tpu_api.url).tpu, "test-project", [QUEUED], clock, {POOL: timedelta(hours=1)}
    )
    tpu_api.stockout("wait")
    actuator.resize(POOL, 4, "up")
    tpu_api.advance()
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.waiting_units, state.billed_units) == (0, 4, 4, 0)
    return state


def _states(qr: PoolState) -> dict[str, PoolState]:
    return {POOL: qr, OD: PoolState(OD, NOW, 0, 0)}


def _plan(settings: Settings, states: Mapping[str, PoolState], watch: BudgetWatch, batch: float) -> CapacityPlan:
    spends = watch.observe(NOW, states)
    return plan_capacity(
        PlanInput(
            now=NOW,
            tick=TICK,
            pools=settings.pool_specs(),
            states=states,
            forecasts={"batch": forecast("batch", [batch] * 60), "serve": forecast("serve", [8.0] * 60)},
            observed={"batch": batch, "serve": 8.0},
            service_levels={"batch": 0.9, "serve": 0.9},
            settings=PlannerSettings(),
            budgets=spends,
        )
    )


def _watch(settings: Settings, ledger: InMemoryLedger) -> BudgetWatch:
    return BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, ledger, tick=TICK)


def test_units_waiting_for_resources_raise_no_overspend_and_leave_room_to_the_other_pools(waiting: PoolState) -> None:
    # room for the on-demand unit and a third of a queued resource: the 4 waiting ones would take 40 USD an hour
    settings = _settings({"monthly_cap_usd": round((OD_PRICE + 5.0) * HOURS, 2)})
    watch = _watch(settings, InMemoryLedger())
    states = _states(waiting)
    plan = _plan(settings, states, watch, batch=32.0)

    assert [(r.pool_id, r.from_units, r.to_units, r.forced) for r in plan.resizes] == [(OD, 0, 1, False)]
    assert plan.skips == ()
    (snapshot,) = plan.budgets
    assert snapshot.projected_usd == pytest.approx(OD_PRICE * HOURS)
    events = watch.alerts(NOW, plan, watch.spend(NOW), states, [])
    assert [e for e in events if e.kind is AlertKind.PROJECTED_OVERSPEND] == []


def test_a_queued_resource_scale_up_counts_the_units_it_adds(waiting: PoolState) -> None:
    settings = _settings({"monthly_cap_usd": round(1.5 * QR_PRICE * HOURS, 2)})  # room for one unit granted
    plan = _plan(settings, _states(waiting), _watch(settings, InMemoryLedger()), batch=48.0)

    # wanted 6 of 8 chips; the 4 waiting bill nothing, the 2 more would once granted: one fits
    assert [(r.pool_id, r.from_units, r.to_units) for r in plan.resizes if r.pool_id == POOL] == [(POOL, 4, 5)]


def test_a_shared_budget_reserves_the_units_asked_for_and_the_ledger_charges_none_while_they_wait(
    waiting: PoolState,
) -> None:
    settings = _settings({"monthly_cap_usd": 1_000_000.0, "remote_pools": ["elsewhere"]})
    ledger = InMemoryLedger()
    watch = _watch(settings, ledger)
    states = _states(waiting)
    plan = _plan(settings, states, watch, batch=40.0)
    (up,) = [r for r in plan.resizes if r.pool_id == POOL]
    assert (up.from_units, up.to_units) == (4, 5)

    watch.acted(NOW, plan, [ActionResult(r.key, r.pool_id, ActionStatus.DONE, NOW) for r in plan.resizes], states)

    # the unit asked for and the on-demand one, held for the other agents to see; not the 4 still waiting
    assert ledger.reserved("team", NOW) == pytest.approx((QR_PRICE + OD_PRICE) * HOURS)
    later = NOW + TICK
    still_waiting = {POOL: PoolState(POOL, later, 0, 5, waiting_units=5), OD: PoolState(OD, later, 1, 1)}
    watch.observe(later, still_waiting)
    assert ledger.spent([POOL], NOW, later) == 0.0  # Cloud TPU bills none of the five yet
    assert ledger.spent([OD], NOW, later) == pytest.approx(OD_PRICE / 60)
