"""The real loop on the daemon's live parts for a GKE TPU slice group whose only slice GKE reports in ERROR with 1
of its 4 hosts left and a job's pod on it: the planner buys a slice in its place, the broken slice is not deleted
while busy, and a critical broken-unit alert naming it and the hosts it lacks is raised every tick, until the job
ends and the slice, failed, is deleted. Against the fake Prometheus, GKE and Kubernetes APIs."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from agent.daemon.live import live_parts
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models import ActionStatus, AlertKind, Severity
from models.clock import SimulatedClock
from tests.daemon.test_slice_release import CLASS, HOSTS, T0, _settings
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi

POOL = "v5e-slices"


def test_the_live_loop_replaces_a_broken_slice_with_a_job_on_it_keeps_it_and_alerts_on_it(
    prometheus_api: FakePrometheusApi,
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
) -> None:
    clock = SimulatedClock(T0)
    kube_api.clock = clock.now
    gke_api.add_pool("v5e-0", nodes=HOSTS)
    last = f"gke-ml-v5e-0-{HOSTS - 1}"
    kube_api.put("nodes", objs.node(last, "v5e-0", accelerators=4, resource=objs.TPU_RESOURCE))
    kube_api.put("pods", objs.pod("train-0", last, accelerators=4, resource=objs.TPU_RESOURCE, owner_kind="Job"))
    (mig,) = gke_api.pools["v5e-0"].migs  # three hosts gone with their nodes, not recreated
    mig.instances, mig.target_size = mig.instances[-1:], 1
    gke_api.report_error("v5e-0", message="Not all instances running in IGM")
    prometheus_api.set_demand(CLASS, 16)  # the job's slice
    settings = settings_from_mapping(_settings(prometheus_api, gke_api, tmp_path), source="slice config")
    notifier = RecordingNotifier()
    parts = live_parts(settings, "slice config", clock, notifier, kube_client, CollectorRegistry())
    agent = Agent(
        settings,
        AgentParts(
            parts.source, build_forecaster(settings.forecast), parts.actuator, parts.ledger, notifier, parts.drainers
        ),
    )

    first = agent.run_once(clock.now())

    assert [(r.pool_id, r.from_units, r.to_units) for r in first.plan.resizes] == [(POOL, 0, 1)]
    assert [(r.status, r.detail) for r in first.results] == [(ActionStatus.STARTED, "target 1 slices: create v5e-1")]
    (alert,) = [a for a in first.alerts if a.kind is AlertKind.BROKEN_UNIT]
    assert (alert.severity, alert.subject) == (Severity.CRITICAL, POOL)
    assert alert.summary.startswith("v5e-0 of v5e-slices cannot run its work but has work on it")
    assert "a person must decide whether to delete it" in alert.summary
    assert alert.details == {
        "v5e-0": "in ERROR with work on it and 1 of 4 hosts running; missing: 3 not in its instance groups"
    }

    clock.advance(timedelta(minutes=1))
    gke_api.advance()  # the new slice's hosts run
    second = agent.run_once(clock.now())
    assert second.plan.decisions[POOL].current_units == 1  # the new slice, the broken one not counted
    assert not second.plan.resizes
    assert [a.kind for a in second.alerts] == [AlertKind.BROKEN_UNIT]  # told again while it lasts
    assert gke_api.calls("DELETE", "/nodePools/") == 0
    assert {n: p.status for n, p in gke_api.pools.items()} == {"v5e-0": "ERROR", "v5e-1": "RUNNING"}

    kube_api.delete("pods", "train-0", "default")  # the job ends: the slice runs nothing any more
    clock.advance(timedelta(minutes=1))
    third = agent.run_once(clock.now())
    assert not [a for a in third.alerts if a.kind is AlertKind.BROKEN_UNIT]
    assert gke_api.pools["v5e-0"].status == "STOPPING"  # failed, and deleted as a failed slice is
    assert gke_api.calls("DELETE", "/nodePools/") == 1
