"""A GKE node pool that lists an instance group Compute no longer has is read without that zone (its nodes not
counted); the pool's state names the zone and why (``PoolState.missing_zones``), and the agent tells a person in a
critical alert every tick while it lasts, instead of a warning in the log alone."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from actuators.gke_node_pool import GkeNodePoolActuator
from agent.conditions import not_evaluated
from agent.daemon.live import live_parts
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from config import settings_from_mapping
from config.cloud import NodePoolMapping
from forecasting.factory import build_forecaster
from models import AlertKind, Severity
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.prometheus_api import FakePrometheusApi

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_the_state_of_a_pool_names_the_zone_whose_group_is_gone(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=9, zones=ZONES)
    gke_api.lose_group("a100", "us-central1-c")
    clients = google_clients(gke_api.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(T0), drained=True)

    (state,) = actuator.list_pools()

    assert (state.ready_units, state.target_units) == (6, 6)
    assert [zone for zone, _ in state.missing_zones] == ["us-central1-c"]
    assert "instance group gke-ml-a100-2-grp was not found (404)" in dict(state.missing_zones)["us-central1-c"]

    gke_api.lost_groups.clear()  # the group is back
    (again,) = actuator.list_pools()
    assert again.missing_zones == ()


def test_the_agent_alerts_on_a_zone_whose_group_is_gone_and_plans_the_pool(
    gke_api: FakeGkeApi,
    prometheus_api: FakePrometheusApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
) -> None:
    """The real loop on the live parts of a configuration with one GKE node pool over three zones, one of whose
    instance groups is gone: the tick plans the pool on the zones it reads and raises a critical alert naming the
    zone and the group."""
    gke_api.add_pool("a100", nodes=6, zones=ZONES)
    gke_api.lose_group("a100", "us-central1-c")
    document = {
        "demand_classes": [{"name": "training", "family": "gpu"}],
        "pools": [
            {
                "id": "a100",
                "kind": "gpu-node-pool",
                "tier": "on-demand",
                "chips_per_unit": 8,
                "max_units": 8,
                "price_per_unit_hour_usd": 98.32,
                "lead_time": "10m",
                "serves": ["training"],
            }
        ],
        "forecast": {"model": "persistence", "history": "2h", "step": "1m", "max_staleness": "5m"},
        "prometheus": {"url": prometheus_api.url, "retries": 0, "timeout": "5s"},
        "cloud": {
            "project": gke_api.project,
            "location": gke_api.location,
            "cluster": gke_api.cluster,
            "endpoint": gke_api.url,
            "node_pools": [{"pool": "a100", "node_pool": "a100"}],
        },
        "ledger": {"path": str(tmp_path / "ledger.sqlite")},
    }
    settings = settings_from_mapping(document, source="one zone gone")
    clock = SimulatedClock(T0)
    notifier = RecordingNotifier()
    parts = live_parts(settings, "one zone gone", clock, notifier, kube_client, CollectorRegistry())
    agent = Agent(
        settings, AgentParts(parts.source, build_forecaster(settings.forecast), parts.actuator, parts.ledger, notifier)
    )
    prometheus_api.set_demand("training", 32)

    tick = agent.run_once(clock.now())

    assert tick.plan.decisions["a100"].current_units == 4  # planned on the two zones it reads
    (alert,) = [a for a in tick.alerts if a.subject == "zones of a100"]
    assert (alert.kind, alert.severity) == (AlertKind.POOL_UNREADABLE, Severity.CRITICAL)
    assert "us-central1-c" in alert.summary
    assert "gke-ml-a100-2-grp was not found (404)" in alert.details["us-central1-c"]


@pytest.mark.parametrize("zones_lost", [1, 2])
def test_every_zone_whose_group_is_gone_is_named(gke_api: FakeGkeApi, zones_lost: int) -> None:
    gke_api.add_pool("a100", nodes=9, zones=ZONES)
    for zone in ZONES[-zones_lost:]:
        gke_api.lose_group("a100", zone)
    clients = google_clients(gke_api.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(T0))

    (state,) = actuator.list_pools()

    assert [zone for zone, _ in state.missing_zones] == list(ZONES[-zones_lost:])
    assert [z.zone for z in state.zones] == list(ZONES[: len(ZONES) - zones_lost])


def test_the_missing_zone_alert_of_a_pool_that_cannot_be_read_is_neither_raised_nor_resolved() -> None:
    """Nothing is known of its zones while the pool is unread: its condition is left as it is."""
    assert (AlertKind.POOL_UNREADABLE, "zones of a100") in not_evaluated(["a100"], {})
