"""The rig of the KubernetesNodeDrainer tests (``test_kubernetes_drain*.py``): the fake Kubernetes API with a pool
"a" of three GKE nodes on the fake GKE and Compute Engine APIs, each running a DaemonSet pod and a web pod, the
drainer and actuator over them on a simulated clock, and the helpers those tests share."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import KubernetesNodeDrainer
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from models.clock import SimulatedClock
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

CLUSTER = "projects/test-project/locations/us-central1/clusters/ml"


@dataclass
class Cluster:
    kube: FakeKubeApi
    gke: FakeGkeApi
    drainer: KubernetesNodeDrainer
    clock: SimulatedClock
    nodes: list[str]
    api: KubernetesApi
    actuator: GkeNodePoolActuator

    def instances(self) -> list[tuple[str, str]]:
        return [(i.name, i.action) for m in self.gke.pools["a100"].migs for i in m.instances]


@pytest.fixture
def cluster(kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi) -> Cluster:
    gke_api.add_pool("a100", nodes=3)
    nodes = [i.name for m in gke_api.pools["a100"].migs for i in m.instances]
    for name in nodes:
        kube_api.put("nodes", objs.node(name, "a100"))
        kube_api.put("pods", objs.pod(f"logs-{name}", name, namespace="kube-system", owner_kind="DaemonSet"))
        kube_api.put("pods", objs.pod(f"web-{name}", name, labels={"app": "web"}, owner_kind="ReplicaSet"))
    clients = google_clients(gke_api.url)
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube_api.clock = clock.now  # evicted pods finish terminating as the test's clock passes their grace period
    actuator = GkeNodePoolActuator(
        clients.gke, clients.migs, CLUSTER, [NodePoolMapping(pool="a", node_pool="a100")], clock
    )
    api = KubernetesApi(kube_client)
    drainer = KubernetesNodeDrainer(api, clock, {"a": "a100"}, actuator, timedelta(minutes=15))
    return Cluster(kube_api, gke_api, drainer, clock, nodes, api, actuator)


def _cordoned(c: Cluster, node: str) -> bool:
    found = c.kube.get("nodes", node)
    assert found is not None
    return bool(found["spec"].get("unschedulable"))


JOB: dict[str, Any] = {"owner_kind": "Job"}


def _pod(name: str, node: str, grace: int | None = None, **options: Any) -> dict[str, Any]:
    pod = objs.pod(name, node, **options)
    if grace is not None:
        pod["spec"]["terminationGracePeriodSeconds"] = grace
    return pod


def _evictions(c: Cluster, pod: str) -> int:
    return sum(1 for r in c.kube.requests if (r.verb, r.subresource, r.name) == ("create", "eviction", pod))
