"""A drain whose node was removed, then whose marks could not be taken off the node, still tells the pods it left.

A node of a GKE pool is left only with a web pod its live kubelet cannot stop, so its drain removes it at the timeout
(GKE takes the deleteInstances). The API server answers 503 to the PATCH that then takes the drain's marks off the
node: the step fails, transient, after the removal went out. The drain is settled at its next step, the marks taken
off then (a node gone needs none), and the drain-unfinished-pods warning naming the stuck pod is told once: whether
the Node object left the cluster with its instance before that step (the pod with it) or outlives it a few ticks. A
scale-up meanwhile does not take the removed node back. Real drainer, GKE actuator and clients, on the fake GKE and
Kubernetes APIs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.drains import NodeDrains
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from models import ActionResult, ActionStatus, AlertEvent, AlertKind, Resize
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import MINUTE, START, _action, _cordoned, _marked, _pool
from tests.contract.harnesses import CLUSTER
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi


class _UnmarkRefusedAfterDelete(GkeNodePoolActuator):
    """The pool's actuator; the first time it deletes a node, the API server answers 503 to the next node PATCH
    (the drain's unmarking, which follows the removal)."""

    kube_api: FakeKubeApi
    deleted = 0

    def delete_nodes(self, pool_id: str, nodes: Sequence[str], key: str) -> ActionResult:
        result = super().delete_nodes(pool_id, nodes, key)
        self.deleted += 1
        if self.deleted == 1:
            self.kube_api.fail_next(1, 503, verb="patch", resource="nodes")
        return result


@dataclass
class _Run:
    drains: NodeDrains
    drainer: KubernetesNodeDrainer
    node: str
    results: list[ActionResult] = field(default_factory=list)
    alerts: list[AlertEvent] = field(default_factory=list)


def _rig(kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi, clock: SimulatedClock) -> _Run:
    """A pool of three nodes (no GKE autoscaling); the first runs a web pod its kubelet cannot stop, and its drain is
    started."""
    node = _pool(kube_api, gke_api, clock, move_bounds=False)[0]
    kube_api.put("pods", objs.pod("web", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
    clients = google_clients(gke_api.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100", gke_autoscaling="refuse")
    gke = _UnmarkRefusedAfterDelete(clients.gke, clients.migs, CLUSTER, [mapping], clock, drained=True)
    gke.kube_api = kube_api
    drainer = KubernetesNodeDrainer(KubernetesApi(kube_client), clock, {"gpu": "a100"}, gke)
    drains = NodeDrains({"gpu": drainer}, timedelta(0))
    kube_api.hang_pods(node)
    started = drains.scale_down(Resize("gpu", 3, 2, "idle", "release"), clock.now(), [node]).results
    return _Run(drains, drainer, node, list(started))


def _step(run: _Run, clock: SimulatedClock) -> list[ActionResult]:
    clock.advance(MINUTE)
    run.drains.observe({}, clock.now())
    out = run.drains.continue_pending(clock.now())
    run.results += out.results
    run.alerts += [a for a in out.alerts if a.kind is AlertKind.DRAIN_UNFINISHED_PODS]
    return list(out.results)


def _removed_unmark_refused(run: _Run, kube_api: FakeKubeApi, gke_api: FakeGkeApi, clock: SimulatedClock) -> None:
    """Steps until the step that removes the node past the timeout, whose unmarking the API server refuses."""
    for _ in range(40):
        _step(run, clock)
        if gke_api.calls("POST", "/deleteInstances"):
            break
    assert gke_api.calls("POST", "/deleteInstances") == 1
    assert _action(gke_api, run.node) == "DELETING"
    removing = run.results[-1]
    assert removing.status is ActionStatus.FAILED and removing.unclear, removing  # transient, after the removal
    assert "503" in (removing.error or "")
    assert _marked(kube_api, run.node)  # the marks could not be taken off
    assert run.alerts == []


def _leaves_the_cluster(kube_api: FakeKubeApi, gke_api: FakeGkeApi, node: str) -> None:
    """The instance is deleted, and its Node object with it; the pod garbage collector deletes the pods bound to it."""
    gke_api.advance()
    kube_api.delete("nodes", node)
    kube_api.delete("pods", "web", namespace="default")


@pytest.mark.parametrize("lingers", [0, 3], ids=["node-gone-at-once", "node-lingers-3-ticks"])
def test_the_pods_a_removed_node_was_left_with_are_told_once_when_its_unmarking_failed(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi, lingers: int
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removed_unmark_refused(run, kube_api, gke_api, clock)

    for _ in range(lingers):  # the Node object outlives its instance a while
        _step(run, clock)
        assert _cordoned(kube_api, run.node)
    if lingers:
        assert not _marked(kube_api, run.node)  # taken off at a later step
    _leaves_the_cluster(kube_api, gke_api, run.node)
    for _ in range(3):
        _step(run, clock)

    assert [a.subject for a in run.alerts] == [f"node {run.node} of gpu removed with pods still terminating"]
    [done] = [r for r in run.results if r.status is ActionStatus.DONE]
    assert [(p.name, p.node, p.kubelet_gone) for p in done.unfinished] == [("web", run.node, False)]
    assert f"node {run.node} removed with" in done.detail
    assert run.drains.pending == ()
    assert gke_api.calls("POST", "/deleteInstances") == 1


def test_a_scale_up_does_not_take_back_a_removed_node_whose_unmarking_failed(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removed_unmark_refused(run, kube_api, gke_api, clock)
    gke_api.advance()  # the instance is gone; its Node object outlives it

    assert run.drains.take_back("gpu", 1, clock.now()) == []
    assert _cordoned(kube_api, run.node)
    [done] = _step(run, clock)
    assert done.status is ActionStatus.DONE, done
    assert len(run.alerts) == 1
