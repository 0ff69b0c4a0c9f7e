"""Every money figure counts the units billed (``PoolState.billed_units``), as the ledger and the budgets do, where
sizes count the pool's target: the dry-run shadow account's cost of both runs, recommend's per-pool cost per day,
and the budget trim's skip, which names the resize it trims in target units and the units billed beside them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from actuators.cloud_tpu import CloudTpuQueuedResourceActuator
from agent.cli import main
from agent.daemon.shadow import ShadowAccount
from config.cloud import QueuedResourceMapping
from models import PoolState, SkipReason
from models.clock import SystemClock
from tests.actuators.test_gke_slice_errors import Rig, rig  # noqa: F401  (the fixture)
from tests.contract.harnesses import POOL as HARNESS_POOL
from tests.fakes.fixtures import google_clients
from tests.fakes.tpu_api import FakeTpuApi
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_budget_billed_recommend import AT, MAPPING, POOL, _config
from tests.test_budget_billed_broken_slice import PRICE, _hours_left, _plan, _settings, _spend, broken  # noqa: F401
from tests.test_budget_billed_queued_resources import _settings as queued_settings

pytestmark = pytest.mark.xdist_group("prometheus")
T0 = datetime(2024, 5, 1, tzinfo=UTC)


def test_a_trim_names_the_resize_it_trims_and_the_units_billed(broken: PoolState) -> None:  # noqa: F811
    hours = _hours_left(broken)
    settings = _settings({"monthly_cap_usd": round(2.5 * PRICE * hours, 2)})  # room for 2 slices billed, not 3

    plan = _plan(settings, broken, _spend(settings, broken, 0.0), slices=2)

    assert plan.resizes == ()
    (skip,) = [s for s in plan.skips if s.reason is SkipReason.BUDGET]
    assert "allows 0 of 1 more units (1->2 asked, trimmed to 1->1; 2 slices billed with 1 broken slice);" in skip.detail
    (decision,) = plan.decisions.values()
    assert [c.detail for c in decision.budget_cuts] == [skip.detail]


def test_the_shadow_account_charges_the_units_billed(broken: PoolState) -> None:  # noqa: F811
    """One ready and one broken slice: both are billed, in what ran and in the recommendation's what-if, which
    keeps the broken slice (the agent never deletes a busy one)."""
    settings = _settings({"monthly_cap_usd": 1_000_000.0})
    account = ShadowAccount(settings.pool_specs(), ["train"], max_interval=timedelta(hours=2))
    start = broken.observed_at
    account.record(start, {"train": 0.0}, [broken], {broken.pool_id: 1})
    later = start + timedelta(hours=1)

    assert account.record(later, {"train": 0.0}, [broken], {broken.pool_id: 1})

    assert account.total.runs["actual"].cost_usd == pytest.approx(2 * PRICE)  # not 1 slice's 20 USD
    assert account.total.runs["recommended"].cost_usd == pytest.approx(2 * PRICE)


def test_the_shadow_account_charges_no_queued_resource_waiting_for_resources() -> None:
    settings = queued_settings({"monthly_cap_usd": 1_000_000.0})
    waiting = PoolState(HARNESS_POOL, T0, ready_units=0, target_units=4, waiting_units=4)  # 4 asked, none granted
    (spec,) = [s for s in settings.pool_specs() if s.pool_id == HARNESS_POOL]
    account = ShadowAccount([spec], [], max_interval=timedelta(hours=2))
    account.record(T0, {}, [waiting], {HARNESS_POOL: 4})

    assert account.record(T0 + timedelta(hours=1), {}, [waiting], {HARNESS_POOL: 4})

    assert account.total.runs["actual"].cost_usd == 0.0  # billed nothing, not 4 units' price
    assert account.total.runs["recommended"].cost_usd == 0.0


def test_recommend_costs_a_pool_per_day_by_its_units_billed(
    prometheus: PrometheusServer,
    tpu_api: FakeTpuApi,
    tmp_path: Path,
) -> None:
    tpu_api.stockout("wait")  # the zone has no v5e capacity: the requests wait
    actuator = CloudTpuQueuedResourceActuator(
        google_clients(tpu_api.url).tpu,
        tpu_api.project,
        [QueuedResourceMapping.model_validate(MAPPING)],
        SystemClock(),
        {POOL: timedelta(hours=1)},
    )
    actuator.resize(POOL, 4, "asked for before")
    tpu_api.advance()
    out = tmp_path / "out"

    assert (
        main(["recommend", "--config", str(_config(tmp_path, prometheus, tpu_api)), "--out", str(out), "--at", AT]) == 0
    )

    document = json.loads((out / "recommendation.json").read_text())
    (pool,) = document["pools"]
    assert (pool["current_units"], pool["billed_units"]) == (4, 0)
    assert pool["current_cost_per_day_usd"] == 0.0  # not 4 queued resources' price
    price = pool["price_per_unit_hour_usd"]
    assert pool["recommended_cost_per_day_usd"] == pytest.approx(pool["recommended_billed_units"] * price * 24)
    assert document["cost"]["current_per_day_usd"] == 0.0
