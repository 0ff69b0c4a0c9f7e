"""The daemon's live wiring gives a GKE TPU slice group a slice drainer, and the real loop on it releases a slice
idle for the hold: exactly that slice's node pool is deleted, once its nodes are drained; the slice running a job
stays. Against the fake Prometheus, GKE and Kubernetes APIs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from actuators.slice_drain import KubernetesSliceDrainer
from agent.daemon.live import live_parts
from agent.daemon.wiring import assemble
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models import ActionStatus, SkipReason
from models.clock import SimulatedClock
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
CLASS = "tpu-train"
HOSTS = 4  # a 4x4 v5e slice: 16 chips, 4 per host


def _settings(prometheus: FakePrometheusApi, gke: FakeGkeApi, tmp_path: Path) -> dict[str, object]:
    return {
        "demand_classes": [{"name": CLASS, "family": "tpu"}],
        "pools": [
            {
                "id": "v5e-slices",
                "kind": "tpu-slice-group",
                "tier": "on-demand",
                "family": "tpu",
                "chips_per_unit": 16,
                "max_units": 4,
                "price_per_chip_hour_usd": 1.2,
                "lead_time": "10m",
                "serves": [CLASS],
            }
        ],
        "planner": {"scale_down_stabilization": "10m", "idle_hold_lead_times": 0},
        "forecast": {"model": "persistence", "history": "2h", "step": "1m", "max_staleness": "5m"},
        "prometheus": {"url": prometheus.url, "retries": 0, "timeout": "5s"},
        "cloud": {
            "project": gke.project,
            "location": gke.location,
            "cluster": gke.cluster,
            "endpoint": gke.url,
            "tpu_slice_groups": [
                {
                    "pool": "v5e-slices",
                    "group": "v5e",
                    "machine_type": "ct5lp-hightpu-4t",
                    "tpu_topology": "4x4",
                    "zone": "us-central1-a",
                }
            ],
        },
        "ledger": {"path": str(tmp_path / "ledger.sqlite")},
        # a port of its own: the default 0.0.0.0:8080 collides with anything else on the machine using it
        "daemon": {"endpoints": {"bind_address": "127.0.0.1", "port": 0}},
    }


def test_the_live_loop_releases_the_idle_slice_after_the_hold_and_only_it(
    prometheus_api: FakePrometheusApi,
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
) -> None:
    clock = SimulatedClock(T0)
    kube_api.clock = clock.now
    for name in ("v5e-0", "v5e-1"):
        gke_api.add_pool(name, nodes=HOSTS)
        for i in range(HOSTS):
            host = f"gke-ml-{name}-{i}"
            kube_api.put("nodes", objs.node(host, name, accelerators=4, resource=objs.TPU_RESOURCE))
            kube_api.put("pods", objs.pod(f"web-{host}", host, owner_kind="ReplicaSet"))
    job = objs.pod("train-0", "gke-ml-v5e-0-2", accelerators=4, resource=objs.TPU_RESOURCE, owner_kind="Job")
    kube_api.put("pods", job)
    prometheus_api.set_demand(CLASS, 16)  # one slice's worth, running on v5e-0
    settings = settings_from_mapping(_settings(prometheus_api, gke_api, tmp_path), source="slice config")
    notifier = RecordingNotifier()

    parts = live_parts(settings, "slice config", clock, notifier, kube_client, CollectorRegistry())

    assert isinstance(parts.drainers.get("v5e-slices"), KubernetesSliceDrainer)
    agent = Agent(
        settings,
        AgentParts(
            parts.source, build_forecaster(settings.forecast), parts.actuator, parts.ledger, notifier, parts.drainers
        ),
    )
    first = agent.run_once(clock.now())
    held = first.plan.decisions["v5e-slices"]
    assert [h.reason for h in held.holds] == [SkipReason.STABILIZING]  # v5e-1 idle, not yet for the hold
    drained = []
    for _ in range(15):
        clock.advance(timedelta(minutes=1))
        tick = agent.run_once(clock.now())
        drained += [r for r in tick.results if r.status is ActionStatus.DONE]
        if drained:
            break
    assert [r.detail.split(";")[0] for r in drained] == ["slice v5e-1 drained"]
    assert clock.now() - T0 >= timedelta(minutes=10)
    assert gke_api.calls("DELETE", "/nodePools/") == 1
    assert {n: p.status for n, p in gke_api.pools.items()} == {"v5e-0": "RUNNING", "v5e-1": "STOPPING"}
    assert kube_api.get("pods", "train-0", "default") is not None


def test_the_live_daemon_records_a_slice_drain_on_its_state_config_map_naming_the_slice(
    prometheus_api: FakePrometheusApi,
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
) -> None:
    """A slice is not a Node: its drain's Events go to the state ConfigMap (``kubectl describe configmap``), each
    message starting with the slice's name, instead of to a Node named like the slice, which does not exist."""
    clock = SimulatedClock(T0)
    kube_api.clock = clock.now
    for name in ("v5e-0", "v5e-1"):
        gke_api.add_pool(name, nodes=HOSTS)
        for i in range(HOSTS):
            host = f"gke-ml-{name}-{i}"
            kube_api.put("nodes", objs.node(host, name, accelerators=4, resource=objs.TPU_RESOURCE))
    job = objs.pod("train-0", "gke-ml-v5e-0-2", accelerators=4, resource=objs.TPU_RESOURCE, owner_kind="Job")
    kube_api.put("pods", job)
    prometheus_api.set_demand(CLASS, 16)
    settings = settings_from_mapping(_settings(prometheus_api, gke_api, tmp_path), source="slice config")
    parts = live_parts(settings, "slice config", clock, RecordingNotifier(), kube_client, CollectorRegistry())
    assembled = assemble(settings, "enforce", parts, {"POD_NAME": "leadtime-0", "POD_NAMESPACE": "leadtime"})
    assembled.endpoints.stop()
    assembled.daemon.elect()
    assembled.daemon.refit()
    for _ in range(15):
        clock.advance(timedelta(minutes=1))
        assembled.daemon.elect()
        assembled.daemon.tick()
        if gke_api.calls("DELETE", "/nodePools/"):
            break
    assembled.daemon.stop_working()
    assert {n: p.status for n, p in gke_api.pools.items()} == {"v5e-0": "RUNNING", "v5e-1": "STOPPING"}

    everything = k8s.CoreV1Api(kube_client).list_event_for_all_namespaces().items
    assert not [e for e in everything if e.involved_object.kind == "Node"]
    drain = [e for e in everything if e.reason in ("Cordoned", "DrainStarted", "DrainFinished")]
    assert sorted(e.reason for e in drain) == ["Cordoned", "DrainFinished", "DrainStarted"]
    for e in drain:
        assert (e.metadata.namespace, e.involved_object.kind, e.involved_object.name) == (
            "leadtime",
            "ConfigMap",
            "leadtime-state",
        )
        assert e.message.startswith("slice v5e-1: ")
        assert e.metadata.annotations["leadtime.io/slice"] == "v5e-1"
