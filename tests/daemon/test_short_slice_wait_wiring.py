"""The daemon's live wiring gives a TPU slice short of hosts for want of capacity its pool's lead time times
alerts.stalled_after_lead_times before it is failed; then the removal of failed units each tick starts with deletes it
and backs the group off, where before it stayed in flight, paid for and serving nothing, for as long as the zone
stayed out. On the fake GKE and Kubernetes APIs behind the real clients."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from agent.daemon.live import live_parts
from agent.executor import clear_failed_units
from agent.notify import RecordingNotifier
from agent.planning import PlannerMemory
from config import settings_from_mapping
from models.clock import SimulatedClock
from tests.daemon.test_slice_release import HOSTS, _settings
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
POOL = "v5e-slices"
WAIT = timedelta(minutes=45)  # lead time 30 minutes times alerts.stalled_after_lead_times 1.5


def test_a_short_slice_is_failed_after_its_wait_deleted_and_its_group_backed_off(
    prometheus_api: FakePrometheusApi,
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
) -> None:
    clock = SimulatedClock(T0)
    kube_api.clock = clock.now
    gke_api.add_pool("v5e-0", nodes=HOSTS)
    for i in range(HOSTS):
        kube_api.put("nodes", objs.node(f"gke-ml-v5e-0-{i}", "v5e-0", accelerators=4, resource=objs.TPU_RESOURCE))
    mapping = _settings(prometheus_api, gke_api, tmp_path)
    pools = mapping["pools"]
    assert isinstance(pools, list)
    pools[0]["lead_time"] = "30m"
    mapping["alerts"] = {"stalled_after_lead_times": 1.5}
    settings = settings_from_mapping(mapping, source="slice config")
    actuator = live_parts(
        settings, "slice config", clock, RecordingNotifier(), kube_client, CollectorRegistry()
    ).actuator
    specs = {p.pool_id: p for p in settings.pool_specs()}
    gke_api.stockout("us-central1-a", mode="operation", room=2)
    gke_api.now = T0  # v5e-1's instance groups are created now: its wait counts from then
    actuator.resize(POOL, 2, "up")
    gke_api.advance()  # v5e-1 comes up with 2 of its 4 hosts

    seen, memory, backed_off = [], PlannerMemory(), []
    for after in (timedelta(0), WAIT - timedelta(minutes=1), WAIT):
        clock.advance(after - (clock.now() - T0))
        states = {s.pool_id: s for s in actuator.list_pools()}
        seen.append((states[POOL].ready_units, states[POOL].target_units, states[POOL].failed_units))
        memory = clear_failed_units(states, actuator, specs, memory, clock.now()).memory  # as each tick does
        backed_off.append(memory.in_backoff(POOL, clock.now()))

    assert seen == [(1, 2, 0), (1, 2, 0), (1, 1, 1)]
    assert backed_off == [False, False, True]
    assert gke_api.pools["v5e-1"].status == "STOPPING"
    assert gke_api.pools["v5e-0"].status == "RUNNING"
