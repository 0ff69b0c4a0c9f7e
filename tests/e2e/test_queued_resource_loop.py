"""The real agent loop on the live parts ``leadtime run`` wires, with two pools of Cloud TPU queued resources on the
fake Cloud TPU API (a Spot v5e pool and a dearer on-demand v6e pool serving the same class) and demand from the fake
Prometheus: a zone out of v5e capacity keeps the Spot requests waiting for resources, as the service does; once
they have waited the pool's wait (its lead time times ``alerts.stalled_after_lead_times``) the Spot pool backs off
and the v6e pool takes the demand."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from agent.daemon.live import live_parts
from agent.ledger.sqlite import SqliteLedger
from agent.loop import Agent, AgentParts, TickReport
from agent.notify import RecordingNotifier
from config import settings_from_mapping
from config.schema import Settings
from forecasting.factory import build_forecaster
from models import ActionStatus, AlertKind
from models.clock import SimulatedClock
from tests.fakes.prometheus_api import FakePrometheusApi
from tests.fakes.tpu_api import FakeTpuApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
CLASS = "training"
SPOT, ON_DEMAND = "v5e-spot", "v6e"
TYPES = {SPOT: "v5litepod-8", ON_DEMAND: "v6e-8"}
GROUPS = {SPOT: "v5e", ON_DEMAND: "v6e"}
LEAD = timedelta(minutes=10)
WAIT = 2 * LEAD  # alerts.stalled_after_lead_times is 2 by default
STEP = timedelta(minutes=5)


def config_document(tpu: FakeTpuApi, prometheus: FakePrometheusApi, workdir: Path) -> dict[str, Any]:
    def pool(pool_id: str, tier: str, price: float) -> dict[str, Any]:
        return {
            "id": pool_id,
            "kind": "tpu-queued-resource",
            "tier": tier,
            "family": "tpu",
            "chips_per_unit": 8,
            "min_units": 0,
            "max_units": 4,
            "price_per_chip_hour_usd": price,
            "lead_time": "10m",
            "serves": [CLASS],
        }

    def queued(pool_id: str, spot: bool) -> dict[str, Any]:
        return {
            "pool": pool_id,
            "group": GROUPS[pool_id],
            "zone": tpu.location,
            "accelerator_type": TYPES[pool_id],
            "runtime_version": "v2-alpha-tpuv5-lite",
            "chips": 8,
            "spot": spot,
        }

    return {
        "demand_classes": [{"name": CLASS, "family": "tpu"}],
        "pools": [pool(SPOT, "spot", 0.6), pool(ON_DEMAND, "on-demand", 2.7)],
        "forecast": {"model": "persistence", "history": "2h", "step": "1m", "max_staleness": "10m"},
        "prometheus": {"url": prometheus.url, "retries": 0, "timeout": "5s"},
        "cloud": {
            "project": tpu.project,
            "location": "us-central2",
            "cluster": "ml",
            "endpoint": tpu.url,
            "queued_resources": [queued(SPOT, True), queued(ON_DEMAND, False)],
        },
        "loop": {"tick_interval": "60s"},
        "ledger": {"path": str(workdir / "ledger.sqlite")},
        "daemon": {"mode": "enforce", "leader_election": {"enabled": False}},
    }


@pytest.fixture
def clock(tpu_api: FakeTpuApi) -> SimulatedClock:
    clock = SimulatedClock(T0)
    tpu_api.clock = clock.now
    return clock


@pytest.fixture
def settings(tpu_api: FakeTpuApi, prometheus_api: FakePrometheusApi, tmp_path: Path) -> Settings:
    return settings_from_mapping(config_document(tpu_api, prometheus_api, tmp_path), source="e2e config")


@pytest.fixture
def agent(settings: Settings, clock: SimulatedClock) -> Iterator[Agent]:
    notifier = RecordingNotifier()
    parts = live_parts(settings, "e2e config", clock, notifier, None, CollectorRegistry())
    forecaster = build_forecaster(settings.forecast)
    agent = Agent(
        settings, AgentParts(parts.source, forecaster, parts.actuator, parts.ledger, notifier, parts.drainers)
    )
    yield agent
    assert isinstance(agent.parts.ledger, SqliteLedger)
    agent.parts.ledger.close()


def _units(tpu: FakeTpuApi, pool_id: str) -> dict[str, str]:
    prefix = f"{GROUPS[pool_id]}-"
    return {qr_id: qr["state"]["state"] for qr_id, qr in tpu.queued.items() if qr_id.startswith(prefix)}


def _tick(agent: Agent, clock: SimulatedClock, tpu: FakeTpuApi) -> TickReport:
    clock.advance(STEP)
    tpu.advance()
    return agent.run_once(clock.now())


def test_spot_requests_that_wait_their_wait_back_the_pool_off_and_the_next_pool_takes_the_demand(
    agent: Agent, clock: SimulatedClock, tpu_api: FakeTpuApi, prometheus_api: FakePrometheusApi
) -> None:
    tpu_api.stockout("wait", accelerator_type=TYPES[SPOT])  # the zone has no v5e capacity; v6e it has
    prometheus_api.set_demand(CLASS, 16)  # two 8-chip units

    first = agent.run_once(clock.now())
    assert [(r.pool_id, r.from_units, r.to_units) for r in first.plan.resizes] == [(SPOT, 0, 2)]
    assert [(r.pool_id, r.status) for r in first.results] == [(SPOT, ActionStatus.STARTED)]
    policies = {qr_id: qr["queueingPolicy"] for qr_id, qr in tpu_api.queued.items()}
    assert policies == {"v5e-0": {"validUntilDuration": "1200s"}, "v5e-1": {"validUntilDuration": "1200s"}}

    while clock.now() + STEP < T0 + WAIT:  # within their wait the Spot requests are on their way
        waiting = _tick(agent, clock, tpu_api)
        assert waiting.plan.resizes == ()
        assert AlertKind.STOCKOUT not in [a.kind for a in waiting.alerts]
        assert _units(tpu_api, SPOT) == {"v5e-0": "WAITING_FOR_RESOURCES", "v5e-1": "WAITING_FOR_RESOURCES"}

    clock.advance(STEP)  # T0 + 20m: their valid-until time; the service fails them
    tpu_api.advance()
    assert clock.now() == T0 + WAIT
    assert _units(tpu_api, SPOT) == {"v5e-0": "FAILED", "v5e-1": "FAILED"}
    expired = agent.run_once(clock.now())
    assert [a.subject for a in expired.alerts if a.kind is AlertKind.STOCKOUT] == [SPOT]
    assert [(r.pool_id, r.from_units, r.to_units) for r in expired.plan.resizes] == [(ON_DEMAND, 0, 2)]
    assert [(r.pool_id, r.status) for r in expired.results] == [
        (SPOT, ActionStatus.STARTED),  # the two requests are deleted: they no longer hold their place in the queue
        (ON_DEMAND, ActionStatus.STARTED),
    ]
    assert set(_units(tpu_api, SPOT).values()) == {"DELETING"}
    assert _units(tpu_api, ON_DEMAND) == {"v6e-0": "WAITING_FOR_RESOURCES", "v6e-1": "WAITING_FOR_RESOURCES"}

    served = _tick(agent, clock, tpu_api)  # within the Spot pool's back-off: nothing asked of it again
    assert served.plan.resizes == ()
    assert _units(tpu_api, SPOT) == {}
    assert tpu_api.calls("POST", "/queuedResources") == 4


def test_requests_waiting_for_resources_are_not_charged_until_they_provision(
    agent: Agent, clock: SimulatedClock, tpu_api: FakeTpuApi, prometheus_api: FakePrometheusApi
) -> None:
    """Cloud TPU charges accrue while the TPU is READY: a request waiting in the queue bills nothing. The ledger
    charges nothing for the agent's own scale-up of queued resources (they may wait), nothing while the requests
    wait, and from the tick that sees them provisioning on."""
    tpu_api.stockout("wait", accelerator_type=TYPES[SPOT])
    prometheus_api.set_demand(CLASS, 16)
    ledger = agent.parts.ledger
    per_unit_hour = 8 * 0.6  # USD

    agent.run_once(clock.now())
    (state,) = [s for s in agent.parts.actuator.list_pools() if s.pool_id == SPOT]
    assert (state.target_units, state.waiting_units, state.billed_units) == (2, 2, 0)
    for _ in range(3):  # T0 + 15m, the requests still waiting
        _tick(agent, clock, tpu_api)
    assert ledger.spent([SPOT], T0, clock.now()) == 0.0

    tpu_api.restock()
    _tick(agent, clock, tpu_api)  # T0 + 20m: provisioning, billed from here on
    (state,) = [s for s in agent.parts.actuator.list_pools() if s.pool_id == SPOT]
    assert (state.target_units, state.waiting_units, state.billed_units) == (2, 0, 2)
    _tick(agent, clock, tpu_api)  # T0 + 25m: active
    assert _units(tpu_api, SPOT) == {"v5e-0": "ACTIVE", "v5e-1": "ACTIVE"}
    assert ledger.spent([SPOT], T0, clock.now()) == pytest.approx(2 * per_unit_hour * 5 / 60)  # from T0 + 20m
    assert _units(tpu_api, ON_DEMAND) == {}
