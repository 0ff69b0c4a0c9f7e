"""``leadtime recommend``'s budget figures count the units billed, as the ledger charges them: Cloud TPU queued
resources read from the cloud still waiting for resources bill nothing, so the current spend rate and projection
leave them out, where the pool's current units (its target) count them."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from actuators.cloud_tpu import CloudTpuQueuedResourceActuator
from agent.cli import main
from config.cloud import QueuedResourceMapping
from models.clock import SystemClock
from tests.fakes.fixtures import google_clients
from tests.fakes.tpu_api import FakeTpuApi
from tests.prometheus.server import TENANTS, PrometheusServer

pytestmark = pytest.mark.xdist_group("prometheus")
AT = "2020-05-08T12:00+08:00"
POOL = "v5e-spot"
PRICE = 9.6  # USD a unit-hour: 8 chips at 1.2
MAPPING = {
    "pool": POOL,
    "group": "v5e",
    "zone": "us-central2-b",
    "accelerator_type": "v5litepod-8",
    "runtime_version": "v2-alpha-tpuv5-lite",
    "chips": 8,
    "spot": True,
}


def _config(tmp_path: Path, server: PrometheusServer, tpu: FakeTpuApi) -> Path:
    document = {
        "demand_classes": [{"name": t, "family": "tpu"} for t in TENANTS],
        "pools": [
            {
                "id": POOL,
                "kind": "tpu-queued-resource",
                "tier": "spot",
                "family": "tpu",
                "chips_per_unit": 8,
                "max_units": 60,
                "price_per_chip_hour_usd": PRICE / 8,
                "lead_time": "10m",
                "serves": list(TENANTS),
            }
        ],
        "budgets": [{"name": "tpu", "pools": [POOL], "monthly_cap_usd": 1_000_000.0}],
        "prometheus": {"url": server.url, "retries": 0},
        "cloud": {
            "project": tpu.project,
            "location": "us-central2",
            "cluster": "ml",
            "endpoint": tpu.url,
            "queued_resources": [MAPPING],
        },
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def test_queued_resources_waiting_for_resources_are_left_out_of_the_budget_figures(
    prometheus: PrometheusServer,
    tpu_api: FakeTpuApi,
    tmp_path: Path,
) -> None:
    clock = SystemClock()  # as recommend reads the cloud (its --at dates the demand only)
    tpu_api.stockout("wait")  # the zone has no v5e capacity: the requests wait
    actuator = CloudTpuQueuedResourceActuator(
        google_clients(tpu_api.url).tpu,
        tpu_api.project,
        [QueuedResourceMapping.model_validate(MAPPING)],
        clock,
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
    (budget,) = document["budgets"]
    assert pool["current_units"] == 4  # asked for, none granted
    assert budget["current_per_hour_usd"] == 0.0
    assert budget["current_projected_period_usd"] == budget["spent_period_usd"]  # nothing billed from now on
    assert pool["billed_units"] == 0
