"""The whole loop of an agent switched back to dry-run (docs/install.md step 6) while drains its enforce leader
started wait on a disruption budget, on the fake GKE, Kubernetes and Prometheus APIs with the writers wrapped as
the daemon wraps them in dry-run mode: the shadow plan counts the cordoned nodes in the pool, nothing is sent, and
the notifier is told once per node which node is left cordoned and what to do."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from actuators import DryRunActuator, DryRunDrainer
from agent.daemon.guard import LeaderOnlyActuator, LeaderOnlyDrainer
from agent.daemon.live import live_parts
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from forecasting.factory import build_forecaster
from models import AlertKind, Severity
from models.clock import SimulatedClock
from tests.e2e.rig import CLASS, NODE_POOLS, ON_DEMAND, T0, NodeMirror, Rig, end_process, live_agent
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi

MINUTE = timedelta(minutes=1)
WINDOW = 10 * MINUTE  # the rig's planner.scale_down_stabilization
WEB = {"app": "web"}


class _Leading:
    def is_leader(self, now: datetime) -> bool:
        return True


@pytest.fixture
def rig(gke_api: FakeGkeApi, kube_api: FakeKubeApi, prometheus_api: FakePrometheusApi, tmp_path: Path) -> Rig:
    return Rig(gke_api, kube_api, prometheus_api, SimulatedClock(T0), NodeMirror(gke_api, kube_api), tmp_path)


def _cordoned(rig: Rig) -> list[str]:
    return sorted(n["metadata"]["name"] for n in rig.kube.list("nodes") if n["spec"].get("unschedulable"))


def _dry_run_agent(rig: Rig, kube: k8s.ApiClient, notifier: RecordingNotifier) -> Agent:
    """The loop ``leadtime run`` builds in dry-run mode: the writers wrapped in dry-run, then leader-only."""
    settings = rig.settings(spot_max=0, mode="dry-run")
    parts = live_parts(settings, "e2e config", rig.clock, notifier, kube, CollectorRegistry())
    leading = _Leading()
    actuator = LeaderOnlyActuator(DryRunActuator(parts.actuator, rig.clock), leading, rig.clock)
    drainer = LeaderOnlyDrainer(DryRunDrainer(parts.drainers[ON_DEMAND], rig.clock), leading, rig.clock)
    drainers = dict.fromkeys(parts.drainers, drainer)
    forecaster = build_forecaster(settings.forecast)
    return Agent(settings, AgentParts(parts.source, forecaster, actuator, parts.ledger, notifier, drainers))


def test_a_dry_run_agent_counts_the_nodes_an_enforce_drain_left_cordoned_and_tells_once_per_node(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    rig.add_pools(on_demand_nodes=3)
    busy, *idle = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train-0", busy, namespace=CLASS, accelerators=8, owner_kind="Job"))
    for node in idle:
        rig.kube.put("pods", objs.pod(f"web-{node}", node, namespace="web", labels=WEB, owner_kind="ReplicaSet"))
    budget = objs.pdb("web", WEB, namespace="web", min_available=2, expected_pods=2)
    rig.kube.put("poddisruptionbudgets", budget, group="policy")
    rig.prometheus.set_demand(CLASS, 8)
    enforce = live_agent(rig, rig.settings(spot_max=0), kube_client, RecordingNotifier())
    enforce.run_once(rig.clock.now())
    rig.clock.advance(WINDOW)
    released = enforce.run_once(rig.clock.now())  # both idle nodes drained; the budget holds both drains up
    assert [(r.from_units, r.to_units) for r in released.plan.resizes] == [(3, 1)]
    assert _cordoned(rig) == sorted(idle)
    end_process(enforce)  # the Deployment is switched back to dry-run

    notifier = RecordingNotifier()
    shadow = _dry_run_agent(rig, kube_client, notifier)
    writes = len([r for r in rig.kube.requests if r.verb in ("patch", "create", "delete")])
    for _ in range(60):
        rig.clock.advance(MINUTE)
        report = shadow.run_once(rig.clock.now())
        assert report.plan.resizes == ()  # 1 node serving, 2 cordoned: nothing to buy, none idle to release
        assert report.results == ()
    decision = report.plan.decisions[ON_DEMAND]
    assert (decision.current_units, decision.target_units) == (3, 3)  # the cordoned nodes are held, not gone
    assert _cordoned(rig) == sorted(idle)
    assert len([r for r in rig.kube.requests if r.verb in ("patch", "create", "delete")]) == writes
    assert rig.gke.pools[NODE_POOLS[ON_DEMAND]].migs[0].target_size == 3
    told = [e for e in notifier.events if e.subject.endswith("left cordoned")]
    assert sorted(e.subject for e in told) == [f"node {n} of {ON_DEMAND} left cordoned" for n in sorted(idle)]
    assert all((e.kind, e.severity) == (AlertKind.ACTUATOR_FAILURE, Severity.WARNING) for e in told)
