"""A TPU slice GKE reports RUNNING none of whose hosts is a node of the cluster (a multi-host slice is recovered
whole, its hosts recreated together: Cloud TPU, "Failure recovery of TPU instances") is in flight for its group's lead
time, at least 10 minutes, before it is failed and deleted by the next resize. Before, the grace was 10 minutes
whatever the lead time, so a group whose slices take 30 minutes to come up failed a slice still being recovered after
10 minutes, deleted it and asked for a new one, to come up 30 minutes later still. The daemon's live wiring, on the
fake GKE and Kubernetes APIs behind the real clients."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from actuators.base import Actuator
from actuators.gke_tpu_slices import NODES_GRACE
from agent.daemon.live import live_parts
from agent.executor import clear_failed_units
from agent.notify import RecordingNotifier
from agent.planning import PlannerMemory
from config import settings_from_mapping
from models import PoolSpec
from models.clock import SimulatedClock
from tests.daemon.test_slice_release import HOSTS, _settings
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
POOL = "v5e-slices"


def _register(kube: FakeKubeApi, name: str) -> None:
    for i in range(HOSTS):
        kube.put("nodes", objs.node(f"gke-ml-{name}-{i}", name, accelerators=4, resource=objs.TPU_RESOURCE))


def _daemon_slices(
    lead_time: str,
    prometheus: FakePrometheusApi,
    gke: FakeGkeApi,
    kube: FakeKubeApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
    clock: SimulatedClock,
) -> tuple[Actuator, dict[str, PoolSpec]]:
    """Two RUNNING slices of a group with ``lead_time``: v5e-0's hosts registered, v5e-1's being recovered (none
    registered); the actuator the live daemon builds for them, and its pools."""
    kube.clock = clock.now
    for name in ("v5e-0", "v5e-1"):
        gke.add_pool(name, nodes=HOSTS)
    _register(kube, "v5e-0")
    mapping = _settings(prometheus, gke, tmp_path)
    pools = mapping["pools"]
    assert isinstance(pools, list)
    pools[0]["lead_time"] = lead_time
    settings = settings_from_mapping(mapping, source="slice config")
    parts = live_parts(settings, "slice config", clock, RecordingNotifier(), kube_client, CollectorRegistry())
    return parts.actuator, {p.pool_id: p for p in settings.pool_specs()}


def _counts(actuator: Actuator) -> tuple[int, int, int]:
    (state,) = [s for s in actuator.list_pools() if s.pool_id == POOL]
    return state.ready_units, state.target_units, state.failed_units


IN_FLIGHT = (1, 2, 0)  # paid for, not ready, not failed
FAILED = (1, 1, 1)  # deleted by the next resize, asked for again if the demand needs it


@pytest.mark.parametrize(
    ("lead_time", "grace"),
    [
        ("30m", timedelta(minutes=30)),  # config/examples/helios-earth-slices.yaml: 30-minute slices
        ("2h", timedelta(hours=2)),
        ("5m", NODES_GRACE),  # never less than a repaired host takes to register again
    ],
)
def test_a_slice_without_nodes_is_in_flight_for_its_lead_time_then_failed(
    lead_time: str,
    grace: timedelta,
    prometheus_api: FakePrometheusApi,
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
) -> None:
    clock = SimulatedClock(T0)
    actuator, _ = _daemon_slices(lead_time, prometheus_api, gke_api, kube_api, kube_client, tmp_path, clock)

    seen = []
    for after in (timedelta(0), grace - timedelta(minutes=1), grace):
        clock.advance(after - (clock.now() - T0))
        seen.append(_counts(actuator))

    assert seen == [IN_FLIGHT, IN_FLIGHT, FAILED]


def test_a_slice_recovered_within_its_lead_time_is_ready_and_never_failed(
    prometheus_api: FakePrometheusApi,
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
) -> None:
    clock = SimulatedClock(T0)
    actuator, pools = _daemon_slices("30m", prometheus_api, gke_api, kube_api, kube_client, tmp_path, clock)

    seen, memory = [], PlannerMemory()
    for minute in range(0, 60, 5):
        if minute == 25:  # the recovered slice's hosts register
            _register(kube_api, "v5e-1")
        seen.append(_counts(actuator))
        states = {s.pool_id: s for s in actuator.list_pools()}
        memory = clear_failed_units(states, actuator, pools, memory, clock.now()).memory  # as each tick does
        clock.advance(timedelta(minutes=5))

    assert seen == [IN_FLIGHT] * 5 + [(2, 2, 0)] * 7
    assert gke_api.calls("DELETE", "/nodePools/") == 0
